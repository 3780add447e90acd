#include "core/clock.hpp"

#include <gtest/gtest.h>

#include <thread>
#include <vector>

namespace autocomp::core {
namespace {

using namespace std::chrono_literals;

TEST(ManualClock, StandsStillUntilAdvanced) {
  ManualClock clock;
  const auto start = clock.now();
  EXPECT_EQ(clock.now(), start);
  clock.advance(1500ms);
  EXPECT_EQ(clock.now() - start, Clock::Duration(1500ms));
  EXPECT_DOUBLE_EQ(clock.seconds_since(start), 1.5);
}

TEST(ManualClock, AdvancesFromSeveralThreadsAddUp) {
  ManualClock clock;
  const auto start = clock.now();
  std::vector<std::thread> threads;
  for (int i = 0; i < 4; ++i) {
    threads.emplace_back([&clock] {
      for (int j = 0; j < 1000; ++j) {
        clock.advance(1ms);
      }
    });
  }
  for (auto& thread : threads) {
    thread.join();
  }
  EXPECT_EQ(clock.now() - start, Clock::Duration(4000ms));
}

TEST(ManualClock, SleepsMoveTheTimeAtOnceAndAreRecorded) {
  ManualClock clock;
  const auto start = clock.now();
  clock.sleep_for(2s);
  clock.sleep_until(start + 1s);  // already passed: no move
  clock.sleep_for(500ms);
  EXPECT_EQ(clock.now() - start, Clock::Duration(2500ms));
  EXPECT_EQ(clock.sleeps(), (std::vector<Clock::Duration>{2s, 0s, 500ms}));
  EXPECT_EQ(clock.sleep_count(), 3u);
}

TEST(ManualClock, WaitForChecksWithoutBlockingThenSleepsOnTheClock) {
  ManualClock clock;
  const auto start = clock.now();
  std::vector<Clock::Duration> real_timeouts;
  bool happened = clock.wait_for(10min, [&](Clock::Duration real_timeout) {
    real_timeouts.push_back(real_timeout);
    return false;
  });
  EXPECT_FALSE(happened);
  EXPECT_EQ(real_timeouts, (std::vector<Clock::Duration>{0s}));
  EXPECT_EQ(clock.now() - start, Clock::Duration(10min));

  // An event that is there already ends the wait without moving the clock.
  happened = clock.wait_for(10min, [](Clock::Duration) { return true; });
  EXPECT_TRUE(happened);
  EXPECT_EQ(clock.now() - start, Clock::Duration(10min));
}

TEST(ManualClock, SleepsFromSeveralThreadsNeverMoveTheTimeBack) {
  ManualClock clock;
  const auto start = clock.now();
  std::vector<std::thread> threads;
  for (int i = 1; i <= 4; ++i) {
    threads.emplace_back(
        [&clock, start, i] { clock.sleep_until(start + std::chrono::seconds(i)); });
  }
  for (auto& thread : threads) {
    thread.join();
  }
  EXPECT_EQ(clock.now() - start, Clock::Duration(4s));
}

TEST(SteadyClock, WaitForHandsTheWholeDurationToTheCheck) {
  auto clock = steady_clock();
  EXPECT_TRUE(clock->real_time());
  Clock::Duration given{};
  EXPECT_TRUE(clock->wait_for(3s, [&](Clock::Duration real_timeout) {
    given = real_timeout;
    return true;
  }));
  EXPECT_EQ(given, Clock::Duration(3s));
}

TEST(SteadyClock, IsSharedAndMonotonic) {
  auto clock = steady_clock();
  ASSERT_TRUE(clock);
  EXPECT_EQ(clock.get(), steady_clock().get());
  const auto first = clock->now();
  EXPECT_LE(first, clock->now());
}

}  // namespace
}  // namespace autocomp::core
