#include "search/engine/beam_search.hpp"

#include <spdlog/spdlog.h>

#include <algorithm>
#include <atomic>
#include <chrono>
#include <set>

#include "core/hash.hpp"
#include "search/engine/beam.hpp"
#include "search/engine/confirmation.hpp"
#include "search/engine/evaluator.hpp"
#include "search/engine/generation.hpp"
#include "search/engine/history.hpp"
#include "search/engine/journal.hpp"
#include "search/engine/learning.hpp"
#include "search/engine/llm_gateway.hpp"
#include "search/engine/outcome.hpp"
#include "search/engine/stop_control.hpp"
#include "search/engine/task_pool.hpp"
#include "search/engine/watcher.hpp"

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

constexpr int k_max_pool_threads = 64;

bool was_cancelled(const backends::EvalResult& result) {
  return result.failure && result.failure->kind == core::FailureKind::cancelled;
}

// Sets each evaluated, correct original's verdict: accepted when it entered the next generation.
void set_verdicts(std::vector<Candidate>& children, const Selection& selection) {
  std::set<std::string> next_keys;
  for (const auto& member : selection.next) {
    next_keys.insert(member.key);
  }
  for (auto& child : children) {
    if (!child.key.empty() && !child.duplicate && child.correct()) {
      child.verdict = next_keys.count(child.key) != 0 ? "accepted" : "rejected";
    }
  }
}

IterationSummary summary_of(const Batch& batch) {
  IterationSummary summary;
  summary.iteration = batch.iteration;
  for (const auto& child : batch.children) {
    if (!child.key.empty() && !child.duplicate) {
      ++summary.evaluated;
    }
  }
  summary.accepted = batch.selection.accepted;
  summary.diverged = batch.selection.diverged;
  summary.best_latency_us = batch.selection.next.front().latency_us();
  return summary;
}

// One search: setup, resume, the budget watch and the batch loop. The batch's work happens in
// Generation; what follows it (journal, prompt history, lessons, reflexions) in AfterBatch steps.
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
  // Stops the run when it is cancelled or its wall-time budget is spent.
  void check_time();
  // The run's status in the journal ("running" claims it for this process).
  void set_status(const std::string& status, const std::string& message);
  void emit(const std::string& phase, const ChildCounts& counts, bool finished = false);
  core::Result<std::vector<std::shared_ptr<Proposer>>> make_proposers() const;
  // A resumed run: its kernels, beam, summaries and prompt history from the store; returns the
  // first iteration to run.
  int restore();
  ProposeContext context_for(int iteration);
  SearchOutcome finish();
  // A confirmed search: makes the confirmation and measures the input kernel on the device.
  core::Status start_confirmation(Candidate& root, bool resumed);
  double elapsed_s() const { return m_clock->seconds_since(m_started); }

  SearchConfig m_config;
  const SearchServices& m_services;
  core::CancelToken m_cancel;
  const SearchHooks& m_hooks;
  std::shared_ptr<const core::Clock> m_clock;
  core::Clock::TimePoint m_started;
  std::unique_ptr<SearchStrategy> m_strategy;

  SearchOutcome m_outcome;
  std::string m_run_id;
  StopControl m_stop;
  std::shared_ptr<const PromptFactory> m_prompts;
  std::unique_ptr<LlmGateway> m_llm;
  std::unique_ptr<TaskPool> m_pool;
  std::unique_ptr<Evaluator> m_evaluator;
  std::unique_ptr<Generation> m_generation;
  std::unique_ptr<Confirmation> m_confirmation;  // null unless the config names a device
  RunKernels m_kernels;
  // After-batch steps, in order; the typed pointers are the same steps.
  std::vector<std::shared_ptr<AfterBatch>> m_after_batch;
  Journal* m_journal = nullptr;
  PromptMemory* m_history = nullptr;
  LessonsStep* m_lessons = nullptr;
  ReflexionStep* m_reflexions = nullptr;
  std::atomic<int> m_iteration{0};
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

void SearchRun::set_status(const std::string& status, const std::string& message) {
  store::RunJournal& runs = *m_services.store.runs;
  auto done =
      status == "running"
          ? runs.claim_run(m_run_id)
          : runs.set_run_status(
                m_run_id, store::run_status_from_string(status).value_or(store::RunStatus::failed),
                message);
  if (!done) {
    spdlog::warn("could not store the status of run {}: {}", m_run_id, done.failure().describe());
  }
}

void SearchRun::emit(const std::string& phase, const ChildCounts& counts, bool finished) {
  if (!m_hooks.progress) {
    return;
  }
  ProgressEvent event;
  event.run_id = m_run_id;
  event.iteration = m_iteration.load();
  event.iterations = m_config.iterations;
  event.candidates_evaluated = counts.evaluated;
  event.candidates_failed = counts.failed;
  event.baseline_latency_us = m_outcome.baseline.latency_us();
  event.best_latency_us = counts.best_latency_us;
  event.speedup =
      counts.best_latency_us > 0 ? event.baseline_latency_us / counts.best_latency_us : 0;
  if (m_llm) {
    auto spend = m_llm->spend();
    event.llm_calls = spend.calls;
    event.tokens = spend.tokens();
    event.cost_usd = spend.cost_usd;
  }
  event.elapsed_s = elapsed_s();
  if (m_confirmation) {
    event.device_s = m_confirmation->device_seconds();
    event.device_measured = m_confirmation->measured();
  }
  event.phase = phase;
  event.finished = finished;
  m_hooks.progress(event);
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

core::Result<std::vector<std::shared_ptr<Proposer>>> SearchRun::make_proposers() const {
  if (!m_services.proposers.empty()) {
    return m_services.proposers;
  }
  std::vector<std::shared_ptr<Proposer>> proposers;
  for (const auto& name : m_config.proposers) {
    auto proposer =
        m_services.make_proposer ? m_services.make_proposer(name) : make_builtin_proposer(name);
    if (!proposer) {
      return proposer.failure();
    }
    proposers.push_back(std::shared_ptr<Proposer>(std::move(proposer.value())));
  }
  return proposers;
}

int SearchRun::restore() {
  std::vector<Candidate> stored = load_candidates(m_services.store, m_run_id);
  if (m_confirmation) {
    for (auto& candidate : stored) {
      m_confirmation->place(candidate);
    }
  }
  auto loaded = m_services.store.runs->get_beams(m_run_id);
  if (!loaded) {
    spdlog::warn("could not load the run's beams: {}", loaded.failure().describe());
  }
  const std::vector<store::Beam> beams =
      loaded ? std::move(loaded).value() : std::vector<store::Beam>{};
  m_history->restore(stored, std::nullopt);
  if (beams.empty()) {
    return 1;
  }
  const store::Beam& last = beams.back();
  // The kernels of finished iterations; those of an unfinished one are asked for again.
  RunKernels known = m_kernels;
  for (const auto& candidate : stored) {
    if (!candidate.duplicate && candidate.origin.iteration <= last.iteration) {
      known.add(candidate);
    }
  }
  if (!m_strategy->restore(last, known.by_key())) {
    return 1;
  }
  m_kernels = std::move(known);
  for (const auto& record : beams) {
    if (record.iteration == 0) {
      continue;
    }
    IterationSummary summary;
    summary.iteration = record.iteration;
    if (!record.members.empty()) {
      if (const Candidate* best = m_kernels.find(record.members.front())) {
        summary.best_latency_us = best->latency_us();
      }
    }
    for (const auto& candidate : stored) {
      if (candidate.origin.iteration == record.iteration && !candidate.key.empty()) {
        ++summary.evaluated;
      }
    }
    m_outcome.history.push_back(summary);
  }
  m_generation->set_best(m_strategy->generation().front().latency_us());
  m_history->restore(stored, last.iteration);
  m_outcome.iterations_done = last.iteration;
  return last.iteration + 1;
}

ProposeContext SearchRun::context_for(int iteration) {
  ProposeContext ctx;
  ctx.iteration = iteration;
  ctx.config = &m_config;
  ctx.llm = m_llm.get();
  ctx.prompts = m_prompts.get();
  ctx.pool = m_pool.get();
  ctx.stop = &m_stop;
  ctx.recent_failures = m_history->recent_failures();
  if (m_lessons != nullptr) {
    ctx.lessons = m_lessons->for_prompts();
  }
  if (m_reflexions != nullptr) {
    ctx.reflexions = m_reflexions->for_prompts();
  }
  ctx.history = m_history->history(iteration);
  return ctx;
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
  auto proposers = make_proposers();
  if (!proposers) {
    return fail(proposers.failure());
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
  Watcher watcher([this] { check_time(); });
  // After the watcher starts: the evaluator probes the problem's input signature first, and a
  // cancel must reach that probe too.
  m_evaluator = std::make_unique<Evaluator>(m_services.backend, m_services.store.evaluations,
                                            m_config, m_stop);
  m_generation = std::make_unique<Generation>(
      std::move(proposers).value(), *m_evaluator, *m_pool, *m_strategy, m_stop,
      m_config.repair_tries, [this](const ChildCounts& counts) { emit("iteration", counts); });

  // The input kernel: measured first (or taken from the cache); it must be correct.
  Candidate root;
  root.source = m_config.kernel_source;
  root.key = core::source_key(root.source);
  root.origin = Origin{0, 0, 0, 0, 0, "input"};
  root.eval = m_evaluator->evaluate_now(root.key, root.source, &root.eval_ref);
  if (auto confirming = start_confirmation(root, resume_id.has_value()); !confirming) {
    return fail(confirming.failure());
  }
  if (was_cancelled(root.eval)) {
    m_outcome.status = m_stop.status().empty() ? "cancelled" : m_stop.status();
    m_outcome.stop_reason = m_stop.reason();
    set_status(m_outcome.status, m_outcome.stop_reason);
    m_outcome.elapsed_s = elapsed_s();
    return m_outcome;
  }
  auto journal = std::make_unique<Journal>(*m_services.store.runs, m_run_id, root.latency_us());
  journal->record_input(root, !resume_id);
  if (!root.correct()) {
    std::string why = root.eval.failure ? root.eval.failure->describe() : "its results are wrong";
    return fail(
        core::make_failure(core::FailureKind::invalid_argument, "baseline",
                           "the input kernel must be correct before it can be optimized: " + why));
  }
  m_outcome.baseline = root;
  m_kernels.add(root);
  m_strategy->start(root);
  m_generation->set_best(root.latency_us());

  // After every batch, in this order: the journal first, so that a kill during learning loses
  // only that iteration's lessons, and a resumed run re-runs an unfinished iteration with the
  // lessons and reflexions it had (its stored answers then replay).
  m_journal = journal.get();
  m_after_batch.push_back(std::move(journal));
  auto history = std::make_unique<PromptMemory>(root, m_config.recent_failures);
  m_history = history.get();
  m_after_batch.push_back(std::move(history));
  const LearningContext learning{m_config, *m_llm,  *m_prompts, *m_services.store.memory,
                                 m_stop,   m_run_id};
  if (m_config.memory) {
    auto lessons = std::make_unique<LessonsStep>(learning);
    m_lessons = lessons.get();
    m_after_batch.push_back(std::move(lessons));
  }
  if (m_config.beam == 1 && m_config.reflexions > 0) {
    auto reflexions = std::make_unique<ReflexionStep>(learning);
    m_reflexions = reflexions.get();
    m_after_batch.push_back(std::move(reflexions));
  }
  m_after_batch.insert(m_after_batch.end(), m_services.after_batch.begin(),
                       m_services.after_batch.end());

  const int start_iteration = resume_id ? restore() : 1;
  emit("baseline", m_generation->counts());

  for (int iteration = start_iteration; iteration <= m_config.iterations; ++iteration) {
    check_time();  // also between the watcher's looks, so a step never overruns by a whole one
    if (m_stop.stopping()) {
      break;
    }
    m_iteration = iteration;
    const std::vector<Candidate> parents = m_strategy->generate(iteration);
    const ProposeContext ctx = context_for(iteration);
    std::vector<Parent> offered;
    for (std::size_t i = 0; i < parents.size(); ++i) {
      offered.push_back(Parent{static_cast<int>(i), &parents[i]});
    }
    emit("iteration", m_generation->counts());
    std::vector<Candidate> children = m_generation->run(ctx, offered, m_kernels);
    if (m_confirmation) {
      m_confirmation->confirm(children);
    }

    // The batch's results go to the strategy, which picks the next generation.
    const Selection selection = m_strategy->notify(iteration, children);
    if (selection.diverged > 0) {
      spdlog::info(
          "iteration {}: {} member(s) more than {:.2f}x slower than the best left the beam",
          iteration, selection.diverged, m_config.divergence);
    }
    set_verdicts(children, selection);
    if (m_confirmation) {
      m_generation->set_best(selection.next.front().latency_us());  // on the device's scale
    } else {
      m_generation->lower_best(selection.next.front().latency_us());
    }
    m_kernels.add(children);
    // An unfinished iteration keeps its children; a resume runs it again from the store.
    const Batch batch{iteration, parents, children, selection, !m_stop.stopping()};
    for (const auto& step : m_after_batch) {
      step->apply(batch);
    }
    if (!batch.finished) {
      break;
    }
    m_outcome.history.push_back(summary_of(batch));
    m_outcome.iterations_done = iteration;
    emit("iteration_done", m_generation->counts());
  }
  return finish();
}

core::Status SearchRun::start_confirmation(Candidate& root, bool resumed) {
  if (m_config.confirm.empty()) {
    return core::ok_status();
  }
  if (!m_services.confirm_backend) {
    return core::make_failure(core::FailureKind::invalid_argument, "confirm",
                              "no confirming backend was made for '" + m_config.confirm + "'");
  }
  Confirmation::Options options;
  options.device = m_services.confirm_backend;
  options.device_spec = m_config.confirm;
  options.cache = m_services.store.evaluations;
  options.pairs = m_services.store.calibrations;
  options.run_id = m_run_id;
  options.sim_identity = m_services.backend->identity();
  options.request = m_evaluator->request_for("");
  m_confirmation = std::make_unique<Confirmation>(std::move(options), m_config, m_stop);
  if (resumed) {
    m_confirmation->restore();
  }
  m_confirmation->confirm_input(root);
  return core::ok_status();
}

SearchOutcome SearchRun::finish() {
  // The winner is verified again before it is reported; one that fails gives way to the next.
  std::vector<Candidate> ranked = m_strategy->generation();
  if (std::none_of(ranked.begin(), ranked.end(),
                   [&](const Candidate& c) { return c.key == m_outcome.baseline.key; })) {
    ranked.push_back(m_outcome.baseline);
  }
  VerifiedBest verified = reverified_best(*m_evaluator, ranked, m_outcome.baseline);
  for (const auto& dropped : verified.dropped) {
    m_journal->record_dropped(dropped);
  }
  for (const auto& note : verified.notes) {
    spdlog::warn("run {}: {}", m_run_id, note);
  }
  m_outcome.notes = std::move(verified.notes);
  if (!m_outcome.notes.empty()) {
    m_journal->record_progress(m_outcome.iterations_done, verified.winner);
  }
  m_generation->set_best(verified.winner.latency_us());
  const ChildCounts counts = m_generation->counts();
  m_outcome.best = verified.winner;
  m_outcome.lineage = lineage_of(m_outcome.best, m_kernels);
  m_outcome.candidates_evaluated = counts.evaluated;
  m_outcome.candidates_failed = counts.failed;
  m_outcome.duplicates = counts.duplicates;
  m_outcome.repairs = counts.repairs;
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
  if (m_confirmation) {
    m_outcome.device_s = m_confirmation->device_seconds();
    m_outcome.device_measured = m_confirmation->measured();
    m_outcome.confirmation = m_confirmation->summary();
    message += (message.empty() ? "" : "; ") + m_outcome.confirmation;
  }
  set_status(m_outcome.status, message);
  emit("done", counts, true);
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
