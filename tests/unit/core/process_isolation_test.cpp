// Isolated children (ProcessSpec::isolate): the boundary between a server and the kernels it runs.
#include <gtest/gtest.h>
#include <signal.h>
#include <stdlib.h>
#include <sys/prctl.h>
#include <sys/wait.h>
#include <unistd.h>

#include <chrono>
#include <filesystem>
#include <fstream>
#include <string>
#include <thread>
#include <vector>

#include "core/process.hpp"

namespace autocomp::core {
namespace {

namespace fs = std::filesystem;
using namespace std::chrono_literals;

ProcessSpec isolated(std::vector<std::string> argv) {
  ProcessSpec spec;
  spec.argv = std::move(argv);
  spec.isolate = true;
  return spec;
}

ProcessResult run_ok(const ProcessSpec& spec, const CancelToken& cancel = {}) {
  auto result = run_process(spec, cancel);
  EXPECT_TRUE(result.ok()) << (result.ok() ? "" : result.failure().describe());
  return result.ok() ? std::move(result).value() : ProcessResult{};
}

bool process_alive(const std::string& marker) {
  ProcessSpec spec;
  spec.argv = {"pgrep", "-f", marker};
  auto check = run_process(spec);
  return check.ok() && check->exited && check->exit_code == 0;
}

// Waits up to `limit` for no process matching `marker` to be left.
bool gone_within(const std::string& marker, std::chrono::milliseconds limit) {
  auto deadline = std::chrono::steady_clock::now() + limit;
  while (process_alive(marker)) {
    if (std::chrono::steady_clock::now() > deadline) {
      return false;
    }
    std::this_thread::sleep_for(50ms);
  }
  return true;
}

std::string unique_marker(const std::string& what) {
  static int counter = 0;
  return "autocomp_" + what + "_" + std::to_string(::getpid()) + "_" + std::to_string(++counter);
}

class TempFolder {
 public:
  TempFolder() {
    std::string pattern = (fs::temp_directory_path() / "autocomp-isolation-XXXXXX").string();
    EXPECT_NE(::mkdtemp(pattern.data()), nullptr);
    m_path = pattern;
  }
  ~TempFolder() {
    std::error_code ec;
    fs::remove_all(m_path, ec);
  }
  const fs::path& path() const { return m_path; }

 private:
  fs::path m_path;
};

TEST(ProcessIsolation, RunsLikeAnyOtherChild) {
  TempFolder tmp;
  ProcessSpec spec = isolated({"sh", "-c",
                               "cat; printf ' %s ' \"$AUTOCOMP_TEST_VALUE\"; pwd; "
                               "echo err >&2; exit 3"});
  spec.stdin_text = std::string(200000, 'x');
  spec.env = {{"AUTOCOMP_TEST_VALUE", "hello"}};
  spec.cwd = tmp.path().string();
  auto result = run_ok(spec);
  EXPECT_TRUE(result.exited);
  EXPECT_EQ(result.exit_code, 3);
  EXPECT_EQ(result.stdout_text, std::string(200000, 'x') + " hello " + tmp.path().string() + "\n");
  EXPECT_EQ(result.stderr_text, "err\n");

  auto killed = run_ok(isolated({"sh", "-c", "kill -SEGV $$"}));
  EXPECT_FALSE(killed.exited);
  EXPECT_EQ(killed.signal, SIGSEGV);

  auto missing = run_process(isolated({"autocomp-no-such-program"}));
  ASSERT_FALSE(missing.ok());
  EXPECT_EQ(missing.failure().kind, FailureKind::io_error);
  ProcessSpec bad_cwd = isolated({"true"});
  bad_cwd.cwd = "/nonexistent/autocomp-folder";
  auto not_started = run_process(bad_cwd);
  ASSERT_FALSE(not_started.ok());
  EXPECT_NE(not_started.failure().message.find("/nonexistent/autocomp-folder"), std::string::npos);
}

TEST(ProcessIsolation, ChildSeesOnlyTheAllowedEnvironment) {
  ::setenv("AUTOCOMP_ISOLATION_TEST_API_KEY", "sk-do-not-leak", 1);
  ::setenv("AUTOCOMP_AUTH_TOKEN", "bearer-do-not-leak", 1);
  ProcessSpec spec = isolated({"env"});
  spec.env = {{"AUTOCOMP_SMALL", "1"}};
  auto result = run_ok(spec);
  ::unsetenv("AUTOCOMP_ISOLATION_TEST_API_KEY");
  ::unsetenv("AUTOCOMP_AUTH_TOKEN");
  EXPECT_EQ(result.stdout_text.find("do-not-leak"), std::string::npos) << result.stdout_text;
  EXPECT_NE(result.stdout_text.find("AUTOCOMP_SMALL=1"), std::string::npos);
  EXPECT_NE(result.stdout_text.find("PATH="), std::string::npos);
}

TEST(ProcessIsolation, ChildCannotKillOrStopTheServer) {
  // Its parent is the supervisor (or the namespace's init), never this process; were it this
  // process, the test would die or freeze here.
  auto result = run_ok(isolated(
      {"sh", "-c", "kill -STOP $PPID 2>/dev/null; kill -9 $PPID 2>/dev/null; echo $PPID"}));
  EXPECT_NE(result.stdout_text, std::to_string(::getpid()) + "\n");
  EXPECT_EQ(::prctl(PR_GET_DUMPABLE), 0) << "the server stays traceable by its kernels";

  if (isolation_mode() == "subreaper") {
    GTEST_SKIP() << "no PID namespaces here: a same-user kernel can still signal by pid";
  }
  // With a PID namespace, no pid the child can name is this process or any other outside it.
  pid_t victim = ::fork();
  if (victim == 0) {
    ::pause();
    ::_exit(0);
  }
  ASSERT_GT(victim, 0);
  auto attack = run_ok(
      isolated({"sh", "-c",
                "kill -STOP " + std::to_string(victim) + " " + std::to_string(::getpid()) +
                    "; kill -9 " + std::to_string(victim) + " " + std::to_string(::getpid())}));
  int status = 0;
  EXPECT_EQ(::waitpid(victim, &status, WNOHANG | WUNTRACED), 0) << "the victim was signalled";
  ::kill(victim, SIGKILL);
  ::waitpid(victim, &status, 0);
}

TEST(ProcessIsolation, SetsidAndDoubleForkedChildrenEndWithTheChild) {
  const std::string marker = unique_marker("escape");
  auto result = run_ok(isolated({"sh", "-c",
                                 "setsid sh -c 'sleep 30; : " + marker +
                                     "' </dev/null >/dev/null 2>&1 & "
                                     "(setsid sh -c '(sleep 30; : " +
                                     marker +
                                     ") &' </dev/null >/dev/null 2>&1 &); "
                                     "sleep 0.2; echo done"}));
  EXPECT_TRUE(result.succeeded()) << result.describe_end() << result.stderr_text;
  EXPECT_EQ(result.stdout_text, "done\n");
  EXPECT_TRUE(gone_within(marker, 2000ms)) << "a setsid() descendant outlived its evaluation";
}

TEST(ProcessIsolation, TimeoutKillsTheWholeTree) {
  const std::string marker = unique_marker("timeout");
  ProcessSpec spec = isolated({"sh", "-c",
                               "setsid sh -c 'trap \"\" TERM; sleep 30; : " + marker +
                                   "' </dev/null >/dev/null 2>&1 & echo started; sleep 30"});
  spec.timeout = 500ms;
  auto result = run_ok(spec);
  EXPECT_TRUE(result.timed_out);
  EXPECT_EQ(result.stdout_text, "started\n");
  EXPECT_LT(result.wall_ms, 5000);
  EXPECT_TRUE(gone_within(marker, 2000ms));
}

TEST(ProcessIsolation, KillingTheServerLeavesNoProcessAndNoWorkFolder) {
  const std::string marker = unique_marker("orphan");
  TempFolder outer;
  const fs::path work = outer.path() / "work";
  fs::create_directories(work / "nested");
  std::ofstream(work / "nested" / "kernel.py") << "print('hi')\n";

  pid_t server = ::fork();
  if (server == 0) {
    ProcessSpec spec = isolated({"sh", "-c",
                                 "setsid sh -c 'sleep 60; : " + marker +
                                     "' </dev/null >/dev/null 2>&1 & "
                                     "touch started; sleep 60"});
    spec.cwd = work.string();
    spec.remove_if_abandoned = work.string();
    auto result = run_process(spec);
    ::_exit(result.ok() ? 0 : 1);
  }
  ASSERT_GT(server, 0);
  auto deadline = std::chrono::steady_clock::now() + 10s;
  while (!fs::exists(work / "started") && std::chrono::steady_clock::now() < deadline) {
    std::this_thread::sleep_for(20ms);
  }
  ASSERT_TRUE(fs::exists(work / "started"));
  ASSERT_TRUE(process_alive(marker));
  ::kill(server, SIGKILL);
  int status = 0;
  ::waitpid(server, &status, 0);
  EXPECT_TRUE(gone_within(marker, 3000ms)) << "the kernel's processes outlived the server";
  deadline = std::chrono::steady_clock::now() + 3s;
  while (fs::exists(work) && std::chrono::steady_clock::now() < deadline) {
    std::this_thread::sleep_for(20ms);
  }
  EXPECT_FALSE(fs::exists(work)) << "the work folder outlived the server";
}

}  // namespace
}  // namespace autocomp::core
