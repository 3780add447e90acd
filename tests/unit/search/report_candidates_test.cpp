// What a person reads in the report besides the lineage: every candidate with its plan and
// outcome (losers included), the winner as a diff against the input, and engine and DMA busy time
// of input and winner side by side.
#include <gtest/gtest.h>

#include <regex>

#include "search/report/report.hpp"

namespace autocomp::search::report {
namespace {

engine::Candidate made(const std::string& key, double us, const std::string& plan,
                       const std::string& parent, engine::Origin origin) {
  engine::Candidate candidate;
  candidate.key = key;
  candidate.source = "def k(x):\n    a = 1\n    b = 2\n    return x  # " + key + "\n";
  candidate.plan = plan;
  candidate.parent_key = parent;
  candidate.origin = origin;
  candidate.eval.device = "sim";
  candidate.eval.verified = true;
  candidate.eval.correct = true;
  candidate.eval.latency = backends::LatencyStats{us, us, us, {us}};
  candidate.eval.metrics["total_time"] = us * 1e-6;
  return candidate;
}

struct Fixture {
  engine::SearchOutcome outcome;
  ReportInput input;
  Fixture() {
    outcome.run_id = "r1";
    outcome.status = "completed";
    outcome.baseline = made("root", 100, "", "", {});
    outcome.baseline.eval.metrics["vector_engine_active_time"] = 80e-6;
    outcome.baseline.eval.metrics["dma_active_time"] = 40e-6;
    auto winner = made("win", 50, "Fuse the | passes.", "root", {1, 0, 0, 0, 0, "llm"});
    winner.source = "def k(x):\n    a = 1\n    c = 3\n    return x  # win\n";
    winner.verdict = "accepted";
    winner.eval.metrics["vector_engine_active_time"] = 20e-6;
    winner.eval.metrics["dma_active_time"] = 40e-6;
    auto loser = made("lose", 104, "Normalize twice.", "root", {1, 0, 1, 0, 0, "llm"});
    loser.verdict = "rejected";
    auto broken = made("broken", 0, "Use a tile loader.", "root", {1, 0, 2, 0, 0, "llm"});
    broken.eval.correct = false;
    broken.eval.failure =
        core::Failure{core::FailureKind::compile_error, "verify", "no such function", 3};
    outcome.best = winner;
    outcome.best.eval.metrics.clear();  // a re-verification carries no profile
    outcome.lineage = {outcome.baseline, winner};
    input.outcome = &outcome;
    input.candidates = {outcome.baseline, winner, loser, broken};
  }
};

TEST(ReportCandidates, EveryCandidateAppearsWithItsPlanOutcomeAndLatency) {
  Fixture f;
  const auto rows = candidate_rows(f.input);
  ASSERT_EQ(rows.size(), 3u) << "the input kernel is not a candidate row";
  EXPECT_EQ(rows[0].outcome, "winner, faster (latency -50.00%)");
  EXPECT_EQ(rows[1].outcome, "rejected, slower (latency +4.00%)");
  EXPECT_EQ(rows[1].plan, "Normalize twice.");
  EXPECT_DOUBLE_EQ(rows[1].latency_us, 104);
  EXPECT_NE(rows[2].outcome.find("failed: compile_error"), std::string::npos) << rows[2].outcome;
  const auto markdown = render_markdown(f.input);
  EXPECT_NE(markdown.find("| i1/m0/p1/k0/r0/llm | Normalize twice. | rejected, slower (latency "
                          "+4.00%) | 104.000 |"),
            std::string::npos)
      << markdown;
  EXPECT_NE(markdown.find("| Fuse the \\| passes. |"), std::string::npos) << "pipes escaped";
}

TEST(ReportCandidates, TheWinnerIsADiffAgainstTheInput) {
  Fixture f;
  const auto diff =
      unified_diff(f.outcome.baseline.source, f.outcome.best.source, "input kernel", "winner");
  EXPECT_EQ(diff,
            "--- input kernel\n+++ winner\n@@ -1,4 +1,4 @@\n def k(x):\n     a = 1\n-    b = 2\n"
            "-    return x  # root\n+    c = 3\n+    return x  # win\n");
  EXPECT_EQ(unified_diff("same\n", "same\n", "a", "b"), "");
  const auto markdown = render_markdown(f.input);
  EXPECT_NE(markdown.find("```diff\n" + diff + "```"), std::string::npos);
  const auto html = render_html(f.input);
  EXPECT_NE(html.find("<span class=\"del\">-    b = 2</span>"), std::string::npos);
  EXPECT_NE(html.find("<span class=\"add\">+    c = 3</span>"), std::string::npos);
}

TEST(ReportCandidates, EngineAndDmaTimeOfInputAndWinnerSideBySide) {
  Fixture f;
  const auto bars = busy_bars(f.input);
  ASSERT_EQ(bars.size(), 2u);
  EXPECT_EQ(bars[0].engine, "VectorE");
  EXPECT_DOUBLE_EQ(bars[0].input_us, 80);
  EXPECT_DOUBLE_EQ(bars[0].winner_us, 20) << "read from the winner's stored, profiled evaluation";
  EXPECT_EQ(bars[1].engine, "DMA");
  const auto svg = render_busy_svg(bars);
  const std::regex bar(
      R"re(data-engine="(\w+)" data-kernel="(\w+)" data-us="([0-9.]+)" x="90" y="[0-9.]+" )re"
      R"re(width="([0-9.]+)")re");
  std::vector<std::tuple<std::string, std::string, double, double>> drawn;
  for (auto it = std::sregex_iterator(svg.begin(), svg.end(), bar); it != std::sregex_iterator();
       ++it) {
    drawn.emplace_back((*it)[1], (*it)[2], std::stod((*it)[3]), std::stod((*it)[4]));
  }
  ASSERT_EQ(drawn.size(), 4u) << svg;
  EXPECT_EQ(drawn[0], std::make_tuple(std::string("VectorE"), std::string("input"), 80.0, 460.0));
  EXPECT_EQ(drawn[1], std::make_tuple(std::string("VectorE"), std::string("winner"), 20.0, 115.0));
  EXPECT_EQ(drawn[2], std::make_tuple(std::string("DMA"), std::string("input"), 40.0, 230.0));
  EXPECT_EQ(render_html(f.input).find("<script"), std::string::npos) << "no scripts";
}

TEST(ReportCandidates, AConfirmedSearchShowsDeviceFiguresEstimatesAndItsAgreement) {
  Fixture f;
  f.outcome.confirmation = "device confirmation: 2 pairs, device/sim ratio 0.94-0.95";
  f.input.candidates[1].device_us = 47.5;
  f.input.candidates[1].device_measured = true;
  f.input.candidates[2].device_us = 98.0;  // estimated from the ratio
  const auto rows = candidate_rows(f.input);
  ASSERT_EQ(rows.size(), 3u);
  EXPECT_EQ(latency_cell(rows[0]), "47.500 (device; simulator 50.000)");
  EXPECT_EQ(latency_cell(rows[1]), "~98.000 (estimate; simulator 104.000)");
  EXPECT_EQ(latency_cell(rows[2]), "-");
  const auto html = render_html(f.input);
  EXPECT_NE(html.find("device confirmation: 2 pairs"), std::string::npos);
  EXPECT_NE(html.find("47.500 (device; simulator 50.000)"), std::string::npos);
  const auto md = render_markdown(f.input);
  EXPECT_NE(md.find("| device confirmation | device confirmation: 2 pairs"), std::string::npos);
  EXPECT_NE(md.find("~98.000 (estimate; simulator 104.000)"), std::string::npos);
}

}  // namespace
}  // namespace autocomp::search::report
