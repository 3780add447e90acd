#include "core/process.hpp"

#include <gtest/gtest.h>
#include <signal.h>
#include <unistd.h>

#include <chrono>
#include <filesystem>
#include <string>
#include <thread>
#include <vector>

namespace autocomp::core {
namespace {

using namespace std::chrono_literals;

ProcessSpec command(std::vector<std::string> argv) {
  ProcessSpec spec;
  spec.argv = std::move(argv);
  return spec;
}

ProcessResult run_ok(ProcessSpec spec, const CancelToken& cancel = {}) {
  auto result = run_process(spec, cancel);
  EXPECT_TRUE(result.ok()) << (result.ok() ? "" : result.failure().describe());
  return result.ok() ? std::move(result).value() : ProcessResult{};
}

// True while any process whose command line contains `marker` is alive.
bool process_alive(const std::string& marker) {
  auto check = run_process(command({"pgrep", "-f", marker}));
  return check.ok() && check->exited && check->exit_code == 0;
}

TEST(Process, CapturesStdoutStderrAndExitCode) {
  auto result = run_ok(command({"sh", "-c", "echo out; echo err >&2; exit 3"}));
  EXPECT_TRUE(result.exited);
  EXPECT_EQ(result.exit_code, 3);
  EXPECT_EQ(result.stdout_text, "out\n");
  EXPECT_EQ(result.stderr_text, "err\n");
  EXPECT_FALSE(result.succeeded());
  EXPECT_EQ(result.describe_end(), "exit code 3");
}

TEST(Process, PassesStdinEnvironmentAndWorkingDirectory) {
  ProcessSpec spec = command({"sh", "-c", "cat; printf ' %s ' \"$AUTOCOMP_TEST_VALUE\"; pwd"});
  spec.stdin_text = std::string(200000, 'x');  // larger than a pipe buffer
  spec.env = {{"AUTOCOMP_TEST_VALUE", "hello"}};
  spec.cwd = "/tmp";
  auto result = run_ok(spec);
  ASSERT_TRUE(result.succeeded()) << result.stderr_text;
  EXPECT_EQ(result.stdout_text, std::string(200000, 'x') + " hello /tmp\n");
}

TEST(Process, ArgumentsAreNotInterpretedByAShell) {
  auto result = run_ok(command({"echo", "$HOME; rm -rf /", "*"}));
  EXPECT_EQ(result.stdout_text, "$HOME; rm -rf / *\n");
}

TEST(Process, MissingProgramIsAFailureValue) {
  auto result = run_process(command({"/nonexistent/autocomp-no-such-program"}));
  ASSERT_FALSE(result.ok());
  EXPECT_EQ(result.failure().kind, FailureKind::io_error);
  EXPECT_NE(result.failure().message.find("autocomp-no-such-program"), std::string::npos);
}

TEST(Process, ReportsTheKillingSignal) {
  auto result = run_ok(command({"sh", "-c", "kill -9 $$"}));
  EXPECT_FALSE(result.exited);
  EXPECT_EQ(result.signal, SIGKILL);
}

TEST(Process, TimeoutKillsTheWholeProcessGroup) {
  const std::string marker = "autocomp_timeout_marker_" + std::to_string(::getpid());
  // The grandchild ignores SIGTERM, so only the SIGKILL after the grace period ends it.
  ProcessSpec spec = command({"sh", "-c",
                              "sh -c 'trap \"\" TERM; while :; do sleep 0.05; done; : " + marker +
                                  "' & echo started; wait"});
  spec.timeout = 300ms;
  spec.kill_grace = 100ms;
  auto result = run_ok(spec);
  EXPECT_TRUE(result.timed_out);
  EXPECT_FALSE(result.succeeded());
  EXPECT_EQ(result.stdout_text, "started\n");
  EXPECT_GE(result.wall_ms, 300);
  EXPECT_LT(result.wall_ms, 5000);
  EXPECT_FALSE(process_alive(marker));
}

TEST(Process, CancelStopsAWaitingChild) {
  CancelToken cancel;
  std::thread canceller([cancel] {
    std::this_thread::sleep_for(100ms);
    cancel.cancel();
  });
  auto result = run_ok(command({"sleep", "30"}), cancel);
  canceller.join();
  EXPECT_TRUE(result.cancelled);
  EXPECT_FALSE(result.timed_out);
  EXPECT_LT(result.wall_ms, 5000);
  EXPECT_EQ(result.describe_end(), "cancelled");
}

TEST(Process, DescendantHoldingThePipesDoesNotHangTheCaller) {
  const std::string marker = "autocomp_orphan_marker_" + std::to_string(::getpid());
  auto result =
      run_ok(command({"sh", "-c", "sh -c 'sleep 30; : " + marker + "' & echo parent-done"}));
  EXPECT_TRUE(result.exited);
  EXPECT_EQ(result.exit_code, 0);
  EXPECT_EQ(result.stdout_text, "parent-done\n");
  EXPECT_LT(result.wall_ms, 5000);
  EXPECT_FALSE(process_alive(marker));
}

TEST(Process, OutputBeyondTheLimitIsDroppedWithoutBlocking) {
  ProcessSpec spec = command({"sh", "-c", "head -c 1000000 /dev/zero; echo done >&2"});
  spec.max_output_bytes = 1000;
  auto result = run_ok(spec);
  EXPECT_TRUE(result.succeeded());
  EXPECT_EQ(result.stdout_text.size(), 1000u);
  EXPECT_TRUE(result.output_truncated);
  EXPECT_EQ(result.stderr_text, "done\n");
}

TEST(Process, ManyThreadsRunChildrenAtOnce) {
  std::vector<std::thread> threads;
  std::vector<std::string> outputs(8);
  for (std::size_t i = 0; i < outputs.size(); ++i) {
    threads.emplace_back([i, &outputs] {
      auto result = run_process(command({"sh", "-c", "sleep 0.1; echo " + std::to_string(i)}));
      outputs[i] = result.ok() ? result->stdout_text : "failed";
    });
  }
  for (auto& t : threads) {
    t.join();
  }
  for (std::size_t i = 0; i < outputs.size(); ++i) {
    EXPECT_EQ(outputs[i], std::to_string(i) + "\n");
  }
}

TEST(TailText, KeepsTheEndAndStartsOnALine) {
  EXPECT_EQ(tail_text("short", 100), "short");
  std::string text = std::string(50, 'a') + "\nTraceback\nValueError: bad\n";
  auto tail = tail_text(text, 30);
  EXPECT_EQ(tail, "...Traceback\nValueError: bad\n");
}

}  // namespace
}  // namespace autocomp::core
