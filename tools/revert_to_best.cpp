#include <chrono>
#include <cstdio>
#include <ctime>
#include <filesystem>

#include "core/hash.hpp"
#include "core/targets.hpp"
#include "tools/evaluation_json.hpp"
#include "tools/evaluation_tools.hpp"
#include "tools/kernel_files.hpp"
#include "tools/tool_surface.hpp"

namespace autocomp::tools {

using nlohmann::json;
namespace fs = std::filesystem;
namespace store = search::store;

namespace {

std::string backup_suffix() {
  const auto now = std::chrono::system_clock::now();
  const std::time_t seconds = std::chrono::system_clock::to_time_t(now);
  std::tm utc{};
  gmtime_r(&seconds, &utc);
  char buffer[32];
  std::strftime(buffer, sizeof buffer, "%Y%m%dT%H%M%SZ", &utc);
  const auto millis =
      std::chrono::duration_cast<std::chrono::milliseconds>(now.time_since_epoch()).count() % 1000;
  char with_millis[48];
  std::snprintf(with_millis, sizeof with_millis, "%s.%03lld", buffer,
                static_cast<long long>(millis));
  return with_millis;
}

core::Failure bad(const std::string& message) {
  return core::make_failure(core::FailureKind::invalid_argument, "revert", message);
}

// The best of a run is the one its status names (get_search_status, list_runs): the candidate
// the search recorded as its best, with the latency it recorded. Runs that never recorded one
// fall back to the fastest correct evaluation among their candidates.
core::Result<std::optional<store::BestVersion>> best_of_run(store::RunJournal& runs,
                                                            store::EvaluationCache& evaluations,
                                                            const std::string& run_id) {
  auto run = runs.get_run(run_id);
  if (!run.ok()) {
    return run.failure();
  }
  if (!run.value()) {
    return bad("no run '" + run_id + "' (list_runs shows the known runs)");
  }
  const store::Run& r = *run.value();
  if (!r.best_candidate_key || !r.best_latency_us) {
    return runs.best_for_run(r.id);
  }
  auto candidate = evaluations.get_candidate(*r.best_candidate_key);
  if (!candidate.ok()) {
    return candidate.failure();
  }
  if (!candidate.value()) {
    return runs.best_for_run(r.id);
  }
  store::BestVersion best;
  best.candidate_key = candidate.value()->key;
  best.source = candidate.value()->source;
  best.median_us = *r.best_latency_us;
  best.backend_identity = r.config.backend;
  if (auto stored_evaluations = evaluations.evaluations_for_candidate(best.candidate_key, 20);
      stored_evaluations.ok()) {
    for (const auto& stored : stored_evaluations.value()) {
      if (stored.result.latency && stored.result.correct && !stored.result.failure) {
        best.evaluation_id = stored.id;
        best.device = stored.result.device;
        if (stored.result.latency->median_us == best.median_us) {
          break;  // the evaluation the run measured it with
        }
      }
    }
  }
  return std::optional<store::BestVersion>(std::move(best));
}

// Finds the best version by run, or by the kernel file's own recorded history.
core::Result<std::optional<store::BestVersion>> find_best(store::Store& db, const json& arguments,
                                                          const std::string& kernel_path,
                                                          const std::string& working_dir,
                                                          ToolEnv& env) {
  if (arguments.contains("run_id")) {
    return best_of_run(db.runs(), db.evaluations(), arguments.at("run_id").get<std::string>());
  }
  std::string problem_key;
  std::string target = arguments.value("target", "");
  if (arguments.contains("problem")) {
    auto problem = read_source_file("problem", arguments.at("problem"), working_dir);
    if (!problem.ok()) {
      return problem.failure();
    }
    problem_key = core::source_key(problem->text);
    target = env.target_for(target, problem->text);
  } else {
    auto versions = db.files().file_versions(kernel_path, 1);
    if (!versions.ok()) {
      return versions.failure();
    }
    if (versions->empty()) {
      return bad("no version of " + kernel_path +
                 " was ever evaluated; evaluate it with verify_kernel or benchmark_kernel first, "
                 "or pass run_id");
    }
    problem_key = versions->front().problem_key;
    if (target.empty()) {
      target = versions->front().target;
    }
  }
  return db.files().best_for_file(kernel_path, problem_key, target, "");
}

}  // namespace

server::ToolDef make_revert_to_best_tool(std::shared_ptr<ToolEnv> env) {
  server::ToolDef tool;
  tool.name = "revert_to_best";
  tool.title = "Restore the best";
  tool.description =
      "Write the fastest correct version back into a kernel file (a run's winner with run_id); "
      "the old text goes to a backup.";
  tool.input_schema = {
      {"type", "object"},
      {"properties",
       {{"kernel", {{"type", "string"}, {"minLength", 1}, {"description", "Kernel file."}}},
        {"problem", {{"type", "string"}, {"description", "Problem file (last used)."}}},
        {"run_id", {{"type", "string"}, {"description", "Take this run's winner."}}},
        {"target",
         {{"type", "string"}, {"enum", core::known_target_names()}, {"description", "Last used."}}},
        {"dry_run", {{"type", "boolean"}, {"description", "Write nothing."}}}}},
      {"required", {"kernel"}},
      {"additionalProperties", false},
  };
  tool.output_schema =
      object_schema({{"restored", "boolean"}, {"candidate", "string"}}, {"restored", "candidate"});
  tool.annotations = hints(false, false, true, false);
  tool.handler = [env](const json& arguments, server::ToolContext& context) {
    const std::string working_dir = context.working_dir();
    fs::path kernel_path(arguments.at("kernel").get<std::string>());
    if (kernel_path.is_relative()) {
      kernel_path = fs::path(working_dir) / kernel_path;
    }
    const std::string path = kernel_path.lexically_normal().string();
    auto opened = env->store();
    if (!opened.ok()) {
      return server::tool_failure(opened.failure());
    }
    store::Store& db = *opened.value();
    auto best = find_best(db, arguments, path, working_dir, *env);
    if (!best.ok()) {
      return server::tool_failure(best.failure());
    }
    if (!best.value()) {
      return server::tool_error("no correct version is recorded for " +
                                (arguments.contains("run_id")
                                     ? "run " + arguments.at("run_id").get<std::string>()
                                     : path) +
                                "; nothing to restore");
    }
    const store::BestVersion& version = *best.value();
    json out = {{"kernel", path},
                {"candidate", version.candidate_key},
                {"median_us", version.median_us},
                {"evaluation_id", version.evaluation_id},
                {"backend", version.backend_identity}};

    std::optional<std::string> current;
    if (fs::exists(path)) {
      auto existing = read_source_file("kernel", path, working_dir);
      if (!existing.ok()) {
        return server::tool_failure(existing.failure());
      }
      current = existing->text;
    }
    if (current && core::source_key(*current) == version.candidate_key) {
      out["restored"] = false;
      out["message"] = path + " already holds the best known version (" +
                       format_number(version.median_us) + " us); nothing changed";
      std::string text = out["message"].get<std::string>();
      return server::ToolResult{out, std::move(text), false, json::array()};
    }
    if (arguments.value("dry_run", false)) {
      out["restored"] = false;
      out["message"] = "would restore candidate " + version.candidate_key.substr(0, 12) + " (" +
                       format_number(version.median_us) + " us) into " + path;
      std::string text = out["message"].get<std::string>();
      return server::ToolResult{out, std::move(text), false, json::array()};
    }
    if (current) {
      // Keep what is replaced twice over: as a backup file and as a stored candidate.
      const std::string backup = path + ".autocomp-backup-" + backup_suffix();
      if (auto written = write_file_atomically(backup, *current); !written.ok()) {
        return server::tool_failure(written.failure());
      }
      if (auto stored = db.evaluations().put_candidate(*current, "agent"); stored.ok()) {
        out["replaced_candidate"] = stored.value();
      }
      out["backup"] = backup;
    }
    if (auto written = write_file_atomically(path, version.source); !written.ok()) {
      return server::tool_failure(written.failure());
    }
    // A search's winner becomes the file's newest version, so that what is measured and
    // reflected on next starts from it (record_reflexion credits the search, not the edit before).
    if (arguments.contains("run_id")) {
      if (auto run = db.runs().get_run(arguments.at("run_id").get<std::string>());
          run.ok() && run.value()) {
        (void)db.files().record_file_version(path, version.candidate_key,
                                             run.value()->config.problem_key,
                                             run.value()->config.target);
        out["run_id"] = run.value()->id;
      }
    }
    out["restored"] = true;
    json links = json::array({resource_link("autocomp://candidates/" + version.candidate_key,
                                            "restored version", "text/x-python")});
    if (out.contains("run_id")) {
      links.push_back(run_link(out["run_id"].get<std::string>()));
    }
    out["message"] = "restored candidate " + version.candidate_key.substr(0, 12) + " (" +
                     format_number(version.median_us) + " us median on " +
                     version.backend_identity + ") into " + path +
                     (current ? "; the previous content is in " + out["backup"].get<std::string>()
                              : std::string());
    std::string text = out["message"].get<std::string>();
    return server::ToolResult{out, std::move(text), false, std::move(links)};
  };
  return tool;
}

}  // namespace autocomp::tools
