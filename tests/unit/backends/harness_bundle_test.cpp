#include "backends/harness_bundle.hpp"

#include <gtest/gtest.h>
#include <stdlib.h>

#include <algorithm>
#include <filesystem>
#include <fstream>

namespace autocomp::backends {
namespace {

namespace fs = std::filesystem;
using namespace std::chrono_literals;

class BundleTest : public ::testing::Test {
 protected:
  void SetUp() override {
    std::string pattern = (fs::temp_directory_path() / "autocomp-bundle-test-XXXXXX").string();
    ASSERT_NE(::mkdtemp(pattern.data()), nullptr);
    m_root = pattern;
    write("harness/autocomp_harness.py", "print('hi')\n");
    write("harness/harnesslib/util.py", "X = 1\n");
    write("nkisim/nkisim/machine/core.py", "Y = 2\n");
    write("harness/notes.txt", "not code\n");
  }
  void TearDown() override { fs::remove_all(m_root); }
  void write(const std::string& relative, const std::string& text) {
    fs::create_directories((m_root / relative).parent_path());
    std::ofstream(m_root / relative) << text;
  }
  fs::path m_root;
};

TEST_F(BundleTest, ListsPythonFilesInOrderAndHashesThem) {
  auto bundle = load_harness_bundle(m_root);
  ASSERT_TRUE(bundle.ok()) << bundle.failure().describe();
  std::vector<std::string> expected{"harness/autocomp_harness.py", "harness/harnesslib/util.py",
                                    "nkisim/nkisim/machine/core.py"};
  EXPECT_EQ(bundle->files, expected);
  EXPECT_EQ(bundle->contents[2], "Y = 2\n");
  EXPECT_EQ(bundle->hash.size(), 64u);
  EXPECT_EQ(bundle->entry(), m_root / "harness" / "autocomp_harness.py");

  auto same = load_harness_bundle(m_root);
  EXPECT_EQ(same->hash, bundle->hash);
  write("nkisim/nkisim/machine/core.py", "Y = 3\n");
  EXPECT_NE(load_harness_bundle(m_root)->hash, bundle->hash);
  write("harness/notes.txt", "changed, but not code\n");
  auto after_text = load_harness_bundle(m_root);
  write("harness/notes.txt", "changed again\n");
  EXPECT_EQ(load_harness_bundle(m_root)->hash, after_text->hash);
}

TEST_F(BundleTest, LocatesTheConfiguredFolderOrSaysWhereItLooked) {
  auto found = locate_harness_dir(m_root.string());
  ASSERT_TRUE(found.ok());
  EXPECT_EQ(found.value(), m_root);
  auto missing = locate_harness_dir("/nonexistent/place");
  ASSERT_FALSE(missing.ok());
  EXPECT_NE(missing.failure().message.find("/nonexistent/place"), std::string::npos);
}

TEST_F(BundleTest, EnvironmentVariableComesBeforeTheSourceTree) {
  ::setenv("AUTOCOMP_HARNESS_DIR", m_root.c_str(), 1);
  auto found = locate_harness_dir("");
  ::unsetenv("AUTOCOMP_HARNESS_DIR");
  ASSERT_TRUE(found.ok());
  EXPECT_EQ(found.value(), m_root);
  auto source = locate_harness_dir("");
  ASSERT_TRUE(source.ok());
  EXPECT_EQ(source.value(), fs::path(AUTOCOMP_SOURCE_DIR) / "backends");
}

TEST(Python, ExplicitThenEnvironmentThenSystem) {
  EXPECT_EQ(resolve_python("/opt/py/bin/python3"), "/opt/py/bin/python3");
  ::setenv("AUTOCOMP_PYTHON", "/env/python", 1);
  EXPECT_EQ(resolve_python(""), "/env/python");
  ::unsetenv("AUTOCOMP_PYTHON");
  EXPECT_EQ(resolve_python(""), fs::exists("/usr/bin/python3") ? "/usr/bin/python3" : "python3");
}

TEST(HarnessArguments, FollowTheProtocol) {
  EvalRequest request;
  request.command = EvalCommand::verify;
  request.target = "trn1";
  request.seeds = {3, 4};
  request.kernel_name = "my_kernel";
  request.warmup = 1;
  request.iters = 7;
  HarnessInvocation invocation{"fake", 25, "/w/k.py", "/w/p.py", "/w", 9.5, -1, ""};
  auto args = harness_arguments(request, invocation);
  std::vector<std::string> expected{
      "verify", "--kernel",  "/w/k.py", "--problem",     "/w/p.py",   "--target",
      "trn1",   "--device",  "fake",    "--warmup",      "1",         "--iters",
      "7",      "--seeds",   "3,4",     "--kernel-name", "my_kernel", "--workdir",
      "/w",     "--timeout", "9.500",   "--fake-ms",     "25"};
  EXPECT_EQ(args, expected);
}

TEST(HarnessArguments, HarnessTimeoutStaysUnderTheWallTimeout) {
  EXPECT_DOUBLE_EQ(harness_timeout_seconds(0ms), 0);
  EXPECT_LT(harness_timeout_seconds(2s), 2.0);
  EXPECT_GT(harness_timeout_seconds(2s), 1.0);
  EXPECT_NEAR(harness_timeout_seconds(300s), 298.0, 1e-9);
}

TEST(SafeFileName, KeepsPlainPythonNamesOnly) {
  EXPECT_EQ(safe_file_name("gemm_v2.py", "kernel.py"), "gemm_v2.py");
  EXPECT_EQ(safe_file_name("/home/me/work/gemm.py", "kernel.py"), "gemm.py");
  EXPECT_EQ(safe_file_name("../../etc/x.py", "kernel.py"), "x.py");
  EXPECT_EQ(safe_file_name("rm -rf.py", "kernel.py"), "kernel.py");
  EXPECT_EQ(safe_file_name("kernel.txt", "kernel.py"), "kernel.py");
  EXPECT_EQ(safe_file_name(".py", "kernel.py"), "kernel.py");
  EXPECT_EQ(safe_file_name("", "problem.py"), "problem.py");
}

TEST(WorkFileNames, SafeNamesThatNeverCollide) {
  EvalRequest request;
  auto names = work_file_names(request);
  EXPECT_EQ(names.kernel, "kernel.py");
  EXPECT_EQ(names.problem, "problem.py");
  request.kernel_filename = "/home/me/layernorm.py";
  request.problem_filename = "../../etc/passwd";
  names = work_file_names(request);
  EXPECT_EQ(names.kernel, "layernorm.py");
  EXPECT_EQ(names.problem, "problem.py");
  request.kernel_filename = "same.py";
  request.problem_filename = "same.py";
  EXPECT_EQ(work_file_names(request).problem, "problem.py");
  request.kernel_filename = "problem.py";
  request.problem_filename = "problem.py";
  EXPECT_EQ(work_file_names(request).problem, "problem_file.py");
}

TEST(EvaluationArguments, PathsInTheFolderTheDefaultTargetAndTheHarnessTimeout) {
  EvalRequest request;
  request.target = "";  // none named: the backend's default
  request.timeout = 10s;
  const WorkFileNames files{"k.py", "p.py"};
  auto args = evaluation_arguments(request, "/w", files, "fake", 7, "trn1");
  auto value_of = [&](const std::string& flag) {
    auto it = std::find(args.begin(), args.end(), flag);
    return it == args.end() || it + 1 == args.end() ? std::string("<none>") : *(it + 1);
  };
  EXPECT_EQ(value_of("--kernel"), "/w/k.py");
  EXPECT_EQ(value_of("--problem"), "/w/p.py");
  EXPECT_EQ(value_of("--workdir"), "/w");
  EXPECT_EQ(value_of("--target"), "trn1");
  EXPECT_EQ(value_of("--device"), "fake");
  EXPECT_EQ(value_of("--fake-ms"), "7");
  EXPECT_EQ(value_of("--timeout"), "9.000");
  request.target = "trn2";
  args = evaluation_arguments(request, "/w", files, "fake", 7, "trn1");
  EXPECT_EQ(value_of("--target"), "trn2");
}

TEST(TimeoutCommand, SecondsAndExitStatuses) {
  EXPECT_EQ(timeout_command_seconds(12500ms), "12.500");
  EXPECT_EQ(timeout_command_seconds(30s), "30.000");
  EXPECT_TRUE(stopped_by_timeout_command(124));
  EXPECT_TRUE(stopped_by_timeout_command(137));
  EXPECT_FALSE(stopped_by_timeout_command(0));
  EXPECT_FALSE(stopped_by_timeout_command(1));
}

}  // namespace
}  // namespace autocomp::backends
