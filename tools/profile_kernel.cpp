#include "tools/evaluation_json.hpp"
#include "tools/evaluation_service.hpp"
#include "tools/evaluation_tools.hpp"

namespace autocomp::tools {

using nlohmann::json;

server::ToolDef make_profile_kernel_tool(std::shared_ptr<ToolEnv> env) {
  server::ToolDef tool;
  tool.name = "profile_kernel";
  tool.title = "Profile an NKI kernel";
  tool.description =
      "Where does an NKI kernel's time go: neuron-profile summary metrics (total_time, per-engine "
      "active time, DMA activity, HBM/SBUF/PSUM bytes, FLOPs, MFU), roofline figures (achieved "
      "vs peak compute and HBM bandwidth, arithmetic intensity) and a bottleneck class "
      "(compute-bound, memory-bound, underutilized). Use it before planning an optimization.";
  tool.input_schema = eval_args_schema();
  tool.output_schema = evaluation_output_schema({{"metrics", {{"type", "object"}}},
                                                 {"roofline", {{"type", "object"}}},
                                                 {"bottleneck", {{"type", "string"}}},
                                                 {"latency_us", {{"type", "object"}}}},
                                                {"metrics", "roofline", "bottleneck"});
  tool.annotations = {{"readOnlyHint", true}, {"idempotentHint", true}, {"openWorldHint", false}};
  tool.handler = [env](const json& arguments, server::ToolContext& context) {
    auto outcome = evaluate_kernel_file(*env, parse_eval_args(arguments), context);
    if (!outcome.ok()) {
      return server::tool_failure(outcome.failure());
    }
    const auto& result = outcome->result;
    if (result.failure || result.metrics.empty()) {
      return unusable_evaluation(outcome.value(), "profile", "profile");
    }
    json out = outcome_header_json(outcome.value());
    out["metrics"] = result.metrics;
    out["roofline"] = result.roofline;
    out["bottleneck"] = result.bottleneck;
    if (result.latency) {
      out["latency_us"] = latency_json(*result.latency, false);
    }
    server::ToolResult tool_result;
    tool_result.structured = std::move(out);
    return tool_result;
  };
  return tool;
}

}  // namespace autocomp::tools
