#include "search/prompts/profile_text.hpp"

#include <algorithm>
#include <cmath>
#include <cstdio>
#include <map>

#include "core/text.hpp"

namespace autocomp::search::prompts {

namespace {

std::string number(double value) {
  char buffer[64];
  std::snprintf(buffer, sizeof(buffer), "%.4g", value);
  return buffer;
}

std::string signed_number(double value) {
  char buffer[64];
  std::snprintf(buffer, sizeof(buffer), "%+.4g", value);
  return buffer;
}

std::string source_line(const std::string& source, int line) {
  if (line <= 0) {
    return {};
  }
  std::size_t start = 0;
  for (int i = 1; i < line; ++i) {
    start = source.find('\n', start);
    if (start == std::string::npos) {
      return {};
    }
    ++start;
  }
  const std::size_t end = source.find('\n', start);
  std::string text = source.substr(start, end == std::string::npos ? end : end - start);
  const auto first = text.find_first_not_of(" \t");
  return first == std::string::npos ? std::string() : text.substr(first);
}

std::string hot_line(const backends::Hotspot& hotspot, const std::string& source) {
  std::string text = hotspot.text.empty() ? source_line(source, hotspot.line) : hotspot.text;
  std::string out = hotspot.line > 0 ? "line " + std::to_string(hotspot.line) : "unknown line";
  if (!text.empty()) {
    out += " `" + core::utf8_prefix(text, 100) + (text.size() > 100 ? "..." : "") + "`";
  }
  out += ": " + engine_name(hotspot.engine) + " " + number(hotspot.share_pct) + "% of the time, " +
         number(hotspot.time_us) + " us over " + std::to_string(hotspot.instructions) +
         " instructions";
  if (hotspot.instructions > 0 && hotspot.time_us > 0) {
    out += " (" + number(hotspot.time_us / static_cast<double>(hotspot.instructions)) + " us each)";
  }
  return out;
}

std::string wait_line(const backends::EngineWait& wait) {
  std::string out = engine_name(wait.engine) + " idle " + number(wait.idle_pct) +
                    "% of the time waiting on " + engine_name(wait.waiting_on);
  if (wait.line > 0) {
    out += " (line " + std::to_string(wait.line) + ")";
  }
  return out;
}

std::optional<double> median_us(const backends::EvalResult& result) {
  if (!result.ok() || !result.correct || !result.latency || result.latency->median_us <= 0) {
    return std::nullopt;
  }
  return result.latency->median_us;
}

}  // namespace

std::string engine_name(const std::string& engine) {
  static const std::map<std::string, std::string> k_names = {
      {"tensor", "TensorE"}, {"vector", "VectorE"}, {"scalar", "ScalarE"},
      {"gpsimd", "GpSimdE"}, {"dma", "DMA"},        {"sync", "SyncE"}};
  if (auto found = k_names.find(engine); found != k_names.end()) {
    return found->second;
  }
  return engine.empty() ? "?" : engine;
}

std::string percent_change(double before, double after) {
  if (before <= 0) {
    return "n/a";
  }
  const double pct = 100.0 * (after - before) / before;
  if (std::abs(pct) < 0.005) {
    return after == before ? "no change" : "+0.00%";
  }
  char buffer[32];
  std::snprintf(buffer, sizeof(buffer), "%+.2f%%", pct);
  return buffer;
}

std::string floor_line(const Floors& floors) {
  if (!floors.floor_us || !floors.floor_pct) {
    return {};
  }
  std::string out = "Modelled floor: " + number(*floors.floor_us) + " us (" +
                    (floors.dma_bound ? "DMA" : "compute") + "-bound";
  if (floors.dma_bound && floors.bytes_once && floors.dma_rate_gbps) {
    out += ": " + number(*floors.bytes_once / 1e6) + " MB in and out once at the modelled " +
           number(*floors.dma_rate_gbps) + " GB/s";
  }
  out += "); this kernel reaches " + number(*floors.floor_pct) + "% of it";
  if (floors.at_floor) {
    out += floors.dma_bound
               ? ": it is AT THE MODELLED FLOOR. Every byte already crosses HBM about once at the "
                 "modelled rate, so no schedule or data-movement change can gain much; only "
                 "moving fewer bytes would."
               : ": it is AT THE MODELLED FLOOR; little is left to gain.";
  } else if (floors.dma_bound && floors.bytes_moved && floors.bytes_once &&
             *floors.bytes_once > 0 && *floors.bytes_moved > 1.05 * *floors.bytes_once) {
    out += "; it moves " + number(*floors.bytes_moved / *floors.bytes_once) +
           "x the bytes the problem needs.";
  } else {
    out += ".";
  }
  return out;
}

std::vector<std::string> profile_lines(const std::vector<backends::Hotspot>& hotspots,
                                       const std::vector<backends::EngineWait>& waits,
                                       const std::optional<Floors>& floors,
                                       const std::string& source, std::size_t max_hot_lines,
                                       std::size_t max_waits) {
  std::vector<std::string> lines;
  if (!hotspots.empty()) {
    lines.push_back("Hot lines (where the time goes, busiest first):");
    for (std::size_t i = 0; i < hotspots.size() && i < max_hot_lines; ++i) {
      lines.push_back("- " + hot_line(hotspots[i], source));
    }
  }
  if (!waits.empty()) {
    lines.push_back("Engine waits (an engine idle because it waits on another):");
    for (std::size_t i = 0; i < waits.size() && i < max_waits; ++i) {
      lines.push_back("- " + wait_line(waits[i]));
    }
  }
  if (floors) {
    std::string busy;
    for (const char* engine : k_floor_engines) {
      auto found = floors->busy_us.find(engine);
      if (found == floors->busy_us.end() || found->second < 0.005 * floors->latency_us) {
        continue;
      }
      busy += (busy.empty() ? "" : ", ") + engine_name(engine) + " " + number(found->second);
    }
    if (!busy.empty()) {
      if (floors->dma_busy_pct) {
        busy += " (DMA bandwidth busy " + number(*floors->dma_busy_pct) + "%)";
      }
      lines.push_back("Busy time per engine, us: " + busy);
    }
    if (auto line = floor_line(*floors); !line.empty()) {
      lines.push_back(line);
    }
  }
  return lines;
}

std::string profile_difference(const backends::EvalResult& parent,
                               const backends::EvalResult& child) {
  std::vector<std::string> parts;
  const auto before = median_us(parent);
  const auto after = median_us(child);
  if (before && after) {
    parts.push_back("latency " + number(*before) + " -> " + number(*after) + " us (" +
                    percent_change(*before, *after) + ")");
  }
  const auto parent_floors = compute_floors(parent);
  const auto child_floors = compute_floors(child);
  if (parent_floors && child_floors) {
    // The engines whose busy time moved most, at most three, each by at least 1% of the latency.
    std::vector<std::pair<double, std::string>> moved;
    for (const char* engine : k_floor_engines) {
      const auto a = parent_floors->busy_us.find(engine);
      const auto b = child_floors->busy_us.find(engine);
      const double old_us = a == parent_floors->busy_us.end() ? 0 : a->second;
      const double new_us = b == child_floors->busy_us.end() ? 0 : b->second;
      const double delta = new_us - old_us;
      if (std::abs(delta) >= 0.01 * parent_floors->latency_us && std::abs(delta) > 0) {
        moved.emplace_back(std::abs(delta),
                           engine_name(engine) + " " + signed_number(delta) + " us");
      }
    }
    std::stable_sort(moved.begin(), moved.end(),
                     [](const auto& x, const auto& y) { return x.first > y.first; });
    std::string busy;
    for (std::size_t i = 0; i < moved.size() && i < 3; ++i) {
      busy += (busy.empty() ? "" : ", ") + moved[i].second;
    }
    parts.push_back(busy.empty() ? "engine busy times unchanged" : "busy: " + busy);
  }
  // The child's top line against the parent's line of the same text and engine (lines move
  // when code is added), else, when a text is unknown, the parent's line of the same number.
  auto find = [](const std::vector<backends::Hotspot>& list, const backends::Hotspot& like) {
    auto same_text = std::find_if(list.begin(), list.end(), [&like](const backends::Hotspot& h) {
      return h.engine == like.engine && !like.text.empty() && h.text == like.text;
    });
    if (same_text != list.end()) {
      return same_text;
    }
    // A line of the same number but other text is another statement: no match.
    return std::find_if(list.begin(), list.end(), [&like](const backends::Hotspot& h) {
      return h.engine == like.engine && h.line == like.line &&
             (h.text.empty() || like.text.empty());
    });
  };
  if (!child.hotspots.empty()) {
    const auto& top = child.hotspots.front();
    auto old = find(parent.hotspots, top);
    std::string line = "top line " + std::to_string(top.line) + " " + engine_name(top.engine) +
                       " " + number(top.share_pct) + "%";
    if (old != parent.hotspots.end()) {
      line += " (was " + number(old->share_pct) + "%, " + std::to_string(old->instructions) +
              " -> " + std::to_string(top.instructions) + " instructions)";
    } else {
      line += " (new hot line, " + std::to_string(top.instructions) + " instructions)";
    }
    parts.push_back(line);
  } else if (!parent.hotspots.empty() && after) {
    parts.push_back("no hot lines reported");
  }
  if (!child.waits.empty()) {
    const auto& wait = child.waits.front();
    parts.push_back("largest wait: " + engine_name(wait.engine) + " " + number(wait.idle_pct) +
                    "% on " + engine_name(wait.waiting_on));
  }
  std::string out;
  for (const auto& part : parts) {
    out += (out.empty() ? "" : "; ") + part;
  }
  return out;
}

}  // namespace autocomp::search::prompts
