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
  // Every candidate of the run, losers included (engine::load_candidates); empty: the tables of
  // candidates and the profile chart are left out.
  std::vector<engine::Candidate> candidates;
};

// One candidate as the report's table shows it.
struct CandidateRow {
  std::string origin;     // "i2/m0/p1/k0/r0/llm"
  std::string plan;       // one line, bounded
  std::string outcome;    // "winner", "accepted, faster (latency -3.21%)", "rejected, slower ...",
                          // "failed: compile_error ...", "duplicate"
  double latency_us = 0;  // 0 when not measured; on the device's scale in a confirmed search
  // A confirmed search: "device" (measured there) or "estimate" (simulated x the run's median
  // device/sim ratio), with the simulated figure beside it; "" otherwise.
  std::string scale;
  double simulated_us = 0;
};
// "22.640 us" as a candidate table cell: "-" when not measured, "~" before an estimate.
std::string latency_cell(const CandidateRow& row);
std::vector<CandidateRow> candidate_rows(const ReportInput& input);

// Busy time (us) per engine and for DMA of the input kernel and of the winner, from their
// profiles: {engine label, input us, winner us}, engines that neither used left out.
struct BusyBar {
  std::string engine;
  double input_us = 0;
  double winner_us = 0;
};
std::vector<BusyBar> busy_bars(const ReportInput& input);
// An inline SVG bar chart of busy_bars (input and winner side by side per engine); each bar
// carries data-engine, data-kernel ("input" | "winner") and data-us. Self-contained, no scripts.
std::string render_busy_svg(const std::vector<BusyBar>& bars);

// A unified diff (3 lines of context) from `before` to `after`, "" when they are equal.
std::string unified_diff(const std::string& before, const std::string& after,
                         const std::string& before_name, const std::string& after_name);

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
