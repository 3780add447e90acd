#include <gtest/gtest.h>

#include <chrono>
#include <cstdlib>
#include <filesystem>
#include <fstream>

#include "search/llm/http_support.hpp"
#include "search/llm/pricing.hpp"

namespace autocomp::search::llm {
namespace {

TEST(LlmEndpointTest, ParsesSchemeHostPortAndPrefix) {
  auto openai = parse_endpoint("https://api.openai.com/v1");
  ASSERT_TRUE(openai.ok());
  EXPECT_EQ(openai->scheme, "https");
  EXPECT_EQ(openai->host, "api.openai.com");
  EXPECT_EQ(openai->port, 443);
  EXPECT_EQ(openai->path_prefix, "/v1");
  EXPECT_FALSE(openai->loopback());

  auto local = parse_endpoint("http://localhost:11434/v1/");
  ASSERT_TRUE(local.ok());
  EXPECT_EQ(local->port, 11434);
  EXPECT_EQ(local->path_prefix, "/v1");
  EXPECT_TRUE(local->loopback());
  EXPECT_EQ(local->origin(), "http://localhost:11434");

  auto bare = parse_endpoint("http://127.0.0.1");
  ASSERT_TRUE(bare.ok());
  EXPECT_EQ(bare->port, 80);
  EXPECT_EQ(bare->path_prefix, "");
  EXPECT_TRUE(bare->loopback());

  auto v6 = parse_endpoint("http://[::1]:8000/v1");
  ASSERT_TRUE(v6.ok());
  EXPECT_EQ(v6->host, "::1");
  EXPECT_EQ(v6->port, 8000);
  EXPECT_TRUE(v6->loopback());
}

TEST(LlmEndpointTest, RejectsMalformedUrls) {
  EXPECT_FALSE(parse_endpoint("api.openai.com/v1").ok());
  EXPECT_FALSE(parse_endpoint("ftp://host/").ok());
  EXPECT_FALSE(parse_endpoint("http://:80").ok());
  EXPECT_FALSE(parse_endpoint("http://host:99999").ok());
  EXPECT_FALSE(parse_endpoint("http://user:pass@host/v1").ok());
}

TEST(LlmRetryTest, RetryAfterInSecondsOrAsAnHttpDate) {
  const auto now = std::chrono::system_clock::from_time_t(784111777);  // 1994-11-06 08:49:37 GMT
  EXPECT_EQ(parse_retry_after("7", now), 7.0);
  EXPECT_EQ(parse_retry_after(" 0 ", now), 0.0);
  auto date = parse_retry_after("Sun, 06 Nov 1994 08:49:47 GMT", now);
  ASSERT_TRUE(date);
  EXPECT_NEAR(*date, 10.0, 1e-6);
  EXPECT_EQ(parse_retry_after("Sun, 06 Nov 1994 08:00:00 GMT", now), 0.0);
  EXPECT_FALSE(parse_retry_after("soon", now));
  EXPECT_FALSE(parse_retry_after("", now));
}

TEST(LlmRetryTest, BackoffDoublesWithJitterAndIsCapped) {
  EXPECT_DOUBLE_EQ(backoff_seconds(0, 1, 30, 1.0), 1.0);
  EXPECT_DOUBLE_EQ(backoff_seconds(0, 1, 30, 0.0), 0.5);
  EXPECT_DOUBLE_EQ(backoff_seconds(3, 1, 30, 1.0), 8.0);
  EXPECT_DOUBLE_EQ(backoff_seconds(10, 1, 30, 1.0), 30.0);
  EXPECT_TRUE(retryable_status(429));
  EXPECT_TRUE(retryable_status(500));
  EXPECT_TRUE(retryable_status(529));
  EXPECT_FALSE(retryable_status(400));
  EXPECT_FALSE(retryable_status(401));
  EXPECT_FALSE(retryable_status(404));
}

TEST(LlmRetryTest, RedactRemovesEverySecretOccurrence) {
  EXPECT_EQ(redact("key abc and abc", "abc"), "key [redacted] and [redacted]");
  EXPECT_EQ(redact("nothing", ""), "nothing");
}

TEST(LlmPricingTest, BuiltinTableKnowsFamiliesAndDatedSnapshots) {
  const auto table = PriceTable::builtin();
  ASSERT_TRUE(table.find("gpt-4o"));
  EXPECT_DOUBLE_EQ(table.find("gpt-4o")->input_per_mtok, 2.5);
  // Longest prefix wins: gpt-4o-mini is not priced like gpt-4o.
  EXPECT_DOUBLE_EQ(table.find("gpt-4o-mini-2024-07-18")->input_per_mtok, 0.15);
  EXPECT_DOUBLE_EQ(table.find("claude-sonnet-4-20250514")->output_per_mtok, 15);
  EXPECT_FALSE(table.find("llama3"));
  EXPECT_FALSE(table.find("gpt-4oxyz"));
  auto cost = estimate_cost(table, "gpt-4o", 1'000'000, 1'000'000);
  ASSERT_TRUE(cost);
  EXPECT_NEAR(*cost, 12.5, 1e-9);
  EXPECT_FALSE(estimate_cost(table, "unknown-model", 10, 10));
}

TEST(LlmPricingTest, PriceFileAndOptionsOverrideTheBuiltinTable) {
  const auto path = std::filesystem::temp_directory_path() / "autocomp_llm_prices_test.txt";
  {
    std::ofstream out(path);
    out << "# local models\nqwen-coder 0.1 0.2\ngpt-4o 1 2  # negotiated\n";
  }
  setenv("AUTOCOMP_LLM_PRICES", path.c_str(), 1);
  auto table = PriceTable::with_overrides({{"gpt-4o", {3, 4}}});
  unsetenv("AUTOCOMP_LLM_PRICES");
  std::filesystem::remove(path);
  ASSERT_TRUE(table.ok()) << table.failure().describe();
  EXPECT_DOUBLE_EQ(table->find("qwen-coder")->output_per_mtok, 0.2);
  EXPECT_DOUBLE_EQ(table->find("gpt-4o")->input_per_mtok, 3);  // options beat the file
}

TEST(LlmPricingTest, MalformedPriceFileNamesTheLine) {
  PriceTable table;
  auto status = parse_price_file("good 1 2\nbad-line 1\n", "prices.txt", table);
  ASSERT_FALSE(status.ok());
  EXPECT_NE(status.failure().message.find("prices.txt:2"), std::string::npos);
}

}  // namespace
}  // namespace autocomp::search::llm
