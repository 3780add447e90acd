#include "search/engine/run_store.hpp"

#include <spdlog/spdlog.h>

#include <nlohmann/json.hpp>

#include "search/store/store.hpp"

namespace autocomp::search::engine {

namespace {

using json = nlohmann::json;

core::Failure damaged(const std::string& run_id, const std::string& why) {
  return core::make_failure(core::FailureKind::invalid_argument, "resume",
                            "the stored settings of run " + run_id + " are damaged: " + why);
}

// The settings that have no column of their own (store::RunConfig::settings).
std::string settings_json(const SearchConfig& c) {
  json out = {
      {"kernel_filename", c.kernel_filename},
      {"problem_filename", c.problem_filename},
      {"kernel_name", c.kernel_name},
      {"repair_tries", c.repair_tries},
      {"early_slack", c.early_slack},
      {"slack_iterations", c.slack_iterations},
      {"proposers", c.proposers},
      {"recent_failures", c.recent_failures},
      {"memory", c.memory},
      {"lesson_limit", c.lesson_limit},
      {"reflexions", c.reflexions},
      {"divergence", c.divergence},
      {"min_gain", c.min_gain ? json(*c.min_gain) : json(nullptr)},
      {"eval_seeds", c.eval_seeds},
      {"warmup", c.warmup},
      {"iters", c.iters},
      {"eval_timeout_ms", c.eval_timeout.count()},
      {"confirm", c.confirm},
      {"confirm_top_k", c.confirm_top_k},
  };
  if (c.max_device_s) {
    out["max_device_s"] = *c.max_device_s;
  }
  return out.dump(-1, ' ', false, json::error_handler_t::replace);
}

// Reads what settings_json wrote; a setting it lacks keeps SearchConfig's default.
void read_settings(const json& in, SearchConfig& c) {
  auto take = [&in](const char* key, auto& field) {
    if (auto it = in.find(key); it != in.end() && !it->is_null()) {
      it->get_to(field);
    }
  };
  take("kernel_filename", c.kernel_filename);
  take("problem_filename", c.problem_filename);
  take("kernel_name", c.kernel_name);
  take("repair_tries", c.repair_tries);
  take("early_slack", c.early_slack);
  take("slack_iterations", c.slack_iterations);
  take("proposers", c.proposers);
  take("recent_failures", c.recent_failures);
  take("memory", c.memory);
  take("lesson_limit", c.lesson_limit);
  take("reflexions", c.reflexions);
  take("divergence", c.divergence);
  if (auto it = in.find("min_gain"); it != in.end() && it->is_number()) {
    c.min_gain = it->get<double>();
  }
  take("eval_seeds", c.eval_seeds);
  take("warmup", c.warmup);
  take("iters", c.iters);
  take("confirm", c.confirm);
  take("confirm_top_k", c.confirm_top_k);
  if (auto it = in.find("max_device_s"); it != in.end() && it->is_number()) {
    c.max_device_s = it->get<double>();
  }
  long long timeout_ms = c.eval_timeout.count();
  take("eval_timeout_ms", timeout_ms);
  c.eval_timeout = std::chrono::milliseconds(timeout_ms);
}

// A candidate's lifecycle as the journal records it.
store::CandidateStatus status_of(const Candidate& candidate) {
  if (candidate.duplicate) {
    return store::CandidateStatus::duplicate;
  }
  if (!candidate.correct()) {
    return store::CandidateStatus::failed;
  }
  if (candidate.verdict == "accepted" || candidate.origin.iteration == 0) {
    return store::CandidateStatus::accepted;
  }
  if (candidate.verdict == "rejected") {
    return store::CandidateStatus::rejected;
  }
  return store::CandidateStatus::evaluated;
}

std::optional<std::int64_t> evaluation_id(const std::string& ref) {
  if (ref.empty()) {
    return std::nullopt;
  }
  try {
    return std::stoll(ref);
  } catch (const std::exception&) {
    return std::nullopt;
  }
}

}  // namespace

RunStore parts_of(const std::shared_ptr<store::Store>& store) {
  return RunStore{store::share(store, store->runs()), store::share(store, store->llm_calls()),
                  store::share(store, store->memory()), store::share(store, store->evaluations()),
                  store::share(store, store->calibrations())};
}

core::Result<std::string> create_run(const RunStore& parts, const SearchConfig& config,
                                     const RunFacts& facts) {
  auto problem_key = parts.evaluations->put_workload(config.problem_source, facts.problem_path);
  if (!problem_key) {
    return problem_key.failure();
  }
  auto kernel_key = parts.evaluations->put_candidate(config.kernel_source, "user");
  if (!kernel_key) {
    return kernel_key.failure();
  }
  store::RunConfig run;
  run.kernel_path = facts.kernel_path;
  run.problem_path = facts.problem_path;
  run.problem_key = problem_key.value();
  run.seed_candidate_key = kernel_key.value();
  run.target = config.target;
  run.backend = facts.backend;
  run.llm_specs = facts.llm_specs;
  run.beam = config.beam;
  run.plans = config.plans;
  run.impls = config.impls;
  run.iterations = config.iterations;
  run.dropout = config.dropout;
  run.rng_seed = config.seed;
  run.budgets = config.budgets;
  run.settings = settings_json(config);
  return parts.runs->create_run(run);
}

core::Result<SearchConfig> config_of(const store::Run& run, store::EvaluationCache& sources) {
  const store::RunConfig& stored = run.config;
  SearchConfig c;
  c.target = stored.target;
  c.beam = stored.beam;
  c.plans = stored.plans;
  c.impls = stored.impls;
  c.iterations = stored.iterations;
  c.dropout = stored.dropout;
  c.seed = stored.rng_seed;
  c.budgets = stored.budgets;
  try {
    read_settings(json::parse(stored.settings), c);
  } catch (const std::exception& error) {
    return damaged(run.id, error.what());
  }
  auto kernel = sources.get_candidate(stored.seed_candidate_key);
  if (!kernel) {
    return kernel.failure();
  }
  auto problem = sources.get_workload(stored.problem_key);
  if (!problem) {
    return problem.failure();
  }
  if (!kernel.value() || !problem.value()) {
    return damaged(run.id, "its kernel or problem source is missing from the store");
  }
  c.kernel_source = kernel.value()->source;
  c.problem_source = problem.value()->source;
  return c;
}

store::RunCandidate run_row(const std::string& run_id, const Candidate& candidate) {
  store::RunCandidate row;
  row.run_id = run_id;
  row.iteration = candidate.origin.iteration;
  row.candidate_key = candidate.key;
  row.parent_key = candidate.parent_key;
  row.plan_text = candidate.plan;
  row.provider = candidate.origin.proposer;
  row.origin = candidate.origin.label();
  row.status = status_of(candidate);
  row.evaluation_id = evaluation_id(candidate.eval_ref);
  if (candidate.eval.latency) {
    row.median_us = candidate.eval.latency->median_us;
  }
  row.correct = candidate.correct();
  return row;
}

std::vector<Candidate> load_candidates(const RunStore& parts, const std::string& run_id) {
  std::vector<Candidate> out;
  auto rows = parts.runs->run_candidates(run_id);
  if (!rows) {
    spdlog::warn("could not load the run's candidates: {}", rows.failure().describe());
    return out;
  }
  for (const auto& row : rows.value()) {
    Candidate candidate;
    candidate.key = row.candidate_key;
    candidate.parent_key = row.parent_key;
    candidate.plan = row.plan_text;
    candidate.duplicate = row.status == store::CandidateStatus::duplicate;
    if (row.status == store::CandidateStatus::accepted) {
      candidate.verdict = "accepted";
    } else if (row.status == store::CandidateStatus::rejected) {
      candidate.verdict = "rejected";
    }
    if (auto origin = Origin::parse(row.origin)) {
      candidate.origin = *origin;
    } else {
      candidate.origin.iteration = row.iteration;
      candidate.origin.proposer = row.provider;
    }
    if (auto stored = parts.evaluations->get_candidate(row.candidate_key);
        stored && stored.value()) {
      candidate.source = stored.value()->source;
    }
    if (row.evaluation_id) {
      if (auto eval = parts.evaluations->get_evaluation(*row.evaluation_id); eval && eval.value()) {
        candidate.eval = eval.value()->result;
        candidate.eval_ref = std::to_string(*row.evaluation_id);
      }
    } else {
      candidate.eval.failure =
          core::make_failure(core::FailureKind::internal, "resume", "no stored evaluation");
    }
    out.push_back(std::move(candidate));
  }
  return out;
}

}  // namespace autocomp::search::engine
