// The real binary in --autonomous mode on the rmsnorm seed in the simulator, with a scripted
// OpenAI-compatible server: what the planning prompts show (the parent's hot lines, waits, busy
// time and floor; the last iteration's results with their profile differences; the plans already
// chosen for the parent), exact changes on the deterministic simulator, and the report (every
// candidate, the winner as a diff, the engine and DMA chart), rendered in headless chromium.

#include <gtest/gtest.h>
#include <sys/wait.h>
#include <unistd.h>

#include <cstdlib>
#include <filesystem>
#include <fstream>
#include <map>
#include <regex>
#include <sstream>
#include <string>
#include <vector>

#include "support/scripted_llm_server.hpp"

namespace {

namespace fs = std::filesystem;
using autocomp::testing::ScriptedLlmServer;
using autocomp::testing::ScriptedResponse;

std::string read(const fs::path& path) {
  std::ifstream in(path, std::ios::binary);
  std::ostringstream text;
  text << in.rdbuf();
  return text.str();
}

void write(const fs::path& path, const std::string& text) {
  std::ofstream out(path, std::ios::binary);
  out << text;
}

std::string replace(std::string text, const std::string& from, const std::string& to) {
  auto pos = text.find(from);
  EXPECT_NE(pos, std::string::npos) << from;
  if (pos != std::string::npos) {
    text.replace(pos, from.size(), to);
  }
  return text;
}

ScriptedResponse matching(const std::string& match, const std::string& text, bool repeat) {
  auto response = ScriptedResponse::reply(text);
  response.match = match;
  response.repeat = repeat;
  return response;
}

std::string fenced(const std::string& code) {
  return "Here it is.\n```python\n" + code + "```\n";
}

// Runs argv with stdout and stderr in files; returns the exit code.
int run(const std::vector<std::string>& argv, const fs::path& out, const fs::path& err) {
  pid_t pid = ::fork();
  if (pid == 0) {
    FILE* o = std::freopen(out.c_str(), "w", stdout);
    FILE* e = std::freopen(err.c_str(), "w", stderr);
    (void)o;
    (void)e;
    std::vector<char*> raw;
    for (const auto& arg : argv) {
      raw.push_back(const_cast<char*>(arg.c_str()));
    }
    raw.push_back(nullptr);
    ::execvp(raw[0], raw.data());
    std::_Exit(127);
  }
  int status = 0;
  ::waitpid(pid, &status, 0);
  return WIFEXITED(status) ? WEXITSTATUS(status) : -1;
}

constexpr const char* k_plan_phrase = "Study the kernel and its measurements";

// One search of two iterations, shared by the tests below (it takes seconds).
class SearchReport : public ::testing::Test {
 protected:
  static void SetUpTestSuite() {
    dir = new fs::path(fs::temp_directory_path() /
                       ("search_report_test_" + std::to_string(::getpid())));
    fs::remove_all(*dir);
    fs::create_directories(*dir);
    const fs::path seed = fs::path(AUTOCOMP_SOURCE_DIR) / "seeds" / "rmsnorm";
    const std::string naive = read(seed / "naive.py");
    const std::string optimized = read(seed / "optimized.py");
    const std::string slower =
        replace(naive, "        out_tile = nl.multiply(normalized, g_bcast)\n",
                "        normalized = nl.multiply(normalized, 1.0)\n"
                "        out_tile = nl.multiply(normalized, g_bcast)\n");
    write(*dir / "kernel.py", naive);
    fs::copy_file(seed / "problem.py", *dir / "problem.py");
    server = new ScriptedLlmServer();
    ::setenv("AUTOCOMP_SMALL", "1", 1);
    ::setenv("AUTOCOMP_PYTHON", AUTOCOMP_PYTHON, 1);
    ::setenv("OPENAI_BASE_URL", server->openai_base_url().c_str(), 1);
    ::setenv("OPENAI_API_KEY", "test-key", 1);
    server->push(
        matching("Distil at most", "- Fusing the row math into one pass paid off.\n", true));
    server->push(
        matching("This is iteration 1 of 2", "ZQ-FASTER: hoist and fuse the math.", false));
    server->push(matching("This is iteration 1 of 2", "ZQ-SLOWER: normalize once more.", false));
    server->push(matching("This is iteration 2 of 2", "ZQ-AGAIN: keep it as it is.", true));
    server->push(matching("ZQ-FASTER", fenced(optimized), true));
    server->push(matching("ZQ-SLOWER", fenced(slower), true));
    server->push(matching("ZQ-AGAIN", fenced(optimized), true));
    code = run({AUTOCOMP_BINARY, "--autonomous",
                "--kernel",      (*dir / "kernel.py").string(),
                "--problem",     (*dir / "problem.py").string(),
                "--db",          (*dir / "store.db").string(),
                "--backend",     "sim",
                "--seed",        "1",
                "--llm",         "openai:scripted",
                "--beam",        "1",
                "--plans",       "2",
                "--impls",       "1",
                "--iterations",  "2",
                "--reflexions",  "0"},
               *dir / "run.out", *dir / "run.err");
    for (const auto& request : server->requests()) {
      if (request.prompt.find(k_plan_phrase) != std::string::npos) {
        plans->push_back(request.prompt);
      } else if (request.prompt.find("Distil at most") != std::string::npos) {
        summaries->push_back(request.prompt);
      }
    }
  }
  static void TearDownTestSuite() {
    server->stop();
    delete server;
    fs::remove_all(*dir);
    delete dir;
  }

  static std::string log() { return read(*dir / "run.out") + read(*dir / "run.err"); }

  static inline fs::path* dir = nullptr;
  static inline ScriptedLlmServer* server = nullptr;
  static inline int code = -1;
  static inline std::vector<std::string>* plans = new std::vector<std::string>();
  static inline std::vector<std::string>* summaries = new std::vector<std::string>();
};

TEST_F(SearchReport, PlanningPromptsShowTheProfileTheLastResultsAndTheSiblingsPlans) {
  ASSERT_EQ(code, 0) << log();
  ASSERT_EQ(plans->size(), 4u) << "2 plans in each of 2 iterations";
  const std::string& first = (*plans)[0];
  EXPECT_NE(first.find("Hot lines (where the time goes, busiest first):"), std::string::npos)
      << first;
  EXPECT_TRUE(std::regex_search(first, std::regex(R"(- line \d+ `[^`]+`: \w+ [0-9.]+% of the )"
                                                  R"(time, [0-9.e+]+ us over \d+ instructions)")))
      << first;
  EXPECT_NE(first.find("Busy time per engine, us:"), std::string::npos);
  EXPECT_NE(first.find("Modelled floor:"), std::string::npos);
  EXPECT_EQ(first.find("Plans already chosen"), std::string::npos);
  const std::string& sibling = (*plans)[1];
  EXPECT_NE(sibling.find("Plans already chosen for this kernel in this iteration"),
            std::string::npos);
  EXPECT_NE(sibling.find("- ZQ-FASTER: hoist and fuse the math."), std::string::npos);
  const std::string& later = (*plans)[2];
  EXPECT_NE(later.find("What the last iteration's attempts did"), std::string::npos) << later;
  EXPECT_TRUE(std::regex_search(later, std::regex(R"(\[[0-9.]+x slower [^\]]*\] ZQ-SLOWER)")))
      << later;
  EXPECT_TRUE(std::regex_search(later, std::regex(R"(ZQ-SLOWER[^\n]*\| profile vs parent: )"
                                                  R"(latency [0-9.]+ -> [0-9.]+ us \(\+)")))
      << later;
  ASSERT_FALSE(summaries->empty());
  EXPECT_EQ(summaries->front().find("within noise"), std::string::npos)
      << "the simulator is deterministic: changes are exact";
  EXPECT_TRUE(std::regex_search(summaries->front(),
                                std::regex(R"(Outcome: slower \(latency \+[0-9]+\.[0-9]{2}%\))")))
      << summaries->front();
  EXPECT_NE(summaries->front().find("- a_tensor: float32 ["), std::string::npos)
      << "the lesson prompt states shapes and dtypes";
}

TEST_F(SearchReport, TheReportListsEveryCandidateDiffsTheWinnerAndChartsEngineTime) {
  ASSERT_EQ(code, 0) << log();
  const fs::path report = *dir / "kernel.autocomp-report";
  const std::string markdown = read(report / "report.md");
  EXPECT_NE(markdown.find("## Every candidate"), std::string::npos) << markdown;
  EXPECT_TRUE(std::regex_search(
      markdown, std::regex(R"(\| i1/m0/p1/k0/r0/llm \| ZQ-SLOWER: normalize once more. \| )"
                           R"((accepted|rejected), slower \(latency \+[0-9.]+%\) \| [0-9.]+ \|)")))
      << markdown;
  EXPECT_TRUE(std::regex_search(markdown, std::regex(R"(\| ZQ-FASTER[^|]*\| winner, faster)")))
      << markdown;
  EXPECT_NE(markdown.find("## The winner against the input\n\n```diff\n--- input kernel\n+++ "
                          "winner\n@@ -"),
            std::string::npos);
  EXPECT_NE(markdown.find("## Engine and DMA busy time, input and winner"), std::string::npos);
  EXPECT_NE(markdown.find("| DMA | "), std::string::npos);
  const std::string html = read(report / "report.html");
  EXPECT_NE(html.find("<table id=\"candidates\">"), std::string::npos);
  EXPECT_NE(html.find("<span class=\"add\">+"), std::string::npos);
  EXPECT_NE(html.find("id=\"busy-chart\""), std::string::npos);
}

// The HTML in a real browser: it renders, and each bar's rendered width is proportional to the
// busy time it states, the longest one spanning the chart.
TEST_F(SearchReport, TheReportRendersInHeadlessChromiumWithBarsMatchingTheData) {
  ASSERT_EQ(code, 0) << log();
  if (std::system("command -v chromium >/dev/null 2>&1") != 0) {
    GTEST_SKIP() << "chromium is not installed (scripts/install-deps.sh installs it): the "
                    "browser check of report.html is skipped";
  }
  const fs::path report = *dir / "kernel.autocomp-report";
  // A copy with a probe script appended (the report itself carries no scripts): it writes each
  // bar's laid-out width into the DOM, which --dump-dom then prints.
  std::string page = read(report / "report.html");
  page = replace(page, "</body>",
                 "<script>for (const r of document.querySelectorAll('rect.bar')) "
                 "r.setAttribute('data-rendered', r.getBoundingClientRect().width);"
                 "document.body.setAttribute('data-probe', 'done');</script></body>");
  write(*dir / "probe.html", page);
  const int status = run({"chromium", "--headless", "--no-sandbox", "--disable-gpu", "--dump-dom",
                          "file://" + (*dir / "probe.html").string()},
                         *dir / "dom.html", *dir / "chromium.err");
  ASSERT_EQ(status, 0) << read(*dir / "chromium.err");
  const std::string dom = read(*dir / "dom.html");
  ASSERT_NE(dom.find("data-probe=\"done\""), std::string::npos) << "the page did not load";
  EXPECT_NE(dom.find("<h2>Every candidate</h2>"), std::string::npos);
  const std::regex bar(R"re(<rect class="bar" data-engine="([^"]+)" data-kernel="(\w+)" )re"
                       R"re(data-us="([0-9.]+)"[^>]*data-rendered="([0-9.]+)")re");
  std::vector<std::pair<double, double>> bars;  // (us, rendered px)
  std::map<std::string, int> kernels;
  for (auto it = std::sregex_iterator(dom.begin(), dom.end(), bar); it != std::sregex_iterator();
       ++it) {
    bars.emplace_back(std::stod((*it)[3]), std::stod((*it)[4]));
    ++kernels[(*it)[2]];
  }
  ASSERT_GE(bars.size(), 4u) << dom.substr(0, 4000);
  EXPECT_EQ(kernels["input"], kernels["winner"]) << "input and winner side by side per engine";
  double max_us = 0;
  double max_px = 0;
  for (const auto& [us, px] : bars) {
    max_us = std::max(max_us, us);
    max_px = std::max(max_px, px);
  }
  EXPECT_NEAR(max_px, 460, 1) << "the longest bar spans the chart";
  for (const auto& [us, px] : bars) {
    EXPECT_NEAR(px, 460 * us / max_us, 1.0) << us << " us drawn " << px << " px wide";
  }
  // A screenshot for people to look at (kept beside the report while the test runs).
  run({"chromium", "--headless", "--no-sandbox", "--disable-gpu", "--window-size=1000,2400",
       "--screenshot=" + (*dir / "report.png").string(),
       "file://" + (report / "report.html").string()},
      *dir / "shot.out", *dir / "shot.err");
  if (const char* keep = std::getenv("AUTOCOMP_REPORT_SCREENSHOT"); keep != nullptr) {
    fs::copy_file(*dir / "report.png", keep, fs::copy_options::overwrite_existing);
  }
}

}  // namespace
