// A result measured at one input shape is never served for another: the same problem file
// produces other shapes under AUTOCOMP_SMALL=1, and the real binary (`autocomp-mcp call`) keys its
// store by the input signature the problem produced.
#include <gtest/gtest.h>
#include <unistd.h>

#include <cstdlib>
#include <filesystem>
#include <fstream>
#include <string>

#include "integration/server_test_support.hpp"
#include "support/add_workload.hpp"

namespace autocomp {
namespace {

namespace fs = std::filesystem;
using nlohmann::json;

// The add workload whose rows come from the environment, as the seed problems do.
constexpr const char* k_shaped_problem = R"(import os
import numpy as np

ROWS = 64 if os.environ.get("AUTOCOMP_SMALL") == "1" else 128

def inputs(seed):
    rng = np.random.default_rng(seed)
    return {"a": rng.standard_normal((ROWS, 512), dtype=np.float32),
            "b": rng.standard_normal((ROWS, 512), dtype=np.float32)}

def reference(a, b):
    return a + b

SEEDS = [0]
)";

class EvalTrustCache : public ::testing::Test {
 protected:
  void SetUp() override {
    m_dir = test::temp_path("eval-trust-cache");
    fs::create_directories(m_dir);
    std::ofstream(m_dir / "problem.py") << k_shaped_problem;
    std::ofstream(m_dir / "kernel.py") << testing::k_add_fast_kernel;
    ::unsetenv("AUTOCOMP_SMALL");
  }
  void TearDown() override {
    ::unsetenv("AUTOCOMP_SMALL");
    fs::remove_all(m_dir);
  }

  json benchmark(bool small) {
    if (small) {
      ::setenv("AUTOCOMP_SMALL", "1", 1);
    } else {
      ::unsetenv("AUTOCOMP_SMALL");
    }
    const json args = {{"kernel", (m_dir / "kernel.py").string()},
                       {"problem", (m_dir / "problem.py").string()},
                       {"iters", 2},
                       {"warmup", 0}};
    auto run = test::run_binary(
        {"call", "benchmark_kernel", "--args", args.dump(), "--db", (m_dir / "store.db").string()});
    EXPECT_EQ(run.exit_code, 0) << run.out;
    json printed = json::parse(run.out, nullptr, false);
    EXPECT_FALSE(printed.is_discarded()) << run.out;
    return printed;
  }

  fs::path m_dir;
};

json structured(const json& printed) {
  return printed.contains("structuredContent") ? printed["structuredContent"] : printed;
}

TEST_F(EvalTrustCache, AShapeChangeIsNeverServedFromTheCache) {
  const json full = structured(benchmark(false));
  ASSERT_TRUE(full.contains("cached")) << full.dump();
  EXPECT_FALSE(full["cached"].get<bool>());

  const json full_again = structured(benchmark(false));
  EXPECT_TRUE(full_again["cached"].get<bool>()) << "equal evaluations are served from the store";

  const json small = structured(benchmark(true));
  EXPECT_FALSE(small["cached"].get<bool>()) << "the 64-row inputs were answered with the 128-row "
                                               "result: "
                                            << small.dump();
  EXPECT_NE(small["evaluation_id"], full["evaluation_id"]);

  const json small_again = structured(benchmark(true));
  EXPECT_TRUE(small_again["cached"].get<bool>());
  EXPECT_EQ(small_again["evaluation_id"], small["evaluation_id"]);

  // Back to the full shape: its own result again, not the small one.
  const json full_third = structured(benchmark(false));
  EXPECT_TRUE(full_third["cached"].get<bool>());
  EXPECT_EQ(full_third["evaluation_id"], full["evaluation_id"]);
}

}  // namespace
}  // namespace autocomp
