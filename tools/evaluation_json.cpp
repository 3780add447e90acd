#include "tools/evaluation_json.hpp"

#include <algorithm>

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
  out["bottleneck"] = result.bottleneck;
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

}  // namespace autocomp::tools
