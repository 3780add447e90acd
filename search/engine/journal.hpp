#pragma once

#include <string>

#include "search/engine/after_batch.hpp"
#include "search/engine/candidate.hpp"
#include "search/store/run_journal.hpp"

namespace autocomp::search::engine {

// Records a run in its journal: each iteration's children, beam and progress in one transaction,
// every child written once with its final status. A write that fails is logged, never fatal: the
// search goes on, and only its record is short.
class Journal : public AfterBatch {
 public:
  Journal(store::RunJournal& runs, std::string run_id, double baseline_latency_us);

  // The input kernel (iteration 0); `fresh` also records the first beam and progress.
  void record_input(const Candidate& root, bool fresh);
  void apply(const Batch& batch) override;
  // A kernel that failed its re-verification: its row becomes rejected with the new evaluation.
  void record_dropped(const Candidate& dropped);
  // Where the run stands after the search (the verified winner).
  void record_progress(int iteration, const Candidate& best);

  void set_baseline(double latency_us) { m_baseline_latency_us = latency_us; }

 private:
  store::RunJournal& m_runs;
  std::string m_run_id;
  double m_baseline_latency_us = 0;
};

}  // namespace autocomp::search::engine
