#pragma once

#include <nlohmann/json.hpp>

#include "backends/backend.hpp"
#include "core/failure.hpp"

namespace autocomp::tools {

// JSON shapes shared by the evaluation tools' structured results (documented in docs/tools.md).
nlohmann::json failure_json(const core::Failure& failure);
nlohmann::json seeds_json(const std::vector<backends::SeedCheck>& seeds);
// {min, median, max} and, when `with_samples`, the raw samples.
nlohmann::json latency_json(const backends::LatencyStats& latency, bool with_samples);
// Where a result came from: backend, host, device, target, harness_version, cached, steps.
nlohmann::json provenance_json(const backends::EvalResult& result, bool cached);
// The full result, as served by the autocomp://evaluations/{id} resource.
nlohmann::json full_result_json(const backends::EvalResult& result);

// One line for people: "correct on 5/5 seeds" or the failure, used in summaries.
std::string verdict_text(const backends::EvalResult& result);

}  // namespace autocomp::tools
