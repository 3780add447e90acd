// ToolEnv keeps a bounded number of backends and opens a store it cannot write read-only.
#include <gtest/gtest.h>
#include <sys/stat.h>
#include <unistd.h>

#include <filesystem>
#include <string>
#include <vector>

#include "search/store/store.hpp"
#include "tools/tool_env.hpp"

namespace autocomp::tools {
namespace {

namespace fs = std::filesystem;

std::string spec(int n) {
  return "local?device=fake&fake_ms=" + std::to_string(n);
}

TEST(ToolEnvBackendCache, DistinctSpecsAreBoundedAndABackendInUseIsNeverEvicted) {
  ToolEnv env(ProductToolsOptions{});
  auto held = env.backend(spec(1));
  ASSERT_TRUE(held.ok()) << held.failure().describe();
  for (int n = 2; n <= 40; ++n) {
    auto made = env.backend(spec(n));
    ASSERT_TRUE(made.ok()) << made.failure().describe();
    EXPECT_LE(env.cached_backends(), ToolEnv::k_backend_cache);
  }
  EXPECT_EQ(env.cached_backends(), ToolEnv::k_backend_cache);
  // Still held by this test: still the same object.
  auto again = env.backend(spec(1));
  ASSERT_TRUE(again.ok());
  EXPECT_EQ(again.value().get(), held.value().get());
  // A recently used spec is kept; one let go long ago is built again (a new object).
  auto recent = env.backend(spec(40));
  auto recent_again = env.backend(spec(40));
  EXPECT_EQ(recent.value().get(), recent_again.value().get());
}

TEST(ToolEnvBackendCache, WhenEveryBackendIsInUseNoneIsEvicted) {
  ToolEnv env(ProductToolsOptions{});
  std::vector<std::shared_ptr<backends::Backend>> holding;
  for (int n = 1; n <= static_cast<int>(ToolEnv::k_backend_cache) + 3; ++n) {
    auto made = env.backend(spec(n));
    ASSERT_TRUE(made.ok());
    holding.push_back(made.value());
  }
  EXPECT_EQ(env.cached_backends(), ToolEnv::k_backend_cache + 3);
  for (int n = 1; n <= static_cast<int>(ToolEnv::k_backend_cache) + 3; ++n) {
    EXPECT_EQ(env.backend(spec(n)).value().get(), holding[static_cast<std::size_t>(n - 1)].get());
  }
  holding.clear();
  ASSERT_TRUE(env.backend(spec(100)).ok());
  EXPECT_EQ(env.cached_backends(), ToolEnv::k_backend_cache);
}

TEST(ToolEnvStore, AStoreThatCannotBeWrittenIsOpenedForReading) {
  if (::geteuid() == 0) {
    GTEST_SKIP() << "root writes through file permissions; "
                    "ReadOnlyStore.ReadsWorkAndWritesSayTheStoreIsReadOnly covers the store side";
  }
  const fs::path dir = fs::temp_directory_path() / ("tool_env_ro_" + std::to_string(::getpid()));
  fs::create_directories(dir);
  const fs::path db = dir / "autocomp.db";
  {
    auto store = search::store::Store::open(db.string());
    ASSERT_TRUE(store.ok());
    ASSERT_TRUE(store.value()->evaluations().put_candidate("def k():\n  pass\n", "user").ok());
  }
  ::chmod(db.c_str(), 0444);
  ::chmod(dir.c_str(), 0555);
  ProductToolsOptions options;
  options.db_path = db.string();
  ToolEnv env(options);
  auto store = env.store();
  ASSERT_TRUE(store.ok()) << store.failure().describe();
  EXPECT_TRUE(store.value()->read_only());
  EXPECT_TRUE(store.value()->runs().list_runs(20).ok());
  auto write = store.value()->evaluations().put_candidate("def other():\n  pass\n", "user");
  ASSERT_FALSE(write.ok());
  EXPECT_NE(write.failure().message.find("read-only"), std::string::npos);
  ::chmod(dir.c_str(), 0755);
  ::chmod(db.c_str(), 0644);
  fs::remove_all(dir);
}

}  // namespace
}  // namespace autocomp::tools
