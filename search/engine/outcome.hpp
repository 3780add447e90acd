#pragma once

#include <string>
#include <vector>

#include "search/engine/candidate.hpp"
#include "search/engine/evaluator.hpp"
#include "search/engine/generation.hpp"

namespace autocomp::search::engine {

// The winner of a search after its re-verification.
struct VerifiedBest {
  Candidate winner;
  std::vector<std::string> notes;  // why a kernel was dropped or not confirmed, in words
  std::vector<Candidate> dropped;  // kernels that failed re-verification, with that evaluation
};

// Verifies the best of `ranked` again in a fresh process; one that fails gives way to the next,
// and when none passes the input kernel is the winner. A failure that is not the kernel's fault
// (timeout, transport) keeps the kernel, with a note saying it was not confirmed.
VerifiedBest reverified_best(Evaluator& evaluator, const std::vector<Candidate>& ranked,
                             const Candidate& baseline);

// The kernels from the input down to `best`, following parent keys.
std::vector<Candidate> lineage_of(const Candidate& best, const RunKernels& known);

}  // namespace autocomp::search::engine
