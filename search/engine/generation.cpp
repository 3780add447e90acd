#include "search/engine/generation.hpp"

#include <algorithm>
#include <set>
#include <thread>

#include "core/hash.hpp"

namespace autocomp::search::engine {

namespace {

bool repairable(const backends::EvalResult& result) {
  return result.failure && (result.failure->kind == core::FailureKind::compile_error ||
                            result.failure->kind == core::FailureKind::runtime_error);
}

bool was_cancelled(const backends::EvalResult& result) {
  return result.failure && result.failure->kind == core::FailureKind::cancelled;
}

Candidate child_of(const Proposal& proposal, const std::string& key) {
  Candidate candidate;
  candidate.key = key;
  candidate.source = proposal.source;
  candidate.parent_key = proposal.parent_key;
  candidate.plan = proposal.plan;
  candidate.origin = proposal.origin;
  return candidate;
}

}  // namespace

void RunKernels::add(const std::vector<Candidate>& children) {
  for (const auto& child : children) {
    add(child);
  }
}

void RunKernels::add(const Candidate& candidate) {
  if (candidate.key.empty()) {
    return;
  }
  auto [it, inserted] = m_by_key.emplace(candidate.key, candidate);
  if (!inserted && candidate.origin < it->second.origin) {
    it->second = candidate;
  }
}

const Candidate* RunKernels::find(const std::string& key) const {
  auto it = m_by_key.find(key);
  return it == m_by_key.end() ? nullptr : &it->second;
}

Generation::Generation(std::vector<std::shared_ptr<Proposer>> proposers, Evaluator& evaluator,
                       TaskPool& pool, const SearchStrategy& strategy, const StopControl& stop,
                       int repair_tries, Observer observe)
    : m_proposers(std::move(proposers)),
      m_evaluator(evaluator),
      m_pool(pool),
      m_strategy(strategy),
      m_stop(stop),
      m_repair_tries(repair_tries),
      m_observe(std::move(observe)) {
  for (const auto& proposer : m_proposers) {
    m_by_name[proposer->name()] = proposer.get();
  }
}

ChildCounts Generation::counts() const {
  std::lock_guard lock(m_mutex);
  return m_counts;
}

void Generation::set_best(double latency_us) {
  std::lock_guard lock(m_mutex);
  m_counts.best_latency_us = latency_us;
}

void Generation::lower_best(double latency_us) {
  std::lock_guard lock(m_mutex);
  m_counts.best_latency_us = std::min(m_counts.best_latency_us, latency_us);
}

void Generation::observe() {
  if (m_observe) {
    m_observe(counts());
  }
}

void Generation::accept(Proposal proposal, const RunKernels& known) {
  if (!proposal.failure && proposal.source.empty()) {
    proposal.failure = core::make_failure(core::FailureKind::internal, "propose",
                                          "the proposer returned neither code nor a failure");
  }
  Arrival arrival;
  if (proposal.failure) {
    arrival.settled = child_of(proposal, "");
    arrival.settled.source.clear();
    arrival.settled.eval.failure = proposal.failure;
  } else {
    arrival.key = core::source_key(proposal.source);
    if (const Candidate* earlier = known.find(arrival.key)) {
      // Identical to a kernel of an earlier batch: never evaluated again, never re-enters.
      arrival.settled = child_of(proposal, arrival.key);
      arrival.settled.duplicate = true;
      arrival.settled.eval = earlier->eval;
      arrival.settled.eval_ref = earlier->eval_ref;
    } else {
      arrival.result = m_evaluator.submit(arrival.key, proposal.source);
    }
  }
  arrival.proposal = std::move(proposal);
  {
    std::lock_guard lock(m_mutex);
    m_arrivals.push_back(std::move(arrival));
  }
  m_changed.notify_all();
}

std::vector<Candidate> Generation::run(const ProposeContext& ctx,
                                       const std::vector<Parent>& parents,
                                       const RunKernels& known) {
  {
    std::lock_guard lock(m_mutex);
    m_arrivals.clear();
    m_proposing = true;
    m_repairing = 0;
  }
  const ChildSink sink = [this, &known](Proposal proposal) { accept(std::move(proposal), known); };
  // The proposers run on their own thread (they fan out on the pool and wait for it); this
  // thread takes their children as they arrive.
  std::thread proposing([this, &ctx, &parents, &sink] {
    for (const auto& proposer : m_proposers) {
      proposer->propose(ctx, parents, sink);
      if (m_stop.stopping()) {
        break;
      }
    }
    {
      std::lock_guard lock(m_mutex);
      m_proposing = false;
    }
    m_changed.notify_all();
  });

  std::vector<Candidate> children;
  std::set<std::string> arrived;  // keys evaluated in this batch; only the first is repaired
  TaskGroup repairs;
  for (;;) {
    Arrival arrival;
    {
      std::unique_lock lock(m_mutex);
      m_changed.wait(lock,
                     [this] { return !m_arrivals.empty() || (!m_proposing && m_repairing == 0); });
      if (m_arrivals.empty()) {
        break;
      }
      arrival = std::move(m_arrivals.front());
      m_arrivals.pop_front();
    }
    if (!arrival.result) {
      if (!arrival.settled.duplicate) {
        std::lock_guard lock(m_mutex);
        ++m_counts.failed;
      }
      children.push_back(std::move(arrival.settled));
      observe();
      continue;
    }
    const Evaluator::Evaluated& evaluated = arrival.result->get();
    if (was_cancelled(evaluated.result)) {
      continue;  // not evaluated; a resumed run asks again
    }
    Candidate child = child_of(arrival.proposal, arrival.key);
    child.eval = evaluated.result;
    child.eval_ref = evaluated.ref;
    const bool first = arrived.insert(arrival.key).second;
    {
      std::lock_guard lock(m_mutex);
      ++m_counts.evaluated;
      if (!child.correct()) {
        ++m_counts.failed;
      }
      if (m_strategy.admits(child) && child.latency_us() < m_counts.best_latency_us) {
        m_counts.best_latency_us = child.latency_us();
      }
    }
    if (first && repairable(evaluated.result) && arrival.proposal.origin.repair < m_repair_tries &&
        !m_stop.stopping()) {
      if (auto it = m_by_name.find(arrival.proposal.origin.proposer); it != m_by_name.end()) {
        Proposer* proposer = it->second;
        {
          std::lock_guard lock(m_mutex);
          ++m_counts.repairs;
          ++m_repairing;
        }
        RepairInput input{arrival.proposal, *evaluated.result.failure};
        repairs.run(m_pool, [this, proposer, input = std::move(input), &ctx, &sink] {
          if (auto repaired = proposer->repair(ctx, input)) {
            sink(std::move(*repaired));
          }
          {
            std::lock_guard lock(m_mutex);
            --m_repairing;
          }
          m_changed.notify_all();
        });
      }
    }
    children.push_back(std::move(child));
    observe();
  }
  proposing.join();
  repairs.wait();

  // Duplicates by origin: the earliest origin is the original, whatever finished first.
  std::sort(children.begin(), children.end(),
            [](const Candidate& a, const Candidate& b) { return a.origin < b.origin; });
  std::set<std::string> originals;
  long duplicates = 0;
  for (auto& child : children) {
    if (child.key.empty()) {
      continue;
    }
    child.duplicate = known.seen(child.key) || !originals.insert(child.key).second;
    if (child.duplicate) {
      ++duplicates;
    }
  }
  {
    std::lock_guard lock(m_mutex);
    m_counts.duplicates += duplicates;
  }
  return children;
}

}  // namespace autocomp::search::engine
