// `autocomp-mcp bench`: a suite in NKIBench's layout (own small kernels and references under
// tests/python/harness/fixtures/nkibench) runs through verify, benchmark and profile; the table
// and JSON carry correctness, latency and percent of peak; a rerun is served from the store;
// --compare puts two runs side by side.

#include <gtest/gtest.h>
#include <sys/wait.h>
#include <unistd.h>

#include <cstdlib>
#include <filesystem>
#include <fstream>
#include <nlohmann/json.hpp>
#include <sstream>
#include <string>

namespace {

namespace fs = std::filesystem;

std::string read(const fs::path& path) {
  std::ifstream in(path);
  std::stringstream text;
  text << in.rdbuf();
  return text.str();
}

class BenchSuiteCommand : public ::testing::Test {
 protected:
  void SetUp() override {
    m_dir = fs::temp_directory_path() / ("bench-suite-cmd-" + std::to_string(::getpid()));
    fs::remove_all(m_dir);
    fs::create_directories(m_dir);
  }
  void TearDown() override { fs::remove_all(m_dir); }

  // Runs bench with extra arguments; stdout and stderr go to NAME.out / NAME.err.
  int bench(const std::string& extra, const std::string& name) const {
    const fs::path suite =
        fs::path(AUTOCOMP_SOURCE_DIR) / "tests" / "python" / "harness" / "fixtures" / "nkibench";
    const std::string command = std::string(AUTOCOMP_BINARY) + " bench " + suite.string() +
                                " --target trn1 --db " + (m_dir / "results.db").string() + " " +
                                extra + " > " + (m_dir / (name + ".out")).string() + " 2> " +
                                (m_dir / (name + ".err")).string();
    const int status = std::system(command.c_str());
    return WIFEXITED(status) ? WEXITSTATUS(status) : -1;
  }

  fs::path m_dir;
};

TEST_F(BenchSuiteCommand, RunsEveryPairAndResumesFromTheStore) {
  const fs::path first_json = m_dir / "first.json";
  ASSERT_EQ(
      bench("--json " + first_json.string() + " --markdown " + (m_dir / "t.md").string(), "first"),
      0)
      << read(m_dir / "first.err");
  const auto first = nlohmann::json::parse(read(first_json));
  ASSERT_EQ(first.at("rows").size(), 2u);
  const auto& rowsum = first["rows"][0];
  const auto& silu = first["rows"][1];
  EXPECT_EQ(rowsum.at("name"), "rowsum/0");
  // An nl.loop_reduce into a tile nothing wrote starts from its first value, as the NKIBench
  // kernels AccelOpt measured on hardware rely on (MODEL.md).
  EXPECT_EQ(rowsum.at("correct"), true) << rowsum.dump();
  EXPECT_GT(rowsum.at("latency_us").get<double>(), 0.0);
  EXPECT_EQ(silu.at("name"), "silu/0");
  EXPECT_EQ(silu.at("correct"), true);
  EXPECT_GT(silu.at("latency_us").get<double>(), 0.0);
  const double accelopt = silu.at("pct_of_peak_accelopt").get<double>();
  EXPECT_GT(accelopt, 0.0);
  EXPECT_LE(accelopt, 100.0);
  EXPECT_TRUE(silu.contains("pct_of_peak_roofline"));
  const std::string table = read(m_dir / "first.out");
  EXPECT_EQ(table, read(m_dir / "t.md"));
  EXPECT_NE(table.find("| silu/0 | silu_M256_N512.py | yes |"), std::string::npos) << table;
  EXPECT_NE(read(m_dir / "first.err").find("2/2"), std::string::npos);  // the progress bar

  const fs::path second_json = m_dir / "second.json";
  ASSERT_EQ(bench("--json " + second_json.string() + " --compare " + first_json.string(), "second"),
            0)
      << read(m_dir / "second.err");
  const auto second = nlohmann::json::parse(read(second_json));
  EXPECT_EQ(second["rows"][1].at("cached"), true);
  EXPECT_EQ(second["rows"][1].at("latency_us"), silu.at("latency_us"));
  EXPECT_NE(read(m_dir / "second.out").find("| silu/0 | yes / yes |"), std::string::npos)
      << read(m_dir / "second.out");
  EXPECT_NE(read(m_dir / "second.out").find("1.00x"), std::string::npos);
}

TEST_F(BenchSuiteCommand, BadUsageIsExitTwo) {
  EXPECT_EQ(bench("--compare " + (m_dir / "missing.json").string(), "bad"), 2);
  EXPECT_NE(read(m_dir / "bad.err").find("--compare"), std::string::npos);
  EXPECT_EQ(bench("--timeout 0.5", "short"), 2);
  EXPECT_NE(read(m_dir / "short.err").find("--timeout must be"), std::string::npos);
}

// --timeout is each evaluation's limit: a problem whose inputs take 6 s fails as a timeout
// under --timeout 2 instead of waiting out the default 600 s.
TEST_F(BenchSuiteCommand, TheTimeoutLimitsEachEvaluation) {
  const fs::path fixtures =
      fs::path(AUTOCOMP_SOURCE_DIR) / "tests" / "python" / "harness" / "fixtures" / "nkibench";
  {
    std::ofstream problem(m_dir / "slow_problem.py");
    problem << "import time\nimport numpy as np\n\n"
               "def get_inputs():\n    time.sleep(6)\n"
               "    return [np.ones((256, 512), dtype=np.float32)]\n\n"
               "def forward(x):\n    return x / (1 + np.exp(-x))\n\n"
               "def transform_to_nki_inputs(inputs):\n"
               "    return [np.reshape(inputs[0], (128, 2, 512))]\n\n"
               "def transform_nki_outputs(k_res, ref):\n"
               "    return [np.reshape(k_res, ref.shape)]\n";
    std::ofstream manifest(m_dir / "slow.json");
    manifest << nlohmann::json::array(
                    {{{"name", "slow"},
                      {"kernel", (fixtures / "kernels" / "silu_M256_N512.py").string()},
                      {"problem", (m_dir / "slow_problem.py").string()}}})
                    .dump();
  }
  const fs::path json_path = m_dir / "timed.json";
  const std::string command = std::string(AUTOCOMP_BINARY) + " bench " +
                              (m_dir / "slow.json").string() + " --target trn1 --db " +
                              (m_dir / "timed.db").string() + " --timeout 2 --json " +
                              json_path.string() + " > " + (m_dir / "timed.out").string() + " 2> " +
                              (m_dir / "timed.err").string();
  const int status = std::system(command.c_str());
  ASSERT_TRUE(WIFEXITED(status)) << read(m_dir / "timed.err");
  const auto rows = nlohmann::json::parse(read(json_path)).at("rows");
  ASSERT_EQ(rows.size(), 1u);
  EXPECT_NE(rows[0].value("correct", nlohmann::json()), true) << rows[0].dump();
  EXPECT_NE(rows[0].dump().find("timeout"), std::string::npos) << rows[0].dump();
}

}  // namespace
