#include "tools/search_tools.hpp"

#include <algorithm>
#include <cstdio>
#include <filesystem>
#include <map>

#include "core/hash.hpp"
#include "core/targets.hpp"
#include "core/text.hpp"
#include "search/autotune/knobs.hpp"
#include "search/engine/beam_search.hpp"
#include "search/engine/confirmation.hpp"
#include "search/engine/run_store.hpp"
#include "search/launch/launcher.hpp"
#include "search/llm/provider.hpp"
#include "server/protocol.hpp"
#include "tools/evaluation_json.hpp"
#include "tools/kernel_files.hpp"
#include "tools/sampling_provider.hpp"
#include "tools/tool_surface.hpp"

namespace autocomp::tools {

using nlohmann::json;
namespace engine = search::engine;
namespace store = search::store;

namespace {

constexpr double k_max_wait_s = 50;  // below the HTTP idle watchdog of common clients

std::string format_progress(const engine::ProgressEvent& event) {
  char buffer[256];
  if (event.best_latency_us <= 0) {
    std::snprintf(buffer, sizeof buffer, "run %s: measuring the input kernel",
                  event.run_id.c_str());
  } else {
    std::snprintf(buffer, sizeof buffer,
                  "iteration %d/%d · %ld evaluated · best %.2f us (%.2fx) · %ld LLM calls · $%.2f",
                  event.iteration, event.iterations, event.candidates_evaluated,
                  event.best_latency_us, event.speedup, event.llm_calls, event.cost_usd);
  }
  return buffer;
}

// Live counters of a running search. The best figures are the run's recorded ones (top level of
// the status): one best everywhere, the one revert_to_best(run_id) restores.
json progress_json(const engine::ProgressEvent& event) {
  return {{"iteration", event.iteration},
          {"iterations", event.iterations},
          {"evaluated", event.candidates_evaluated},
          {"failed", event.candidates_failed},
          {"llm_calls", event.llm_calls},
          {"tokens", event.tokens},
          {"cost_usd", event.cost_usd},
          {"elapsed_s", event.elapsed_s},
          {"device_s", event.device_s},
          {"device_measured", event.device_measured},
          {"phase", event.phase}};
}

// A confirmed run's device pairs: how well the simulator ranked like the device
// (search/engine/confirmation.hpp), with the advice to recalibrate when it drifted.
std::optional<json> confirmation_json(store::Store& db, const store::Run& run) {
  auto settings = engine::config_of(run, db.evaluations());
  const std::string spec = settings.ok() ? settings->confirm : std::string();
  auto pairs = db.calibrations().pairs_for_run(run.id);
  if (spec.empty() && (!pairs.ok() || pairs->empty())) {
    return std::nullopt;
  }
  std::vector<engine::LatencyPair> figures;
  if (pairs.ok()) {
    for (const auto& pair : pairs.value()) {
      figures.push_back({pair.simulated_us, pair.measured_us});
    }
  }
  const engine::Agreement agreement = engine::agreement_of(figures, spec);
  json out = {{"backend", spec}, {"pairs", agreement.pairs}};
  if (settings.ok()) {
    out["top_k"] = settings->confirm_top_k;
    if (settings->max_device_s) {
      out["max_device_s"] = *settings->max_device_s;
    }
  }
  if (agreement.rank_correlation) {
    out["rank_correlation"] = *agreement.rank_correlation;
  }
  if (agreement.pairs > 0) {
    out["device_sim_ratio"] = {{"min", agreement.ratio_min},
                               {"median", agreement.ratio_median},
                               {"max", agreement.ratio_max}};
  }
  out["drifted"] = agreement.drifted;
  if (agreement.drifted) {
    out["advice"] = agreement.warning;
  }
  return out;
}

// The model source a stored run was started with, from its llm_specs.
std::string model_source_of(const std::vector<std::string>& llm_specs) {
  if (llm_specs.empty()) {
    return "none";
  }
  const bool client = std::all_of(llm_specs.begin(), llm_specs.end(), [](const std::string& spec) {
    return spec == k_client_model_spec;
  });
  return client ? "client" : "server";
}

json client_model_json(const SamplingStats& stats) {
  json out = {{"requests", stats.requests}, {"answered", stats.answered}, {"failed", stats.failed}};
  if (!stats.last_failure.empty()) {
    out["last_failure"] = stats.last_failure;
  }
  return out;
}

json outcome_json(const engine::SearchOutcome& outcome) {
  // The best and baseline figures are the run's own (top level of the status), not repeated.
  json out = {{"status", outcome.status},
              {"iterations_done", outcome.iterations_done},
              {"evaluated", outcome.candidates_evaluated},
              {"failed", outcome.candidates_failed},
              {"duplicates", outcome.duplicates},
              {"llm_calls", outcome.llm_calls},
              {"tokens", outcome.tokens},
              {"cost_usd", outcome.cost_usd},
              {"elapsed_s", outcome.elapsed_s}};
  if (!outcome.confirmation.empty()) {
    out["device_s"] = outcome.device_s;
    out["device_measured"] = outcome.device_measured;
  }
  if (!outcome.stop_reason.empty()) {
    out["stop_reason"] = outcome.stop_reason;
  }
  if (outcome.failure) {
    out["error"] = outcome.failure->describe();
  }
  return out;
}

// What the store knows about a run (for runs not running in this process, and for listings).
core::Result<json> stored_run_json(store::Store& db, const std::string& run_id) {
  auto run = db.runs().get_run(run_id);
  if (!run.ok()) {
    return run.failure();
  }
  if (!run.value()) {
    return core::make_failure(
        core::FailureKind::invalid_argument, "search",
        "no run '" + run_id + "' in " + db.path() + " (list_runs shows the known runs)");
  }
  const store::Run& r = *run.value();
  json out = {{"run_id", r.id},
              {"status", std::string(store::to_string(r.status))},
              {"kernel", r.config.kernel_path},
              {"target", r.config.target},
              {"iteration", r.iteration},
              {"iterations", r.config.iterations},
              {"created_at_ms", r.created_at_ms},
              {"model_source", model_source_of(r.config.llm_specs)}};
  if (!r.status_message.empty()) {
    out["message"] = r.status_message;
  }
  if (r.baseline_latency_us) {
    out["baseline_latency_us"] = *r.baseline_latency_us;
  }
  if (r.best_latency_us) {
    out["best_latency_us"] = *r.best_latency_us;
    if (r.baseline_latency_us && *r.best_latency_us > 0) {
      out["speedup"] = *r.baseline_latency_us / *r.best_latency_us;
    }
  }
  if (r.best_candidate_key) {
    out["best_candidate"] = *r.best_candidate_key;
  }
  if (auto confirmed = confirmation_json(db, r)) {
    out["confirm"] = std::move(*confirmed);
  }
  if (auto counts = db.runs().run_counts(r.id); counts.ok()) {
    out["evaluated"] = counts->evaluated;
    out["failed"] = counts->failed;
  }
  if (auto totals = db.llm_calls().llm_totals(r.id); totals.ok()) {
    out["llm_calls"] = totals->calls;
    out["tokens"] = totals->input_tokens + totals->output_tokens;
    out["cost_usd"] = totals->cost_usd;
  }
  return out;
}

constexpr std::size_t k_table_rows = 30;
constexpr std::size_t k_table_plan_chars = 70;

// Every candidate of a run in a few characters each, fastest correct first, then the rest in
// the order they came: {it (iteration), plan (its knobs or the start of its plan), us (median),
// status}. At most k_table_rows; `candidates_total` counts them all.
json candidate_table(store::Store& db, const std::string& run_id, std::size_t& total) {
  json rows = json::array();
  auto candidates = db.runs().run_candidates(run_id);
  if (!candidates.ok()) {
    total = 0;
    return rows;
  }
  auto list = std::move(candidates).value();
  total = list.size();
  // A confirmed run's device measurements, by kernel (the newest of each).
  std::map<std::string, double> measured;
  if (auto pairs = db.calibrations().pairs_for_run(run_id); pairs.ok()) {
    for (const auto& pair : pairs.value()) {
      measured[pair.kernel_digest] = pair.measured_us;
    }
  }
  std::stable_sort(list.begin(), list.end(),
                   [](const store::RunCandidate& a, const store::RunCandidate& b) {
                     const bool a_timed = a.correct && a.median_us.has_value();
                     const bool b_timed = b.correct && b.median_us.has_value();
                     if (a_timed != b_timed) {
                       return a_timed;
                     }
                     return a_timed && *a.median_us < *b.median_us;
                   });
  for (const auto& candidate : list) {
    if (rows.size() >= k_table_rows) {
      break;
    }
    std::string plan = candidate.plan_text;
    std::replace(plan.begin(), plan.end(), '\n', ' ');
    if (plan.empty()) {
      plan = candidate.parent_key.empty() ? "input kernel" : candidate.provider;
    }
    if (plan.size() > k_table_plan_chars) {
      plan = core::utf8_prefix(plan, k_table_plan_chars - 3) + "...";
    }
    json row = {{"it", candidate.iteration},
                {"plan", std::move(plan)},
                {"status", std::string(store::to_string(candidate.status))}};
    if (candidate.median_us && candidate.correct) {
      row["us"] = round_sig(*candidate.median_us);
    }
    if (auto it = measured.find(candidate.candidate_key); it != measured.end()) {
      row["device_us"] = round_sig(it->second);
    }
    rows.push_back(std::move(row));
  }
  return rows;
}

// The table as text lines: "  i1  612.3 us  accepted  TILE_N=256".
std::string candidate_table_text(const json& rows) {
  std::string text;
  for (const auto& row : rows) {
    std::string us =
        row.contains("us") ? format_number(row.at("us").get<double>()) + " us" : std::string("-");
    if (row.contains("device_us")) {
      us += " (device " + format_number(row.at("device_us").get<double>()) + " us)";
    }
    text += "  i" + std::to_string(row.at("it").get<int>()) + "  " + us + "  " +
            row.at("status").get<std::string>() + "  " + row.at("plan").get<std::string>() + "\n";
  }
  return text;
}

// Status of a run: live when this process runs it, else from the store. Waits up to `wait_s`
// for a change, sending progress notifications meanwhile.
core::Result<json> run_status(ToolEnv& env, const std::string& run_id, double wait_s,
                              server::ToolContext& context) {
  auto db = env.store();
  if (!db.ok()) {
    return db.failure();
  }
  auto resolved = db.value()->runs().get_run(run_id);
  if (!resolved.ok()) {
    return resolved.failure();
  }
  const std::string id = resolved.value() ? resolved.value()->id : run_id;
  auto live = env.jobs().snapshot(id);
  if (live && wait_s > 0) {
    const auto deadline =
        std::chrono::steady_clock::now() +
        std::chrono::milliseconds(static_cast<long>(std::min(wait_s, k_max_wait_s) * 1000));
    long seen = live->updates;
    double sent = 0;
    while (!live->finished && !context.cancel.cancelled() &&
           std::chrono::steady_clock::now() < deadline) {
      const auto left = std::chrono::duration_cast<std::chrono::milliseconds>(
          deadline - std::chrono::steady_clock::now());
      live = env.jobs().wait(id, seen, left, context.cancel);
      if (live->updates > seen) {
        seen = live->updates;
        context.progress(++sent, std::nullopt, format_progress(live->progress));
      }
    }
  }
  auto stored = stored_run_json(*db.value(), id);
  if (!stored.ok()) {
    return stored.failure();
  }
  json out = std::move(stored).value();
  if (live) {
    out["model_source"] = live->model.source;
    if (live->model.client) {
      out["client_model"] = client_model_json(live->model.client->stats());
    }
    out["live"] = progress_json(live->progress);
    out["running_here"] = !live->finished;
    if (live->outcome) {
      out["result"] = outcome_json(*live->outcome);
    }
  } else {
    out["running_here"] = false;
  }
  std::size_t total = 0;
  out["candidates"] = candidate_table(*db.value(), id, total);
  out["candidates_total"] = total;
  out["details"] = "autocomp://runs/" + id;
  return out;
}

// One line for a run: "run r1: completed, iteration 3/3, input 612 us, best 301 us (2.03x)".
std::string run_line(const json& status) {
  std::string text = "run " + status.value("run_id", std::string()) + ": " +
                     status.value("status", std::string()) + ", iteration " +
                     std::to_string(status.value("iteration", 0)) + "/" +
                     std::to_string(status.value("iterations", 0));
  if (status.contains("baseline_latency_us")) {
    text += ", input " + format_number(status.at("baseline_latency_us").get<double>()) + " us";
  }
  if (status.contains("best_latency_us")) {
    text += ", best " + format_number(status.at("best_latency_us").get<double>()) + " us";
  }
  if (status.contains("speedup")) {
    text += " (" + format_number(status.at("speedup").get<double>()) + "x)";
  }
  return text;
}

// The text block of a status answer: the figures that matter, then the candidate table.
std::string run_status_text(const json& status) {
  std::string text = run_line(status);
  if (status.contains("message")) {
    text += "\n" + status.at("message").get<std::string>();
  }
  if (auto it = status.find("confirm"); it != status.end()) {
    text += "\nconfirmed on " + it->value("backend", std::string()) + ": " +
            std::to_string(it->value("pairs", 0)) + " device pairs";
    if (it->contains("rank_correlation")) {
      text += ", rank correlation " + format_number(it->at("rank_correlation").get<double>());
    }
    if (auto ratio = it->find("device_sim_ratio"); ratio != it->end()) {
      text += ", device/sim ratio " + format_number(ratio->at("min").get<double>()) + "/" +
              format_number(ratio->at("median").get<double>()) + "/" +
              format_number(ratio->at("max").get<double>()) + " (min/median/max)";
    }
    if (auto live = status.find("live"); live != status.end()) {
      text += ", " + format_number(live->value("device_s", 0.0)) + " device s";
    }
    if (it->contains("advice")) {
      text += "\nwarning: " + it->at("advice").get<std::string>();
    }
  }
  const auto& rows = status.at("candidates");
  text += "\ncandidates (" + std::to_string(rows.size()) + " of " +
          std::to_string(status.value("candidates_total", std::size_t{0})) +
          ", fastest first: iteration, median, status, knobs or plan):\n" +
          candidate_table_text(rows);
  for (const char* key : {"next", "note"}) {
    if (status.contains(key)) {
      text += std::string(key) + ": " + status.at(key).get<std::string>() + "\n";
    }
  }
  text += "details: " + status.value("details", std::string());
  return text;
}

json search_input_schema() {
  auto typed = [](const char* type, const char* description) {
    return json{{"type", type}, {"description", description}};
  };
  auto bounded = [](const char* type, int minimum, int maximum, const char* description) {
    json out = {{"type", type}, {"minimum", minimum}, {"description", description}};
    if (maximum > 0) {
      out["maximum"] = maximum;
    }
    return out;
  };
  json target = typed("string", "Else the problem's.");
  target["enum"] = core::known_target_names();
  json llm = typed("array", "LLM specs.");
  llm["items"] = {{"type", "string"}};
  return {
      {"type", "object"},
      {"properties",
       {{"kernel", typed("string", "Kernel file.")},
        {"problem", typed("string", "Problem file.")},
        {"resume", typed("string", "Run id to continue.")},
        {"backend", typed("string", "Backend spec.")},
        {"target", std::move(target)},
        {"llm", std::move(llm)},
        {"use_client_model", typed("boolean", "Sampling (true).")},
        {"beam", bounded("integer", 1, 64, "Beam width (6).")},
        {"plans", bounded("integer", 1, 64, "Plans per member (6).")},
        {"impls", bounded("integer", 1, 16, "Codes per plan (2).")},
        {"iterations", bounded("integer", 1, 1000, "Iterations (10).")},
        {"dropout", bounded("number", 0, 1, "Menu dropout (0.7).")},
        {"seed", bounded("integer", 0, 0, "Random seed.")},
        {"memory", typed("boolean", "Use lessons (true).")},
        {"reflexions", bounded("integer", 0, 20, "Reflexions shown (3).")},
        {"divergence", bounded("number", 0, 0, "Cut-off ratio (1.5).")},
        {"min_gain", typed("number", "Min gain %.")},
        // A string or an object (parse_confirm checks); no "type" keeps tools/list small.
        {"confirm", {{"description", "Device spec or {backend,top_k,max_device_s}"}}},
        {"max_llm_calls", bounded("integer", 1, 0, "LLM calls.")},
        {"max_tokens", bounded("integer", 1, 0, "Tokens.")},
        {"max_cost_usd", bounded("number", 0, 0, "USD.")},
        {"max_wall_s", bounded("number", 1, 0, "Seconds.")},
        {"wait_s", bounded("number", 0, static_cast<int>(k_max_wait_s), "Wait for progress.")}}},
      {"additionalProperties", false},
  };
}

// run_beam_search's `confirm`: a device spec, or {backend, top_k, max_device_s} (the
// hardware-confirmed search, search/engine/confirmation.hpp). One property keeps tools/list small.
core::Status parse_confirm(const json& arguments, engine::SearchConfig& shape) {
  auto it = arguments.find("confirm");
  if (it == arguments.end()) {
    return core::ok_status();
  }
  auto bad = [](const std::string& message) {
    return core::make_failure(core::FailureKind::invalid_argument, "search", "confirm: " + message);
  };
  if (it->is_string()) {
    shape.confirm = it->get<std::string>();
    return shape.confirm.empty() ? bad("the device spec is empty") : core::ok_status();
  }
  if (!it->is_object()) {
    return bad("expected a device spec or {backend, top_k, max_device_s}");
  }
  for (const auto& [key, value] : it->items()) {
    if (key != "backend" && key != "top_k" && key != "max_device_s") {
      return bad("unknown field '" + key + "' (known: backend, top_k, max_device_s)");
    }
  }
  const auto backend = it->find("backend");
  if (backend == it->end() || !backend->is_string() || backend->get<std::string>().empty()) {
    return bad("'backend' must name the device's backend spec");
  }
  shape.confirm = backend->get<std::string>();
  if (auto top_k = it->find("top_k"); top_k != it->end()) {
    if (!top_k->is_number_integer() || top_k->get<long>() < 1 || top_k->get<long>() > 64) {
      return bad("'top_k' must be an integer from 1 to 64");
    }
    shape.confirm_top_k = top_k->get<int>();
  }
  if (auto seconds = it->find("max_device_s"); seconds != it->end()) {
    if (!seconds->is_number() || !(seconds->get<double>() > 0)) {
      return bad("'max_device_s' must be a positive number of seconds");
    }
    shape.max_device_s = seconds->get<double>();
  }
  return core::ok_status();
}

// The output of run_beam_search, get_search_status and cancel_search (run_status's fields).
json run_status_schema() {
  return object_schema({{"run_id", "string"}, {"status", "string"}}, {"run_id", "status"});
}

}  // namespace

server::ToolDef make_run_beam_search_tool(std::shared_ptr<ToolEnv> env) {
  server::ToolDef tool;
  tool.name = "run_beam_search";
  tool.title = "Search";
  tool.description =
      "Background beam search for a faster NKI kernel (LLM/client-model plans, knob tuning); "
      "returns run_id for get_search_status.";
  tool.input_schema = search_input_schema();
  tool.output_schema = run_status_schema();
  tool.annotations = hints(false, false, false, true);
  tool.handler = [env](const json& arguments, server::ToolContext& context) {
    const std::string resume = arguments.value("resume", "");
    if (resume.empty() && (!arguments.contains("kernel") || !arguments.contains("problem"))) {
      return server::tool_error("'kernel' and 'problem' are required unless 'resume' is given");
    }
    auto db = env->shared_store();
    if (!db.ok()) {
      return server::tool_failure(db.failure());
    }
    std::vector<std::string> llm_specs = env->options().llm_specs;
    if (arguments.contains("llm")) {
      llm_specs = arguments.at("llm").get<std::vector<std::string>>();
    }
    // With no configured model the client's own model plans and writes candidates when it offers
    // sampling. A resumed run that never used a model stays on autotuning.
    bool use_client_model = llm_specs.empty() && context.client_supports_sampling &&
                            arguments.value("use_client_model", true);
    if (use_client_model && !resume.empty()) {
      auto stored = db.value()->runs().get_run(resume);
      if (stored.ok() && stored.value() && stored.value()->config.llm_specs.empty()) {
        use_client_model = false;
      }
    }
    search::launch::LaunchRequest request;
    request.resume_run_id = resume;
    request.default_target = env->options().target;
    request.backend_spec = arguments.value("backend", "");
    request.default_backend_spec = env->default_backend_spec();
    request.harness_dir = env->options().harness_dir;
    request.llm_specs = llm_specs;
    JobModel model;
    if (!llm_specs.empty()) {
      model.source = "server";
    } else if (use_client_model) {
      auto client = make_session_sampling_provider(context.session_channel());
      request.extra_providers.push_back(client);
      request.recorded_llm_specs = {std::string(k_client_model_spec)};
      model.source = "client";
      model.client = client;
    }
    if (resume.empty()) {
      const std::string working_dir = context.working_dir();
      auto kernel = read_source_file("kernel", arguments.at("kernel"), working_dir);
      if (!kernel.ok()) {
        return server::tool_failure(kernel.failure());
      }
      auto problem = read_source_file("problem", arguments.at("problem"), working_dir);
      if (!problem.ok()) {
        return server::tool_failure(problem.failure());
      }
      if (llm_specs.empty() && !use_client_model &&
          search::autotune::parse_knobs(kernel->text).empty()) {
        return server::tool_error(
            "nothing to search with: no model is configured (no llm argument, no server --llm)" +
            std::string(context.client_supports_sampling ? ", use_client_model is false,"
                                                         : " and this client offers no sampling,") +
            " and " + kernel->path +
            " declares no knobs for autotuning. Declare tunable constants in the kernel, e.g.\n"
            "    # autocomp: knob TILE_N = [512, 256, 128]\n    TILE_N = 512\n"
            "(the comment lists the values, the line below assigns one; docs/knobs.md), or pass "
            "llm: ['openai:MODEL'] or ['anthropic:MODEL'] (keys in the server's environment), or "
            "start the server with --llm SPEC.");
      }
      request.kernel_path = kernel->path;
      request.kernel_source = kernel->text;
      request.problem_path = problem->path;
      request.problem_source = problem->text;
      request.target = arguments.value("target", "");
      engine::SearchConfig& shape = request.shape;
      shape.beam = arguments.value("beam", shape.beam);
      shape.plans = arguments.value("plans", shape.plans);
      shape.impls = arguments.value("impls", shape.impls);
      shape.iterations = arguments.value("iterations", shape.iterations);
      shape.dropout = arguments.value("dropout", shape.dropout);
      shape.seed = arguments.value("seed", std::uint64_t{0});
      shape.memory = arguments.value("memory", shape.memory);
      shape.reflexions = arguments.value("reflexions", shape.reflexions);
      shape.divergence = arguments.value("divergence", shape.divergence);
      if (arguments.contains("min_gain")) {
        shape.min_gain = arguments.at("min_gain").get<double>();
      }
      if (auto confirm = parse_confirm(arguments, shape); !confirm.ok()) {
        return server::tool_failure(confirm.failure());
      }
    }
    engine::Budgets budgets;
    bool budgets_given = false;
    if (arguments.contains("max_llm_calls")) {
      budgets.max_llm_calls = arguments.at("max_llm_calls").get<long>();
      budgets_given = true;
    }
    if (arguments.contains("max_tokens")) {
      budgets.max_tokens = arguments.at("max_tokens").get<long>();
      budgets_given = true;
    }
    if (arguments.contains("max_cost_usd")) {
      budgets.max_cost_usd = arguments.at("max_cost_usd").get<double>();
      budgets_given = true;
    }
    if (arguments.contains("max_wall_s")) {
      budgets.max_wall_s = arguments.at("max_wall_s").get<double>();
      budgets_given = true;
    }
    if (budgets_given) {
      request.budgets = budgets;
    }
    auto launch = search::launch::prepare(
        request, db.value(), [env](const std::string& spec, const std::string& target) {
          return env->backend(spec, target);
        });
    if (!launch.ok()) {
      return server::tool_failure(launch.failure());
    }

    auto started = env->jobs().start(std::move(launch).value(), model);
    if (!started.ok()) {
      return server::tool_failure(started.failure());
    }
    auto status = run_status(*env, started.value(), arguments.value("wait_s", 0.0), context);
    if (!status.ok()) {
      return server::tool_failure(status.failure());
    }
    json out = std::move(status).value();
    out["next"] = "get_search_status(run_id='" + started.value() +
                  "', wait_s=30) to follow it; cancel_search to stop it";
    if (use_client_model) {
      out["note"] =
          "No LLM is configured on the server, so this search plans and writes candidates with "
          "your own model: it sends sampling/createMessage requests while it runs in the "
          "background (over Streamable HTTP they travel on the session's GET event stream, "
          "which must stay open). If they fail it keeps going on knob autotuning; client_model "
          "in get_search_status counts the requests and failures.";
    } else if (llm_specs.empty() && resume.empty()) {
      out["note"] =
          std::string(
              "No LLM is used, so this search runs on knob autotuning alone: it tries the "
              "values the kernel declares with '# autocomp: knob NAME = [v1, v2]' "
              "comments. ") +
          (context.client_supports_sampling
               ? "use_client_model: true (the default) lets your own model plan and write "
                 "candidates through sampling. "
               : "") +
          "For plan-then-implement search pass llm: ['openai:MODEL'] or ['anthropic:MODEL'] "
          "(keys in the server's environment) or start the server with --llm SPEC" +
          (context.client_supports_sampling ? "."
                                            : ", or connect with a client that offers "
                                              "sampling.");
    }
    std::string text = run_status_text(out);
    return server::ToolResult{out, std::move(text), false,
                              json::array({run_link(started.value())})};
  };
  // As a protocol task the call is the search job itself; the task ends with the run and its
  // result is the finished run's status (what get_search_status reports).
  tool.task_support = server::TaskSupport::optional;
  tool.jobs = std::make_shared<SearchTaskSource>(env->jobs(), [env](const std::string& run_id) {
    server::ToolContext quiet;
    auto status = run_status(*env, run_id, 0, quiet);
    if (!status.ok()) {
      return server::to_call_tool_result(server::tool_failure(status.failure()));
    }
    const bool failed = status.value().value("status", std::string()) == "failed";
    return server::to_call_tool_result(server::ToolResult{
        status.value(), failed ? status.value().dump() : "", failed, json::array()});
  });
  return tool;
}

server::ToolDef make_get_search_status_tool(std::shared_ptr<ToolEnv> env) {
  server::ToolDef tool;
  tool.name = "get_search_status";
  tool.title = "Search status";
  tool.description = "A run's status, speedup and candidate table.";
  tool.input_schema = {
      {"type", "object"},
      {"properties",
       {{"run_id", {{"type", "string"}, {"minLength", 4}, {"description", "The run."}}},
        {"wait_s",
         {{"type", "number"},
          {"minimum", 0},
          {"maximum", static_cast<int>(k_max_wait_s)},
          {"description", "Wait for the end."}}}}},
      {"required", {"run_id"}},
      {"additionalProperties", false},
  };
  tool.output_schema = run_status_schema();
  tool.annotations = hints(true, false, true, false);
  tool.handler = [env](const json& arguments, server::ToolContext& context) {
    auto status = run_status(*env, arguments.at("run_id"), arguments.value("wait_s", 0.0), context);
    if (!status.ok()) {
      return server::tool_failure(status.failure());
    }
    std::string text = run_status_text(status.value());
    json link = run_link(status.value().value("run_id", std::string()));
    return server::ToolResult{std::move(status).value(), std::move(text), false,
                              json::array({std::move(link)})};
  };
  return tool;
}

server::ToolDef make_cancel_search_tool(std::shared_ptr<ToolEnv> env) {
  server::ToolDef tool;
  tool.name = "cancel_search";
  tool.title = "Stop a search";
  tool.description =
      "Stop a running search; revert_to_best(run_id) takes its best, run_beam_search(resume) "
      "continues it.";
  tool.input_schema = {
      {"type", "object"},
      {"properties",
       {{"run_id", {{"type", "string"}, {"minLength", 4}, {"description", "The run to stop."}}}}},
      {"required", {"run_id"}},
      {"additionalProperties", false},
  };
  tool.output_schema = run_status_schema();
  tool.annotations = hints(false, false, true, false);
  tool.handler = [env](const json& arguments, server::ToolContext& context) {
    auto db = env->store();
    if (!db.ok()) {
      return server::tool_failure(db.failure());
    }
    auto run = db.value()->runs().get_run(arguments.at("run_id"));
    if (!run.ok()) {
      return server::tool_failure(run.failure());
    }
    if (!run.value()) {
      return server::tool_error("no run '" + arguments.at("run_id").get<std::string>() +
                                "' (list_runs shows the known runs)");
    }
    const std::string id = run.value()->id;
    const bool cancelled = env->jobs().cancel(id);
    if (cancelled) {
      // Report once the engine has stopped (bounded), so the caller sees the final state.
      const auto deadline = std::chrono::steady_clock::now() + std::chrono::seconds(20);
      auto live = env->jobs().snapshot(id);
      while (live && !live->finished && std::chrono::steady_clock::now() < deadline) {
        live = env->jobs().wait(id, live->updates, std::chrono::seconds(1), context.cancel);
      }
    }
    auto status = run_status(*env, id, 0, context);
    if (!status.ok()) {
      return server::tool_failure(status.failure());
    }
    json out = std::move(status).value();
    out["cancelled"] = cancelled;
    if (!cancelled) {
      out["message"] = "run " + id + " is not running in this server (status " +
                       out.value("status", std::string("unknown")) + ")";
    }
    return server::ToolResult{out, "", false, json::array()};
  };
  return tool;
}

server::ToolDef make_list_runs_tool(std::shared_ptr<ToolEnv> env) {
  server::ToolDef tool;
  tool.name = "list_runs";
  tool.title = "List runs";
  tool.description = "Recent search runs, newest first.";
  tool.input_schema = {
      {"type", "object"},
      {"properties",
       {{"limit",
         {{"type", "integer"},
          {"minimum", 1},
          {"maximum", 200},
          {"description", "Most shown (20)."}}}}},
      {"additionalProperties", false},
  };
  tool.output_schema = object_schema({{"runs", "array"}}, {"runs"});
  tool.annotations = hints(true, false, true, false);
  tool.handler = [env](const json& arguments, server::ToolContext&) {
    auto db = env->store();
    if (!db.ok()) {
      return server::tool_failure(db.failure());
    }
    auto runs = db.value()->runs().list_runs(arguments.value("limit", 20));
    if (!runs.ok()) {
      return server::tool_failure(runs.failure());
    }
    json list = json::array();
    std::string text = runs.value().empty() ? "no runs yet" : "runs, newest first:";
    for (const auto& run : runs.value()) {
      auto item = stored_run_json(*db.value(), run.id);
      if (item.ok()) {
        item.value()["running_here"] =
            env->jobs().snapshot(run.id).has_value() && !env->jobs().snapshot(run.id)->finished;
        text += "\n" + run_line(item.value()) + " — " +
                item.value().value("kernel", std::string()) + " on " +
                item.value().value("target", std::string());
        if (item.value().at("running_here").get<bool>()) {
          text += " (running here)";
        }
        list.push_back(std::move(item).value());
      }
    }
    return server::ToolResult{json{{"runs", std::move(list)}}, text, false, json::array()};
  };
  return tool;
}

core::Result<json> read_run_resource(ToolEnv& env, const std::string& uri,
                                     const std::string& run_id) {
  auto db = env.store();
  if (!db.ok()) {
    return db.failure();
  }
  auto summary = stored_run_json(*db.value(), run_id);
  if (!summary.ok()) {
    return core::make_failure(core::FailureKind::unavailable, "resource",
                              summary.failure().message);
  }
  json body = std::move(summary).value();
  const std::string id = body.at("run_id");
  json candidates = json::array();
  if (auto rows = db.value()->runs().run_candidates(id); rows.ok()) {
    for (const auto& row : rows.value()) {
      json item = {
          {"candidate", row.candidate_key}, {"iteration", row.iteration},
          {"parent", row.parent_key},       {"status", std::string(store::to_string(row.status))},
          {"correct", row.correct},         {"plan", row.plan_text},
          {"provider", row.provider}};
      if (row.median_us) {
        item["median_us"] = *row.median_us;
      }
      candidates.push_back(std::move(item));
    }
  }
  body["candidates"] = std::move(candidates);
  json beams = json::array();
  if (auto rows = db.value()->runs().get_beams(id); rows.ok()) {
    for (const auto& beam : rows.value()) {
      beams.push_back({{"iteration", beam.iteration}, {"candidates", beam.members}});
    }
  }
  body["beams"] = std::move(beams);
  return json::array({{{"uri", uri}, {"mimeType", "application/json"}, {"text", body.dump(2)}}});
}

}  // namespace autocomp::tools
