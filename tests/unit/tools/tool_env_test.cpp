#include "tools/tool_env.hpp"

#include <gtest/gtest.h>

namespace autocomp::tools {
namespace {

TEST(ToolEnv, TargetComesFromArgumentThenProblemThenOptions) {
  ProductToolsOptions options;
  ToolEnv plain(options);
  EXPECT_EQ(plain.target_for("", "def inputs(seed): pass\n"), "trn2");
  EXPECT_EQ(plain.target_for("", "import numpy\nTARGET = 'trn1'\n"), "trn1");
  EXPECT_EQ(plain.target_for("trn2", "TARGET = \"trn1\"\n"), "trn2");
  options.target = "trn1";
  ToolEnv configured(options);
  EXPECT_EQ(configured.target_for("", "x = 1\n"), "trn1");
}

TEST(ToolEnv, BackendsAreCachedPerSpecAndBadSpecsFail) {
  ToolEnv env(ProductToolsOptions{});
  auto first = env.backend("");
  ASSERT_TRUE(first.ok()) << first.failure().describe();
  auto again = env.backend("sim");
  ASSERT_TRUE(again.ok());
  EXPECT_EQ(first.value().get(), again.value().get());
  auto bad = env.backend("warp-drive://x");
  ASSERT_FALSE(bad.ok());
  EXPECT_EQ(bad.failure().kind, core::FailureKind::invalid_argument);
}

TEST(ToolEnv, StoreFailureIsReportedNotThrown) {
  ProductToolsOptions options;
  options.db_path = "/proc/definitely/not/writable/autocomp.db";
  ToolEnv env(options);
  EXPECT_FALSE(env.store().ok());
}

}  // namespace
}  // namespace autocomp::tools
