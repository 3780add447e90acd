#include "search/engine/store_run_log.hpp"

#include <spdlog/spdlog.h>

#include "search/engine/search_config.hpp"

namespace autocomp::search::engine {

namespace {

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

StoreRunLog::StoreRunLog(std::shared_ptr<store::Store> store, StoreRunInfo info)
    : m_store(std::move(store)), m_info(std::move(info)) {}

core::Result<std::string> StoreRunLog::create_run(const std::string& config_text) {
  auto config = config_from_text(config_text);
  if (!config) {
    return config.failure();
  }
  auto problem_key =
      m_store->evaluations().put_workload(config->problem_source, m_info.problem_path);
  if (!problem_key) {
    return problem_key.failure();
  }
  auto kernel_key = m_store->evaluations().put_candidate(config->kernel_source, "user");
  if (!kernel_key) {
    return kernel_key.failure();
  }
  store::RunConfig run;
  run.kernel_path = m_info.kernel_path;
  run.problem_path = m_info.problem_path;
  run.problem_key = problem_key.value();
  run.seed_candidate_key = kernel_key.value();
  run.target = config->target;
  run.backend = m_info.backend;
  run.llm_specs = m_info.llm_specs;
  run.beam = config->beam;
  run.plans = config->plans;
  run.impls = config->impls;
  run.iterations = config->iterations;
  run.dropout = config->dropout;
  run.rng_seed = config->seed;
  run.budgets.max_llm_calls = config->budgets.max_llm_calls;
  run.budgets.max_tokens = config->budgets.max_tokens;
  run.budgets.max_cost_usd = config->budgets.max_cost_usd;
  run.budgets.max_wall_s = config->budgets.max_wall_s;
  run.engine_config = config_text;
  return m_store->runs().create_run(run);
}

core::Result<RunRecord> StoreRunLog::load_run(const std::string& run_id) {
  auto run = m_store->runs().get_run(run_id);
  if (!run) {
    return run.failure();
  }
  if (!run.value()) {
    return core::make_failure(core::FailureKind::invalid_argument, "resume",
                              "no run '" + run_id + "' in " + m_store->path());
  }
  const store::Run& stored = *run.value();
  RunRecord record;
  record.id = stored.id;
  record.config_text = stored.config.engine_config;
  record.status = std::string(store::to_string(stored.status));
  record.stop_reason = stored.status_message;
  return record;
}

core::Status StoreRunLog::set_run_status(const std::string& run_id, const std::string& status,
                                         const std::string& stop_reason) {
  if (status == "running") {
    return m_store->runs().claim_run(run_id);
  }
  auto parsed = store::run_status_from_string(status);
  return m_store->runs().set_run_status(run_id, parsed.value_or(store::RunStatus::failed),
                                        stop_reason);
}

std::optional<LlmCallRecord> StoreRunLog::find_llm_call(const std::string& run_id,
                                                        const std::string& request_hash) {
  auto found = m_store->llm_calls().find_llm_response(run_id, request_hash);
  if (!found) {
    spdlog::warn("LLM replay lookup failed: {}", found.failure().describe());
    return std::nullopt;
  }
  return std::move(found).value();
}

core::Status StoreRunLog::record_llm_call(const std::string& run_id, const LlmCallRecord& call) {
  LlmCallRecord stored = call;
  stored.run_id = run_id;
  auto id = m_store->llm_calls().put_llm_call(stored);
  if (!id) {
    return id.failure();
  }
  return core::ok_status();
}

LlmSpend StoreRunLog::llm_spend(const std::string& run_id) {
  LlmSpend spend;
  auto totals = m_store->llm_calls().llm_totals(run_id);
  if (totals) {
    spend.calls = totals->calls;
    spend.tokens = totals->input_tokens + totals->output_tokens;
    spend.cost_usd = totals->cost_usd;
  }
  return spend;
}

core::Status StoreRunLog::record_candidate(const std::string& run_id, const Candidate& candidate) {
  if (candidate.key.empty()) {
    return core::ok_status();  // no code: nothing the store can key
  }
  if (auto put = m_store->evaluations().put_candidate(candidate.source, candidate.origin.proposer);
      !put) {
    return put.failure();
  }
  store::RunCandidate row;
  row.run_id = run_id;
  row.iteration = candidate.origin.iteration;
  row.candidate_key = candidate.key;
  row.parent_key = candidate.parent_key;
  row.plan_text = candidate.plan;
  row.provider = candidate.origin.proposer;
  row.status = status_of(candidate);
  row.evaluation_id = evaluation_id(candidate.eval_ref);
  if (candidate.eval.latency) {
    row.median_us = candidate.eval.latency->median_us;
  }
  row.correct = candidate.correct();
  row.origin = candidate.origin.label();
  auto added = m_store->runs().add_run_candidate(row);
  if (!added) {
    return added.failure();
  }
  if (added.value() || candidate.duplicate) {
    return core::ok_status();
  }
  return m_store->runs().update_run_candidate(run_id, candidate.key, row.status, row.evaluation_id,
                                              row.note);
}

std::vector<Candidate> StoreRunLog::load_candidates(const std::string& run_id) {
  std::vector<Candidate> out;
  auto rows = m_store->runs().run_candidates(run_id);
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
    if (auto stored = m_store->evaluations().get_candidate(row.candidate_key);
        stored && stored.value()) {
      candidate.source = stored.value()->source;
    }
    if (row.evaluation_id) {
      if (auto eval = m_store->evaluations().get_evaluation(*row.evaluation_id);
          eval && eval.value()) {
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

core::Status StoreRunLog::record_beam(const std::string& run_id, const BeamRecord& beam) {
  return m_store->runs().record_beam(run_id, beam.iteration, beam.members);
}

std::vector<BeamRecord> StoreRunLog::load_beams(const std::string& run_id) {
  auto beams = m_store->runs().get_beams(run_id);
  if (!beams) {
    spdlog::warn("could not load the run's beams: {}", beams.failure().describe());
    return {};
  }
  return std::move(beams).value();
}

core::Status StoreRunLog::record_lesson(const std::string& target, const std::string& text,
                                        const std::string& kind, const std::string& run_id,
                                        double speedup) {
  store::Lesson lesson;
  lesson.target = target;
  lesson.text = text;
  lesson.kind = kind;
  lesson.source_run = run_id;
  lesson.speedup = speedup;
  if (auto run = m_store->runs().get_run(run_id); run && run.value()) {
    lesson.problem_key = run.value()->config.problem_key;
  }
  auto id = m_store->memory().add_lesson(lesson);
  if (!id) {
    return id.failure();
  }
  return core::ok_status();
}

std::vector<std::string> StoreRunLog::load_lessons(const std::string& target, int limit) {
  std::vector<std::string> out;
  auto lessons = m_store->memory().lessons(target, limit);
  if (!lessons) {
    spdlog::warn("could not load lessons: {}", lessons.failure().describe());
    return out;
  }
  for (const auto& lesson : lessons.value()) {
    out.push_back(lesson.text);
  }
  return out;
}

core::Status StoreRunLog::record_reflexion(const std::string& run_id,
                                           const std::string& candidate_key,
                                           const prompts::ReflexionRecord& record) {
  if (!candidate_key.empty()) {
    // One reflexion per attempt, also when a resumed run replays an iteration.
    auto recent = m_store->memory().recent_reflexions(run_id, 1000);
    if (recent) {
      for (const auto& stored : recent.value()) {
        if (stored.candidate_key == candidate_key) {
          return core::ok_status();
        }
      }
    }
  }
  store::Reflexion reflexion;
  reflexion.scope = run_id;
  reflexion.candidate_key = candidate_key;
  reflexion.diagnosis_right = record.diagnosis_right;
  reflexion.fix_worked = record.fix_worked;
  reflexion.expected = record.expected;
  reflexion.actual = record.actual;
  reflexion.lessons = record.lessons;
  reflexion.avoid = record.avoid;
  reflexion.try_next = record.try_next;
  reflexion.raw_text = record.raw_text;
  auto id = m_store->memory().add_reflexion(reflexion);
  if (!id) {
    return id.failure();
  }
  return core::ok_status();
}

std::vector<prompts::ReflexionRecord> StoreRunLog::load_reflexions(const std::string& run_id,
                                                                   int limit) {
  std::vector<prompts::ReflexionRecord> out;
  auto recent = m_store->memory().recent_reflexions(run_id, limit);
  if (!recent) {
    spdlog::warn("could not load reflexions: {}", recent.failure().describe());
    return out;
  }
  const auto& newest_first = recent.value();
  for (auto it = newest_first.rbegin(); it != newest_first.rend(); ++it) {
    out.push_back(to_reflexion_record(*it));
  }
  return out;
}

prompts::ReflexionRecord to_reflexion_record(const store::Reflexion& stored) {
  prompts::ReflexionRecord record;
  record.diagnosis_right = stored.diagnosis_right;
  record.fix_worked = stored.fix_worked;
  record.expected = stored.expected;
  record.actual = stored.actual;
  record.lessons = stored.lessons;
  record.avoid = stored.avoid;
  record.try_next = stored.try_next;
  record.raw_text = stored.raw_text;
  return record;
}

void StoreRunLog::record_progress(const std::string& run_id, int iteration, const Candidate& best,
                                  double baseline_latency_us) {
  std::optional<double> best_latency;
  if (best.correct()) {
    best_latency = best.latency_us();
  }
  if (auto status = m_store->runs().set_run_progress(run_id, iteration, best.key, best_latency,
                                                     baseline_latency_us);
      !status) {
    spdlog::warn("could not store the run's progress: {}", status.failure().describe());
  }
}

}  // namespace autocomp::search::engine
