#include "tools/profile_floor.hpp"

#include <algorithm>
#include <cmath>
#include <set>

#include "tools/evaluation_json.hpp"

namespace autocomp::tools {

using nlohmann::json;

namespace {

constexpr const char* k_engines[] = {"tensor", "vector", "scalar", "gpsimd", "dma"};

// A hot line is made of tiny instructions when it holds many that each take about their fixed
// cost (tens of cycles); a kernel has many when its total is this high.
constexpr long k_tiny_line_instructions = 512;
constexpr double k_tiny_us_per_instruction = 0.2;
constexpr double k_tiny_line_share_pct = 10;
constexpr long k_many_instructions = 20000;

std::optional<double> metric(const std::map<std::string, double>& metrics,
                             const std::string& name) {
  auto found = metrics.find(name);
  if (found == metrics.end() || !std::isfinite(found->second)) {
    return std::nullopt;
  }
  return found->second;
}

std::string megabytes(double bytes) {
  return format_number(bytes / 1e6) + " MB";
}

}  // namespace

json floors_json(const Floors& floors) {
  json out = json::object();
  json busy = json::object();
  for (const auto& [engine, us] : floors.busy_us) {
    if (us > 0) {
      busy[engine] = round_sig(us);
    }
  }
  out["busy_us"] = std::move(busy);
  auto put = [&out](const char* name, const std::optional<double>& value) {
    if (value) {
      out[name] = round_sig(*value);
    }
  };
  put("dma_floor_us", floors.dma_floor_us);
  put("compute_floor_us", floors.compute_floor_us);
  put("floor_pct", floors.floor_pct);
  out["at_floor"] = floors.at_floor;
  return out;
}

std::vector<std::string> floors_lines(const Floors& floors) {
  std::vector<std::string> lines;
  if (floors.dma_floor_us) {
    std::string line = "DMA floor: " + format_number(*floors.dma_floor_us) + " us (" +
                       megabytes(*floors.bytes_once) + " in and out once at the modelled " +
                       format_number(*floors.dma_rate_gbps) + " GB/s)";
    if (floors.bytes_moved && *floors.bytes_once > 0) {
      const double ratio = *floors.bytes_moved / *floors.bytes_once;
      line += ratio > 1.05 ? "; it moves " + format_number(ratio) + "x those bytes"
                           : "; it moves each once";
    }
    lines.push_back(line);
  }
  if (floors.compute_floor_us) {
    lines.push_back("compute floor: " + format_number(*floors.compute_floor_us) +
                    " us (the problem's FLOPS at peak)");
  }
  if (floors.floor_pct) {
    std::string line = "floor reached: " + format_number(*floors.floor_pct) + "%";
    if (floors.at_floor) {
      line += floors.dma_bound
                  ? ": at the modelled floor; every byte crosses once at the modelled rate, so "
                    "no schedule change can gain much"
                  : ": at the modelled floor";
    } else if (floors.dma_bound && floors.average_transfer &&
               *floors.average_transfer < Floors::k_full_transfer_bytes) {
      line += "; transfers average " + format_number(*floors.average_transfer) +
              " bytes: small ones run below the modelled rate";
    }
    lines.push_back(line);
  }
  std::string busy;
  for (const char* engine : k_engines) {
    auto found = floors.busy_us.find(engine);
    if (found == floors.busy_us.end() || found->second < 0.005 * floors.latency_us) {
      continue;
    }
    busy += (busy.empty() ? "" : ", ") + engine_label(engine) + " " + format_number(found->second);
  }
  if (!busy.empty()) {
    if (floors.dma_busy_pct) {
      busy += " (DMA bandwidth busy " + format_number(*floors.dma_busy_pct) + "%)";
    }
    lines.push_back("busy us: " + busy);
  }
  return lines;
}

std::string TinyInstructions::describe() const {
  std::string out = std::to_string(total) + " instructions";
  if (line > 0) {
    out += "; line " + std::to_string(line) + ": " + std::to_string(line_instructions) + " of " +
           format_number(us_per_instruction) + " us each";
  }
  return out;
}

std::optional<TinyInstructions> tiny_instructions(const backends::EvalResult& result) {
  TinyInstructions tiny;
  tiny.total = static_cast<long>(metric(result.metrics, "total_instruction_count").value_or(0));
  for (const auto& hotspot : result.hotspots) {
    if (hotspot.instructions < k_tiny_line_instructions ||
        hotspot.share_pct < k_tiny_line_share_pct || hotspot.time_us <= 0) {
      continue;
    }
    const double each = hotspot.time_us / static_cast<double>(hotspot.instructions);
    if (each <= k_tiny_us_per_instruction && hotspot.instructions > tiny.line_instructions) {
      tiny.line = hotspot.line;
      tiny.line_instructions = hotspot.instructions;
      tiny.us_per_instruction = each;
    }
  }
  if (tiny.line == 0 && tiny.total < k_many_instructions) {
    return std::nullopt;
  }
  return tiny;
}

bool is_data_movement_item(const std::string& id) {
  static const std::set<std::string> k_items = {
      "hoist_loads",     "keep_resident",     "double_buffer",  "fuse_loops",         "larger_dma",
      "coalesce_stores", "software_pipeline", "downcast_early", "independent_buffers"};
  return k_items.count(id) != 0;
}

std::vector<std::string> rank_menu_by_profile(std::vector<search::prompts::RankedItem>& ranked,
                                              const std::optional<Floors>& floors,
                                              const std::optional<TinyInstructions>& tiny) {
  std::vector<std::string> at_floor;
  const bool dma_floor = floors && floors->at_floor && floors->dma_bound;
  std::vector<search::prompts::RankedItem> kept;
  for (auto& entry : ranked) {
    if (dma_floor && is_data_movement_item(entry.item.id)) {
      at_floor.push_back(entry.item.id);
    } else {
      kept.push_back(std::move(entry));
    }
  }
  if (tiny) {
    auto found =
        std::find_if(kept.begin(), kept.end(), [](const search::prompts::RankedItem& entry) {
          return entry.item.id == "reduce_instruction_count";
        });
    if (found != kept.end()) {
      found->reasons.assign(1, "tiny instructions: " + tiny->describe());
      std::rotate(kept.begin(), found, found + 1);
    }
  }
  ranked = std::move(kept);
  return at_floor;
}

}  // namespace autocomp::tools
