#include <cstdio>
#include <filesystem>
#include <optional>

#include "tools/evaluation_json.hpp"
#include "tools/evaluation_service.hpp"
#include "tools/evaluation_tools.hpp"
#include "tools/memory_tools.hpp"
#include "tools/tool_surface.hpp"

namespace autocomp::tools {

using nlohmann::json;

namespace {

std::string format_us(double us) {
  char buffer[32];
  std::snprintf(buffer, sizeof buffer, "%.2f us", us);
  return buffer;
}

// A measurement on a device (not the simulator) is recorded with the simulator's estimate of the
// same kernel beside it (the plain simulator, answered from the store when it can be), so that
// every device measurement can feed `autocomp-mcp calibrate --from-history`. Returns the
// simulator's median, or nothing when it could not be had (the device answer stands either way).
std::optional<double> record_device_pair(ToolEnv& env, const EvalArgs& args,
                                         const EvaluationOutcome& outcome,
                                         server::ToolContext& context) {
  const auto& result = outcome.result;
  if (outcome.cached || result.device == "sim" || !result.latency) {
    return std::nullopt;
  }
  EvalArgs simulated = args;
  simulated.backend = "sim";
  simulated.fresh = false;
  simulated.target = outcome.target;
  auto sim = evaluate_kernel_file(env, simulated, context);
  if (!sim.ok() || !sim->result.ok() || !sim->result.latency) {
    return std::nullopt;
  }
  auto db = env.store();
  if (!db.ok()) {
    return std::nullopt;
  }
  search::store::DevicePair pair;
  pair.kernel_digest = outcome.candidate_key;
  pair.kernel_source = outcome.kernel.text;
  pair.kernel_name = args.kernel_name;
  pair.problem_source = outcome.problem.text;
  pair.problem_key = outcome.problem_key;
  pair.target = outcome.target;
  pair.device_spec = result.backend_identity;
  pair.sim_spec = sim->result.backend_identity;
  pair.measured_us = result.latency->median_us;
  pair.simulated_us = sim->result.latency->median_us;
  if (!db.value()->calibrations().record_pair(pair).ok()) {
    return std::nullopt;
  }
  return pair.simulated_us;
}

}  // namespace

server::ToolDef make_benchmark_kernel_tool(std::shared_ptr<ToolEnv> env) {
  server::ToolDef tool;
  tool.name = "benchmark_kernel";
  tool.title = "Benchmark a kernel";
  tool.description =
      "Latency of a correct NKI kernel, the file's best version (diverged: 1.5x slower, "
      "revert_to_best) and the change since the last version.";
  tool.input_schema = with_detail_argument(eval_args_schema({"seeds"}));
  tool.output_schema = brief_output_schema(
      {{"latency_us", {{"type", "object"}}}, {"diverged", {{"type", "boolean"}}}}, {"latency_us"});
  tool.annotations = hints(true, false, true, false);
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
    const Detail detail = parse_detail(arguments);
    json out = brief_header_json(outcome.value());
    const auto& latency = *result.latency;
    out["latency_us"] = {{"min", round_sig(latency.min_us)},
                         {"median", round_sig(latency.median_us)},
                         {"max", round_sig(latency.max_us)}};
    const std::string name = std::filesystem::path(outcome->kernel.path).filename().string();
    std::vector<std::string> lines;
    lines.push_back("benchmark " + name + ": median " + format_us(latency.median_us) + " (min " +
                    format_number(latency.min_us) + ", max " + format_number(latency.max_us) +
                    ", " + std::to_string(latency.samples_us.size()) + " samples)");
    bool diverged = false;
    if (const auto& best = outcome->best_for_file) {
      const double ratio = best->median_us > 0 ? latency.median_us / best->median_us : 1.0;
      const bool is_best = best->candidate_key == outcome->candidate_key;
      out["best_known"] = {{"candidate", best->candidate_key},
                           {"median_us", round_sig(best->median_us)},
                           {"this_vs_best", round_sig(ratio)}};
      lines.push_back(is_best ? "this is the best version of this file so far"
                              : "best version of this file: " + format_us(best->median_us) +
                                    " (this one is " + format_number(ratio) + "x its time)");
      diverged = !is_best && ratio > k_divergence_ratio;
      if (diverged) {
        out["advice"] = "This version (" + format_us(latency.median_us) +
                        ") is more than 1.5x slower than the best recorded version of this file (" +
                        format_us(best->median_us) +
                        "). Call revert_to_best to restore it, then change one thing at a time.";
        lines.push_back("advice: " + out["advice"].get<std::string>());
      }
    }
    out["diverged"] = diverged;
    if (auto simulated = record_device_pair(*env, parse_eval_args(arguments), *outcome, context)) {
      out["simulator_us"] = round_sig(*simulated);
      lines.push_back("the simulator's estimate: " + format_us(*simulated) +
                      " (recorded for calibrate --from-history)");
    }
    if (auto db = env->store(); db.ok()) {
      if (auto attempt = last_attempt(db.value()->files(), db.value()->evaluations(),
                                      outcome->kernel.path, outcome->candidate_key)) {
        attempt->current_us = latency.median_us;  // this measurement, whatever is stored
        json previous = {{"candidate", attempt->previous_key}, {"change", attempt->describe()}};
        if (attempt->previous_us && latency.median_us > 0) {
          previous["median_us"] = round_sig(*attempt->previous_us);
          previous["speedup"] = round_sig(*attempt->previous_us / latency.median_us);
        }
        lines.push_back("vs the previous version: " + attempt->describe() +
                        " (record_reflexion records what it taught)");
        out["previous_version"] = std::move(previous);
      }
    }
    server::ToolResult tool_result;
    tool_result.text = brief_text(lines, out);
    if (detail == Detail::full) {
      out["latency_us"]["samples"] = latency.samples_us;
      out["full"] = full_result_json(result);
    }
    tool_result.extra_content.push_back(evaluation_link(outcome->evaluation_id));
    tool_result.structured = std::move(out);
    return tool_result;
  };
  tool.task_support = server::TaskSupport::optional;  // long runs may be protocol tasks
  return tool;
}

}  // namespace autocomp::tools
