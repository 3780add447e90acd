#include "search/engine/beam_search.hpp"

#include <spdlog/spdlog.h>

#include <algorithm>
#include <chrono>
#include <condition_variable>
#include <cstdio>
#include <map>
#include <mutex>
#include <set>
#include <thread>

#include "core/hash.hpp"
#include "core/text.hpp"
#include "search/engine/beam.hpp"
#include "search/engine/evaluator.hpp"
#include "search/engine/llm_gateway.hpp"
#include "search/engine/stop_control.hpp"
#include "search/engine/task_pool.hpp"

namespace autocomp::search::engine {

namespace {

// Without a proposer maker the engine knows only its own plan-then-implement proposer.
core::Result<std::unique_ptr<Proposer>> make_builtin_proposer(const std::string& name) {
  if (name == "llm") {
    return make_llm_proposer();
  }
  return core::make_failure(core::FailureKind::invalid_argument, "config",
                            "unknown proposer '" + name + "' (known here: llm)");
}

constexpr std::size_t k_failure_text_limit = 400;
constexpr int k_max_pool_threads = 64;

bool repairable(const backends::EvalResult& result) {
  return result.failure && (result.failure->kind == core::FailureKind::compile_error ||
                            result.failure->kind == core::FailureKind::runtime_error);
}

bool was_cancelled(const backends::EvalResult& result) {
  return result.failure && result.failure->kind == core::FailureKind::cancelled;
}

std::string failure_text(const Candidate& candidate) {
  std::string text;
  if (candidate.eval.failure) {
    text = candidate.eval.failure->describe();
  } else {
    text = "incorrect result";
  }
  if (!candidate.plan.empty()) {
    std::string plan = core::utf8_prefix(candidate.plan, 160);
    std::replace(plan.begin(), plan.end(), '\n', ' ');
    text = "plan \"" + plan + "\": " + text;
  }
  if (text.size() > k_failure_text_limit) {
    text = core::utf8_prefix(text, k_failure_text_limit) + "...";
  }
  return text;
}

constexpr double k_lesson_speedup = 1.04;       // a child this much faster than its parent
constexpr double k_regression_slowdown = 1.25;  // a correct child this much slower
constexpr double k_noise_pct = 2.0;             // latency changes below this are noise

// The measured outcome of a correct child in words, with its latency change in percent.
std::string change_outcome(double parent_us, double child_us) {
  const double pct = (child_us - parent_us) / parent_us * 100.0;
  char buffer[96];
  if (pct <= -k_noise_pct) {
    std::snprintf(buffer, sizeof(buffer), "faster (latency %.1f%%)", pct);
  } else if (pct >= k_noise_pct) {
    std::snprintf(buffer, sizeof(buffer), "slower (latency +%.1f%%)", pct);
  } else {
    std::snprintf(buffer, sizeof(buffer), "within noise (latency %+.1f%%, under %.0f%%)", pct,
                  k_noise_pct);
  }
  return buffer;
}

// Failures of one iteration in origin order, at most `limit`, for the next planning prompts.
std::vector<std::string> failures_of(std::vector<Candidate> candidates, int iteration, int limit) {
  std::sort(candidates.begin(), candidates.end(),
            [](const Candidate& a, const Candidate& b) { return a.origin < b.origin; });
  std::vector<std::string> out;
  for (const auto& candidate : candidates) {
    if (candidate.origin.iteration != iteration || candidate.duplicate || candidate.correct() ||
        was_cancelled(candidate.eval)) {
      continue;
    }
    out.push_back(failure_text(candidate));
  }
  if (static_cast<int>(out.size()) > limit) {
    out.erase(out.begin(), out.end() - limit);
  }
  return out;
}

class SearchRun {
 public:
  SearchRun(SearchConfig config, const SearchServices& services, const core::CancelToken& cancel,
            const SearchHooks& hooks)
      : m_config(std::move(config)),
        m_services(services),
        m_cancel(cancel),
        m_hooks(hooks),
        m_clock(services.clock ? services.clock : core::steady_clock()),
        m_started(m_clock->now()),
        m_strategy(std::make_unique<BeamStrategy>(m_config)) {}

  SearchOutcome run(const std::optional<std::string>& resume_id);

 private:
  SearchOutcome fail(core::Failure failure);
  void watch();
  // Stops the run when it is cancelled or its wall-time budget is spent.
  void check_time();
  void handle_proposal(Proposal proposal, const ProposeContext& ctx);
  void on_evaluated(const Proposal& proposal, const std::string& key,
                    const backends::EvalResult& result, const std::string& ref,
                    const ProposeContext& ctx);
  void record(const Candidate& candidate);
  // The run's status in the journal ("running" claims it for this process).
  void set_status(const std::string& status, const std::string& message);
  // Where the run stands, for listings (after every iteration).
  void record_progress(int iteration, const Candidate& best);
  void emit(const std::string& phase, bool finished = false);
  void restore(int& start_iteration);
  void summarize_lessons(int iteration, const std::vector<Candidate>& beam,
                         const std::vector<Candidate>& children,
                         const std::vector<std::string>& lessons);
  void reflect_on(int iteration, const std::vector<Candidate>& beam,
                  const std::vector<Candidate>& children);
  std::vector<std::string> reflexions_for_prompts();
  bool already_reflected(const std::string& candidate_key);
  std::vector<Candidate> lineage_of(const Candidate& best) const;
  Candidate reverified_best(std::vector<Candidate> ranked);
  double elapsed_s() const { return m_clock->seconds_since(m_started); }

  SearchConfig m_config;
  const SearchServices& m_services;
  core::CancelToken m_cancel;
  const SearchHooks& m_hooks;

  SearchOutcome m_outcome;
  std::string m_run_id;
  std::shared_ptr<const core::Clock> m_clock;
  core::Clock::TimePoint m_started;
  StopControl m_stop;
  std::shared_ptr<const PromptFactory> m_prompts;
  std::vector<std::shared_ptr<Proposer>> m_proposers;
  std::map<std::string, Proposer*> m_proposer_by_name;
  std::unique_ptr<LlmGateway> m_llm;
  std::unique_ptr<Evaluator> m_evaluator;
  std::unique_ptr<TaskPool> m_pool;
  TaskGroup m_outstanding;
  // Which kernels the next iteration builds on. Changed only between batches.
  std::unique_ptr<SearchStrategy> m_strategy;

  mutable std::mutex m_mutex;  // guards everything below
  std::map<std::string, Candidate> m_by_key;  // every evaluated kernel of the run, first origin
  std::set<std::string> m_seen;               // keys of finished iterations and the input
  std::vector<Candidate> m_children;          // this iteration's children
  std::map<std::string, int> m_iteration_keys;
  std::vector<std::string> m_previous_failures;
  int m_iteration = 0;
  double m_best_latency = 0;
  long m_evaluated = 0;
  long m_failed = 0;
  long m_duplicates = 0;
  long m_repairs = 0;

  std::mutex m_watch_mutex;
  std::condition_variable m_watch_wake;
  bool m_watch_done = false;
};

void SearchRun::check_time() {
  if (m_cancel.cancelled()) {
    m_stop.stop("cancelled", "cancelled on request", true);
  }
  if (m_config.budgets.max_wall_s && elapsed_s() >= *m_config.budgets.max_wall_s) {
    m_stop.stop("budget_exhausted",
                "wall-time budget reached (" +
                    std::to_string(static_cast<long>(*m_config.budgets.max_wall_s)) + " s)",
                true);
  }
}

void SearchRun::watch() {
  std::unique_lock lock(m_watch_mutex);
  while (!m_watch_done) {
    check_time();
    m_watch_wake.wait_for(lock, std::chrono::milliseconds(20));
  }
}

void SearchRun::record(const Candidate& candidate) {
  if (auto status = record_candidate(m_services.store, m_run_id, candidate); !status) {
    spdlog::warn("could not store candidate {}: {}", candidate.origin.label(),
                 status.failure().describe());
  }
}

void SearchRun::set_status(const std::string& status, const std::string& message) {
  store::RunJournal& runs = *m_services.store.runs;
  auto done = status == "running"
                  ? runs.claim_run(m_run_id)
                  : runs.set_run_status(m_run_id,
                                        store::run_status_from_string(status).value_or(
                                            store::RunStatus::failed),
                                        message);
  if (!done) {
    spdlog::warn("could not store the status of run {}: {}", m_run_id, done.failure().describe());
  }
}

void SearchRun::record_progress(int iteration, const Candidate& best) {
  std::optional<double> best_latency;
  if (best.correct()) {
    best_latency = best.latency_us();
  }
  if (auto status = m_services.store.runs->set_run_progress(
          m_run_id, iteration, best.key, best_latency, m_outcome.baseline.latency_us());
      !status) {
    spdlog::warn("could not store the run's progress: {}", status.failure().describe());
  }
}

void SearchRun::emit(const std::string& phase, bool finished) {
  if (!m_hooks.progress) {
    return;
  }
  ProgressEvent event;
  {
    std::lock_guard lock(m_mutex);
    event.run_id = m_run_id;
    event.iteration = m_iteration;
    event.iterations = m_config.iterations;
    event.candidates_evaluated = m_evaluated;
    event.candidates_failed = m_failed;
    event.baseline_latency_us = m_outcome.baseline.latency_us();
    event.best_latency_us = m_best_latency;
    event.speedup = m_best_latency > 0 ? event.baseline_latency_us / m_best_latency : 0;
  }
  if (m_llm) {
    auto spend = m_llm->spend();
    event.llm_calls = spend.calls;
    event.tokens = spend.tokens();
    event.cost_usd = spend.cost_usd;
  }
  event.elapsed_s = elapsed_s();
  event.phase = phase;
  event.finished = finished;
  m_hooks.progress(event);
}

void SearchRun::handle_proposal(Proposal proposal, const ProposeContext& ctx) {
  if (!proposal.failure && proposal.source.empty()) {
    proposal.failure = core::make_failure(core::FailureKind::internal, "propose",
                                          "the proposer returned neither code nor a failure");
  }
  if (proposal.failure) {
    Candidate candidate;
    candidate.parent_key = proposal.parent_key;
    candidate.plan = proposal.plan;
    candidate.origin = proposal.origin;
    candidate.eval.failure = proposal.failure;
    {
      std::lock_guard lock(m_mutex);
      m_children.push_back(candidate);
      ++m_failed;
    }
    record(candidate);
    emit("iteration");
    return;
  }

  const std::string key = core::source_key(proposal.source);
  {
    std::unique_lock lock(m_mutex);
    if (m_seen.count(key) != 0) {
      // Identical to a kernel of an earlier iteration: never evaluated again, never re-enters.
      Candidate candidate;
      candidate.key = key;
      candidate.source = proposal.source;
      candidate.parent_key = proposal.parent_key;
      candidate.plan = proposal.plan;
      candidate.origin = proposal.origin;
      candidate.duplicate = true;
      if (auto it = m_by_key.find(key); it != m_by_key.end()) {
        candidate.eval = it->second.eval;
        candidate.eval_ref = it->second.eval_ref;
      }
      m_children.push_back(candidate);
      ++m_duplicates;
      lock.unlock();
      record(candidate);
      emit("iteration");
      return;
    }
  }
  m_outstanding.add();
  const std::string source = proposal.source;
  m_evaluator->submit(key, source,
                      [this, proposal = std::move(proposal), key, &ctx](
                          const backends::EvalResult& result, const std::string& ref, bool) {
                        on_evaluated(proposal, key, result, ref, ctx);
                        m_outstanding.done();
                      });
}

void SearchRun::on_evaluated(const Proposal& proposal, const std::string& key,
                             const backends::EvalResult& result, const std::string& ref,
                             const ProposeContext& ctx) {
  if (was_cancelled(result)) {
    return;  // not evaluated; a resumed run asks again
  }
  Candidate candidate;
  candidate.key = key;
  candidate.source = proposal.source;
  candidate.parent_key = proposal.parent_key;
  candidate.plan = proposal.plan;
  candidate.origin = proposal.origin;
  candidate.eval = result;
  candidate.eval_ref = ref;
  {
    std::lock_guard lock(m_mutex);
    candidate.duplicate = m_iteration_keys[key]++ > 0;
    if (candidate.duplicate) {
      ++m_duplicates;
    }
    m_by_key.emplace(key, candidate);
    m_children.push_back(candidate);
    ++m_evaluated;
    if (!candidate.correct()) {
      ++m_failed;
    }
    if (m_strategy->admits(candidate) && candidate.latency_us() < m_best_latency) {
      m_best_latency = candidate.latency_us();
    }
  }
  record(candidate);

  if (!candidate.duplicate && repairable(result) &&
      proposal.origin.repair < m_config.repair_tries && !m_stop.stopping()) {
    auto it = m_proposer_by_name.find(proposal.origin.proposer);
    if (it != m_proposer_by_name.end()) {
      Proposer* proposer = it->second;
      {
        std::lock_guard lock(m_mutex);
        ++m_repairs;
      }
      RepairInput input{proposal, *result.failure};
      m_outstanding.run(*m_pool, [this, proposer, input = std::move(input), &ctx] {
        if (auto repaired = proposer->repair(ctx, input)) {
          handle_proposal(std::move(*repaired), ctx);
        }
      });
    }
  }
  emit("iteration");
}

SearchOutcome SearchRun::fail(core::Failure failure) {
  m_outcome.status = "failed";
  m_outcome.stop_reason = failure.describe();
  m_outcome.failure = std::move(failure);
  m_outcome.elapsed_s = elapsed_s();
  if (!m_run_id.empty()) {
    set_status("failed", m_outcome.stop_reason);
  }
  return m_outcome;
}

void SearchRun::summarize_lessons(int iteration, const std::vector<Candidate>& beam,
                                  const std::vector<Candidate>& children,
                                  const std::vector<std::string>& lessons) {
  if (!m_config.memory || !m_llm->has_providers() || m_stop.stopping()) {
    return;
  }
  SummarizePromptInput input;
  input.target = m_config.target;
  input.problem_source = m_config.problem_source;
  input.existing_lessons = lessons;
  double best_speedup = 0;
  double worst_speedup = 0;
  for (const auto& child : children) {
    const auto member = static_cast<std::size_t>(child.origin.member);
    if (child.key.empty() || child.duplicate || child.plan.empty() || member >= beam.size()) {
      continue;
    }
    const double parent_us = beam[member].latency_us();
    LessonAttempt attempt{child.plan, parent_us, std::nullopt, ""};
    if (child.correct() && parent_us > 0 && child.latency_us() > 0) {
      const double speedup = parent_us / child.latency_us();
      attempt.outcome = change_outcome(parent_us, child.latency_us());  // neutral ones teach too
      if (speedup >= k_lesson_speedup) {
        best_speedup = std::max(best_speedup, speedup);
      } else if (speedup <= 1.0 / k_regression_slowdown) {
        worst_speedup = worst_speedup == 0 ? speedup : std::min(worst_speedup, speedup);
      }
      attempt.latency_us = child.latency_us();
    } else if (!child.correct()) {
      attempt.outcome = child.eval.failure ? child.eval.failure->describe() : "incorrect result";
    } else {
      continue;
    }
    input.attempts.push_back(std::move(attempt));
  }
  if (input.attempts.empty()) {
    return;
  }
  auto request = m_prompts->summarize(input);
  if (!request) {
    spdlog::warn("lesson prompt of iteration {}: {}", iteration, request.failure().describe());
    return;
  }
  const std::string call_id = "i" + std::to_string(iteration) + "/summarize";
  auto answer = m_llm->complete(*request, call_id, static_cast<std::size_t>(iteration));
  if (!answer) {
    spdlog::warn("lesson summary of iteration {} failed: {}", iteration,
                 answer.failure().describe());
    return;
  }
  auto parsed = m_prompts->parse_lessons(answer->text, input);
  if (parsed.empty()) {
    spdlog::warn("lesson summary of iteration {} held no lessons", iteration);
    return;
  }
  // One reply mixes lessons from wins and losses when the iteration had both: then no kind.
  const bool had_loss =
      std::any_of(input.attempts.begin(), input.attempts.end(),
                  [](const LessonAttempt& a) { return a.outcome.rfind("faster", 0) != 0; });
  const std::string kind = best_speedup > 0    ? (had_loss ? "" : "improvement")
                           : worst_speedup > 0 ? "regression"
                                               : "";
  const double evidence = best_speedup > 0 ? (had_loss ? 0 : best_speedup) : worst_speedup;
  // Stored newest first: recorded last to first, a reply's lessons load in the order written.
  for (auto it = parsed.rbegin(); it != parsed.rend(); ++it) {
    store::Lesson lesson;
    lesson.target = m_config.target;
    lesson.text = *it;
    lesson.kind = kind;
    lesson.source_run = m_run_id;
    lesson.problem_key = core::source_key(m_config.problem_source);
    lesson.speedup = evidence;
    if (auto id = m_services.store.memory->add_lesson(lesson); !id) {
      spdlog::warn("could not store a lesson: {}", id.failure().describe());
    }
  }
}

namespace {

// The measured outcome of a child against its parent, in words.
std::string outcome_text(const Candidate& child, double parent_us) {
  if (!child.correct()) {
    return child.eval.failure ? child.eval.failure->describe()
                              : std::string("incorrect result (outputs differ from the reference)");
  }
  const double child_us = child.latency_us();
  if (child_us <= 0 || parent_us <= 0) {
    return "correct";
  }
  return "correct, " + core::describe_speed_change(parent_us, child_us);
}

// How good an attempt's result is, to pick one child per plan: faster correct ones first.
bool better_attempt(const Candidate& a, const Candidate& b) {
  if (a.correct() != b.correct()) {
    return a.correct();
  }
  if (a.correct()) {
    return a.latency_us() < b.latency_us();
  }
  return b.origin < a.origin;  // among failures, the last repair says most
}

}  // namespace

void SearchRun::reflect_on(int iteration, const std::vector<Candidate>& beam,
                           const std::vector<Candidate>& children) {
  if (m_config.beam != 1 || m_config.reflexions == 0 || !m_llm->has_providers() ||
      m_stop.stopping()) {
    return;
  }
  // One reflexion per plan: its best implementation (or its last failure), in plan order.
  std::map<std::pair<int, int>, const Candidate*> per_plan;
  for (const auto& child : children) {
    if (child.key.empty() || child.duplicate || child.plan.empty() ||
        child.origin.proposer != "llm" || was_cancelled(child.eval)) {
      continue;
    }
    auto& slot = per_plan[{child.origin.member, child.origin.plan}];
    if (slot == nullptr || better_attempt(child, *slot)) {
      slot = &child;
    }
  }
  for (const auto& [where, child] : per_plan) {
    if (m_stop.stopping()) {
      return;
    }
    const auto member = static_cast<std::size_t>(where.first);
    if (member >= beam.size()) {
      continue;
    }
    const Candidate& parent = beam[member];
    ReflectPromptInput input;
    input.target = m_config.target;
    input.plan = child->plan;
    input.parent_source = parent.source;
    input.parent_evaluation = &parent.eval;
    input.child_source = child->source;
    input.child_evaluation = &child->eval;
    input.outcome = outcome_text(*child, parent.latency_us());
    const std::string call_id =
        "i" + std::to_string(iteration) + "/reflect/" + child->origin.label();
    auto request = m_prompts->reflect(input);
    auto answer = request
                      ? m_llm->complete(*request, call_id, static_cast<std::size_t>(where.second))
                      : core::Result<llm::Completion>(request.failure());
    store::Reflexion record;
    if (answer) {
      static_cast<prompts::ReflexionRecord&>(record) = m_prompts->parse_reflexion(answer->text);
      if (!record.structured()) {
        spdlog::warn("the reflection on {} had none of the expected fields; kept as raw text",
                     child->origin.label());
      }
    } else {
      spdlog::warn("reflection on {} failed: {}", child->origin.label(),
                   answer.failure().describe());
    }
    // What was measured is a fact, whatever the model said.
    record.fix_worked = child->correct() && child->latency_us() < parent.latency_us();
    record.actual = input.outcome + (record.actual.empty() ? "" : "; " + record.actual);
    if (record.expected.empty()) {
      record.expected = "plan: " + core::utf8_prefix(child->plan, 200);
    }
    record.scope = m_run_id;
    record.candidate_key = child->key;
    if (already_reflected(child->key)) {
      continue;  // one reflexion per attempt, also when a resumed run replays an iteration
    }
    if (auto id = m_services.store.memory->add_reflexion(record); !id) {
      spdlog::warn("could not store a reflexion: {}", id.failure().describe());
    }
  }
}

bool SearchRun::already_reflected(const std::string& candidate_key) {
  auto recent = m_services.store.memory->recent_reflexions(m_run_id, 1000);
  return recent && std::any_of(recent->begin(), recent->end(), [&](const store::Reflexion& r) {
           return r.candidate_key == candidate_key;
         });
}

std::vector<std::string> SearchRun::reflexions_for_prompts() {
  std::vector<std::string> out;
  if (m_config.beam != 1 || m_config.reflexions == 0) {
    return out;
  }
  auto recent = m_services.store.memory->recent_reflexions(m_run_id, m_config.reflexions);
  if (!recent) {
    spdlog::warn("could not load reflexions: {}", recent.failure().describe());
    return out;
  }
  for (auto it = recent->rbegin(); it != recent->rend(); ++it) {  // oldest first
    if (auto line = prompts::describe_reflexion(*it); !line.empty()) {
      out.push_back(std::move(line));
    }
  }
  return out;
}

void SearchRun::restore(int& start_iteration) {
  auto stored = load_candidates(m_services.store, m_run_id);
  auto loaded = m_services.store.runs->get_beams(m_run_id);
  if (!loaded) {
    spdlog::warn("could not load the run's beams: {}", loaded.failure().describe());
  }
  const std::vector<store::Beam> beams = loaded ? std::move(loaded).value()
                                                : std::vector<store::Beam>{};
  for (const auto& candidate : stored) {
    if (!candidate.key.empty() && !candidate.duplicate) {
      auto [it, inserted] = m_by_key.emplace(candidate.key, candidate);
      if (!inserted && candidate.origin < it->second.origin) {
        it->second = candidate;
      }
    }
  }
  if (beams.empty()) {
    return;
  }
  const store::Beam& last = beams.back();
  if (!m_strategy->restore(last, m_by_key)) {
    return;
  }
  for (const auto& record : beams) {
    if (record.iteration == 0) {
      continue;
    }
    IterationSummary summary;
    summary.iteration = record.iteration;
    if (!record.members.empty()) {
      if (auto it = m_by_key.find(record.members.front()); it != m_by_key.end()) {
        summary.best_latency_us = it->second.latency_us();
      }
    }
    for (const auto& candidate : stored) {
      if (candidate.origin.iteration == record.iteration && !candidate.key.empty()) {
        ++summary.evaluated;
      }
    }
    m_outcome.history.push_back(summary);
  }
  for (const auto& candidate : stored) {
    if (candidate.origin.iteration <= last.iteration && !candidate.key.empty()) {
      m_seen.insert(candidate.key);
    }
  }
  m_best_latency = m_strategy->generation().front().latency_us();
  m_previous_failures = failures_of(stored, last.iteration, m_config.recent_failures);
  m_outcome.iterations_done = last.iteration;
  start_iteration = last.iteration + 1;
}

std::vector<Candidate> SearchRun::lineage_of(const Candidate& best) const {
  std::vector<Candidate> chain{best};
  std::set<std::string> visited{best.key};
  std::string parent = best.parent_key;
  while (!parent.empty() && visited.insert(parent).second) {
    auto it = m_by_key.find(parent);
    if (it == m_by_key.end()) {
      break;
    }
    chain.push_back(it->second);
    parent = it->second.parent_key;
  }
  std::reverse(chain.begin(), chain.end());
  return chain;
}

Candidate SearchRun::reverified_best(std::vector<Candidate> ranked) {
  for (const auto& candidate : ranked) {
    std::string ref;
    const backends::EvalResult check = m_evaluator->reverify(candidate.source, &ref);
    const std::string name = candidate.key.substr(0, 12);
    if (check.ok() && check.correct) {
      return candidate;
    }
    if (check.failure && !Evaluator::cacheable(check)) {
      // Not the kernel's fault (timeout, transport, ...): keep it, and say it was not confirmed.
      m_outcome.notes.push_back("best kernel " + name + " could not be re-verified (" +
                                check.failure->describe() + "); reported as first measured");
      spdlog::warn("run {}: {}", m_run_id, m_outcome.notes.back());
      return candidate;
    }
    const std::string why = check.failure ? check.failure->describe() : "its results are wrong";
    m_outcome.notes.push_back("kernel " + name + " dropped: it failed re-verification (" + why +
                              ")");
    spdlog::warn("run {}: {}", m_run_id, m_outcome.notes.back());
    Candidate dropped = candidate;
    dropped.eval = check;
    dropped.eval_ref = ref;
    dropped.verdict = "rejected";
    record(dropped);
  }
  m_outcome.notes.push_back("no kernel passed re-verification; the input kernel is reported");
  return m_outcome.baseline;
}

SearchOutcome SearchRun::run(const std::optional<std::string>& resume_id) {
  m_outcome.config = m_config;
  m_stop.link(m_cancel);
  if (!m_services.backend || !m_services.store.complete()) {
    return fail(core::make_failure(core::FailureKind::invalid_argument, "search",
                                   "a search needs a backend and a store"));
  }
  if (auto status = validate(m_config); !status) {
    return fail(status.failure());
  }
  m_prompts = m_services.prompts
                  ? m_services.prompts
                  : std::shared_ptr<const PromptFactory>(make_default_prompt_factory());
  if (!m_services.proposers.empty()) {
    m_proposers = m_services.proposers;
  } else {
    for (const auto& name : m_config.proposers) {
      auto proposer =
          m_services.make_proposer ? m_services.make_proposer(name) : make_builtin_proposer(name);
      if (!proposer) {
        return fail(proposer.failure());
      }
      m_proposers.push_back(std::shared_ptr<Proposer>(std::move(proposer.value())));
    }
  }
  for (const auto& proposer : m_proposers) {
    m_proposer_by_name[proposer->name()] = proposer.get();
  }

  if (resume_id) {
    m_run_id = *resume_id;
    set_status("running", "");
  } else {
    auto created = create_run(m_services.store, m_config, m_services.facts);
    if (!created) {
      return fail(created.failure());
    }
    m_run_id = created.value();
  }
  m_outcome.run_id = m_run_id;
  if (m_hooks.started) {
    m_hooks.started(m_run_id);
  }

  m_llm = std::make_unique<LlmGateway>(m_services.providers, m_services.store.llm_calls, m_run_id,
                                       m_config.budgets, m_stop);
  m_pool = std::make_unique<TaskPool>(
      static_cast<std::size_t>(std::clamp(m_llm->concurrency(), 2, k_max_pool_threads)));
  std::thread watcher([this] { watch(); });
  struct WatcherStop {
    SearchRun* run;
    std::thread* thread;
    ~WatcherStop() {
      {
        std::lock_guard lock(run->m_watch_mutex);
        run->m_watch_done = true;
      }
      run->m_watch_wake.notify_all();
      thread->join();
    }
  } watcher_stop{this, &watcher};
  // After the watcher starts: the evaluator probes the problem's input signature first, and a
  // cancel must reach that probe too.
  m_evaluator =
      std::make_unique<Evaluator>(m_services.backend, m_services.store.evaluations, m_config, m_stop);

  // The input kernel: measured first (or taken from the cache); it must be correct.
  Candidate root;
  root.source = m_config.kernel_source;
  root.key = core::source_key(root.source);
  root.origin = Origin{0, 0, 0, 0, 0, "input"};
  root.eval = m_evaluator->evaluate_now(root.key, root.source, &root.eval_ref);
  if (was_cancelled(root.eval)) {
    m_outcome.status = m_stop.status().empty() ? "cancelled" : m_stop.status();
    m_outcome.stop_reason = m_stop.reason();
    set_status(m_outcome.status, m_outcome.stop_reason);
    m_outcome.elapsed_s = elapsed_s();
    return m_outcome;
  }
  record(root);
  if (!root.correct()) {
    std::string why = root.eval.failure ? root.eval.failure->describe() : "its results are wrong";
    return fail(
        core::make_failure(core::FailureKind::invalid_argument, "baseline",
                           "the input kernel must be correct before it can be optimized: " + why));
  }
  m_outcome.baseline = root;
  {
    std::lock_guard lock(m_mutex);
    m_by_key.emplace(root.key, root);
    m_seen.insert(root.key);
    m_strategy->start(root);
    m_best_latency = root.latency_us();
  }
  int start_iteration = 1;
  if (resume_id) {
    std::lock_guard lock(m_mutex);
    restore(start_iteration);
  } else {
    if (auto status = m_services.store.runs->record_beam(m_run_id, 0, {root.key}); !status) {
      spdlog::warn("could not store the initial beam: {}", status.failure().describe());
    }
    record_progress(0, root);
  }
  emit("baseline");

  for (int iteration = start_iteration; iteration <= m_config.iterations; ++iteration) {
    check_time();  // also between the watcher's looks, so a step never overruns by a whole one
    if (m_stop.stopping()) {
      break;
    }
    {
      std::lock_guard lock(m_mutex);
      m_iteration = iteration;
      m_children.clear();
      m_iteration_keys.clear();
    }
    // The batch: children of this generation, each evaluated as it arrives.
    const std::vector<Candidate> beam = m_strategy->generate(iteration);
    ProposeContext ctx;
    ctx.iteration = iteration;
    ctx.config = &m_config;
    ctx.llm = m_llm.get();
    ctx.prompts = m_prompts.get();
    ctx.pool = m_pool.get();
    ctx.stop = &m_stop;
    ctx.recent_failures = m_previous_failures;
    if (m_config.memory && m_config.lesson_limit > 0) {
      if (auto lessons = m_services.store.memory->lessons(m_config.target, m_config.lesson_limit)) {
        for (const auto& lesson : lessons.value()) {
          ctx.lessons.push_back(lesson.text);
        }
      } else {
        spdlog::warn("could not load lessons: {}", lessons.failure().describe());
      }
    }
    ctx.reflexions = reflexions_for_prompts();
    ctx.history =
        prompt_history(load_candidates(m_services.store, m_run_id), m_outcome.baseline, iteration);
    std::vector<Parent> parents;
    for (std::size_t i = 0; i < beam.size(); ++i) {
      parents.push_back(Parent{static_cast<int>(i), &beam[i]});
    }
    emit("iteration");
    for (const auto& proposer : m_proposers) {
      proposer->propose(ctx, parents, [this, &ctx](Proposal proposal) {
        handle_proposal(std::move(proposal), ctx);
      });
      if (m_stop.stopping()) {
        break;
      }
    }
    m_outstanding.wait();

    // Same-iteration duplicates: the earliest origin is the original, whatever finished first.
    std::vector<Candidate> children;
    {
      std::lock_guard lock(m_mutex);
      children = m_children;
    }
    std::sort(children.begin(), children.end(),
              [](const Candidate& a, const Candidate& b) { return a.origin < b.origin; });
    std::set<std::string> originals;
    IterationSummary summary;
    summary.iteration = iteration;
    for (auto& child : children) {
      if (child.key.empty()) {
        continue;
      }
      bool duplicate = m_seen.count(child.key) != 0 || !originals.insert(child.key).second;
      if (duplicate != child.duplicate) {
        child.duplicate = duplicate;
        record(child);
      }
      if (!duplicate) {
        ++summary.evaluated;
      }
    }
    // The batch's results go to the strategy, which picks the next generation.
    Selection selection = m_strategy->notify(iteration, children);
    const std::vector<Candidate>& next = selection.next;
    summary.accepted = selection.accepted;
    summary.diverged = selection.diverged;
    if (selection.diverged > 0) {
      spdlog::info(
          "iteration {}: {} member(s) more than {:.2f}x slower than the best left the beam",
          iteration, selection.diverged, m_config.divergence);
    }
    const bool partial = m_stop.stopping();
    std::set<std::string> next_keys;
    for (const auto& member : next) {
      next_keys.insert(member.key);
    }
    for (auto& child : children) {
      if (child.key.empty() || child.duplicate || !child.correct()) {
        continue;
      }
      child.verdict = next_keys.count(child.key) != 0 ? "accepted" : "rejected";
      record(child);
    }
    {
      std::lock_guard lock(m_mutex);
      m_best_latency = std::min(m_best_latency, next.front().latency_us());
      for (const auto& child : children) {
        if (!child.key.empty()) {
          m_seen.insert(child.key);
        }
      }
    }
    if (partial) {
      break;  // an unfinished iteration is not stored: a resume runs it again from the store
    }
    std::vector<std::string> members;
    for (const auto& member : next) {
      members.push_back(member.key);
    }
    if (auto status = m_services.store.runs->record_beam(m_run_id, iteration, members); !status) {
      spdlog::warn("could not store the beam of iteration {}: {}", iteration,
                   status.failure().describe());
    }
    record_progress(iteration, next.front());
    summary.best_latency_us = next.front().latency_us();
    m_outcome.history.push_back(summary);
    m_outcome.iterations_done = iteration;
    m_previous_failures = failures_of(children, iteration, m_config.recent_failures);
    // Learning comes after the beam is stored: a resumed run re-runs an unfinished iteration with
    // the same lessons and reflexions it had (so its stored answers replay); a kill during
    // learning loses only that iteration's lessons.
    summarize_lessons(iteration, beam, children, ctx.lessons);
    reflect_on(iteration, beam, children);
    emit("iteration_done");
  }

  // The winner is verified again before it is reported; one that fails gives way to the next.
  std::vector<Candidate> ranked = m_strategy->generation();
  if (std::none_of(ranked.begin(), ranked.end(),
                   [&](const Candidate& c) { return c.key == m_outcome.baseline.key; })) {
    ranked.push_back(m_outcome.baseline);
  }
  Candidate winner = reverified_best(std::move(ranked));
  if (!m_outcome.notes.empty()) {
    record_progress(m_outcome.iterations_done, winner);
  }
  {
    std::lock_guard lock(m_mutex);
    m_best_latency = winner.latency_us();
    m_outcome.best = winner;
    m_outcome.lineage = lineage_of(m_outcome.best);
    m_outcome.candidates_evaluated = m_evaluated;
    m_outcome.candidates_failed = m_failed;
    m_outcome.duplicates = m_duplicates;
    m_outcome.repairs = m_repairs;
  }
  m_outcome.backend_evaluations = m_evaluator->backend_evaluations();
  m_outcome.cache_hits = m_evaluator->cache_hits();
  auto spend = m_llm->spend();
  m_outcome.llm_calls = spend.calls;
  m_outcome.tokens = spend.tokens();
  m_outcome.cost_usd = spend.cost_usd;
  m_outcome.llm_replayed = m_llm->replayed();
  if (m_stop.stopping()) {
    m_outcome.status = m_stop.status();
    m_outcome.stop_reason = m_stop.reason();
  } else {
    m_outcome.status = "completed";
  }
  m_outcome.elapsed_s = elapsed_s();
  std::string message = m_outcome.stop_reason;
  for (const auto& note : m_outcome.notes) {
    message += (message.empty() ? "" : "; ") + note;
  }
  set_status(m_outcome.status, message);
  emit("done", true);
  return m_outcome;
}

}  // namespace

SearchOutcome run_search(const SearchConfig& config, const SearchServices& services,
                         const core::CancelToken& cancel, const SearchHooks& hooks) {
  SearchRun run(config, services, cancel, hooks);
  return run.run(std::nullopt);
}

SearchOutcome resume_search(const std::string& run_id, const SearchServices& services,
                            const core::CancelToken& cancel, const SearchHooks& hooks,
                            const std::optional<Budgets>& budgets) {
  auto fail = [&run_id](core::Failure failure) {
    SearchOutcome outcome;
    outcome.run_id = run_id;
    outcome.status = "failed";
    outcome.stop_reason = failure.describe();
    outcome.failure = std::move(failure);
    return outcome;
  };
  if (!services.store.complete()) {
    return fail(core::make_failure(core::FailureKind::invalid_argument, "resume",
                                   "resuming needs the store that holds the run"));
  }
  auto stored = services.store.runs->get_run(run_id);
  if (!stored) {
    return fail(stored.failure());
  }
  if (!stored.value()) {
    return fail(core::make_failure(core::FailureKind::invalid_argument, "resume",
                                   "no run '" + run_id + "' in the store"));
  }
  auto config = config_of(*stored.value(), *services.store.evaluations);
  if (!config) {
    return fail(config.failure());
  }
  if (budgets) {
    config->budgets = *budgets;
  }
  SearchRun run(std::move(config.value()), services, cancel, hooks);
  return run.run(run_id);
}

}  // namespace autocomp::search::engine
