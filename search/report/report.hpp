#pragma once

#include <string>
#include <utility>
#include <vector>

#include "core/result.hpp"
#include "search/engine/beam_search.hpp"

namespace autocomp::search::report {

// What a run report shows besides the outcome itself.
struct ReportInput {
  const engine::SearchOutcome* outcome = nullptr;
  std::string kernel_path;
  std::string problem_path;
  std::string best_path;  // where the best kernel was written ("" when it was not)
  std::string backend;
  std::vector<std::string> llm_specs;
  std::vector<std::string> lessons;  // optimization memory written by this run
};

// Best latency per iteration: iteration 0 is the input kernel.
std::vector<std::pair<int, double>> latency_points(const engine::SearchOutcome& outcome);

// An inline SVG line chart of best latency (us) per iteration; self-contained, no scripts.
std::string render_latency_svg(const std::vector<std::pair<int, double>>& points);
std::string render_html(const ReportInput& input);
std::string render_markdown(const ReportInput& input);

// Writes report.html and report.md into `dir` (created when missing), each through a temporary
// file renamed into place. Returns the paths written; io_error naming the path on failure.
core::Result<std::vector<std::string>> write_report(const ReportInput& input,
                                                    const std::string& dir);

}  // namespace autocomp::search::report
