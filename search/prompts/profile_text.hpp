#pragma once

#include <optional>
#include <string>
#include <vector>

#include "backends/backend.hpp"
#include "search/prompts/floors.hpp"

namespace autocomp::search::prompts {

// "TensorE", "VectorE", "ScalarE", "GpSimdE", "DMA"; other names unchanged.
std::string engine_name(const std::string& engine);

// What a profile says about where the time goes, as prompt lines: the busiest source lines
// (instruction, engine, share, us, instruction count and us per instruction), the engines idle
// waiting on others, the busy time per engine and the modelled floor (saying when the kernel is
// at it). `source` supplies a hot line's text when the profile lacks it. Empty when the
// evaluation holds no profile.
std::vector<std::string> profile_lines(const std::vector<backends::Hotspot>& hotspots,
                                       const std::vector<backends::EngineWait>& waits,
                                       const std::optional<Floors>& floors,
                                       const std::string& source, std::size_t max_hot_lines = 5,
                                       std::size_t max_waits = 3);

// One line for the floor: "floor: 480 us (DMA-bound); this kernel reaches 96% of it: at the
// modelled floor ..."; empty when no floor is known.
std::string floor_line(const Floors& floors);

// A short profile difference of a child from its parent, e.g. "latency 611.3 -> 598 us (-2.2%);
// busy: VectorE -40 us, DMA +12 us; hot line 42 VectorE 35% -> 12%". Empty when either has no
// profile and no latency.
std::string profile_difference(const backends::EvalResult& parent,
                               const backends::EvalResult& child);

// A latency change in exact figures: "-3.2%", "+0.4%", "no change" (identical to 4 digits).
std::string percent_change(double before, double after);

}  // namespace autocomp::search::prompts
