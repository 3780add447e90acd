#pragma once

#include <condition_variable>
#include <deque>
#include <functional>
#include <future>
#include <map>
#include <memory>
#include <mutex>
#include <optional>
#include <string>
#include <vector>

#include "search/engine/candidate.hpp"
#include "search/engine/evaluator.hpp"
#include "search/engine/proposer.hpp"
#include "search/engine/strategy.hpp"
#include "search/engine/task_pool.hpp"

namespace autocomp::search::engine {

// The kernels of a run so far: the input and every child of a finished batch, by key, each with
// its first origin. Changed only between batches (add()), read during them.
class RunKernels {
 public:
  // Adds the keyed children of a batch (in origin order, so the first origin wins).
  void add(const std::vector<Candidate>& children);
  void add(const Candidate& candidate);
  // Whether the kernel belongs to an earlier batch (or is the input).
  bool seen(const std::string& key) const { return m_by_key.count(key) != 0; }
  const Candidate* find(const std::string& key) const;
  const std::map<std::string, Candidate>& by_key() const { return m_by_key; }

 private:
  std::map<std::string, Candidate> m_by_key;
};

// Running totals of a run's children, for progress events and the outcome.
struct ChildCounts {
  long evaluated = 0;          // children whose evaluation returned (cache hits included)
  long failed = 0;             // children without a correct result (no code, compile error, ...)
  long duplicates = 0;         // children identical to an earlier one
  long repairs = 0;            // repair attempts asked for
  double best_latency_us = 0;  // best admitted latency so far
};

// One iteration's children. run() hands the parents to every proposer, evaluates each child as it
// arrives (so LLM latency overlaps evaluation), sends failures that a repair may fix back to their
// proposer in bounded rounds, marks duplicates, and returns the children in origin order. The
// proposers' sink and the evaluator's futures are drained inside; nothing calls back into the
// caller except `observe`, which receives the counts after every child.
class Generation {
 public:
  using Observer = std::function<void(const ChildCounts&)>;

  Generation(std::vector<std::shared_ptr<Proposer>> proposers, Evaluator& evaluator, TaskPool& pool,
             const SearchStrategy& strategy, const StopControl& stop, int repair_tries,
             Observer observe);

  // The children of `parents`, sorted by origin, with key, source, evaluation and its store
  // reference filled in; `duplicate` marks a kernel of `known` or of an earlier origin in this
  // batch (it is never evaluated again when known). A child whose evaluation was cancelled is
  // left out (a resumed run asks for it again).
  std::vector<Candidate> run(const ProposeContext& ctx, const std::vector<Parent>& parents,
                             const RunKernels& known);

  ChildCounts counts() const;
  // The best latency the counts report: set from the input kernel, a restored beam or the
  // verified winner; lowered by a batch's selection.
  void set_best(double latency_us);
  void lower_best(double latency_us);

 private:
  // A child waiting for its result, in arrival order.
  struct Arrival {
    Proposal proposal;
    std::string key;
    std::optional<std::shared_future<Evaluator::Evaluated>> result;  // absent: nothing to evaluate
    Candidate settled;  // the child when it needs no evaluation (no code, known duplicate)
  };

  void accept(Proposal proposal, const RunKernels& known);
  void observe();

  std::vector<std::shared_ptr<Proposer>> m_proposers;
  std::map<std::string, Proposer*> m_by_name;
  Evaluator& m_evaluator;
  TaskPool& m_pool;
  const SearchStrategy& m_strategy;
  const StopControl& m_stop;
  int m_repair_tries = 0;
  Observer m_observe;

  mutable std::mutex m_mutex;  // guards everything below
  std::condition_variable m_changed;
  std::deque<Arrival> m_arrivals;
  bool m_proposing = false;
  int m_repairing = 0;  // repair requests not yet answered
  ChildCounts m_counts;
};

}  // namespace autocomp::search::engine
