#pragma once

#include <functional>
#include <string>

namespace autocomp::search::engine {

// A snapshot of a run's progress, sent after the input kernel is measured, after every child's
// evaluation returns, at the end of every iteration and once when the run ends.
struct ProgressEvent {
  std::string run_id;
  int iteration = 0;              // 0 while measuring the input kernel
  int iterations = 0;             // T
  long candidates_evaluated = 0;  // children whose evaluation returned (cache hits included)
  long candidates_failed = 0;
  double baseline_latency_us = 0;
  double best_latency_us = 0;  // 0 until the input kernel is measured
  double speedup = 0;          // baseline / best
  long llm_calls = 0;
  long tokens = 0;
  double cost_usd = 0;
  double elapsed_s = 0;
  double device_s = 0;       // seconds on the confirming backend (a confirmed search)
  long device_measured = 0;  // kernels measured there
  std::string phase;         // "baseline", "iteration", "iteration_done", "done"
  bool finished = false;
};

// Called from engine threads; implementations must be thread-safe and quick.
using ProgressCallback = std::function<void(const ProgressEvent&)>;

}  // namespace autocomp::search::engine
