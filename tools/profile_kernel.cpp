#include <algorithm>
#include <filesystem>
#include <map>
#include <vector>

#include "tools/evaluation_json.hpp"
#include "tools/evaluation_service.hpp"
#include "tools/evaluation_tools.hpp"
#include "tools/profile_floor.hpp"
#include "tools/tool_surface.hpp"

namespace autocomp::tools {

using nlohmann::json;

namespace {

constexpr std::size_t k_hotspots_shown = 5;
constexpr std::size_t k_waits_shown = 3;

// The profile entries a brief answer carries: where the time goes and how busy the memory is.
constexpr const char* k_brief_metrics[] = {
    "total_time",
    "tensor_engine_active_time_percent",
    "vector_engine_active_time_percent",
    "scalar_engine_active_time_percent",
    "gpsimd_engine_active_time_percent",
    "dma_active_time_percent",
    "dma_transfer_count",
    "dma_transfer_average_bytes",
    "hbm_read_bytes",
    "hbm_write_bytes",
    "spill_save_bytes",
    "mfu_estimated_percent",
    "mbu_estimated_percent",
    "total_instruction_count",
};

constexpr const char* k_brief_roofline[] = {"compute_pct",          "hbm_pct",
                                            "arithmetic_intensity", "ridge_point",
                                            "busiest_engine_pct",   "dma_achievable_gbps"};
// Compiler effects shown in the brief answer (all of them: detail "full").
constexpr std::size_t k_effects_shown = 2;
constexpr std::size_t k_effect_chars = 120;

// "VectorE 69%, ScalarE 12%, DMA 40%": the engines that did anything, by activity.
std::string engine_activity(const std::map<std::string, double>& metrics) {
  std::string out;
  for (const char* engine : {"tensor", "vector", "scalar", "gpsimd", "dma"}) {
    const std::string name =
        std::string(engine) +
        (std::string(engine) == "dma" ? "_active_time_percent" : "_engine_active_time_percent");
    auto found = metrics.find(name);
    if (found == metrics.end() || found->second < 0.5) {
      continue;
    }
    out +=
        (out.empty() ? "" : ", ") + engine_label(engine) + " " + format_number(found->second) + "%";
  }
  return out.empty() ? "no engine activity reported" : out;
}

double metric(const std::map<std::string, double>& metrics, const char* name) {
  auto found = metrics.find(name);
  return found == metrics.end() ? 0.0 : found->second;
}

std::string kib(double bytes) {
  return format_number(bytes / 1024.0) + " KiB";
}

// "SBUF: peak 541 KiB per partition of 192 KiB (2.82x); spills: 184 MB saved, 3.6 GB reloaded,
// 94% of the bytes DMA moved": what on-chip memory costs, which no hot line shows (spill
// transfers are the allocator's, not a line's). Empty when the backend reports no SBUF figures.
std::string memory_line(const std::map<std::string, double>& metrics) {
  const double peak = metric(metrics, "peak_sbuf_bytes_per_partition");
  const double capacity = metric(metrics, "sbuf_capacity_bytes_per_partition");
  if (peak <= 0 || capacity <= 0) {
    return {};
  }
  const double saved = metric(metrics, "spill_save_bytes");
  const double reloaded = metric(metrics, "spill_reload_bytes");
  if (saved + reloaded <= 0 && peak < 0.5 * capacity) {
    return {};  // not what limits this kernel; the figures stay in detail "full"
  }
  std::string line = "SBUF: peak " + kib(peak) + " per partition of " + kib(capacity);
  if (peak > capacity) {
    line += " (" + format_number(peak / capacity) + "x capacity)";
  } else {
    line += " (" + format_number(100.0 * peak / capacity) + "%)";
  }
  if (saved + reloaded > 0) {
    const double moved = metric(metrics, "hbm_read_bytes") + metric(metrics, "hbm_write_bytes");
    line += "; spills: " + format_number(saved / 1e6) + " MB saved, " +
            format_number(reloaded / 1e6) + " MB reloaded";
    if (moved > 0) {
      line += ", " + format_number(std::min(100.0, 100.0 * (saved + reloaded) / moved)) +
              "% of the HBM bytes moved (not in the hot lines: keep fewer tiles live)";
    }
  } else {
    line += "; no spills";
  }
  return line;
}

// "cores: LNC=2, each core's end 42.27 / 40.1 us": how the launch's programs shared the
// physical cores; "cores: 1 of 2 used" for a launch on one of them. Empty on one core.
std::string cores_line(const std::map<std::string, double>& metrics) {
  std::vector<double> ends;
  for (int core = 0; core < 8; ++core) {
    auto found = metrics.find("core" + std::to_string(core) + "_end_us");
    if (found == metrics.end()) {
      break;
    }
    ends.push_back(found->second);
  }
  const double lnc = std::max<double>(metric(metrics, "lnc"), static_cast<double>(ends.size()));
  if (lnc < 2) {
    return {};
  }
  const auto used = std::count_if(ends.begin(), ends.end(), [](double end) { return end > 0; });
  if (used < 2) {  // no grid, or one without an nl.nc axis
    return "cores: 1 of " + format_number(lnc) + " used";
  }
  std::string line = "cores: LNC=" + format_number(lnc) + ", each core's end";
  for (std::size_t i = 0; i < ends.size(); ++i) {
    line += (i == 0 ? " " : " / ") + format_number(ends[i]);
  }
  line += " us";
  const auto [low, high] = std::minmax_element(ends.begin(), ends.end());
  if (*low < 0.9 * *high) {
    line += " (unbalanced: the slowest core sets the latency)";
  }
  return line;
}

}  // namespace

server::ToolDef make_profile_kernel_tool(std::shared_ptr<ToolEnv> env) {
  server::ToolDef tool;
  tool.name = "profile_kernel";
  tool.title = "Profile a kernel";
  tool.description =
      "Where an NKI kernel's time goes: hot lines, waits, SBUF and spills, cores, bottleneck, "
      "floors, percent of peak.";
  tool.input_schema = with_detail_argument(eval_args_schema({"seeds", "warmup", "iters"}));
  tool.output_schema = brief_output_schema(
      {{"bottleneck", {{"type", "string"}}}, {"metrics", {{"type", "object"}}}}, {"metrics"});
  tool.annotations = hints(true, false, true, false);
  tool.handler = [env](const json& arguments, server::ToolContext& context) {
    auto outcome = evaluate_kernel_file(*env, parse_eval_args(arguments), context);
    if (!outcome.ok()) {
      return server::tool_failure(outcome.failure());
    }
    const auto& result = outcome->result;
    if (result.failure || result.metrics.empty()) {
      return unusable_evaluation(outcome.value(), "profile", "profile");
    }
    const Detail detail = parse_detail(arguments);
    json out = brief_header_json(outcome.value());
    json metrics = json::object();
    for (const char* name : k_brief_metrics) {
      if (auto found = result.metrics.find(name); found != result.metrics.end()) {
        metrics[name] = round_sig(found->second);
      }
    }
    json roofline = json::object();
    for (const char* name : k_brief_roofline) {
      if (auto found = result.roofline.find(name); found != result.roofline.end()) {
        roofline[name] = round_sig(found->second);
      }
    }
    for (const char* name : {"peak_tflops", "peak_hbm_gbps"}) {  // the peaks behind the pcts
      if (auto found = result.roofline.find(name); found != result.roofline.end()) {
        roofline[name] = round_sig(found->second);
      }
    }
    out["metrics"] = std::move(metrics);
    out["roofline"] = std::move(roofline);
    const json peak = percent_of_peak_json(result.roofline, false);
    if (!peak.empty()) {
      out["percent_of_peak"] = peak;
    }
    out["bottleneck"] = result.bottleneck;
    // the limiting engine, when it says more than the class ("VectorE-bound")
    const bool engine_named =
        !result.bottleneck_engine.empty() && result.bottleneck_engine != result.bottleneck;
    if (engine_named) {
      out["bottleneck_engine"] = result.bottleneck_engine;
    }
    json effects = json::array();
    for (std::size_t i = 0; i < result.compiler_effects.size() && i < k_effects_shown; ++i) {
      std::string effect = result.compiler_effects[i];
      if (effect.size() > k_effect_chars) {
        std::size_t cut = k_effect_chars - 3;
        while (cut > 0 && (static_cast<unsigned char>(effect[cut]) & 0xC0U) == 0x80U) {
          --cut;  // never split a UTF-8 sequence
        }
        effect = effect.substr(0, cut) + "...";
      }
      effects.push_back(std::move(effect));
    }
    if (!effects.empty()) {
      out["compiler_effects"] = effects;
    }
    if (result.latency) {
      out["latency_us"] = round_sig(result.latency->median_us);
    }
    const json hotspots = hotspots_json(result.hotspots, outcome->kernel.text, k_hotspots_shown);
    const json waits = waits_json(result.waits, k_waits_shown);
    if (!hotspots.empty()) {
      out["hotspots"] = hotspots;
    }
    if (!waits.empty()) {
      out["waits"] = waits;
    }
    const auto floors = compute_floors(result);
    if (floors) {
      out["floors"] = floors_json(*floors);
    }

    const std::string name = std::filesystem::path(outcome->kernel.path).filename().string();
    std::vector<std::string> lines;
    std::string first = "profile " + name + ":";
    if (result.latency) {
      first += " " + format_number(result.latency->median_us) + " us,";
    }
    first +=
        " " + (result.bottleneck.empty() ? std::string("no bottleneck class") : result.bottleneck);
    if (engine_named) {
      first += " (" + result.bottleneck_engine + ")";
    }
    lines.push_back(first);
    lines.push_back("engines active: " + engine_activity(result.metrics));
    if (auto memory = memory_line(result.metrics); !memory.empty()) {
      lines.push_back(std::move(memory));
    }
    if (auto cores = cores_line(result.metrics); !cores.empty()) {
      lines.push_back(std::move(cores));
    }
    std::string roof;
    for (const auto& [key, label] :
         {std::pair{"compute_pct", "compute "}, std::pair{"hbm_pct", "HBM bandwidth "}}) {
      if (auto found = result.roofline.find(key); found != result.roofline.end()) {
        roof += (roof.empty() ? "" : ", ") + std::string(label) + format_number(found->second) +
                "% of peak";
      }
    }
    if (auto found = result.roofline.find("dma_achievable_gbps");
        found != result.roofline.end() && !roof.empty()) {
      roof += " (DMA reaches at most " + format_number(found->second) + " GB/s here)";
    }
    if (!roof.empty()) {
      lines.push_back("roofline: " + roof);
    }
    if (!peak.empty()) {
      // The headline rule only: the floor and roofline shares are stated on their own lines
      // (one figure per quantity); every rule stays in the structured answer.
      const std::string rule = peak["rule"].get<std::string>();
      if (auto entry = peak.find(rule); entry != peak.end() && entry->is_object()) {
        lines.push_back("percent of peak (" +
                        std::string(rule == "accelopt" ? "AccelOpt's" : rule) +
                        " rule): " + format_number(entry->at("percent").get<double>()) + "%");
      }
    }
    if (!hotspots.empty()) {
      lines.push_back("hot lines (share of the makespan):");
      for (const auto& hotspot : hotspots) {
        lines.push_back("  " + describe_hotspot(hotspot));
      }
    } else {
      lines.push_back("hot lines: not reported by this backend");
    }
    for (const auto& wait : waits) {
      lines.push_back("wait: " + describe_wait(wait));
    }
    for (const auto& effect : effects) {
      lines.push_back("compiler (modelled): " + effect.get<std::string>());
    }
    if (result.compiler_effects.size() > effects.size()) {
      lines.push_back("compiler (modelled): " +
                      std::to_string(result.compiler_effects.size() - effects.size()) +
                      " more effects (detail: \"full\")");
    }
    if (floors) {
      for (auto& line : floors_lines(*floors)) {
        lines.push_back(std::move(line));
      }
    }
    server::ToolResult tool_result;
    tool_result.text = brief_text(lines, out);
    if (detail == Detail::full) {
      out["full"] = full_result_json(result);
      out["full"]["hotspots"] =
          hotspots_json(result.hotspots, outcome->kernel.text, result.hotspots.size());
    }
    tool_result.extra_content.push_back(evaluation_link(outcome->evaluation_id));
    tool_result.structured = std::move(out);
    return tool_result;
  };
  tool.task_support = server::TaskSupport::optional;  // long runs may be protocol tasks
  return tool;
}

}  // namespace autocomp::tools
