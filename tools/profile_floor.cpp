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

// The harness's floor section (PROTOCOL.md), from the benchmark or the profile section.
json harness_floor(const std::string& raw_json) {
  if (raw_json.empty()) {
    return nullptr;
  }
  const json document = json::parse(raw_json, nullptr, /*allow_exceptions=*/false);
  if (!document.is_object()) {
    return nullptr;
  }
  for (const char* section : {"benchmark", "profile"}) {
    auto found = document.find(section);
    if (found != document.end() && found->is_object()) {
      auto floor = found->find("floor");
      if (floor != found->end() && floor->is_object()) {
        return *floor;
      }
    }
  }
  return nullptr;
}

std::string megabytes(double bytes) {
  return format_number(bytes / 1e6) + " MB";
}

}  // namespace

std::optional<Floors> compute_floors(const backends::EvalResult& result) {
  const auto total_s = metric(result.metrics, "total_time");
  if (!total_s || *total_s <= 0) {
    return std::nullopt;
  }
  Floors floors;
  floors.latency_us = *total_s * 1e6;
  for (const char* engine : k_engines) {
    const std::string name = std::string(engine) == "dma"
                                 ? std::string("dma_active_time")
                                 : std::string(engine) + "_engine_active_time";
    if (auto seconds = metric(result.metrics, name)) {
      floors.busy_us[engine] = *seconds * 1e6;
    }
  }
  floors.dma_busy_pct = metric(result.metrics, "dma_bandwidth_busy_percent");
  floors.average_transfer = metric(result.metrics, "dma_transfer_average_bytes");
  const auto read = metric(result.metrics, "hbm_read_bytes");
  const auto written = metric(result.metrics, "hbm_write_bytes");
  if (read || written) {
    floors.bytes_moved = read.value_or(0) + written.value_or(0);
  }
  const json harness = harness_floor(result.raw_json);
  if (harness.is_object()) {
    if (auto bytes = harness.find("hbm_bytes"); bytes != harness.end() && bytes->is_number()) {
      floors.bytes_once = bytes->get<double>();
    }
    if (auto compute = harness.find("compute_floor_us");
        compute != harness.end() && compute->is_number()) {
      floors.compute_floor_us = compute->get<double>();
    }
    // The model's best sustained DMA rate; results recorded before the harness gave it fall
    // back to the target's peak HBM rate.
    for (const char* rate : {"dma_gbps", "peak_hbm_gbps"}) {
      auto found = harness.find(rate);
      if (!floors.dma_rate_gbps && found != harness.end() && found->is_number() &&
          found->get<double>() > 0) {
        floors.dma_rate_gbps = found->get<double>();
      }
    }
  }
  if (floors.bytes_once && floors.dma_rate_gbps && *floors.dma_rate_gbps > 0) {
    floors.dma_floor_us = *floors.bytes_once / (*floors.dma_rate_gbps * 1e3);
  }
  if (floors.dma_floor_us || floors.compute_floor_us) {
    floors.dma_bound = floors.dma_floor_us.value_or(0) >= floors.compute_floor_us.value_or(0);
    floors.floor_us =
        std::max(floors.dma_floor_us.value_or(0), floors.compute_floor_us.value_or(0));
    floors.floor_pct = 100 * *floors.floor_us / floors.latency_us;
    floors.at_floor = *floors.floor_pct >= Floors::k_at_floor_pct;
  }
  return floors;
}

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
