#include "search/engine/outcome.hpp"

#include <algorithm>
#include <set>

namespace autocomp::search::engine {

VerifiedBest reverified_best(Evaluator& evaluator, const std::vector<Candidate>& ranked,
                             const Candidate& baseline) {
  VerifiedBest out;
  for (const auto& candidate : ranked) {
    std::string ref;
    const backends::EvalResult check = evaluator.reverify(candidate.source, &ref);
    const std::string name = candidate.key.substr(0, 12);
    if (check.ok() && check.correct) {
      out.winner = candidate;
      return out;
    }
    if (check.failure && !Evaluator::cacheable(check)) {
      // Not the kernel's fault (timeout, transport, ...): keep it, and say it was not confirmed.
      out.notes.push_back("best kernel " + name + " could not be re-verified (" +
                          check.failure->describe() + "); reported as first measured");
      out.winner = candidate;
      return out;
    }
    const std::string why = check.failure ? check.failure->describe() : "its results are wrong";
    out.notes.push_back("kernel " + name + " dropped: it failed re-verification (" + why + ")");
    Candidate dropped = candidate;
    dropped.eval = check;
    dropped.eval_ref = ref;
    dropped.verdict = "rejected";
    out.dropped.push_back(std::move(dropped));
  }
  out.notes.push_back("no kernel passed re-verification; the input kernel is reported");
  out.winner = baseline;
  return out;
}

std::vector<Candidate> lineage_of(const Candidate& best, const RunKernels& known) {
  std::vector<Candidate> chain{best};
  std::set<std::string> visited{best.key};
  std::string parent = best.parent_key;
  while (!parent.empty() && visited.insert(parent).second) {
    const Candidate* found = known.find(parent);
    if (found == nullptr) {
      break;
    }
    chain.push_back(*found);
    parent = found->parent_key;
  }
  std::reverse(chain.begin(), chain.end());
  return chain;
}

}  // namespace autocomp::search::engine
