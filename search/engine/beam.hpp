#pragma once

#include <vector>

#include "search/engine/candidate.hpp"
#include "search/engine/search_config.hpp"

namespace autocomp::search::engine {

// How much slower than its parent a child may be in `iteration` (1-based): early_slack during the
// first slack_iterations iterations, 1 afterwards.
double slack_for(int iteration, const SearchConfig& config);

// A child may enter the beam when it is correct, not a duplicate, and faster than its parent
// (strictly), or within the slack while the slack applies.
bool accepts(const Candidate& child, double parent_latency_us, int iteration,
             const SearchConfig& config);

// The next beam: the best `beam_size` of the old beam plus the accepted children, by latency.
// Ties keep the old member (and among children, the earlier origin). A key appears at most once.
// Divergence guard: when `divergence` > 1, a kernel more than `divergence` times slower than the
// best is left out, so the next step works from the best instead (counted in `*diverged`).
std::vector<Candidate> select_next_beam(const std::vector<Candidate>& old_beam,
                                        const std::vector<Candidate>& accepted, int beam_size,
                                        double divergence = 0, int* diverged = nullptr);

}  // namespace autocomp::search::engine
