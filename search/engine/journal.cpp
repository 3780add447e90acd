#include "search/engine/journal.hpp"

#include <spdlog/spdlog.h>

#include "search/engine/run_store.hpp"

namespace autocomp::search::engine {

namespace {

store::RunProgress progress_of(int iteration, const Candidate& best, double baseline_latency_us) {
  store::RunProgress progress;
  progress.iteration = iteration;
  progress.best_candidate_key = best.key;
  if (best.correct()) {
    progress.best_latency_us = best.latency_us();
  }
  progress.baseline_latency_us = baseline_latency_us;
  return progress;
}

}  // namespace

Journal::Journal(store::RunJournal& runs, std::string run_id, double baseline_latency_us)
    : m_runs(runs), m_run_id(std::move(run_id)), m_baseline_latency_us(baseline_latency_us) {}

void Journal::record_input(const Candidate& root, bool fresh) {
  store::IterationRecord record;
  record.iteration = 0;
  record.children.push_back({run_row(m_run_id, root), root.source});
  if (fresh && root.correct()) {
    record.beam = std::vector<std::string>{root.key};
    record.progress = progress_of(0, root, m_baseline_latency_us);
  }
  if (auto status = m_runs.record_iteration(m_run_id, record); !status) {
    spdlog::warn("could not store the input kernel: {}", status.failure().describe());
  }
}

void Journal::apply(const Batch& batch) {
  store::IterationRecord record;
  record.iteration = batch.iteration;
  for (const auto& child : batch.children) {
    // No code: nothing the store can key. A duplicate has no row of its own: its original (of an
    // earlier batch, or earlier in this one) holds the key.
    if (!child.key.empty() && !child.duplicate) {
      record.children.push_back({run_row(m_run_id, child), child.source});
    }
  }
  if (batch.finished) {
    std::vector<std::string> members;
    for (const auto& member : batch.selection.next) {
      members.push_back(member.key);
    }
    record.beam = std::move(members);
    record.progress =
        progress_of(batch.iteration, batch.selection.next.front(), m_baseline_latency_us);
  }
  if (auto status = m_runs.record_iteration(m_run_id, record); !status) {
    spdlog::warn("could not store iteration {}: {}", batch.iteration, status.failure().describe());
  }
}

void Journal::record_dropped(const Candidate& dropped) {
  const store::RunCandidate row = run_row(m_run_id, dropped);
  if (auto status =
          m_runs.update_run_candidate(m_run_id, dropped.key, row.status, row.evaluation_id);
      !status) {
    spdlog::warn("could not store candidate {}: {}", dropped.origin.label(),
                 status.failure().describe());
  }
}

void Journal::record_progress(int iteration, const Candidate& best) {
  const store::RunProgress progress = progress_of(iteration, best, m_baseline_latency_us);
  if (auto status = m_runs.set_run_progress(m_run_id, iteration, progress.best_candidate_key,
                                            progress.best_latency_us, progress.baseline_latency_us);
      !status) {
    spdlog::warn("could not store the run's progress: {}", status.failure().describe());
  }
}

}  // namespace autocomp::search::engine
