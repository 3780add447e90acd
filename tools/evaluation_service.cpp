#include "tools/evaluation_service.hpp"

#include <chrono>
#include <cmath>
#include <condition_variable>
#include <filesystem>
#include <mutex>
#include <thread>

#include "backends/kernel_modules.hpp"
#include "core/hash.hpp"
#include "core/targets.hpp"
#include "search/engine/evaluation_service.hpp"
#include "tools/evaluation_json.hpp"

namespace autocomp::tools {

using nlohmann::json;
namespace store = search::store;

namespace {

// Sends a progress notification every `period` while one evaluation runs, so that a client
// waiting minutes for a device is told it is still under way (and its idle timeout restarts).
// Progress rises towards, never reaching, 1; the caller sends 1 when the evaluation ends.
class Heartbeat {
 public:
  Heartbeat(server::ToolContext& context, std::chrono::milliseconds period, std::string what)
      : m_context(context), m_period(period), m_what(std::move(what)) {
    if (m_period.count() > 0) {
      m_thread = std::thread([this] { run(); });
    }
  }
  ~Heartbeat() {
    {
      std::lock_guard lock(m_mutex);
      m_stopped = true;
    }
    m_wake.notify_all();
    if (m_thread.joinable()) {
      m_thread.join();
    }
  }
  Heartbeat(const Heartbeat&) = delete;
  Heartbeat& operator=(const Heartbeat&) = delete;

 private:
  void run() {
    const auto start = std::chrono::steady_clock::now();
    std::unique_lock lock(m_mutex);
    while (!m_wake.wait_for(lock, m_period, [this] { return m_stopped; })) {
      const double elapsed =
          std::chrono::duration<double>(std::chrono::steady_clock::now() - start).count();
      lock.unlock();
      m_context.progress(elapsed / (elapsed + 60.0), 1.0,
                         m_what + ": still running after " + format_number(elapsed) + " s");
      lock.lock();
    }
  }

  server::ToolContext& m_context;
  std::chrono::milliseconds m_period;
  std::string m_what;
  std::mutex m_mutex;
  std::condition_variable m_wake;
  bool m_stopped = false;
  std::thread m_thread;
};

}  // namespace

EvalArgs parse_eval_args(const json& arguments) {
  EvalArgs args;
  args.kernel = arguments.value("kernel", "");
  args.problem = arguments.value("problem", "");
  args.backend = arguments.value("backend", "");
  args.target = arguments.value("target", "");
  args.kernel_name = arguments.value("kernel_name", "");
  if (arguments.contains("seeds")) {
    for (const auto& seed : arguments.at("seeds")) {
      args.seeds.push_back(seed.get<int>());
    }
  }
  args.warmup = arguments.value("warmup", args.warmup);
  args.iters = arguments.value("iters", args.iters);
  args.fresh = arguments.value("fresh", false);
  args.timeout_s = arguments.value("timeout_s", args.timeout_s);
  return args;
}

json eval_args_schema(const std::vector<std::string>& leave_out) {
  auto with = [](json property, const char* description) {
    property["description"] = description;
    return property;
  };
  json schema = {
      {"type", "object"},
      {"properties",
       {{"kernel", with({{"type", "string"}}, "Kernel file.")},
        {"problem", with({{"type", "string"}}, "Problem file.")},
        {"backend", with({{"type", "string"}}, "sim (default) or ssh://host.")},
        {"target", with({{"type", "string"}, {"enum", core::known_target_names()}},
                        "Default: the problem's.")},
        {"kernel_name", with({{"type", "string"}}, "Function to run.")},
        {"seeds", with({{"type", "array"},
                        {"items", {{"type", "integer"}, {"minimum", 0}}},
                        {"maxItems", 64}},
                       "Input seeds.")},
        {"warmup", with({{"type", "integer"}, {"minimum", 0}, {"maximum", 1000}}, "Warm-up runs.")},
        {"iters", with({{"type", "integer"}, {"minimum", 1}, {"maximum", 10000}}, "Timed runs.")},
        {"fresh", with({{"type", "boolean"}}, "Ignore the store.")},
        {"timeout_s",
         with({{"type", "number"}, {"minimum", 1}, {"maximum", 86400}}, "Time limit (s).")}}},
      {"required", {"kernel", "problem"}},
      {"additionalProperties", false},
  };
  for (const auto& name : leave_out) {
    schema["properties"].erase(name);
  }
  return schema;
}

core::Result<EvaluationOutcome> evaluate_kernel_file(ToolEnv& env, const EvalArgs& args,
                                                     server::ToolContext& context) {
  // The schema names the known targets; a caller that skips schema checks still gets this
  // answer rather than a stored harness failure.
  if (!args.target.empty() && !core::is_known_target(args.target)) {
    return core::make_failure(
        core::FailureKind::invalid_argument, "evaluate",
        "target must be " + core::known_targets_text() + ", not '" + args.target + "'");
  }
  const std::string working_dir = context.working_dir();
  auto kernel = read_source_file("kernel", args.kernel, working_dir);
  if (!kernel.ok()) {
    return kernel.failure();
  }
  auto problem = read_source_file("problem", args.problem, working_dir);
  if (!problem.ok()) {
    return problem.failure();
  }
  auto opened = env.shared_store();
  if (!opened.ok()) {
    return opened.failure();
  }
  const std::shared_ptr<store::Store>& db = opened.value();
  auto backend = env.backend(args.backend, env.target_for(args.target, problem.value().text));
  if (!backend.ok()) {
    return backend.failure();
  }
  const search::engine::EvaluationService service(
      backend.value(), store::share(db, db->evaluations()), store::share(db, db->files()));

  EvaluationOutcome outcome;
  outcome.kernel = std::move(kernel).value();
  outcome.problem = std::move(problem).value();
  outcome.target = env.target_for(args.target, outcome.problem.text);
  if (auto refused = core::namespace_problem(outcome.target, outcome.kernel.text)) {
    return core::make_failure(core::FailureKind::invalid_argument, "evaluate",
                              outcome.kernel.path + ": " + *refused);
  }

  auto problem_key = db->evaluations().put_workload(outcome.problem.text, outcome.problem.path);
  if (!problem_key.ok()) {
    return problem_key.failure();
  }
  outcome.problem_key = problem_key.value();
  auto candidate_key = db->evaluations().put_candidate(outcome.kernel.text, "agent");
  if (!candidate_key.ok()) {
    return candidate_key.failure();
  }
  outcome.candidate_key = candidate_key.value();

  backends::EvalRequest request;
  request.command = backends::EvalCommand::evaluate;
  request.kernel_source = outcome.kernel.text;
  request.kernel_filename = std::filesystem::path(outcome.kernel.path).filename().string();
  auto modules = backends::collect_kernel_modules(outcome.kernel.path, outcome.kernel.text,
                                                  outcome.problem.path);
  if (!modules.ok()) {
    return core::make_failure(core::FailureKind::invalid_argument, "evaluate",
                              outcome.kernel.path + ": " + modules.failure().message);
  }
  request.kernel_modules = std::move(modules.value().modules);
  request.kernel_folder = modules.value().kernel_folder;
  request.problem_source = outcome.problem.text;
  request.problem_filename = std::filesystem::path(outcome.problem.path).filename().string();
  request.kernel_name = args.kernel_name;
  request.target = outcome.target;
  request.seeds = args.seeds;
  request.warmup = args.warmup;
  request.iters = args.iters;
  request.timeout =
      std::chrono::milliseconds(static_cast<long>(std::llround(args.timeout_s * 1000)));

  // The inputs the problem produces here are part of the key: the same problem file can produce
  // other shapes elsewhere or under another environment (AUTOCOMP_SMALL=1).
  const store::EvalSite site = service.site_for(request, context.cancel);
  if (context.cancel.cancelled()) {
    return core::make_failure(core::FailureKind::cancelled, "evaluate", "the call was cancelled");
  }
  std::optional<store::StoredEvaluation> stored;
  if (!args.fresh) {
    auto found = service.lookup(request, site);
    if (!found.ok()) {
      return found.failure();
    }
    stored = std::move(found).value();
  }

  if (stored) {
    outcome.result = std::move(stored->result);
    outcome.evaluation_id = stored->id;
    outcome.cached = true;
  } else {
    const std::string what = "evaluating " + request.kernel_filename + " on " +
                             backend.value()->identity() + " (" + outcome.target + ")";
    context.progress(0, 1, what);
    const backends::ProgressFn progress = [&context](std::size_t done, std::size_t total,
                                                     const std::string& message) {
      if (done < total) {
        context.progress(static_cast<double>(done), static_cast<double>(total), message);
      }
    };
    // Looked up already: run and record.
    auto evaluated = [&] {
      const Heartbeat heartbeat(context, env.options().progress_interval, what);
      return service.evaluate(request, site, context.cancel, /*fresh=*/true, progress);
    }();
    if (!evaluated.ok()) {
      return evaluated.failure();
    }
    outcome.result = std::move(evaluated.value().result);
    outcome.evaluation_id = evaluated.value().id;
    context.progress(1, 1, verdict_text(outcome.result));
  }

  auto best = service.record_file(outcome.kernel.path, outcome.candidate_key, outcome.problem_key,
                                  outcome.target);
  if (!best.ok()) {
    return best.failure();
  }
  outcome.best_for_file = std::move(best).value();
  return outcome;
}

json outcome_header_json(const EvaluationOutcome& outcome) {
  json out = {{"kernel", outcome.kernel.path},
              {"problem", outcome.problem.path},
              {"candidate", outcome.candidate_key},
              {"evaluation_id", outcome.evaluation_id},
              {"details", "autocomp://evaluations/" + std::to_string(outcome.evaluation_id)}};
  out.update(provenance_json(outcome.result, outcome.cached));
  return out;
}

json evaluation_output_schema(json properties, const std::vector<std::string>& required) {
  for (const char* name : {"kernel", "candidate", "backend", "host", "device", "target"}) {
    properties[name] = {{"type", "string"}};
  }
  properties["cached"] = {{"type", "boolean"}};
  properties["evaluation_id"] = {{"type", "integer"}};
  json all_required = {"kernel", "candidate", "cached", "backend"};
  for (const auto& name : required) {
    all_required.push_back(name);
  }
  return {{"type", "object"}, {"properties", std::move(properties)}, {"required", all_required}};
}

server::ToolResult unusable_evaluation(const EvaluationOutcome& outcome, const std::string& stage,
                                       const std::string& missing, const std::string& hint) {
  core::Failure failure = outcome.result.failure.value_or(core::make_failure(
      core::FailureKind::harness_error, stage, "the backend returned no " + missing));
  failure.message = "cannot " + stage + " " + outcome.kernel.path + ": " + failure.message;
  if (!hint.empty() && failure.kind == core::FailureKind::mismatch) {
    failure.message += " (" + hint + ")";
  }
  return server::tool_failure(failure);
}

}  // namespace autocomp::tools
