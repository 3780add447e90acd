#include <gtest/gtest.h>

#include <chrono>
#include <cstdlib>
#include <nlohmann/json.hpp>
#include <thread>
#include <vector>

#include "search/llm/ensemble.hpp"
#include "search/llm/provider.hpp"
#include "support/scripted_llm_server.hpp"

namespace autocomp::search::llm {
namespace {

using autocomp::testing::ScriptedLlmServer;
using autocomp::testing::ScriptedResponse;
using core::FailureKind;

constexpr const char* k_key = "sk-test-SECRET-4242";

// Sets an environment variable for one test and restores the previous value afterwards.
class ScopedEnv {
 public:
  ScopedEnv(const char* name, const char* value) : m_name(name) {
    if (const char* old = std::getenv(name)) {
      m_old = old;
    }
    if (value != nullptr) {
      setenv(name, value, 1);
    } else {
      unsetenv(name);
    }
  }
  ~ScopedEnv() {
    if (m_old) {
      setenv(m_name, m_old->c_str(), 1);
    } else {
      unsetenv(m_name);
    }
  }

 private:
  const char* m_name;
  std::optional<std::string> m_old;
};

ProviderOptions fast_options(const std::string& base_url) {
  ProviderOptions options;
  options.base_url = base_url;
  options.backoff_initial_s = 0.01;
  options.backoff_max_s = 0.05;
  options.max_retries = 3;
  options.timeout_s = 10;
  return options;
}

CompletionRequest simple_request(const std::string& text = "Optimize this kernel") {
  CompletionRequest request;
  request.system = "You are a kernel engineer.";
  request.messages.push_back({"user", text});
  request.max_tokens = 321;
  request.temperature = 0.5;
  request.purpose = "plan";
  return request;
}

std::shared_ptr<Provider> make(const std::string& spec, const ProviderOptions& options) {
  auto provider = make_provider(spec, options);
  EXPECT_TRUE(provider.ok()) << (provider.ok() ? "" : provider.failure().describe());
  return provider.ok() ? provider.value() : nullptr;
}

TEST(LlmProviderTest, OpenAiCallSendsChatCompletionAndReturnsTextUsageAndCost) {
  ScopedEnv key("OPENAI_API_KEY", k_key);
  ScriptedLlmServer server;
  ScriptedResponse reply = ScriptedResponse::reply("plan: hoist the loads");
  reply.input_tokens = 1000;
  reply.output_tokens = 500;
  server.push(reply);
  auto provider = make("openai:gpt-4o", fast_options(server.openai_base_url()));
  ASSERT_TRUE(provider);

  auto result = provider->complete(simple_request(), {});
  ASSERT_TRUE(result.ok()) << result.failure().describe();
  EXPECT_EQ(result->text, "plan: hoist the loads");
  EXPECT_EQ(result->provider, "openai:gpt-4o");
  EXPECT_EQ(result->attempts, 1);
  EXPECT_EQ(result->usage.input_tokens, 1000);
  EXPECT_EQ(result->usage.output_tokens, 500);
  EXPECT_TRUE(result->usage.cost_known);
  EXPECT_NEAR(result->usage.cost_usd, (1000 * 2.5 + 500 * 10.0) / 1e6, 1e-12);

  const auto requests = server.requests();
  ASSERT_EQ(requests.size(), 1u);
  EXPECT_EQ(requests[0].path, "/v1/chat/completions");
  EXPECT_EQ(requests[0].header("Authorization"), std::string("Bearer ") + k_key);
  const auto body = nlohmann::json::parse(requests[0].body);
  EXPECT_EQ(body["model"], "gpt-4o");
  EXPECT_EQ(body["max_tokens"], 321);
  EXPECT_DOUBLE_EQ(body["temperature"].get<double>(), 0.5);
  ASSERT_EQ(body["messages"].size(), 2u);
  EXPECT_EQ(body["messages"][0]["role"], "system");
  EXPECT_EQ(body["messages"][0]["content"], "You are a kernel engineer.");
  EXPECT_EQ(body["messages"][1]["role"], "user");
  EXPECT_EQ(body["messages"][1]["content"], "Optimize this kernel");
}

TEST(LlmProviderTest, UnknownModelCostsZeroAndSaysSo) {
  ScopedEnv key("OPENAI_API_KEY", nullptr);
  ScriptedLlmServer server;
  server.push_text("ok");
  auto provider = make("openai:my-local-llama:8b", fast_options(server.openai_base_url()));
  ASSERT_TRUE(provider);
  auto result = provider->complete(simple_request(), {});
  ASSERT_TRUE(result.ok()) << result.failure().describe();
  EXPECT_EQ(result->usage.cost_usd, 0);
  EXPECT_FALSE(result->usage.cost_known);
  // A local server needs no key, and none is sent.
  EXPECT_EQ(server.requests().at(0).header("Authorization"), "");
  EXPECT_EQ(nlohmann::json::parse(server.requests().at(0).body)["model"], "my-local-llama:8b");
}

TEST(LlmProviderTest, PriceOverrideFromOptionsIsUsed) {
  ScopedEnv key("OPENAI_API_KEY", nullptr);
  ScriptedLlmServer server;
  ScriptedResponse reply = ScriptedResponse::reply("ok");
  reply.input_tokens = 2'000'000;
  reply.output_tokens = 1'000'000;
  server.push(reply);
  auto options = fast_options(server.openai_base_url());
  options.prices["house-model"] = {1.0, 3.0};
  auto provider = make("openai:house-model", options);
  ASSERT_TRUE(provider);
  auto result = provider->complete(simple_request(), {});
  ASSERT_TRUE(result.ok());
  EXPECT_NEAR(result->usage.cost_usd, 5.0, 1e-9);
  EXPECT_TRUE(result->usage.cost_known);
}

TEST(LlmProviderTest, RateLimitIsRetriedAfterTheServersRetryAfter) {
  ScopedEnv key("OPENAI_API_KEY", k_key);
  ScriptedLlmServer server;
  ScriptedResponse limited = ScriptedResponse::status_code(
      429, R"({"error":{"message":"Rate limit reached","type":"rate_limit"}})");
  limited.retry_after = "1";
  server.push(limited);
  server.push_text("second time lucky");
  auto provider = make("openai:gpt-4o", fast_options(server.openai_base_url()));
  ASSERT_TRUE(provider);

  auto result = provider->complete(simple_request(), {});
  ASSERT_TRUE(result.ok()) << result.failure().describe();
  EXPECT_EQ(result->text, "second time lucky");
  EXPECT_EQ(result->attempts, 2);
  const auto requests = server.requests();
  ASSERT_EQ(requests.size(), 2u);
  // The backoff alone would be ~10 ms: the wait shows Retry-After was honoured.
  EXPECT_GE(requests[1].received - requests[0].received, std::chrono::milliseconds(900));
}

TEST(LlmProviderTest, ServerErrorIsRetriedThenSucceeds) {
  ScopedEnv key("OPENAI_API_KEY", k_key);
  ScriptedLlmServer server;
  server.push(ScriptedResponse::status_code(500, R"({"error":{"message":"upstream broke"}})"));
  server.push(ScriptedResponse::status_code(503));
  server.push_text("recovered");
  auto provider = make("openai:gpt-4o", fast_options(server.openai_base_url()));
  ASSERT_TRUE(provider);
  auto result = provider->complete(simple_request(), {});
  ASSERT_TRUE(result.ok()) << result.failure().describe();
  EXPECT_EQ(result->text, "recovered");
  EXPECT_EQ(result->attempts, 3);
  EXPECT_EQ(server.request_count(), 3u);
}

TEST(LlmProviderTest, PersistentServerErrorFailsAfterTheRetryBudget) {
  ScopedEnv key("OPENAI_API_KEY", k_key);
  ScriptedLlmServer server;
  server.set_fallback(ScriptedResponse::status_code(502, R"({"error":{"message":"bad gateway"}})"));
  auto options = fast_options(server.openai_base_url());
  options.max_retries = 2;
  auto provider = make("openai:gpt-4o", options);
  ASSERT_TRUE(provider);
  auto result = provider->complete(simple_request(), {});
  ASSERT_FALSE(result.ok());
  EXPECT_EQ(result.failure().kind, FailureKind::transport_error);
  EXPECT_NE(result.failure().message.find("bad gateway"), std::string::npos);
  EXPECT_NE(result.failure().message.find("3 attempts"), std::string::npos);
  EXPECT_EQ(server.request_count(), 3u);
}

TEST(LlmProviderTest, BadRequestIsNotRetried) {
  ScopedEnv key("OPENAI_API_KEY", k_key);
  ScriptedLlmServer server;
  server.push(ScriptedResponse::status_code(
      400, R"({"error":{"message":"This model's maximum context length is 8192 tokens"}})"));
  server.push_text("never reached");
  auto provider = make("openai:gpt-4o", fast_options(server.openai_base_url()));
  ASSERT_TRUE(provider);
  auto result = provider->complete(simple_request(), {});
  ASSERT_FALSE(result.ok());
  EXPECT_EQ(result.failure().kind, FailureKind::invalid_argument);
  EXPECT_NE(result.failure().message.find("maximum context length"), std::string::npos);
  EXPECT_EQ(server.request_count(), 1u);
}

TEST(LlmProviderTest, RejectedMaxTokensParameterIsReplacedAndAskedAgain) {
  ScopedEnv key("OPENAI_API_KEY", k_key);
  ScriptedLlmServer server;
  server.push(ScriptedResponse::status_code(
      400,
      R"({"error":{"message":"Unsupported parameter: 'max_tokens' is not supported with this model. Use 'max_completion_tokens' instead."}})"));
  server.push_text("fine now");
  auto provider = make("openai:o3", fast_options(server.openai_base_url()));
  ASSERT_TRUE(provider);
  auto result = provider->complete(simple_request(), {});
  ASSERT_TRUE(result.ok()) << result.failure().describe();
  const auto requests = server.requests();
  ASSERT_EQ(requests.size(), 2u);
  const auto second = nlohmann::json::parse(requests[1].body);
  EXPECT_EQ(second["max_completion_tokens"], 321);
  EXPECT_FALSE(second.contains("max_tokens"));
}

TEST(LlmProviderTest, SlowServerTimesOut) {
  ScopedEnv key("OPENAI_API_KEY", k_key);
  ScriptedLlmServer server;
  ScriptedResponse slow = ScriptedResponse::reply("too late");
  slow.delay = std::chrono::milliseconds(5000);
  server.push(slow);
  auto options = fast_options(server.openai_base_url());
  options.timeout_s = 0.3;
  options.max_retries = 0;
  auto provider = make("openai:gpt-4o", options);
  ASSERT_TRUE(provider);
  auto result = provider->complete(simple_request(), {});
  ASSERT_FALSE(result.ok());
  EXPECT_EQ(result.failure().kind, FailureKind::timeout);
}

TEST(LlmProviderTest, UnreachableServerIsATransportError) {
  ScopedEnv key("OPENAI_API_KEY", k_key);
  int port = 0;
  {
    ScriptedLlmServer server;  // bind, learn a free port, and close it again
    port = server.port();
  }
  auto options = fast_options("http://127.0.0.1:" + std::to_string(port) + "/v1");
  options.max_retries = 1;
  auto provider = make("openai:gpt-4o", options);
  ASSERT_TRUE(provider);
  auto result = provider->complete(simple_request(), {});
  ASSERT_FALSE(result.ok());
  EXPECT_EQ(result.failure().kind, FailureKind::transport_error);
  EXPECT_NE(result.failure().message.find("2 attempts"), std::string::npos);
}

TEST(LlmProviderTest, CancellationDuringBackoffStopsTheCall) {
  ScopedEnv key("OPENAI_API_KEY", k_key);
  ScriptedLlmServer server;
  server.set_fallback(ScriptedResponse::status_code(500));
  auto options = fast_options(server.openai_base_url());
  options.backoff_initial_s = 30;
  options.backoff_max_s = 30;
  auto provider = make("openai:gpt-4o", options);
  ASSERT_TRUE(provider);
  core::CancelToken cancel;
  std::thread canceller([&] {
    while (server.request_count() == 0) {
      std::this_thread::sleep_for(std::chrono::milliseconds(5));
    }
    std::this_thread::sleep_for(std::chrono::milliseconds(100));
    cancel.cancel();
  });
  auto result = provider->complete(simple_request(), cancel);
  canceller.join();
  ASSERT_FALSE(result.ok());
  EXPECT_EQ(result.failure().kind, FailureKind::cancelled);
  EXPECT_EQ(server.request_count(), 1u);
}

TEST(LlmProviderTest, CancellationDuringARequestStopsTheCall) {
  ScopedEnv key("OPENAI_API_KEY", k_key);
  ScriptedLlmServer server;
  ScriptedResponse slow = ScriptedResponse::reply("too late");
  slow.delay = std::chrono::milliseconds(20000);
  server.push(slow);
  auto provider = make("openai:gpt-4o", fast_options(server.openai_base_url()));
  ASSERT_TRUE(provider);
  core::CancelToken cancel;
  std::thread canceller([&] {
    while (server.request_count() == 0) {
      std::this_thread::sleep_for(std::chrono::milliseconds(5));
    }
    cancel.cancel();
  });
  auto result = provider->complete(simple_request(), cancel);
  canceller.join();
  ASSERT_FALSE(result.ok());
  EXPECT_EQ(result.failure().kind, FailureKind::cancelled);
}

TEST(LlmProviderTest, ConcurrencyLimitIsRespected) {
  ScopedEnv key("OPENAI_API_KEY", k_key);
  ScriptedLlmServer server;
  ScriptedResponse reply = ScriptedResponse::reply("done");
  reply.delay = std::chrono::milliseconds(150);
  reply.repeat = true;
  server.push(reply);
  auto options = fast_options(server.openai_base_url());
  options.max_concurrency = 2;
  auto provider = make("openai:gpt-4o", options);
  ASSERT_TRUE(provider);
  EXPECT_EQ(provider->max_concurrency(), 2);
  std::vector<std::thread> callers;
  std::atomic<int> succeeded{0};
  for (int i = 0; i < 6; ++i) {
    callers.emplace_back([&] {
      if (provider->complete(simple_request(), {}).ok()) {
        ++succeeded;
      }
    });
  }
  for (auto& caller : callers) {
    caller.join();
  }
  EXPECT_EQ(succeeded.load(), 6);
  EXPECT_EQ(server.request_count(), 6u);
  EXPECT_LE(server.max_concurrent(), 2);
  EXPECT_GE(server.max_concurrent(), 1);
}

TEST(LlmProviderTest, KeyNeverAppearsInFailureMessages) {
  ScopedEnv key("OPENAI_API_KEY", k_key);
  ScriptedLlmServer server;
  // A server that echoes the key back in its error, as some do for a wrong key.
  server.push(ScriptedResponse::status_code(
      401, std::string(R"({"error":{"message":"Incorrect API key provided: )") + k_key + "\"}}"));
  server.set_fallback(ScriptedResponse::status_code(
      500, std::string(R"({"error":{"message":"internal error for key )") + k_key + "\"}}"));
  auto provider = make("openai:gpt-4o", fast_options(server.openai_base_url()));
  ASSERT_TRUE(provider);

  auto unauthorized = provider->complete(simple_request(), {});
  ASSERT_FALSE(unauthorized.ok());
  EXPECT_EQ(unauthorized.failure().kind, FailureKind::unavailable);
  EXPECT_EQ(unauthorized.failure().describe().find(k_key), std::string::npos)
      << unauthorized.failure().describe();
  EXPECT_NE(unauthorized.failure().message.find("OPENAI_API_KEY"), std::string::npos);

  auto broken = provider->complete(simple_request(), {});
  ASSERT_FALSE(broken.ok());
  EXPECT_EQ(broken.failure().describe().find(k_key), std::string::npos)
      << broken.failure().describe();
  EXPECT_EQ(provider->spec().find(k_key), std::string::npos);
}

TEST(LlmProviderTest, MissingKeyForARemoteEndpointIsUnavailable) {
  ScopedEnv key("OPENAI_API_KEY", nullptr);
  ScopedEnv base("OPENAI_BASE_URL", nullptr);
  auto provider = make_provider("openai:gpt-4o", ProviderOptions{});
  ASSERT_FALSE(provider.ok());
  EXPECT_EQ(provider.failure().kind, FailureKind::unavailable);
  EXPECT_NE(provider.failure().message.find("OPENAI_API_KEY"), std::string::npos);
  EXPECT_NE(provider.failure().message.find("api.openai.com"), std::string::npos);
}

TEST(LlmProviderTest, BaseUrlComesFromTheEnvironment) {
  ScopedEnv key("OPENAI_API_KEY", nullptr);
  ScriptedLlmServer server;
  ScopedEnv base("OPENAI_BASE_URL", server.openai_base_url().c_str());
  server.push_text("from env");
  auto provider = make_provider("openai:qwen", ProviderOptions{});
  ASSERT_TRUE(provider.ok()) << provider.failure().describe();
  auto result = provider.value()->complete(simple_request(), {});
  ASSERT_TRUE(result.ok()) << result.failure().describe();
  EXPECT_EQ(result->text, "from env");
}

TEST(LlmProviderTest, UnknownSchemeAndMalformedSpecsAreRejected) {
  auto unknown = make_provider("gemini:pro", ProviderOptions{});
  ASSERT_FALSE(unknown.ok());
  EXPECT_EQ(unknown.failure().kind, FailureKind::invalid_argument);
  EXPECT_NE(unknown.failure().message.find("openai"), std::string::npos);
  EXPECT_FALSE(make_provider("gpt-4o", ProviderOptions{}).ok());
  EXPECT_FALSE(make_provider("openai:", ProviderOptions{}).ok());
  auto bad_url = ProviderOptions{};
  bad_url.base_url = "ftp://example.com";
  EXPECT_FALSE(make_provider("openai:gpt-4o", bad_url).ok());
}

TEST(LlmProviderTest, AnthropicWireFormat) {
  ScopedEnv key("ANTHROPIC_API_KEY", k_key);
  ScriptedLlmServer server;
  ScriptedResponse reply = ScriptedResponse::reply("anthropic says hi");
  reply.input_tokens = 1'000'000;
  reply.output_tokens = 100'000;
  server.push(reply);
  auto provider =
      make("anthropic:claude-sonnet-4-5-20250929", fast_options(server.anthropic_base_url()));
  ASSERT_TRUE(provider);
  auto result = provider->complete(simple_request(), {});
  ASSERT_TRUE(result.ok()) << result.failure().describe();
  EXPECT_EQ(result->text, "anthropic says hi");
  EXPECT_EQ(result->provider, "anthropic:claude-sonnet-4-5-20250929");
  EXPECT_EQ(result->usage.input_tokens, 1'000'000);
  EXPECT_EQ(result->usage.output_tokens, 100'000);
  EXPECT_NEAR(result->usage.cost_usd, 3.0 + 1.5, 1e-9);  // dated snapshot priced by its family

  const auto requests = server.requests();
  ASSERT_EQ(requests.size(), 1u);
  EXPECT_EQ(requests[0].path, "/v1/messages");
  EXPECT_EQ(requests[0].header("x-api-key"), k_key);
  EXPECT_FALSE(requests[0].header("anthropic-version").empty());
  EXPECT_EQ(requests[0].header("Authorization"), "");
  const auto body = nlohmann::json::parse(requests[0].body);
  EXPECT_EQ(body["system"], "You are a kernel engineer.");
  EXPECT_EQ(body["max_tokens"], 321);
  ASSERT_EQ(body["messages"].size(), 1u);
  EXPECT_EQ(body["messages"][0]["role"], "user");
  EXPECT_EQ(body["messages"][0]["content"], "Optimize this kernel");
}

TEST(LlmProviderTest, AnthropicBaseUrlEndingInV1IsNotDoubled) {
  ScopedEnv key("ANTHROPIC_API_KEY", k_key);
  ScriptedLlmServer server;
  server.push_text("ok");
  auto provider =
      make("anthropic:claude-haiku-4-5", fast_options(server.anthropic_base_url() + "/v1/"));
  ASSERT_TRUE(provider);
  ASSERT_TRUE(provider->complete(simple_request(), {}).ok());
  EXPECT_EQ(server.requests().at(0).path, "/v1/messages");
}

TEST(LlmProviderTest, AnthropicOverloadIsRetried) {
  ScopedEnv key("ANTHROPIC_API_KEY", k_key);
  ScriptedLlmServer server;
  server.push(ScriptedResponse::status_code(
      529, R"({"type":"error","error":{"type":"overloaded_error","message":"Overloaded"}})"));
  server.push_text("after overload");
  auto provider = make("anthropic:claude-haiku-4-5", fast_options(server.anthropic_base_url()));
  ASSERT_TRUE(provider);
  auto result = provider->complete(simple_request(), {});
  ASSERT_TRUE(result.ok()) << result.failure().describe();
  EXPECT_EQ(result->attempts, 2);
}

TEST(LlmProviderTest, EnsembleSpreadsCallsOverEveryProviderRoundRobin) {
  ScopedEnv openai_key("OPENAI_API_KEY", nullptr);
  ScopedEnv anthropic_key("ANTHROPIC_API_KEY", nullptr);
  ScriptedLlmServer server;
  server.set_fallback(ScriptedResponse::reply("answer"));
  auto options = fast_options("");
  ScopedEnv openai_base("OPENAI_BASE_URL", server.openai_base_url().c_str());
  ScopedEnv anthropic_base("ANTHROPIC_BASE_URL", server.anthropic_base_url().c_str());
  options.base_url.clear();
  auto ensemble = make_ensemble({"openai:model-a", "anthropic:model-b"}, options);
  ASSERT_TRUE(ensemble.ok()) << ensemble.failure().describe();
  EXPECT_EQ(ensemble.value()->spec(), "openai:model-a,anthropic:model-b");
  std::vector<std::string> answered_by;
  for (int i = 0; i < 4; ++i) {
    auto result = ensemble.value()->complete(simple_request(), {});
    ASSERT_TRUE(result.ok()) << result.failure().describe();
    answered_by.push_back(result->provider);
  }
  EXPECT_EQ(answered_by, (std::vector<std::string>{"openai:model-a", "anthropic:model-b",
                                                   "openai:model-a", "anthropic:model-b"}));
  const auto requests = server.requests();
  ASSERT_EQ(requests.size(), 4u);
  EXPECT_EQ(requests[0].path, "/v1/chat/completions");
  EXPECT_EQ(requests[1].path, "/v1/messages");
}

TEST(LlmProviderTest, SpecCanNameItsOwnServerSoAnEnsembleMixesServers) {
  ScopedEnv key("OPENAI_API_KEY", nullptr);
  ScriptedLlmServer first;
  ScriptedLlmServer second;
  first.set_fallback(ScriptedResponse::reply("from first"));
  second.set_fallback(ScriptedResponse::reply("from second"));
  const std::string spec_a = "openai:qwen@" + first.openai_base_url();
  const std::string spec_b = "openai:llama@" + second.openai_base_url();
  auto ensemble = make_ensemble({spec_a, spec_b}, fast_options(""));
  ASSERT_TRUE(ensemble.ok()) << ensemble.failure().describe();
  auto a = ensemble.value()->complete(simple_request(), {});
  auto b = ensemble.value()->complete(simple_request(), {});
  ASSERT_TRUE(a.ok() && b.ok());
  EXPECT_EQ(a->text, "from first");
  EXPECT_EQ(a->provider, spec_a);
  EXPECT_EQ(b->text, "from second");
  EXPECT_EQ(nlohmann::json::parse(first.requests().at(0).body)["model"], "qwen");
  EXPECT_EQ(nlohmann::json::parse(second.requests().at(0).body)["model"], "llama");
}

}  // namespace
}  // namespace autocomp::search::llm
