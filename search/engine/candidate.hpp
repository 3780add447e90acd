#pragma once

#include <optional>
#include <string>

#include "backends/backend.hpp"
#include "core/failure.hpp"

namespace autocomp::search::engine {

// Where a child came from: a stable identity that is the same every time the same run asks for
// the same child (so resumed runs find earlier answers). iteration 0 is the input kernel.
struct Origin {
  int iteration = 0;
  int member = 0;  // index of the parent in the beam of the previous iteration
  int plan = 0;
  int impl = 0;
  int repair = 0;  // 0: first implementation; r: r-th repair of it
  std::string proposer;

  // "i2/m0/p3/k1/r0/llm"; unique within a run.
  std::string label() const;
  // Total order used to break ties deterministically (iteration, member, plan, impl, repair,
  // proposer).
  bool operator<(const Origin& other) const;
  bool operator==(const Origin& other) const = default;

  // The inverse of label(); nullopt for text that is not a label.
  static std::optional<Origin> parse(const std::string& label);
};

// A child produced by a proposer, before evaluation.
struct Proposal {
  Origin origin;
  std::string parent_key;
  std::string plan;    // the plan in words ("" when the proposer has none)
  std::string source;  // empty when the proposer produced no code (then `failure` says why)
  std::optional<core::Failure> failure;
};

// An evaluated kernel of the run.
struct Candidate {
  std::string key;  // core::source_key(source)
  std::string source;
  std::string parent_key;  // "" for the input kernel
  std::string plan;
  Origin origin;
  backends::EvalResult eval;
  bool duplicate = false;  // same source as an earlier candidate of the run: never evaluated again
  std::string verdict;     // "" until selection, then "accepted" (entered the beam) or "rejected"
  std::string eval_ref;    // the store's reference to `eval` ("" when it was not stored)
  // A confirmed search (search/engine/confirmation.hpp) ranks on the confirming device's scale:
  // the latency measured there, or the simulator's scaled by the run's median device/sim ratio.
  // Unset in a search without a confirming device.
  std::optional<double> device_us;
  bool device_measured = false;  // device_us was measured, not estimated

  bool correct() const { return eval.ok() && eval.correct && eval.latency.has_value(); }
  // The latency the search ranks by, in microseconds: device_us when set, else the evaluation's
  // median; only meaningful when correct().
  double latency_us() const { return device_us ? *device_us : evaluated_us(); }
  // The evaluation's own median (the simulator's in a confirmed search).
  double evaluated_us() const { return eval.latency ? eval.latency->median_us : 0.0; }
};

}  // namespace autocomp::search::engine
