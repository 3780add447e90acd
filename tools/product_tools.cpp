#include "tools/product_tools.hpp"

#include <memory>

#include "tools/evaluation_json.hpp"
#include "tools/evaluation_tools.hpp"
#include "tools/memory_tools.hpp"
#include "tools/planning_tools.hpp"
#include "tools/search_tools.hpp"
#include "tools/tool_env.hpp"

namespace autocomp::tools {

using nlohmann::json;

namespace {

using ToolMaker = server::ToolDef (*)(std::shared_ptr<ToolEnv>);

// The product's tools, in tools/list order. Adding a tool: its file, its declaration, this row.
// clang-format off
constexpr ToolMaker k_tool_makers[] = {
    &make_verify_kernel_tool,
    &make_benchmark_kernel_tool,
    &make_profile_kernel_tool,
    &make_revert_to_best_tool,
    &make_run_beam_search_tool,
    &make_get_search_status_tool,
    &make_cancel_search_tool,
    &make_list_runs_tool,
    &make_list_lessons_tool,
    &make_clear_lessons_tool,
    &make_record_reflexion_tool,
};
// clang-format on

core::Result<json> read_evaluation(ToolEnv& env, const std::string& uri, const std::string& id) {
  std::int64_t number = 0;
  try {
    std::size_t used = 0;
    number = std::stoll(id, &used);
    if (used != id.size() || number <= 0) {
      throw std::invalid_argument(id);
    }
  } catch (const std::exception&) {
    return core::make_failure(core::FailureKind::invalid_argument, "resource",
                              "evaluation ids are positive integers, not '" + id + "'");
  }
  auto db = env.store();
  if (!db.ok()) {
    return db.failure();
  }
  auto stored = db.value()->evaluations().get_evaluation(number);
  if (!stored.ok()) {
    return stored.failure();
  }
  if (!stored.value()) {
    return core::make_failure(core::FailureKind::unavailable, "resource",
                              "no evaluation " + id + " in " + db.value()->path());
  }
  json body = full_result_json(stored.value()->result);
  body["evaluation_id"] = number;
  body["candidate"] = stored.value()->key.candidate_key;
  body["problem_key"] = stored.value()->key.problem_key;
  body["harness_output"] = stored.value()->result.raw_json;
  // How it was measured, whole (the stored receipt), and the inputs it was measured at.
  body["receipt"] = json::parse(search::store::receipt_to_json(stored.value()->result));
  body["input_signature"] = stored.value()->key.input_signature;
  return json::array({{{"uri", uri}, {"mimeType", "application/json"}, {"text", body.dump(2)}}});
}

core::Result<json> read_candidate(ToolEnv& env, const std::string& uri, const std::string& key) {
  auto db = env.store();
  if (!db.ok()) {
    return db.failure();
  }
  auto candidate = db.value()->evaluations().get_candidate(key);
  if (!candidate.ok()) {
    return candidate.failure();
  }
  if (!candidate.value()) {
    return core::make_failure(core::FailureKind::unavailable, "resource",
                              "no candidate with key " + key);
  }
  return json::array(
      {{{"uri", uri}, {"mimeType", "text/x-python"}, {"text", candidate.value()->source}}});
}

// The newest runs, each with the uri of its whole record.
core::Result<json> read_recent_runs(ToolEnv& env, const std::string& uri) {
  auto db = env.store();
  if (!db.ok()) {
    return db.failure();
  }
  auto runs = db.value()->runs().list_runs(50);
  if (!runs.ok()) {
    return runs.failure();
  }
  json list = json::array();
  for (const auto& run : runs.value()) {
    json item = {{"run_id", run.id},
                 {"uri", "autocomp://runs/" + run.id},
                 {"status", std::string(search::store::to_string(run.status))},
                 {"kernel", run.config.kernel_path},
                 {"target", run.config.target},
                 {"created_at_ms", run.created_at_ms}};
    if (run.best_latency_us) {
      item["best_latency_us"] = *run.best_latency_us;
    }
    if (run.baseline_latency_us) {
      item["baseline_latency_us"] = *run.baseline_latency_us;
    }
    list.push_back(std::move(item));
  }
  return json::array({{{"uri", uri},
                       {"mimeType", "application/json"},
                       {"text", json{{"runs", std::move(list)}}.dump(1)}}});
}

}  // namespace

void register_product_tools(server::Registries& registries, const ProductToolsOptions& options) {
  auto env = std::make_shared<ToolEnv>(options);
  for (ToolMaker make : k_tool_makers) {
    registries.tools.add(make(env));
  }
  auto plan_prompts = std::make_shared<PlanPromptCache>();
  registries.tools.add(make_propose_plan_tool(env, plan_prompts));

  server::ResourceDef recent_runs;
  recent_runs.uri = "autocomp://runs";
  recent_runs.name = "runs";
  recent_runs.title = "Recent search runs";
  recent_runs.description =
      "The newest search runs (status, kernel, latencies), each with the uri of its record.";
  recent_runs.mime_type = "application/json";
  recent_runs.read = [env](const std::string& uri, const std::map<std::string, std::string>&) {
    return read_recent_runs(*env, uri);
  };
  registries.resources.add(std::move(recent_runs));

  server::ResourceTemplateDef prompt_resource;
  prompt_resource.uri_template = "autocomp://plan-prompts/{key}";
  prompt_resource.name = "plan-prompt";
  prompt_resource.title = "Planning prompt";
  prompt_resource.description = "A full planning prompt assembled by propose_plan.";
  prompt_resource.mime_type = "text/markdown";
  prompt_resource.read = [plan_prompts](
                             const std::string& uri,
                             const std::map<std::string, std::string>& vars) -> core::Result<json> {
    auto text = plan_prompts->get(vars.at("key"));
    if (!text) {
      return core::make_failure(core::FailureKind::unavailable, "resource",
                                "no planning prompt " + vars.at("key") +
                                    " (prompts are kept for the life of the server process)");
    }
    return json::array({{{"uri", uri}, {"mimeType", "text/markdown"}, {"text", *text}}});
  };
  registries.resources.add_template(std::move(prompt_resource));

  server::ResourceTemplateDef evaluations;
  evaluations.uri_template = "autocomp://evaluations/{id}";
  evaluations.name = "evaluation";
  evaluations.title = "Evaluation";
  evaluations.description =
      "Everything recorded for one evaluation: per-seed checks, raw latency samples, all "
      "profile metrics, per-step timings and the harness's JSON output.";
  evaluations.mime_type = "application/json";
  evaluations.read = [env](const std::string& uri, const std::map<std::string, std::string>& vars) {
    return read_evaluation(*env, uri, vars.at("id"));
  };
  registries.resources.add_template(std::move(evaluations));

  server::ResourceTemplateDef candidates;
  candidates.uri_template = "autocomp://candidates/{hash}";
  candidates.name = "candidate";
  candidates.title = "Candidate kernel source";
  candidates.description = "The source of a kernel version, by its content hash.";
  candidates.mime_type = "text/x-python";
  candidates.read = [env](const std::string& uri, const std::map<std::string, std::string>& vars) {
    return read_candidate(*env, uri, vars.at("hash"));
  };
  registries.resources.add_template(std::move(candidates));

  server::ResourceTemplateDef runs;
  runs.uri_template = "autocomp://runs/{id}";
  runs.name = "run";
  runs.title = "Search run";
  runs.description =
      "A search run: status, progress, every candidate with its parent, plan and "
      "latency, and the beam of each iteration.";
  runs.mime_type = "application/json";
  runs.read = [env](const std::string& uri, const std::map<std::string, std::string>& vars) {
    return read_run_resource(*env, uri, vars.at("id"));
  };
  registries.resources.add_template(std::move(runs));
}

}  // namespace autocomp::tools
