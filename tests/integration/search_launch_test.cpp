// The run_beam_search tool's handler over the real simulator backend and a temporary store: the
// search it starts runs on the target the problem file names (the same launcher as --autonomous).

#include <gtest/gtest.h>
#include <unistd.h>

#include <cstdlib>
#include <filesystem>
#include <fstream>
#include <sstream>

#include "core/hash.hpp"
#include "search/store/store.hpp"
#include "support/search_job.hpp"
#include "tools/search_tools.hpp"
#include "tools/tool_env.hpp"

namespace autocomp::tools {
namespace {

namespace fs = std::filesystem;
using nlohmann::json;

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

class SearchLaunch : public ::testing::Test {
 protected:
  void SetUp() override {
    m_dir = fs::temp_directory_path() /
            ("search_launch_test_" + std::to_string(::getpid()) + "_" +
             ::testing::UnitTest::GetInstance()->current_test_info()->name());
    fs::remove_all(m_dir);
    fs::create_directories(m_dir);
    ::setenv("AUTOCOMP_SMALL", "1", 1);
    ::setenv("AUTOCOMP_PYTHON", AUTOCOMP_PYTHON, 1);
    const fs::path seed = fs::path(AUTOCOMP_SOURCE_DIR) / "seeds" / "rmsnorm";
    m_kernel = read(seed / "tunable.py");
    write(m_dir / "kernel.py", m_kernel);
    write(m_dir / "problem.py", read(seed / "problem.py") + "\nTARGET = \"trn1\"\n");
  }
  void TearDown() override { fs::remove_all(m_dir); }

  fs::path m_dir;
  std::string m_kernel;
};

TEST_F(SearchLaunch, AProblemsTargetIsTheHardwareTheToolsSearchRunsOn) {
  ProductToolsOptions options;
  options.db_path = (m_dir / "store.db").string();
  options.target = "trn2";  // the server's default; the problem's TARGET wins over it
  auto env = std::make_shared<ToolEnv>(options);
  auto result = testing::start_small_search(env, (m_dir / "kernel.py").string(),
                                            (m_dir / "problem.py").string());
  ASSERT_FALSE(result.is_error) << result.structured.dump();
  const std::string run_id = result.structured.at("run_id");
  EXPECT_EQ(result.structured.at("target"), "trn1");

  auto live = testing::finished_job(*env, run_id);
  ASSERT_TRUE(live);
  ASSERT_TRUE(live->outcome);
  EXPECT_EQ(live->outcome->status, "completed") << live->outcome->stop_reason;
  EXPECT_EQ(live->outcome->config.target, "trn1");

  auto db = env->store();
  ASSERT_TRUE(db.ok());
  auto evaluations =
      db.value()->evaluations().evaluations_for_candidate(core::source_key(m_kernel));
  ASSERT_TRUE(evaluations.ok());
  ASSERT_FALSE(evaluations->empty());
  for (const auto& stored : *evaluations) {
    EXPECT_EQ(stored.key.target, "trn1");
    EXPECT_EQ(stored.result.receipt.target, "trn1") << stored.result.raw_json;
  }
}

}  // namespace
}  // namespace autocomp::tools
