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

TEST(SteadyClock, IsSharedAndMonotonic) {
  auto clock = steady_clock();
  ASSERT_TRUE(clock);
  EXPECT_EQ(clock.get(), steady_clock().get());
  const auto first = clock->now();
  EXPECT_LE(first, clock->now());
}

}  // namespace
}  // namespace autocomp::core
