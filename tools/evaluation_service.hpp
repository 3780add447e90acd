#pragma once

#include <cstdint>
#include <nlohmann/json.hpp>
#include <optional>
#include <string>
#include <vector>

#include "backends/backend.hpp"
#include "core/result.hpp"
#include "search/store/store.hpp"
#include "server/tool.hpp"
#include "tools/kernel_files.hpp"
#include "tools/tool_env.hpp"

namespace autocomp::tools {

// The arguments verify_kernel, benchmark_kernel and profile_kernel share.
struct EvalArgs {
  std::string kernel;
  std::string problem;
  std::string backend;  // "" = server default
  std::string target;   // "" = problem TARGET / --target / trn2
  std::string kernel_name;
  std::vector<int> seeds;
  int warmup = 2;
  int iters = 10;
  bool fresh = false;
  double timeout_s = 600;
};

// Reads EvalArgs from arguments already validated against eval_args_schema().
EvalArgs parse_eval_args(const nlohmann::json& arguments);
// The JSON-Schema properties of EvalArgs (kernel and problem required), without `leave_out`
// (arguments that do not matter to a tool; leaving them out keeps tools/list short).
nlohmann::json eval_args_schema(const std::vector<std::string>& leave_out = {});

// One evaluation of a kernel file, answered from the store when an equal evaluation is recorded
// (unless `fresh`), else run on the backend and recorded.
struct EvaluationOutcome {
  SourceFile kernel;
  SourceFile problem;
  std::string candidate_key;
  std::string problem_key;
  std::string target;
  backends::EvalResult result;
  bool cached = false;
  std::int64_t evaluation_id = 0;
  // Best correct version recorded for this kernel path (this problem and target), if any, after
  // this evaluation was recorded.
  std::optional<search::store::BestVersion> best_for_file;
};

// Runs the harness's `evaluate` (verify, then benchmark and profile) so that one evaluation answers
// all three tools. Failures are for problems with the call itself (bad paths, unknown backend,
// store trouble, cancellation); a kernel that fails to compile or is wrong is a successful outcome
// whose result carries the failure.
core::Result<EvaluationOutcome> evaluate_kernel_file(ToolEnv& env, const EvalArgs& args,
                                                     server::ToolContext& context);

// The fields every evaluation tool's structured result starts with.
nlohmann::json outcome_header_json(const EvaluationOutcome& outcome);

// An output schema: the header fields of outcome_header_json plus the tool's own `properties`;
// `required` lists the tool's own required fields (the header's are added).
nlohmann::json evaluation_output_schema(nlohmann::json properties,
                                        const std::vector<std::string>& required);

// The isError result for a tool that needs a section (latency, profile) the evaluation could not
// produce: the evaluation's failure, or a harness_error naming what is missing.
server::ToolResult unusable_evaluation(const EvaluationOutcome& outcome, const std::string& stage,
                                       const std::string& missing, const std::string& hint = "");

}  // namespace autocomp::tools
