// Retry backoff on a ManualClock: the provider's waits between attempts are recorded on the fake
// clock instead of slept, so backoffs of minutes cost no real time.
#include <gtest/gtest.h>

#include <chrono>
#include <cstdlib>
#include <memory>
#include <string>

#include "core/clock.hpp"
#include "search/llm/http_support.hpp"
#include "search/llm/provider.hpp"
#include "support/scripted_llm_server.hpp"

namespace autocomp::search::llm {
namespace {

using namespace std::chrono_literals;
using autocomp::testing::ScriptedLlmServer;
using autocomp::testing::ScriptedResponse;
using Duration = core::Clock::Duration;

CompletionRequest simple_request() {
  CompletionRequest request;
  request.system = "You are a kernel engineer.";
  request.messages.push_back({"user", "Optimize this kernel"});
  request.max_tokens = 100;
  request.purpose = "plan";
  return request;
}

std::shared_ptr<Provider> provider_on(const std::string& base_url,
                                      std::shared_ptr<core::ManualClock> clock) {
  ProviderOptions options;
  options.base_url = base_url;
  options.backoff_initial_s = 30;
  options.backoff_max_s = 120;
  options.retry_after_cap_s = 60;
  options.max_retries = 3;
  options.timeout_s = 10;
  options.clock = std::move(clock);
  // Loopback endpoints need no key.
  auto provider = make_provider("openai:gpt-4o", options);
  EXPECT_TRUE(provider.ok()) << (provider.ok() ? "" : provider.failure().describe());
  return provider.ok() ? provider.value() : nullptr;
}

TEST(LlmBackoffClock, BackoffWaitsAreRecordedOnTheClockNotSlept) {
  ScriptedLlmServer server;
  server.push(ScriptedResponse::status_code(500));
  server.push(ScriptedResponse::status_code(503));
  server.push(ScriptedResponse::status_code(500));
  server.push_text("recovered");
  auto clock = std::make_shared<core::ManualClock>();
  auto provider = provider_on(server.openai_base_url(), clock);
  ASSERT_TRUE(provider);

  auto result = provider->complete(simple_request(), {});
  ASSERT_TRUE(result.ok()) << result.failure().describe();
  EXPECT_EQ(result->attempts, 4);
  // Retry n waits a random time in [d/2, d], d = 30 s * 2^n.
  const auto sleeps = clock->sleeps();
  ASSERT_EQ(sleeps.size(), 3u);
  for (std::size_t n = 0; n < sleeps.size(); ++n) {
    const Duration full = std::chrono::seconds(30 << n);
    EXPECT_GE(sleeps[n], full / 2) << "retry " << n;
    EXPECT_LE(sleeps[n], full) << "retry " << n;
  }
  EXPECT_GE(result->latency_ms, 105000.0);  // 15 + 30 + 60 s at least, on the clock
}

TEST(LlmBackoffClock, RetryAfterIsWaitedOnTheClockUpToTheCap) {
  ScriptedLlmServer server;
  ScriptedResponse limited = ScriptedResponse::status_code(429);
  limited.retry_after = "45";
  server.push(limited);
  limited.retry_after = "600";
  server.push(limited);
  server.push_text("done");
  auto clock = std::make_shared<core::ManualClock>();
  auto provider = provider_on(server.openai_base_url(), clock);
  ASSERT_TRUE(provider);

  auto result = provider->complete(simple_request(), {});
  ASSERT_TRUE(result.ok()) << result.failure().describe();
  EXPECT_EQ(result->attempts, 3);
  EXPECT_EQ(clock->sleeps(), (std::vector<Duration>{45s, 60s}));
}

TEST(LlmBackoffClock, SleepUnlessCancelledOnAManualClock) {
  core::ManualClock clock;
  const auto start = clock.now();
  EXPECT_TRUE(sleep_unless_cancelled(90.5, {}, clock));
  EXPECT_EQ(clock.now() - start, Duration(90500ms));
  EXPECT_EQ(clock.sleep_count(), 1u);

  core::CancelToken cancel;
  cancel.cancel();
  EXPECT_FALSE(sleep_unless_cancelled(90, cancel, clock));
  EXPECT_EQ(clock.sleep_count(), 1u);
}

}  // namespace
}  // namespace autocomp::search::llm
