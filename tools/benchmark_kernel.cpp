#include <cstdio>

#include "tools/evaluation_json.hpp"
#include "tools/evaluation_service.hpp"
#include "tools/evaluation_tools.hpp"
#include "tools/memory_tools.hpp"

namespace autocomp::tools {

using nlohmann::json;

namespace {

std::string format_us(double us) {
  char buffer[32];
  std::snprintf(buffer, sizeof buffer, "%.2f us", us);
  return buffer;
}

}  // namespace

server::ToolDef make_benchmark_kernel_tool(std::shared_ptr<ToolEnv> env) {
  server::ToolDef tool;
  tool.name = "benchmark_kernel";
  tool.title = "Benchmark an NKI kernel";
  tool.description =
      "Measure an NKI kernel's latency (after checking it is correct): `latency_us` with min, "
      "median, max and raw samples, the best correct version recorded for the same file, and "
      "`diverged` when this version is more than 1.5x slower than that best (then call "
      "revert_to_best), and `previous_version`: how this version compares with the file's "
      "version before it (then record what the change taught with record_reflexion). An "
      "incorrect kernel is an error: fix it with verify_kernel first.";
  tool.input_schema = eval_args_schema();
  tool.output_schema = evaluation_output_schema(
      {{"latency_us",
        {{"type", "object"},
         {"properties",
          {{"min", {{"type", "number"}}},
           {"median", {{"type", "number"}}},
           {"max", {{"type", "number"}}},
           {"samples", {{"type", "array"}, {"items", {{"type", "number"}}}}}}},
         {"required", {"min", "median", "max", "samples"}}}},
       {"best_known", {{"type", "object"}}},
       {"diverged", {{"type", "boolean"}}},
       {"previous_version",
        {{"type", "object"},
         {"properties",
          {{"candidate", {{"type", "string"}}},
           {"change", {{"type", "string"}}},
           {"median_us", {{"type", "number"}}},
           {"speedup", {{"type", "number"}}}}},
         {"required", {"candidate", "change"}}}},
       {"advice", {{"type", "string"}}}},
      {"latency_us", "diverged"});
  tool.annotations = {{"readOnlyHint", true}, {"idempotentHint", true}, {"openWorldHint", false}};
  tool.handler = [env](const json& arguments, server::ToolContext& context) {
    auto outcome = evaluate_kernel_file(*env, parse_eval_args(arguments), context);
    if (!outcome.ok()) {
      return server::tool_failure(outcome.failure());
    }
    const auto& result = outcome->result;
    if (result.failure || !result.latency) {
      return unusable_evaluation(outcome.value(), "benchmark", "latency",
                                 "call verify_kernel for per-seed errors");
    }
    json out = outcome_header_json(outcome.value());
    out["latency_us"] = latency_json(*result.latency, true);
    bool diverged = false;
    if (const auto& best = outcome->best_for_file) {
      const double ratio = best->median_us > 0 ? result.latency->median_us / best->median_us : 1.0;
      out["best_known"] = {{"candidate", best->candidate_key},
                           {"median_us", best->median_us},
                           {"evaluation_id", best->evaluation_id},
                           {"this_vs_best", ratio}};
      diverged = best->candidate_key != outcome->candidate_key && ratio > k_divergence_ratio;
      if (diverged) {
        out["advice"] = "This version (" + format_us(result.latency->median_us) +
                        ") is more than 1.5x slower than the best recorded version of this file (" +
                        format_us(best->median_us) +
                        "). Call revert_to_best to restore it, then change one thing at a time.";
      }
    }
    out["diverged"] = diverged;
    if (auto db = env->store(); db.ok()) {
      if (auto attempt = last_attempt(*db.value(), outcome->kernel.path, outcome->candidate_key)) {
        attempt->current_us = result.latency->median_us;  // this measurement, whatever is stored
        json previous = {{"candidate", attempt->previous_key}, {"change", attempt->describe()}};
        if (attempt->previous_us && result.latency->median_us > 0) {
          previous["median_us"] = *attempt->previous_us;
          previous["speedup"] = *attempt->previous_us / result.latency->median_us;
        }
        out["previous_version"] = std::move(previous);
      }
    }
    server::ToolResult tool_result;
    tool_result.structured = std::move(out);
    return tool_result;
  };
  return tool;
}

}  // namespace autocomp::tools
