#pragma once

#include <cstdint>
#include <optional>
#include <string>
#include <vector>

#include "core/result.hpp"
#include "search/store/types.hpp"

namespace autocomp::search::store {

// Search runs: their settings, status and progress, their candidates with lineage, and their
// beams. Same contract as EvaluationCache; a multi-row write is one transaction.
class RunJournal {
 public:
  virtual ~RunJournal() = default;

  virtual core::Result<std::string> create_run(const RunConfig& config) = 0;
  // Exact id, or a unique prefix of at least 4 characters.
  virtual core::Result<std::optional<Run>> get_run(const std::string& run_id) = 0;
  // Newest first.
  virtual core::Result<std::vector<Run>> list_runs(int limit = 20) = 0;
  virtual core::Status set_run_status(const std::string& run_id, RunStatus status,
                                      const std::string& message = "") = 0;
  // Marks the run running and owned by this process (used by --resume and job restarts).
  virtual core::Status claim_run(const std::string& run_id) = 0;
  // Marks every `running` run owned by a process on this host that no longer exists as
  // interrupted; returns their ids. Call once at startup.
  virtual core::Result<std::vector<std::string>> interrupt_orphaned_runs() = 0;
  virtual core::Status set_run_progress(const std::string& run_id, int iteration,
                                        const std::optional<std::string>& best_candidate_key,
                                        std::optional<double> best_latency_us,
                                        std::optional<double> baseline_latency_us) = 0;

  // Replaces the beam recorded for this iteration (idempotent on resume).
  virtual core::Status record_beam(const std::string& run_id, int iteration,
                                   const std::vector<std::string>& candidate_keys) = 0;
  // Records a search iteration in one transaction: each child's source and run row (a child
  // already in the run has its row updated with the new status and evaluation, unless the new
  // one is a duplicate, which never changes the original's row), then the beam and the progress
  // when present (the beam replaces one stored for the same iteration).
  virtual core::Status record_iteration(const std::string& run_id,
                                        const IterationRecord& record) = 0;
  // Ordered by iteration.
  virtual core::Result<std::vector<Beam>> get_beams(const std::string& run_id) = 0;

  // Returns false (and changes nothing) when the candidate is already part of the run: identical
  // sources are never evaluated twice within a run. The candidate must be stored.
  virtual core::Result<bool> add_run_candidate(const RunCandidate& candidate) = 0;
  // Updates status, evaluation (and with it median and correct) and note of a run candidate;
  // an absent evaluation id or empty note leaves those as they were.
  virtual core::Status update_run_candidate(
      const std::string& run_id, const std::string& candidate_key, CandidateStatus status,
      std::optional<std::int64_t> evaluation_id = std::nullopt, const std::string& note = "") = 0;
  virtual core::Result<std::optional<RunCandidate>> get_run_candidate(
      const std::string& run_id, const std::string& candidate_key) = 0;
  // In insertion order.
  virtual core::Result<std::vector<RunCandidate>> run_candidates(const std::string& run_id) = 0;
  // From the run's root down to `candidate_key` (following parent keys within the run).
  virtual core::Result<std::vector<RunCandidate>> lineage(const std::string& run_id,
                                                          const std::string& candidate_key) = 0;
  virtual core::Result<RunCounts> run_counts(const std::string& run_id) = 0;
  // Best among the run's candidates, judged by the evaluations the run linked to them.
  virtual core::Result<std::optional<BestVersion>> best_for_run(const std::string& run_id) = 0;
};

}  // namespace autocomp::search::store
