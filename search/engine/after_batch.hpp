#pragma once

#include <vector>

#include "search/engine/candidate.hpp"
#include "search/engine/strategy.hpp"

namespace autocomp::search::engine {

// What one iteration of a search produced, handed to every after-batch step.
struct Batch {
  int iteration = 0;
  const std::vector<Candidate>& parents;   // the generation the children were made from
  const std::vector<Candidate>& children;  // in origin order, duplicates marked, verdicts set
  const Selection& selection;              // the next generation and the gate's counts
  // False when the run stopped during the iteration: the children are kept, but the iteration
  // is not done (a resumed run runs it again), so only the journal records anything.
  bool finished = true;
};

// A step that runs after every batch, in the order the runner lists them (journal, prompt
// history, lessons, reflexions). Each step takes the batch's values and keeps its own state; none
// reaches back into the runner.
class AfterBatch {
 public:
  virtual ~AfterBatch() = default;
  virtual void apply(const Batch& batch) = 0;
};

}  // namespace autocomp::search::engine
