// SearchJobs::wait on a ManualClock with a fake search runner: a wait for an update that never
// comes ends at its timeout without real waiting; one that is already answered does not move the
// clock.
#include "tools/search_jobs.hpp"

#include <gtest/gtest.h>

#include <chrono>
#include <memory>
#include <string>
#include <thread>

#include "core/clock.hpp"

namespace autocomp::tools {
namespace {

using namespace std::chrono_literals;
namespace engine = search::engine;

// A search that reports `updates_before_start` progress events, starts as "run-1" and then runs
// until it is cancelled.
SearchJobs::Runner fake_search_runner(int updates_before_start) {
  return [updates_before_start](const search::launch::Launch&, const core::CancelToken& cancel,
                                const engine::SearchHooks& hooks) {
    for (int i = 0; i < updates_before_start; ++i) {
      engine::ProgressEvent event;
      event.run_id = "run-1";
      event.iteration = i;
      hooks.progress(event);
    }
    hooks.started("run-1");
    while (!cancel.cancelled()) {
      std::this_thread::sleep_for(1ms);
    }
    engine::SearchOutcome outcome;
    outcome.run_id = "run-1";
    outcome.status = "cancelled";
    return outcome;
  };
}

TEST(SearchJobsWait, AWaitWithoutUpdatesEndsAtItsTimeoutOnTheClock) {
  auto clock = std::make_shared<core::ManualClock>();
  SearchJobs jobs(4, clock, fake_search_runner(0));
  auto run_id = jobs.start(search::launch::Launch{});
  ASSERT_TRUE(run_id.ok()) << run_id.failure().describe();
  EXPECT_EQ(run_id.value(), "run-1");

  const auto start = clock->now();
  auto snapshot = jobs.wait("run-1", 0, 10min, {});
  ASSERT_TRUE(snapshot);
  EXPECT_FALSE(snapshot->finished);
  EXPECT_EQ(snapshot->updates, 0);
  EXPECT_GE(clock->now() - start, core::Clock::Duration(10min));
  EXPECT_LT(clock->now() - start, core::Clock::Duration(10min + 1s));
  EXPECT_TRUE(jobs.cancel("run-1"));
}

TEST(SearchJobsWait, AnUpdateAlreadySentEndsTheWaitWithoutMovingTheClock) {
  auto clock = std::make_shared<core::ManualClock>();
  SearchJobs jobs(4, clock, fake_search_runner(2));
  ASSERT_TRUE(jobs.start(search::launch::Launch{}).ok());
  const auto start = clock->now();
  auto snapshot = jobs.wait("run-1", 1, 10min, {});
  ASSERT_TRUE(snapshot);
  EXPECT_EQ(snapshot->updates, 2);
  EXPECT_EQ(snapshot->progress.iteration, 1);
  EXPECT_EQ(clock->now(), start);
}

TEST(SearchJobsWait, ACancelledCallerReturnsAtOnce) {
  auto clock = std::make_shared<core::ManualClock>();
  SearchJobs jobs(4, clock, fake_search_runner(0));
  ASSERT_TRUE(jobs.start(search::launch::Launch{}).ok());
  core::CancelToken cancel;
  cancel.cancel();
  const auto start = clock->now();
  auto snapshot = jobs.wait("run-1", 0, 10min, cancel);
  ASSERT_TRUE(snapshot);
  EXPECT_EQ(clock->now(), start);
}

TEST(SearchJobsWait, AnUnknownRunHasNoSnapshot) {
  auto clock = std::make_shared<core::ManualClock>();
  SearchJobs jobs(4, clock, fake_search_runner(0));
  ASSERT_TRUE(jobs.start(search::launch::Launch{}).ok());
  EXPECT_FALSE(jobs.wait("run-2", 0, 10min, {}));
}

}  // namespace
}  // namespace autocomp::tools
