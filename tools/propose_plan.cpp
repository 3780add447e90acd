#include <algorithm>
#include <filesystem>
#include <mutex>
#include <set>

#include "core/hash.hpp"
#include "search/engine/prompts.hpp"
#include "search/llm/provider.hpp"
#include "search/prompts/code_extract.hpp"
#include "search/prompts/menu.hpp"
#include "search/prompts/prompt_builder.hpp"
#include "tools/evaluation_json.hpp"
#include "tools/evaluation_service.hpp"
#include "tools/memory_tools.hpp"
#include "tools/planning_tools.hpp"
#include "tools/profile_floor.hpp"
#include "tools/sampling_provider.hpp"
#include "tools/tool_surface.hpp"

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

constexpr std::size_t k_hotspots_shown = 2;
constexpr int k_menu_shown = 6;
constexpr std::size_t k_lessons_shown = 4;
constexpr std::size_t k_line_chars = 200;

std::string clip(const std::string& text, std::size_t max_chars) {
  return text.size() <= max_chars ? text : text.substr(0, max_chars - 3) + "...";
}

// Menu items this file's reflexions say were tried (named in what was expected, what happened,
// the lesson or what to avoid; not in what to try next).
std::set<std::string> tried_items(store::Memory& db, const std::string& abs_path,
                                  const std::vector<prompts::MenuItem>& items) {
  std::set<std::string> tried;
  auto recent = db.recent_reflexions(abs_path, 50);
  if (!recent.ok()) {
    return tried;
  }
  for (const auto& reflexion : recent.value()) {
    const std::string text = reflexion.expected + "\n" + reflexion.actual + "\n" +
                             reflexion.lessons + "\n" + reflexion.avoid;
    for (const auto& id : prompts::mentioned_items(items, text)) {
      tried.insert(id);
    }
  }
  return tried;
}

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
  tool.title = "Propose plans";
  tool.description =
      "Plans for a faster NKI kernel from its profile, menu, lessons and reflexions: LLM plans, "
      "or without a model the menu ranked by the profile.";
  // The evaluation's arguments without the timing ones: plans use the default measurement.
  json schema = eval_args_schema({"seeds", "warmup", "iters", "timeout_s", "fresh"});
  schema["properties"]["count"] = {
      {"type", "integer"}, {"minimum", 1}, {"maximum", 8}, {"description", "Plans (default 3)."}};
  schema["properties"]["dropout"] = {{"type", "number"},
                                     {"minimum", 0},
                                     {"maximum", 1},
                                     {"description", "Share of the menu hidden."}};
  schema["properties"]["seed"] = {
      {"type", "integer"}, {"minimum", 0}, {"description", "Menu sample seed."}};
  schema["properties"]["menu_items"] = {
      {"type", "integer"}, {"minimum", 1}, {"maximum", 64}, {"description", "Items shown (6)."}};
  schema["properties"]["llm"] = {
      {"type", "array"}, {"items", {{"type", "string"}}}, {"description", "LLM specs."}};
  tool.input_schema = std::move(schema);
  tool.output_schema = brief_output_schema({{"mode", {{"type", "string"}}}}, {"mode"});
  tool.annotations = hints(true, false, false, true);
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

    // The engine's planning input, so that this tool and the search ask in the same words.
    search::engine::PlanPromptInput request;
    request.target = outcome->target;
    request.kernel_source = outcome->kernel.text;
    request.evaluation = &result;
    request.problem_source = outcome->problem.text;
    if (result.failure) {
      request.recent_failures.push_back("the current kernel fails: " + result.failure->describe());
    }
    if (auto lessons = db.value()->memory().lessons(outcome->target, 16); lessons.ok()) {
      for (const auto& lesson : lessons.value()) {
        request.lessons.push_back(lesson.text);
      }
    }
    request.reflexions = reflexion_lines(db.value()->memory(), outcome->kernel.path, 3);
    request.iteration = 1;
    request.iterations = 1;
    request.dropout = arguments.value("dropout", 0.7);  // LLM plans sample the menu
    auto input = search::engine::plan_builder_input(request);
    if (result.failure) {
      input.kernel.latency_us.reset();
    }
    const std::uint64_t seed = arguments.value("seed", std::uint64_t{0});
    const int count = arguments.value("count", 3);

    std::vector<std::string> llm_specs = env->options().llm_specs;
    if (arguments.contains("llm")) {
      llm_specs = arguments.at("llm").get<std::vector<std::string>>();
    }

    json out = brief_header_json(outcome.value());
    out["bottleneck"] = result.bottleneck;
    if (input.kernel.latency_us) {
      out["latency_us"] = round_sig(*input.kernel.latency_us);
    }
    json profile = json::object();
    for (const char* name : k_key_metrics) {
      if (auto found = result.metrics.find(name); found != result.metrics.end()) {
        profile[name] = round_sig(found->second);
      }
    }
    out["profile"] = std::move(profile);
    const json hotspots = hotspots_json(result.hotspots, outcome->kernel.text, k_hotspots_shown);
    if (!hotspots.empty()) {
      out["hotspots"] = hotspots;
    }
    json lessons = json::array();
    for (std::size_t i = 0; i < input.lessons.size() && i < k_lessons_shown; ++i) {
      lessons.push_back(clip(input.lessons[i], k_line_chars));
    }
    out["lessons"] = std::move(lessons);
    json reflexions = json::array();
    for (const auto& line : input.reflexions) {
      reflexions.push_back(clip(line, k_line_chars));
    }
    out["reflexions"] = std::move(reflexions);

    // With no configured model, the client's own model plans when it offers sampling.
    const bool use_sampling = llm_specs.empty() && context.client_supports_sampling;
    if (llm_specs.empty() && !use_sampling) {
      // The whole menu goes to the prompt resource unless the caller asks for dropout.
      input.dropout = arguments.value("dropout", 0.0);
      input.seed = seed;
      auto prompt = builder->plan(input);
      if (!prompt.ok()) {
        return server::tool_failure(prompt.failure());
      }
      auto menu = prompts::load_menu(builder->library(), outcome->target);
      if (!menu.ok()) {
        return server::tool_failure(menu.failure());
      }
      prompts::MenuContext menu_context;
      menu_context.bottleneck = result.bottleneck;
      menu_context.metrics = result.metrics;
      menu_context.roofline = result.roofline;
      menu_context.kernel_source = outcome->kernel.text;
      for (const auto& hotspot : result.hotspots) {
        menu_context.hot_engines.push_back(hotspot.engine);
      }
      menu_context.tried = tried_items(db.value()->memory(), outcome->kernel.path, menu->items);
      // The problem's tolerance and launch grid decide whether bf16 and spmd_grid can pay.
      menu_context.rtol = input.rtol;
      menu_context.programs = input.programs;
      auto ranked = prompts::rank_menu(menu->items, menu_context);
      const std::optional<Floors> floors =
          result.failure ? std::optional<Floors>() : compute_floors(result);
      const auto left_at_floor = rank_menu_by_profile(ranked, floors, tiny_instructions(result));
      const std::size_t shown = std::min<std::size_t>(
          ranked.size(), static_cast<std::size_t>(arguments.value("menu_items", k_menu_shown)));
      json items = json::array();
      std::vector<std::string> lines;
      lines.push_back(
          "plan " + std::filesystem::path(outcome->kernel.path).filename().string() + ": " +
          (result.bottleneck.empty() ? "no bottleneck class" : result.bottleneck) +
          (input.kernel.latency_us ? ", " + format_number(*input.kernel.latency_us) + " us"
                                   : std::string()));
      std::string hot;
      for (const auto& hotspot : hotspots) {
        hot += (hot.empty() ? "" : ", ") + std::string("line ") +
               std::to_string(hotspot.value("line", 0)) + " (" +
               engine_label(hotspot.value("engine", "")) + " " +
               format_number(hotspot.value("share_pct", 0.0)) + "%)";
      }
      if (!hot.empty()) {
        lines.push_back("hot lines: " + hot + " (profile_kernel shows more)");
      }
      if (floors && floors->floor_pct) {
        out["floor"] = {{"floor_us", round_sig(*floors->floor_us)},
                        {"floor_pct", round_sig(*floors->floor_pct)},
                        {"bound", floors->dma_bound ? "dma" : "compute"},
                        {"at_floor", floors->at_floor}};
        lines.push_back("floor: " + format_number(*floors->floor_us) + " us (" +
                        (floors->dma_bound ? "DMA" : "compute") + "), " +
                        format_number(*floors->floor_pct) + "% reached" +
                        (floors->at_floor ? ": at the modelled floor, little left to gain; stop "
                                            "or confirm on hardware"
                                          : ""));
      }
      lines.push_back("menu, best fit first:");
      for (std::size_t i = 0; i < shown; ++i) {
        const auto& entry = ranked[i];
        std::string why;
        for (const auto& reason : entry.reasons) {
          why += (why.empty() ? "" : ", ") + reason;
        }
        json item = {{"id", entry.item.id}, {"text", entry.item.text}};
        if (!why.empty()) {
          item["why"] = why;
        }
        lines.push_back("- " + entry.item.id + (why.empty() ? "" : " [" + why + "]"));
        items.push_back(std::move(item));
      }
      const std::string key = cache->put(render_prompt(prompt->request));
      out["mode"] = "prompt";
      out["menu"] = std::move(items);
      out["menu_left"] = ranked.size() - shown;
      if (!left_at_floor.empty()) {
        out["left_out_at_floor"] = left_at_floor;
        std::string ids;
        for (const auto& id : left_at_floor) {
          ids += (ids.empty() ? "" : ", ") + id;
        }
        lines.push_back("left out (data movement, already at the DMA floor): " + ids);
      }
      if (!menu_context.tried.empty()) {
        out["already_tried"] = menu_context.tried;
        std::string tried;
        for (const auto& id : menu_context.tried) {
          tried += (tried.empty() ? "" : ", ") + id;
        }
        lines.push_back("left out (tried on this file): " + tried);
      }
      for (const auto& lesson : out["lessons"]) {
        lines.push_back("lesson: " + lesson.get<std::string>());
      }
      for (const auto& reflexion : out["reflexions"]) {
        lines.push_back("reflexion: " + reflexion.get<std::string>());
      }
      out["prompt"] = "autocomp://plan-prompts/" + key;
      out["next"] =
          "No LLM is configured: pick one item, implement it, verify_kernel and "
          "benchmark_kernel, then record_reflexion naming its id.";
      lines.push_back("next: " + out["next"].get<std::string>());
      lines.push_back("prompt: " + out["prompt"].get<std::string>());
      return server::ToolResult{out, brief_text(lines, out), false,
                                json::array({resource_link(out["prompt"].get<std::string>(),
                                                           "planning prompt", "text/markdown")})};
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
      (void)db.value()->llm_calls().put_llm_call(call);
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
    return server::ToolResult{out, "", false,
                              json::array({evaluation_link(outcome->evaluation_id)})};
  };
  return tool;
}

}  // namespace autocomp::tools
