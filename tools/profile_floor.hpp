#pragma once

#include <map>
#include <nlohmann/json.hpp>
#include <optional>
#include <string>
#include <vector>

#include "backends/backend.hpp"
#include "search/prompts/menu.hpp"

namespace autocomp::tools {

// How close a kernel is to the least time its problem needs, from one evaluation: the busy time
// of each engine and of DMA, the DMA floor (the bytes the problem must move, inputs read once and
// outputs written once, at the simulator's best sustained DMA rate from the harness's floor
// section) and the compute floor (the problem's FLOPS at the target's peak, when it states FLOPS).
struct Floors {
  double latency_us = 0;
  std::map<std::string, double> busy_us;   // tensor, vector, scalar, gpsimd, dma
  std::optional<double> dma_busy_pct;      // share of the makespan the DMA bandwidth was busy
  std::optional<double> bytes_once;        // bytes the problem must move
  std::optional<double> bytes_moved;       // HBM bytes this kernel moved
  std::optional<double> dma_rate_gbps;     // the modelled DMA rate (bytes per ns)
  std::optional<double> average_transfer;  // bytes per DMA transfer
  std::optional<double> dma_floor_us;
  std::optional<double> compute_floor_us;
  std::optional<double> floor_us;   // the larger of the two floors
  std::optional<double> floor_pct;  // floor_us / latency, in percent
  bool at_floor = false;            // within k_at_floor_pct of the floor
  bool dma_bound = false;           // the DMA floor is the larger one

  static constexpr double k_at_floor_pct = 90;
  // Below this many bytes per transfer the per-transfer cost lowers the DMA rate.
  static constexpr double k_full_transfer_bytes = 2048;
};

// The floors of a correct, profiled evaluation; nullopt when it has no profile.
std::optional<Floors> compute_floors(const backends::EvalResult& result);

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
