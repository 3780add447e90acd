#pragma once

#include <map>
#include <nlohmann/json.hpp>
#include <optional>
#include <string>
#include <vector>

#include "backends/backend.hpp"
#include "search/prompts/floors.hpp"
#include "search/prompts/menu.hpp"

namespace autocomp::tools {

// The floor of an evaluation (search/prompts/floors.hpp), named here for the tools.
using search::prompts::compute_floors;
using search::prompts::Floors;

// {latency_us, busy_us{engine: us}, dma_floor_us, compute_floor_us, floor_us, floor_pct, ...},
// numbers to 4 significant digits.
nlohmann::json floors_json(const Floors& floors);
// Lines for a brief answer: the floor and how near it is, and the engines' busy time.
std::vector<std::string> floors_lines(const Floors& floors);

// Instructions too small to pay for their fixed cost: the total count and the hot line with the
// most of them, when the profile shows many (what reduce_instruction_count addresses).
struct TinyInstructions {
  long total = 0;
  int line = 0;  // hot line with the most instructions (0: none)
  long line_instructions = 0;
  double us_per_instruction = 0;  // on that line
  std::string describe() const;   // "131072 instructions; line 90: 65536 of 0.0061 us each"
};
std::optional<TinyInstructions> tiny_instructions(const backends::EvalResult& result);

// Menu items that only speed up data movement (nothing left for them at the DMA floor).
bool is_data_movement_item(const std::string& id);

// Reorders a ranked menu by what the profile shows, which outranks what the code suggests: many
// tiny instructions put reduce_instruction_count first; at the DMA floor the data-movement items
// leave the menu. Returns the ids left out at the floor.
std::vector<std::string> rank_menu_by_profile(std::vector<search::prompts::RankedItem>& ranked,
                                              const std::optional<Floors>& floors,
                                              const std::optional<TinyInstructions>& tiny);

}  // namespace autocomp::tools
