#include "search/report/report.hpp"

#include <gtest/gtest.h>

#include <filesystem>
#include <fstream>
#include <sstream>

namespace autocomp::search::report {
namespace {

engine::Candidate step(const std::string& key, double us, const std::string& plan, int iteration,
                       const std::string& parent) {
  engine::Candidate candidate;
  candidate.key = key;
  candidate.source = "def k(x):\n    return x  # " + key + "\n";
  candidate.plan = plan;
  candidate.parent_key = parent;
  candidate.origin.iteration = iteration;
  candidate.origin.proposer = iteration == 0 ? "input" : "llm";
  candidate.eval.verified = true;
  candidate.eval.correct = true;
  candidate.eval.latency = backends::LatencyStats{us, us, us, {us}};
  return candidate;
}

engine::SearchOutcome outcome() {
  engine::SearchOutcome outcome;
  outcome.run_id = "abc123";
  outcome.status = "completed";
  outcome.baseline = step("root", 100, "", 0, "");
  auto middle = step("mid", 80, "Hoist the <weight> load & broadcast.", 1, "root");
  outcome.best = step("best", 50, "Fuse the two multiplies.", 2, "mid");
  outcome.lineage = {outcome.baseline, middle, outcome.best};
  outcome.history = {{1, 80, 4, 1}, {2, 50, 4, 1}};
  outcome.iterations_done = 2;
  outcome.config.iterations = 2;
  return outcome;
}

TEST(Report, ChartHasOnePointPerIterationIncludingTheInput) {
  auto o = outcome();
  auto points = latency_points(o);
  ASSERT_EQ(points.size(), 3u);
  EXPECT_EQ(points[0], std::make_pair(0, 100.0));
  std::string svg = render_latency_svg(points);
  EXPECT_EQ(svg.rfind("<svg", 0), 0u);
  std::size_t circles = 0;
  for (auto pos = svg.find("<circle"); pos != std::string::npos;
       pos = svg.find("<circle", pos + 1)) {
    ++circles;
  }
  EXPECT_EQ(circles, 3u);
}

TEST(Report, HtmlAndMarkdownShowTheLineageWithPlansInWords) {
  auto o = outcome();
  ReportInput input{&o,    "/k/naive.py", "/k/problem.py",           "/k/naive.best.py",
                    "sim", {"openai:m"},  {"Tiles <128> rows win."}, {}};
  std::string html = render_html(input);
  EXPECT_NE(html.find("<svg"), std::string::npos);
  EXPECT_NE(html.find("Hoist the &lt;weight&gt; load &amp; broadcast."), std::string::npos)
      << "plans are escaped";
  EXPECT_NE(html.find("Fuse the two multiplies."), std::string::npos);
  EXPECT_NE(html.find("2.000x"), std::string::npos);
  std::string md = render_markdown(input);
  EXPECT_NE(md.find("> Hoist the <weight> load & broadcast."), std::string::npos);
  EXPECT_NE(md.find("| 2 | 50.000 |"), std::string::npos);
  EXPECT_NE(md.find("return x  # best"), std::string::npos) << "the best kernel is included";
  EXPECT_NE(md.find("## Lessons learned\n\n- Tiles <128> rows win."), std::string::npos) << md;
  EXPECT_NE(html.find("<li>Tiles &lt;128&gt; rows win.</li>"), std::string::npos);
}

TEST(Report, WritesBothFilesIntoANewFolder) {
  auto o = outcome();
  ReportInput input{&o, "k.py", "p.py", "", "sim", {}, {}, {}};
  auto dir = std::filesystem::temp_directory_path() / "report_test_folder" / "nested";
  std::filesystem::remove_all(dir.parent_path());
  auto written = write_report(input, dir.string());
  ASSERT_TRUE(written.ok()) << written.failure().describe();
  EXPECT_EQ(written->size(), 2u);
  EXPECT_TRUE(std::filesystem::exists(dir / "report.html"));
  EXPECT_TRUE(std::filesystem::exists(dir / "report.md"));
  EXPECT_FALSE(std::filesystem::exists(dir / "report.md.tmp"));
  std::filesystem::remove_all(dir.parent_path());
}

}  // namespace
}  // namespace autocomp::search::report
