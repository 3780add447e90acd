#include "app/bench.hpp"

#include <gtest/gtest.h>

#include <filesystem>
#include <fstream>

namespace autocomp::app {
namespace {

namespace fs = std::filesystem;

class BenchSuite : public ::testing::Test {
 protected:
  void SetUp() override {
    m_dir = fs::temp_directory_path() /
            ("bench-suite-" + std::to_string(::testing::UnitTest::GetInstance()->random_seed()) +
             "-" + ::testing::UnitTest::GetInstance()->current_test_info()->name());
    fs::remove_all(m_dir);
    fs::create_directories(m_dir);
  }
  void TearDown() override { fs::remove_all(m_dir); }
  void write(const fs::path& relative, const std::string& text) {
    fs::create_directories((m_dir / relative).parent_path());
    std::ofstream(m_dir / relative) << text;
  }
  fs::path m_dir;
};

TEST_F(BenchSuite, ReadsAnNkiBenchSummaryAndItsFolder) {
  write("summary.json", R"({"silu": {"seed": "./seeds/silu.yaml", "cases": {"0": {"values": {},
      "impls": [{"task": "./reference/silu.py", "kernel": "./kernels/silu.py"}]}}},
      "adamw": {"cases": {"1": {"impls": [{"task": "reference/a.py", "kernel": "kernels/a.py"}]}}}})");
  for (const auto& suite : {(m_dir / "summary.json").string(), m_dir.string()}) {
    const SuiteParse parsed = read_suite(suite);
    ASSERT_TRUE(parsed.error.empty()) << parsed.error;
    ASSERT_EQ(parsed.pairs.size(), 2u);
    EXPECT_EQ(parsed.pairs[0].name, "adamw/1");
    EXPECT_EQ(parsed.pairs[1].name, "silu/0");
    EXPECT_EQ(parsed.pairs[1].kernel, (m_dir / "kernels" / "silu.py").string());
    EXPECT_EQ(parsed.pairs[1].problem, (m_dir / "reference" / "silu.py").string());
  }
}

TEST_F(BenchSuite, ReadsAManifestAndAFolderOfWorkloads) {
  write("m.json", R"({"pairs": [{"name": "x", "kernel": "k.py", "problem": "p.py"}]})");
  const SuiteParse manifest = read_suite((m_dir / "m.json").string());
  ASSERT_TRUE(manifest.error.empty()) << manifest.error;
  ASSERT_EQ(manifest.pairs.size(), 1u);
  EXPECT_EQ(manifest.pairs[0].kernel, (m_dir / "k.py").string());

  write("w/gemm/problem.py", "");
  write("w/gemm/naive.py", "");
  write("w/gemm/optimized.py", "");
  write("w/README.md", "");
  const SuiteParse folder = read_suite((m_dir / "w").string());
  ASSERT_TRUE(folder.error.empty()) << folder.error;
  ASSERT_EQ(folder.pairs.size(), 2u);
  EXPECT_EQ(folder.pairs[0].name, "gemm/naive");
  EXPECT_EQ(folder.pairs[0].problem, (m_dir / "w" / "gemm" / "problem.py").string());
}

TEST_F(BenchSuite, BadSuitesSayWhatIsExpected) {
  EXPECT_NE(read_suite((m_dir / "missing.json").string()).error.find("not found"),
            std::string::npos);
  write("bad.json", R"([{"kernel": "k.py"}])");
  EXPECT_NE(read_suite((m_dir / "bad.json").string()).error.find("\"problem\""), std::string::npos);
  write("empty/readme.txt", "");
  EXPECT_NE(read_suite((m_dir / "empty").string()).error.find("summary.json"), std::string::npos);
}

TEST(BenchTable, ShowsRowsAndComparesTwoRuns) {
  const nlohmann::json before = nlohmann::json::parse(
      R"([{"name": "silu/0", "correct": true, "latency_us": 20.0, "pct_of_peak_accelopt": 10.0}])");
  const nlohmann::json after = nlohmann::json::parse(
      R"([{"name": "silu/0", "kernel": "/a/k.py", "correct": true, "latency_us": 10.0,
           "bottleneck": "memory-bound", "pct_of_peak_accelopt": 20.0},
          {"name": "bmm/2", "correct": null, "error": "compile_error: a|b"}])");
  const std::string table = bench_markdown(after);
  EXPECT_NE(table.find("| silu/0 | k.py | yes | 10.00 | memory-bound | 20.0 |"), std::string::npos)
      << table;
  EXPECT_NE(table.find("| bmm/2 |  | error |"), std::string::npos) << table;
  EXPECT_NE(table.find("compile_error: a/b"), std::string::npos) << table;
  const std::string compared = bench_markdown(after, &before);
  EXPECT_NE(compared.find("| silu/0 | yes / yes | 20.00 / 10.00 | 2.00x | 10.0 / 20.0 |"),
            std::string::npos)
      << compared;
}

}  // namespace
}  // namespace autocomp::app
