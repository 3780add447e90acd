#include <algorithm>
#include <mutex>

#include "core/hash.hpp"
#include "search/llm/provider.hpp"
#include "search/prompts/code_extract.hpp"
#include "search/prompts/menu.hpp"
#include "search/prompts/prompt_builder.hpp"
#include "tools/evaluation_json.hpp"
#include "tools/evaluation_service.hpp"
#include "tools/memory_tools.hpp"
#include "tools/planning_tools.hpp"
#include "tools/sampling_provider.hpp"

namespace autocomp::tools {

using nlohmann::json;
namespace prompts = search::prompts;
namespace store = search::store;

namespace {

// Profile entries shown inline: the ones that say where time goes.
constexpr const char* k_key_metrics[] = {
    "total_time",
    "tensor_engine_active_time_percent",
    "vector_engine_active_time_percent",
    "scalar_engine_active_time_percent",
    "gpsimd_engine_active_time_percent",
    "dma_active_time_percent",
    "mfu_estimated_percent",
    "mbu_estimated_percent",
    "hbm_read_bytes",
    "hbm_write_bytes",
    "dma_transfer_count",
};

std::string render_prompt(const search::llm::CompletionRequest& request) {
  std::string text = "## system\n" + request.system + "\n";
  for (const auto& message : request.messages) {
    text += "\n## " + message.role + "\n" + message.content + "\n";
  }
  return text;
}

}  // namespace

PlanPromptCache::PlanPromptCache(std::size_t capacity) : m_capacity(capacity) {}

std::string PlanPromptCache::put(std::string text) {
  const std::string key = core::sha256_hex(text).substr(0, 16);
  std::lock_guard lock(m_mutex);
  if (m_texts.emplace(key, std::move(text)).second) {
    m_order.push_back(key);
    while (m_order.size() > m_capacity) {
      m_texts.erase(m_order.front());
      m_order.pop_front();
    }
  }
  return key;
}

std::optional<std::string> PlanPromptCache::get(const std::string& key) const {
  std::lock_guard lock(m_mutex);
  auto found = m_texts.find(key);
  if (found == m_texts.end()) {
    return std::nullopt;
  }
  return found->second;
}

server::ToolDef make_propose_plan_tool(std::shared_ptr<ToolEnv> env,
                                       std::shared_ptr<PlanPromptCache> cache) {
  server::ToolDef tool;
  tool.name = "propose_plan";
  tool.title = "Propose optimization plans";
  tool.description =
      "Plans for making an NKI kernel faster, guided by its profile (bottleneck, engine and DMA "
      "activity), the target's optimization menu (sampled with dropout), lessons remembered from "
      "earlier attempts and recent reflexions. With an LLM (server --llm, the llm argument, or "
      "the client's own model when it offers sampling) it returns `plans` in words; without one "
      "it returns the sampled menu, the "
      "profile summary and lessons so you can plan yourself, and the full planning prompt as a "
      "resource. Implement one plan at a time, then verify and benchmark.";
  json schema = eval_args_schema();
  schema["properties"]["count"] = {{"type", "integer"},
                                   {"minimum", 1},
                                   {"maximum", 8},
                                   {"description", "How many plans (default 3)."}};
  schema["properties"]["dropout"] = {{"type", "number"}, {"minimum", 0}, {"maximum", 1}};
  schema["properties"]["seed"] = {{"type", "integer"}, {"minimum", 0}};
  schema["properties"]["llm"] = {{"type", "array"}, {"items", {{"type", "string"}}}};
  tool.input_schema = std::move(schema);
  tool.annotations = {{"readOnlyHint", true}, {"openWorldHint", true}};
  tool.handler = [env, cache](const json& arguments, server::ToolContext& context) {
    auto outcome = evaluate_kernel_file(*env, parse_eval_args(arguments), context);
    if (!outcome.ok()) {
      return server::tool_failure(outcome.failure());
    }
    auto builder = prompts::PromptBuilder::open();
    if (!builder.ok()) {
      return server::tool_failure(builder.failure());
    }
    auto db = env->store();
    if (!db.ok()) {
      return server::tool_failure(db.failure());
    }
    const auto& result = outcome->result;

    prompts::PlanPromptInput input;
    input.target = outcome->target;
    input.kernel.source = outcome->kernel.text;
    if (result.latency && !result.failure) {
      input.kernel.latency_us = result.latency->median_us;
    }
    input.kernel.metrics = result.metrics;
    input.kernel.roofline = result.roofline;
    input.kernel.bottleneck = result.bottleneck;
    if (result.failure) {
      input.recent_failures.push_back("the current kernel fails: " + result.failure->describe());
    }
    if (auto lessons = db.value()->lessons(outcome->target, 16); lessons.ok()) {
      for (const auto& lesson : lessons.value()) {
        input.lessons.push_back(lesson.text);
      }
    }
    input.reflexions = reflexion_lines(*db.value(), outcome->kernel.path, 3);
    input.iteration = 1;
    input.total_iterations = 1;
    input.dropout = arguments.value("dropout", 0.7);
    const std::uint64_t seed = arguments.value("seed", std::uint64_t{0});
    const int count = arguments.value("count", 3);

    std::vector<std::string> llm_specs = env->options().llm_specs;
    if (arguments.contains("llm")) {
      llm_specs = arguments.at("llm").get<std::vector<std::string>>();
    }

    json out = outcome_header_json(outcome.value());
    out["bottleneck"] = result.bottleneck;
    if (input.kernel.latency_us) {
      out["latency_us"] = *input.kernel.latency_us;
    }
    json profile = json::object();
    for (const char* name : k_key_metrics) {
      if (auto found = result.metrics.find(name); found != result.metrics.end()) {
        profile[name] = found->second;
      }
    }
    out["profile"] = std::move(profile);
    out["roofline"] = result.roofline;
    out["lessons"] = input.lessons;
    out["reflexions"] = input.reflexions;

    // With no configured model, the client's own model plans when it offers sampling.
    const bool use_sampling = llm_specs.empty() && context.client_supports_sampling;
    if (llm_specs.empty() && !use_sampling) {
      input.seed = seed;
      auto prompt = builder->plan(input);
      if (!prompt.ok()) {
        return server::tool_failure(prompt.failure());
      }
      auto menu = prompts::load_menu(builder->library(), outcome->target);
      json sampled = json::array();
      if (menu.ok()) {
        for (const auto& item : menu->items) {
          if (std::find(prompt->menu_ids.begin(), prompt->menu_ids.end(), item.id) !=
              prompt->menu_ids.end()) {
            sampled.push_back(item.id + ": " + item.text);
          }
        }
      }
      const std::string key = cache->put(render_prompt(prompt->request));
      out["mode"] = "prompt";
      out["menu"] = std::move(sampled);
      out["variant"] = std::string(prompts::to_string(prompt->variant));
      out["instructions_used"] = prompt->instructions;
      out["prompt"] = "autocomp://plan-prompts/" + key;
      out["next"] =
          "No LLM is configured, so plan yourself: pick one menu item that attacks the "
          "bottleneck, implement it, then verify_kernel and benchmark_kernel.";
      return server::ToolResult{out, "", false, json::array()};
    }

    std::vector<std::shared_ptr<search::llm::Provider>> providers;
    if (use_sampling) {
      providers.push_back(make_sampling_provider(context));
    }
    for (const auto& spec : llm_specs) {
      auto provider = search::llm::make_provider(spec, search::llm::ProviderOptions{});
      if (!provider.ok()) {
        return server::tool_failure(provider.failure());
      }
      providers.push_back(provider.value());
    }
    json plans = json::array();
    json failures = json::array();
    for (int i = 0; i < count && !context.cancel.cancelled(); ++i) {
      input.seed = seed + static_cast<std::uint64_t>(i);
      auto prompt = builder->plan(input);
      if (!prompt.ok()) {
        return server::tool_failure(prompt.failure());
      }
      auto& provider = providers[static_cast<std::size_t>(i) % providers.size()];
      context.progress(i, count, "planning with " + provider->spec());
      auto reply = provider->complete(prompt->request, context.cancel);
      if (!reply.ok()) {
        failures.push_back(reply.failure().describe());
        continue;
      }
      store::LlmCall call;
      call.request_hash = core::sha256_hex(render_prompt(prompt->request) + provider->spec());
      call.purpose = "plan";
      call.provider = provider->spec();
      call.response = reply->text;
      call.usage = reply->usage;
      call.latency_ms = reply->latency_ms;
      call.attempts = reply->attempts;
      (void)db.value()->put_llm_call(call);
      plans.push_back({{"plan", prompts::extract_plan(reply->text)},
                       {"variant", std::string(prompts::to_string(prompt->variant))},
                       {"menu_items", prompt->menu_ids},
                       {"provider", provider->spec()},
                       {"cost_usd", reply->usage.cost_usd}});
    }
    if (plans.empty()) {
      std::string message = "no plan came back from the LLM";
      for (const auto& failure : failures) {
        message += "; " + failure.get<std::string>();
      }
      return server::tool_error(message);
    }
    out["mode"] = "llm";
    out["plans"] = std::move(plans);
    if (!failures.empty()) {
      out["failures"] = std::move(failures);
    }
    return server::ToolResult{out, "", false, json::array()};
  };
  return tool;
}

}  // namespace autocomp::tools
