#include "tools/evaluation_json.hpp"
#include "tools/evaluation_service.hpp"
#include "tools/evaluation_tools.hpp"

namespace autocomp::tools {

using nlohmann::json;

server::ToolDef make_verify_kernel_tool(std::shared_ptr<ToolEnv> env) {
  server::ToolDef tool;
  tool.name = "verify_kernel";
  tool.title = "Verify an NKI kernel";
  tool.description =
      "Compile an NKI kernel and check it against the problem's reference on several seeds "
      "(shapes, dtypes, finite values, tolerance). Returns `correct`, per-seed max abs and "
      "relative L2 errors, and on failure the kind (compile_error, runtime_error, mismatch, "
      "timeout, ...), message and kernel line. Runs on the built-in simulator unless a "
      "Trainium backend is configured; equal evaluations are answered from the store.";
  tool.input_schema = eval_args_schema();
  tool.output_schema = evaluation_output_schema({{"correct", {{"type", "boolean"}}},
                                                 {"seeds", {{"type", "array"}}},
                                                 {"failure", {{"type", "object"}}},
                                                 {"summary", {{"type", "string"}}}},
                                                {"correct", "seeds"});
  tool.annotations = {{"readOnlyHint", true}, {"idempotentHint", true}, {"openWorldHint", false}};
  tool.handler = [env](const json& arguments, server::ToolContext& context) {
    auto outcome = evaluate_kernel_file(*env, parse_eval_args(arguments), context);
    if (!outcome.ok()) {
      return server::tool_failure(outcome.failure());
    }
    const auto& result = outcome->result;
    json out = outcome_header_json(outcome.value());
    out["correct"] = result.correct && !result.failure;
    out["seeds"] = seeds_json(result.seeds);
    if (result.failure) {
      out["failure"] = failure_json(*result.failure);
    }
    out["summary"] = verdict_text(result);
    server::ToolResult tool_result;
    tool_result.structured = std::move(out);
    return tool_result;
  };
  return tool;
}

}  // namespace autocomp::tools
