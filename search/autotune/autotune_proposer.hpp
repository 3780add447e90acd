#pragma once

#include <cstdint>
#include <memory>
#include <string>
#include <vector>

#include "search/autotune/knobs.hpp"
#include "search/engine/proposer.hpp"

namespace autocomp::search::autotune {

// At most this many autotune children per parent and iteration; the cap actually used is
// min(k_max_children, config.plans * config.impls), at least 1.
inline constexpr int k_max_children = 12;
// At most this many of a parent's children change two knobs at once.
inline constexpr int k_max_pair_children = 4;

// One child the autotuner would make from a parent: which knobs change to which values.
struct KnobEdit {
  std::size_t knob = 0;   // index into parse_knobs(parent source)
  std::size_t value = 0;  // index into that knob's values
};
struct TuneStep {
  std::vector<KnobEdit> edits;  // one or two
};

// The steps worth trying on a parent with `knobs`, best guesses first and without limit:
//   1. every knob moved to a value next to its current one in the declared list (the next value,
//      then the previous one), in an order shuffled by `shuffle_seed`;
//   2. up to k_max_pair_children pairs of such moves on two different knobs (pairs shuffled);
//   3. every knob moved further away, nearer values first.
// A knob whose current value is not declared treats every declared value as one step away.
std::vector<TuneStep> plan_steps(const std::vector<Knob>& knobs, std::uint64_t shuffle_seed);

// The proposer "autotune": children that change declared knobs (see plan_steps), never calling
// an LLM. Up to the cap above per parent; a child whose source equals its parent's, an earlier
// child of this run or a parent seen earlier in this run is skipped. Origins: plan = 1 + knob
// index and impl = 1 + value index for one knob; plan = 1000 * (1 + a) + (1 + b) and
// impl = 1000 * (1 + value of a) + (1 + value of b) for two knobs a < b. Plans read
// "autotune: TILE_N 256 -> 512" (", "-separated for two knobs).
std::unique_ptr<engine::Proposer> make_autotune_proposer();

}  // namespace autocomp::search::autotune
