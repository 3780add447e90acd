#pragma once

#include <map>
#include <optional>
#include <string>

#include "backends/backend.hpp"

namespace autocomp::search::prompts {

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

// The floors of a correct, profiled evaluation; nullopt when it has no profile. Shared by the
// profile tools and the search prompts, so both state the same floor.
std::optional<Floors> compute_floors(const backends::EvalResult& result);

// The engines a floor lists, in display order.
inline constexpr const char* k_floor_engines[] = {"tensor", "vector", "scalar", "gpsimd", "dma"};

}  // namespace autocomp::search::prompts
