#include "tools/evaluation_json.hpp"

#include <algorithm>
#include <cmath>
#include <cstdio>
#include <cstdlib>
#include <map>

#include "tools/evaluation_service.hpp"

namespace autocomp::tools {

using nlohmann::json;

json failure_json(const core::Failure& failure) {
  json out = {{"kind", std::string(core::to_string(failure.kind))},
              {"stage", failure.stage},
              {"message", failure.message}};
  if (failure.line) {
    out["line"] = *failure.line;
  }
  return out;
}

json seeds_json(const std::vector<backends::SeedCheck>& seeds) {
  json out = json::array();
  for (const auto& seed : seeds) {
    json item = {{"seed", seed.seed},
                 {"ok", seed.ok},
                 {"max_abs_err", seed.max_abs_err},
                 {"rel_l2_err", seed.rel_l2_err}};
    if (!seed.message.empty()) {
      item["message"] = seed.message;
    }
    out.push_back(std::move(item));
  }
  return out;
}

json latency_json(const backends::LatencyStats& latency, bool with_samples) {
  json out = {{"min", latency.min_us}, {"median", latency.median_us}, {"max", latency.max_us}};
  if (with_samples) {
    out["samples"] = latency.samples_us;
  }
  return out;
}

json provenance_json(const backends::EvalResult& result, bool cached) {
  json steps = json::object();
  for (const auto& step : result.steps) {
    steps[step.step] = step.ms;
  }
  return {{"backend", result.backend_identity},
          {"host", result.host},
          {"device", result.device},
          {"target", result.target},
          {"harness_version", result.harness_version},
          {"cached", cached},
          {"steps_ms", std::move(steps)}};
}

json percent_of_peak_json(const std::map<std::string, double>& roofline, bool define_rules) {
  struct Rule {
    const char* name;
    const char* description;
    std::vector<std::pair<const char*, const char*>> peaks;  // roofline key, label
  };
  const Rule rules[] = {
      {"accelopt",
       "max(vector FLOPs / vector peak, fp32 matmul FLOPs / matmul peak, minimal bytes / HBM "
       "bandwidth) over the latency (AccelOpt's NKIBench rule)",
       {{"peak_vector_gflops_accelopt", "vector_gflops"},
        {"peak_matmul_tflops_accelopt", "matmul_fp32_tflops"},
        {"peak_hbm_gibps_accelopt", "hbm_gibps"}}},
      {"roofline",
       "the largest share of a peak in the product's roofline (compute, HBM)",
       {{"peak_tflops", "tflops"}, {"peak_hbm_gbps", "hbm_gbps"}}},
      {"floor",
       "the physical floor (inputs and outputs once through HBM, the problem's FLOPS) over the "
       "latency",
       {}},
  };
  json out = json::object();
  for (const auto& rule : rules) {
    auto found = roofline.find(std::string("pct_of_peak_") + rule.name);
    if (found == roofline.end()) {
      continue;
    }
    json entry = {{"percent", round_sig(found->second)}};
    if (define_rules) {
      entry["rule"] = rule.description;
    }
    if (auto t = roofline.find(std::string("theoretical_us_") + rule.name); t != roofline.end()) {
      entry["theoretical_us"] = round_sig(t->second);
    }
    json peaks = json::object();
    for (const auto& [key, label] : rule.peaks) {
      if (auto p = roofline.find(key); p != roofline.end()) {
        peaks[label] = round_sig(p->second);
      }
    }
    if (!peaks.empty()) {
      entry["peaks"] = std::move(peaks);
    }
    if (!out.contains("rule")) {
      out["rule"] = rule.name;  // the headline: the first rule present, accelopt when known
    }
    out[rule.name] = std::move(entry);
  }
  return out;
}

json full_result_json(const backends::EvalResult& result) {
  json out = provenance_json(result, false);
  out.erase("cached");
  out["correct"] = result.correct;
  out["seeds"] = seeds_json(result.seeds);
  if (result.failure) {
    out["failure"] = failure_json(*result.failure);
  }
  if (result.latency) {
    out["latency_us"] = latency_json(*result.latency, true);
  }
  out["metrics"] = result.metrics;
  out["roofline"] = result.roofline;
  if (json peak = percent_of_peak_json(result.roofline); !peak.empty()) {
    out["percent_of_peak"] = std::move(peak);
  }
  out["bottleneck"] = result.bottleneck;
  if (!result.bottleneck_engine.empty()) {
    out["bottleneck_engine"] = result.bottleneck_engine;
  }
  if (!result.compiler_effects.empty()) {
    out["compiler_effects"] = result.compiler_effects;
  }
  out["measured"] = receipt_line(result);
  if (!result.input_signature.empty()) {
    out["input_signature"] = result.input_signature;
  }
  if (!result.hotspots.empty()) {
    out["hotspots"] = hotspots_json(result.hotspots, "", result.hotspots.size());
  }
  if (!result.waits.empty()) {
    out["waits"] = waits_json(result.waits, result.waits.size());
  }
  return out;
}

std::string verdict_text(const backends::EvalResult& result) {
  if (result.failure) {
    return result.failure->describe();
  }
  const auto passed = std::count_if(result.seeds.begin(), result.seeds.end(),
                                    [](const backends::SeedCheck& seed) { return seed.ok; });
  return "correct on " + std::to_string(passed) + "/" + std::to_string(result.seeds.size()) +
         " seeds";
}

Detail parse_detail(const json& arguments) {
  return arguments.value("detail", std::string("brief")) == "full" ? Detail::full : Detail::brief;
}

json with_detail_argument(json input_schema) {
  input_schema["properties"]["detail"] = {
      {"type", "string"}, {"enum", {"brief", "full"}}, {"description", "full: whole record."}};
  return input_schema;
}

std::string receipt_line(const backends::EvalResult& result) {
  backends::Receipt receipt = result.receipt;
  if (receipt.device.empty()) {
    receipt.device = result.device;
  }
  if (receipt.target.empty()) {
    receipt.target = result.target;
  }
  if (receipt.host.empty()) {
    receipt.host = result.host;
  }
  if (receipt.harness_version.empty()) {
    receipt.harness_version = result.harness_version;
  }
  return receipt.summary();
}

json brief_header_json(const EvaluationOutcome& outcome) {
  return {{"kernel", outcome.kernel.path},
          {"candidate", outcome.candidate_key},
          {"evaluation_id", outcome.evaluation_id},
          {"details", "autocomp://evaluations/" + std::to_string(outcome.evaluation_id)},
          {"cached", outcome.cached},
          {"measured", receipt_line(outcome.result)}};
}

json brief_output_schema(json properties, const std::vector<std::string>& required) {
  // Only what a client checks first: the header fields are in every answer but not listed, to
  // keep tools/list short.
  return {{"type", "object"}, {"properties", std::move(properties)}, {"required", required}};
}

std::string source_line(const std::string& source, int line, std::size_t max_chars) {
  if (line <= 0) {
    return "";
  }
  std::size_t start = 0;
  for (int current = 1; current < line; ++current) {
    const auto newline = source.find('\n', start);
    if (newline == std::string::npos) {
      return "";
    }
    start = newline + 1;
  }
  auto end = source.find('\n', start);
  if (end == std::string::npos) {
    end = source.size();
  }
  std::string text = source.substr(start, end - start);
  const auto first = text.find_first_not_of(" \t\r");
  if (first == std::string::npos) {
    return "";
  }
  text = text.substr(first, text.find_last_not_of(" \t\r") - first + 1);
  if (text.size() > max_chars) {
    text = text.substr(0, max_chars - 3) + "...";
  }
  return text;
}

json hotspots_json(const std::vector<backends::Hotspot>& hotspots, const std::string& kernel_source,
                   std::size_t limit) {
  json out = json::array();
  for (const auto& hotspot : hotspots) {
    if (out.size() >= limit) {
      break;
    }
    constexpr std::size_t k_text_chars = 80;
    std::string text = hotspot.text;
    if (text.size() > k_text_chars) {
      text = text.substr(0, k_text_chars - 3) + "...";
    }
    if (text.empty()) {
      text = source_line(kernel_source, hotspot.line, k_text_chars);
    }
    json item = {{"line", hotspot.line},
                 {"engine", hotspot.engine},
                 {"share_pct", std::round(hotspot.share_pct * 10) / 10},
                 {"instructions", hotspot.instructions}};
    if (hotspot.time_us > 0 && hotspot.instructions > 0) {
      item["us_per_instr"] = round_sig(hotspot.time_us / static_cast<double>(hotspot.instructions));
    }
    if (!text.empty()) {
      item["text"] = std::move(text);
    }
    out.push_back(std::move(item));
  }
  return out;
}

json waits_json(const std::vector<backends::EngineWait>& waits, std::size_t limit) {
  json out = json::array();
  for (const auto& wait : waits) {
    if (out.size() >= limit) {
      break;
    }
    json item = {{"engine", wait.engine},
                 {"waiting_on", wait.waiting_on},
                 {"idle_pct", std::round(wait.idle_pct * 10) / 10}};
    if (wait.line > 0) {
      item["line"] = wait.line;
    }
    out.push_back(std::move(item));
  }
  return out;
}

std::string engine_label(const std::string& engine) {
  static const std::map<std::string, std::string> k_labels = {
      {"tensor", "TensorE"}, {"vector", "VectorE"}, {"scalar", "ScalarE"},
      {"gpsimd", "GpSimdE"}, {"dma", "DMA"},        {"sync", "SyncE"}};
  if (auto found = k_labels.find(engine); found != k_labels.end()) {
    return found->second;
  }
  return engine.empty() ? "?" : engine;
}

std::string format_number(double value) {
  char buffer[32];
  std::snprintf(buffer, sizeof buffer, "%.4g", value);
  return buffer;
}

std::string describe_hotspot(const json& hotspot) {
  std::string out =
      "line " + std::to_string(hotspot.value("line", 0)) + " (" +
      engine_label(hotspot.value("engine", "")) + " " +
      format_number(hotspot.value("share_pct", 0.0)) + "%, " +
      std::to_string(hotspot.value("instructions", 0L)) + " instr" +
      (hotspot.contains("us_per_instr")
           ? ", " + format_number(hotspot.at("us_per_instr").get<double>()) + " us each"
           : std::string()) +
      ")";
  if (hotspot.contains("text")) {
    out += ": " + hotspot.at("text").get<std::string>();
  }
  return out;
}

std::string describe_wait(const json& wait) {
  std::string out = engine_label(wait.value("engine", "")) + " idle " +
                    format_number(wait.value("idle_pct", 0.0)) + "% waiting on " +
                    engine_label(wait.value("waiting_on", ""));
  if (wait.contains("line")) {
    out += " at line " + std::to_string(wait.at("line").get<int>());
  }
  return out;
}

double round_sig(double value) {
  if (!std::isfinite(value)) {
    return value;
  }
  return std::strtod(format_number(value).c_str(), nullptr);
}

std::string brief_text(const std::vector<std::string>& lines, const json& header) {
  std::string text;
  for (const auto& line : lines) {
    text += line + "\n";
  }
  text += "measured: " + header.value("measured", std::string()) +
          (header.value("cached", false) ? " (from the store)" : "") + "\n";
  text += "details: " + header.value("details", std::string());
  return text;
}

}  // namespace autocomp::tools
