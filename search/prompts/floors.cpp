#include "search/prompts/floors.hpp"

#include <algorithm>
#include <cmath>
#include <nlohmann/json.hpp>

namespace autocomp::search::prompts {

using nlohmann::json;

namespace {

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

}  // namespace

std::optional<Floors> compute_floors(const backends::EvalResult& result) {
  const auto total_s = metric(result.metrics, "total_time");
  if (!total_s || *total_s <= 0) {
    return std::nullopt;
  }
  Floors floors;
  floors.latency_us = *total_s * 1e6;
  for (const char* engine : k_floor_engines) {
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

}  // namespace autocomp::search::prompts
