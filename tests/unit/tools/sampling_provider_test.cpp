#include "tools/sampling_provider.hpp"

#include <gtest/gtest.h>

#include <atomic>
#include <nlohmann/json.hpp>
#include <thread>

namespace autocomp::tools {
namespace {

using nlohmann::json;

// A client that answers every sampling request with `reply` (a fake: no model behind it).
server::ClientChannel client_answering(json reply, std::atomic<int>* asked = nullptr) {
  return server::ClientChannel(
      [reply, asked](const std::string&, const json&, std::chrono::milliseconds,
                     const core::CancelToken&) -> core::Result<json> {
        if (asked != nullptr) {
          ++*asked;
        }
        return reply;
      },
      json{{"sampling", json::object()}});
}

search::llm::CompletionRequest plan_request() {
  search::llm::CompletionRequest request;
  request.system = "system";
  request.messages.push_back({"user", "plan something"});
  request.purpose = "plan";
  return request;
}

TEST(SessionSamplingProvider, ReadsTextBlocksAndNamesTheModel) {
  auto provider = make_session_sampling_provider(
      client_answering({{"role", "assistant"},
                        {"model", "client-model"},
                        {"content", json::array({{{"type", "text"}, {"text", "Fuse "}},
                                                 {{"type", "image"}, {"data", "..."}},
                                                 {{"type", "text"}, {"text", "the loops."}}})}}));
  auto completion = provider->complete(plan_request(), {});
  ASSERT_TRUE(completion.ok()) << completion.failure().describe();
  EXPECT_EQ(completion->text, "Fuse the loops.");
  EXPECT_NE(completion->provider.find("client-model"), std::string::npos);
  EXPECT_EQ(provider->stats().answered, 1);
}

TEST(SessionSamplingProvider, MalformedRepliesAreFailuresNotExceptions) {
  for (const json& reply :
       {json{{"content", {{"type", "text"}, {"text", nullptr}}}},
        json{{"content", {{"type", 7}, {"text", "x"}}}}, json{{"content", "just a string"}},
        json{{"content", json::array({nullptr, 3, {{"text", 5}}})}}, json::array(), json()}) {
    auto provider = make_session_sampling_provider(client_answering(reply));
    core::Result<search::llm::Completion> completion =
        core::make_failure(core::FailureKind::internal, "test", "not run");
    EXPECT_NO_THROW(completion = provider->complete(plan_request(), {})) << reply.dump();
    EXPECT_FALSE(completion.ok()) << reply.dump();
    EXPECT_EQ(provider->stats().failed, 1) << reply.dump();
  }
}

TEST(SessionSamplingProvider, AClientWithoutSamplingIsUnavailable) {
  auto provider = make_session_sampling_provider(server::ClientChannel());
  auto completion = provider->complete(plan_request(), {});
  ASSERT_FALSE(completion.ok());
  EXPECT_EQ(completion.failure().kind, core::FailureKind::unavailable);
}

TEST(SessionSamplingProvider, AfterRepeatedTimeoutsOnlyAProbeIsSentPerRetryInterval) {
  std::atomic<int> asked{0};
  server::ClientChannel silent(
      [&asked](const std::string&, const json&, std::chrono::milliseconds,
               const core::CancelToken&) -> core::Result<json> {
        ++asked;
        return core::make_failure(core::FailureKind::timeout, "sampling", "no answer");
      },
      json{{"sampling", json::object()}});
  SessionSamplingOptions options;
  options.max_consecutive_timeouts = 2;
  options.retry_after = std::chrono::milliseconds(200);
  auto provider = make_session_sampling_provider(silent, options);
  EXPECT_FALSE(provider->complete(plan_request(), {}).ok());
  EXPECT_FALSE(provider->complete(plan_request(), {}).ok());
  EXPECT_EQ(asked.load(), 2);
  auto refused = provider->complete(plan_request(), {});
  ASSERT_FALSE(refused.ok());
  EXPECT_EQ(refused.failure().kind, core::FailureKind::unavailable);
  EXPECT_EQ(asked.load(), 2) << "given up: not sent";
  std::this_thread::sleep_for(std::chrono::milliseconds(250));
  EXPECT_FALSE(provider->complete(plan_request(), {}).ok());
  EXPECT_EQ(asked.load(), 3) << "one probe after retry_after";
  EXPECT_FALSE(provider->complete(plan_request(), {}).ok());
  EXPECT_EQ(asked.load(), 3) << "and only one";
}

}  // namespace
}  // namespace autocomp::tools
