// Process timeouts on a ManualClock: a child that never ends is killed at its timeout, and the
// test takes a moment instead of the timeout (waits move the fake clock, not real time).
#include <gtest/gtest.h>
#include <signal.h>

#include <chrono>
#include <memory>
#include <string>
#include <vector>

#include "core/clock.hpp"
#include "core/process.hpp"

namespace autocomp::core {
namespace {

using namespace std::chrono_literals;

ProcessResult run_on(std::shared_ptr<ManualClock> clock, std::vector<std::string> argv,
                     std::chrono::milliseconds timeout, std::chrono::milliseconds kill_grace) {
  ProcessSpec spec;
  spec.argv = std::move(argv);
  spec.timeout = timeout;
  spec.kill_grace = kill_grace;
  spec.clock = std::move(clock);
  auto result = run_process(spec);
  EXPECT_TRUE(result.ok()) << (result.ok() ? "" : result.failure().describe());
  return result.ok() ? std::move(result).value() : ProcessResult{};
}

TEST(ProcessClock, AChildThatNeverEndsIsKilledAtItsTimeout) {
  auto clock = std::make_shared<ManualClock>();
  const auto start = clock->now();
  auto result = run_on(clock, {"sleep", "100000"}, 10min, 500ms);
  EXPECT_TRUE(result.timed_out);
  EXPECT_FALSE(result.exited);
  EXPECT_NE(result.signal, 0);
  EXPECT_GE(clock->now() - start, Clock::Duration(10min));
  EXPECT_LT(clock->now() - start, Clock::Duration(10min + 1s));  // at the timeout, not later
  EXPECT_GE(result.wall_ms, 600000.0);
  EXPECT_LT(result.wall_ms, 601000.0);
}

TEST(ProcessClock, AChildWithItsOutputClosedIsKilledAtItsTimeout) {
  auto clock = std::make_shared<ManualClock>();
  const auto start = clock->now();
  auto result = run_on(clock, {"sh", "-c", "exec sleep 100000 >/dev/null 2>&1"}, 2min, 500ms);
  EXPECT_TRUE(result.timed_out);
  EXPECT_FALSE(result.exited);
  EXPECT_GE(clock->now() - start, Clock::Duration(2min));
}

// The fake timeout comes after tens of thousands of polls, long after the shell set its trap.
TEST(ProcessClock, AChildThatIgnoresSigtermIsKilledAfterTheGrace) {
  auto clock = std::make_shared<ManualClock>();
  const auto start = clock->now();
  auto result = run_on(clock, {"sh", "-c", "trap '' TERM; sleep 100000 & wait"}, 10min, 1min);
  EXPECT_TRUE(result.timed_out);
  EXPECT_EQ(result.signal, SIGKILL);
  EXPECT_GE(clock->now() - start, Clock::Duration(11min));
}

TEST(ProcessClock, AQuickChildEndsNormallyOnAManualClock) {
  auto clock = std::make_shared<ManualClock>();
  ProcessSpec spec;
  spec.argv = {"sh", "-c", "echo hi"};
  spec.clock = clock;
  auto result = run_process(spec);
  ASSERT_TRUE(result.ok());
  EXPECT_TRUE(result->succeeded());
  EXPECT_EQ(result->stdout_text, "hi\n");
}

}  // namespace
}  // namespace autocomp::core
