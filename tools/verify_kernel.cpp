#include <algorithm>
#include <filesystem>

#include "tools/evaluation_json.hpp"
#include "tools/evaluation_service.hpp"
#include "tools/evaluation_tools.hpp"
#include "tools/tool_surface.hpp"

namespace autocomp::tools {

using nlohmann::json;

namespace {

constexpr std::size_t k_failing_seeds_shown = 3;

// What to do after a failed verification: the kind says whose file (or which host) to fix.
std::string next_step(const std::optional<core::Failure>& failure) {
  using core::FailureKind;
  const FailureKind kind = failure ? failure->kind : FailureKind::mismatch;
  switch (kind) {
    case FailureKind::problem_error:
      return "next: fix the problem file (inputs, reference, its constants) and verify again; the "
             "kernel was not judged";
    case FailureKind::unavailable:
    case FailureKind::transport_error:
    case FailureKind::harness_error:
    case FailureKind::io_error:
      return "next: the backend could not judge the kernel; fix what the message names (host, "
             "Python, files) and verify again";
    case FailureKind::timeout:
      return "next: the kernel ran out of time; shrink the work per instruction or the problem, "
             "then verify again";
    default:
      return "next: fix the kernel and verify again; benchmark needs a correct kernel";
  }
}

}  // namespace

server::ToolDef make_verify_kernel_tool(std::shared_ptr<ToolEnv> env) {
  server::ToolDef tool;
  tool.name = "verify_kernel";
  tool.title = "Verify a kernel";
  tool.description =
      "Compile an NKI kernel and check it against the problem's reference on several seeds; on "
      "failure: kind, message, line, failing seeds.";
  tool.input_schema = with_detail_argument(eval_args_schema({"warmup", "iters"}));
  tool.output_schema = brief_output_schema(
      {{"correct", {{"type", "boolean"}}}, {"summary", {{"type", "string"}}}}, {"correct"});
  tool.annotations = hints(true, false, true, false);
  tool.handler = [env](const json& arguments, server::ToolContext& context) {
    auto outcome = evaluate_kernel_file(*env, parse_eval_args(arguments), context);
    if (!outcome.ok()) {
      return server::tool_failure(outcome.failure());
    }
    const auto& result = outcome->result;
    json out = brief_header_json(outcome.value());
    const bool correct = result.correct && !result.failure;
    out["correct"] = correct;
    std::size_t passed = 0;
    double worst_abs = 0;
    double worst_rel = 0;
    json failing = json::array();
    for (const auto& seed : result.seeds) {
      passed += seed.ok ? 1 : 0;
      worst_abs = std::max(worst_abs, seed.max_abs_err);
      worst_rel = std::max(worst_rel, seed.rel_l2_err);
      if (!seed.ok && failing.size() < k_failing_seeds_shown) {
        json item = {{"seed", seed.seed},
                     {"max_abs_err", round_sig(seed.max_abs_err)},
                     {"rel_l2_err", round_sig(seed.rel_l2_err)}};
        if (!seed.message.empty()) {
          item["message"] = seed.message.substr(0, 200);
        }
        failing.push_back(std::move(item));
      }
    }
    out["seeds_passed"] = std::to_string(passed) + "/" + std::to_string(result.seeds.size());
    if (!result.seeds.empty()) {
      out["worst"] = {{"max_abs_err", round_sig(worst_abs)}, {"rel_l2_err", round_sig(worst_rel)}};
    }
    if (!failing.empty()) {
      out["failing_seeds"] = failing;
    }
    if (result.failure) {
      out["failure"] = failure_json(*result.failure);
      // Right on every drawn seed, wrong on a problem's stress input: say which input, beside
      // the seed count that alone would read as a pass.
      const std::string& message = result.failure->message;
      if (const std::string prefix = "stress input '"; message.rfind(prefix, 0) == 0) {
        if (const auto end = message.find('\'', prefix.size()); end != std::string::npos) {
          out["stress_failed"] = message.substr(prefix.size(), end - prefix.size());
        }
      }
    }
    out["summary"] = verdict_text(result);

    const std::string name = std::filesystem::path(outcome->kernel.path).filename().string();
    std::vector<std::string> lines;
    std::string first = "verify " + name + ": " + out["summary"].get<std::string>();
    if (out.contains("worst")) {
      first += " (worst max abs err " + format_number(worst_abs) + ", rel L2 " +
               format_number(worst_rel) + ")";
    }
    lines.push_back(first);
    for (const auto& seed : failing) {
      std::string line = "seed " + std::to_string(seed.at("seed").get<int>()) + ": max abs err " +
                         format_number(seed.at("max_abs_err").get<double>());
      if (seed.contains("message")) {
        line += ", " + seed.at("message").get<std::string>();
      }
      lines.push_back(line);
    }
    if (!correct) {
      lines.push_back(next_step(result.failure));
    }
    server::ToolResult tool_result;
    tool_result.text = brief_text(lines, out);
    if (parse_detail(arguments) == Detail::full) {
      out["full"] = full_result_json(result);
    }
    tool_result.extra_content.push_back(evaluation_link(outcome->evaluation_id));
    tool_result.structured = std::move(out);
    return tool_result;
  };
  return tool;
}

}  // namespace autocomp::tools
