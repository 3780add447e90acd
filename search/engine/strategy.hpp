#pragma once

#include <map>
#include <optional>
#include <string>
#include <vector>

#include "search/engine/candidate.hpp"
#include "search/store/types.hpp"

namespace autocomp::search::engine {

// What a strategy decided about one batch.
struct Selection {
  std::vector<Candidate> next;  // the next generation, best first (never empty)
  long accepted = 0;            // children that passed the gate
  long diverged = 0;            // kernels left out for being far slower than the best
};

// A search strategy in the generate / notify shape. Each iteration the runner asks it for a
// generation of parents, has the proposers make children of them, evaluates each child as it
// arrives (LLM calls overlap evaluations), asks the strategy whether each child passes its gate,
// and once the batch is done tells the strategy all of its results. Budgets, proposers,
// evaluation, recording and learning belong to the runner; which kernels are worth building on
// belongs to the strategy.
//
// Calls are not concurrent except admits(), which may run on any thread while a batch streams
// (it reads state that only start, restore and notify change, and they run between batches).
class SearchStrategy {
 public:
  virtual ~SearchStrategy() = default;

  // A new run from its input kernel (measured and correct).
  virtual void start(const Candidate& root) = 0;
  // A resumed run: the generation stored after iteration `stored.iteration`, its members looked
  // up in `known` (the run's kernels by key). False, changing nothing, when a member is unknown or
  // not correct (then the run starts again from the input kernel).
  virtual bool restore(const store::Beam& stored,
                       const std::map<std::string, Candidate>& known) = 0;

  // The parents whose children iteration `iteration` explores; member i of a child's origin is
  // position i.
  virtual std::vector<Candidate> generate(int iteration) = 0;
  // Whether an evaluated child of the current batch passes the gate into the next generation.
  virtual bool admits(const Candidate& child) const = 0;
  // The batch's results: the children of generate(iteration) in origin order, with duplicates
  // marked. Picks the next generation.
  virtual Selection notify(int iteration, const std::vector<Candidate>& children) = 0;

  // The current generation, best first.
  virtual std::vector<Candidate> generation() const = 0;
};

}  // namespace autocomp::search::engine
