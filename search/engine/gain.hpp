#pragma once

#include <string>

#include "backends/backend.hpp"
#include "search/engine/candidate.hpp"
#include "search/engine/search_config.hpp"

namespace autocomp::search::engine {

// Whether an evaluation's backend repeats a measurement exactly (the simulator and the fake
// backend): then any latency difference is real and no change is "noise".
bool deterministic(const backends::EvalResult& eval);

// The latency spread an evaluation measured, in percent of its median: (max - min) / median of
// its samples; 0 on a deterministic backend or without a latency.
double measured_spread_pct(const backends::EvalResult& eval);

// The noise band of a parent/child comparison in percent: 0 when both were measured on a
// deterministic backend, else the larger measured spread of the two.
double noise_pct(const Candidate& parent, const Candidate& child);

// The least latency gain, in percent, a child must show over its parent to count as faster:
// config.min_gain when set; otherwise 0 on deterministic backends (strictly faster; an exact tie
// is not a gain) and the measured spread on noisy ones.
double required_gain_pct(const Candidate& parent, const Candidate& child,
                         const SearchConfig& config);

// A correct child's latency against its parent's, in words the prompts and reports use. Exact on
// deterministic backends ("faster (latency -3.21%)", "slower (latency +0.40%)", "unchanged
// (identical latency)"); on noisy ones a change inside the measured spread is "within noise
// (latency -1.2%, measured spread 2.5%)".
std::string change_words(const Candidate& parent, const Candidate& child);

}  // namespace autocomp::search::engine
