// Process timeouts on a ManualClock: a child that never ends is killed at its timeout, and the
// test takes a moment instead of the timeout (waits move the fake clock, not real time).
#include <gtest/gtest.h>
#include <signal.h>
#include <unistd.h>

#include <atomic>
#include <chrono>
#include <filesystem>
#include <memory>
#include <string>
#include <thread>
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

// A ManualClock whose time stands still until `ready` exists: the child says when it has set up
// (here: its SIGTERM trap), so the fake timeout never overtakes a slow shell start.
class ClockStartedByAFile : public ManualClock {
 public:
  explicit ClockStartedByAFile(std::filesystem::path ready) : m_ready(std::move(ready)) {}
  void sleep_until(TimePoint until) const override {
    const auto give_up = std::chrono::steady_clock::now() + 60s;
    while (!m_started && !std::filesystem::exists(m_ready) &&
           std::chrono::steady_clock::now() < give_up) {
      std::this_thread::sleep_for(5ms);
    }
    m_started = true;
    ManualClock::sleep_until(until);
  }

 private:
  std::filesystem::path m_ready;
  mutable std::atomic<bool> m_started{false};
};

TEST(ProcessClock, AChildThatIgnoresSigtermIsKilledAfterTheGrace) {
  const auto ready = std::filesystem::temp_directory_path() /
                     ("process_clock_ready_" + std::to_string(::getpid()));
  std::filesystem::remove(ready);
  auto clock = std::make_shared<ClockStartedByAFile>(ready);
  const auto start = clock->now();
  auto result =
      run_on(clock, {"sh", "-c", "trap '' TERM; : > '" + ready.string() + "'; sleep 100000 & wait"},
             10min, 1min);
  std::filesystem::remove(ready);
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
