#include <gtest/gtest.h>

#include "search/llm/ensemble.hpp"
#include "search/llm/fake_provider.hpp"

namespace autocomp::search::llm {
namespace {

using core::FailureKind;

CompletionRequest request_with(const std::string& text) {
  CompletionRequest request;
  request.messages.push_back({"user", text});
  return request;
}

TEST(LlmEnsembleTest, EveryMemberGetsAnEqualShare) {
  auto a = std::make_shared<FakeProvider>("fake:a", 2);
  auto b = std::make_shared<FakeProvider>("fake:b", 3);
  auto c = std::make_shared<FakeProvider>("fake:c", 1);
  for (auto& fake : {a, b, c}) {
    fake->set_responder([](const CompletionRequest&) -> core::Result<Completion> {
      Completion completion;
      completion.text = "ok";
      return completion;
    });
  }
  Ensemble ensemble({a, b, c});
  EXPECT_EQ(ensemble.max_concurrency(), 6);
  for (int i = 0; i < 9; ++i) {
    ASSERT_TRUE(ensemble.complete(request_with("x"), {}).ok());
  }
  EXPECT_EQ(a->call_count(), 3u);
  EXPECT_EQ(b->call_count(), 3u);
  EXPECT_EQ(c->call_count(), 3u);
}

TEST(LlmEnsembleTest, TransportFailureMovesOnToTheNextMember) {
  auto down = std::make_shared<FakeProvider>("fake:down");
  down->push_failure(core::make_failure(FailureKind::transport_error, "llm", "connection refused"));
  auto up = std::make_shared<FakeProvider>("fake:up");
  up->push_text("from the healthy one");
  Ensemble ensemble({down, up});
  auto result = ensemble.complete(request_with("x"), {});
  ASSERT_TRUE(result.ok()) << result.failure().describe();
  EXPECT_EQ(result->text, "from the healthy one");
  EXPECT_EQ(result->provider, "fake:up");
}

TEST(LlmEnsembleTest, BadRequestIsReturnedWithoutTryingOthers) {
  auto first = std::make_shared<FakeProvider>("fake:first");
  first->push_failure(core::make_failure(FailureKind::invalid_argument, "llm", "prompt too long"));
  auto second = std::make_shared<FakeProvider>("fake:second");
  second->push_text("unused");
  Ensemble ensemble({first, second});
  auto result = ensemble.complete(request_with("x"), {});
  ASSERT_FALSE(result.ok());
  EXPECT_EQ(result.failure().kind, FailureKind::invalid_argument);
  EXPECT_EQ(second->call_count(), 0u);
}

TEST(LlmEnsembleTest, AllMembersDownGivesTheFirstFailure) {
  auto a = std::make_shared<FakeProvider>("fake:a");
  auto b = std::make_shared<FakeProvider>("fake:b");
  a->push_failure(core::make_failure(FailureKind::unavailable, "llm", "no key for a"));
  b->push_failure(core::make_failure(FailureKind::transport_error, "llm", "b is down"));
  Ensemble ensemble({a, b});
  auto result = ensemble.complete(request_with("x"), {});
  ASSERT_FALSE(result.ok());
  EXPECT_NE(result.failure().message.find("no key for a"), std::string::npos);
}

TEST(LlmEnsembleTest, NoSpecsMeansNoLlmConfigured) {
  auto ensemble = make_ensemble({}, ProviderOptions{});
  ASSERT_FALSE(ensemble.ok());
  EXPECT_EQ(ensemble.failure().kind, FailureKind::unavailable);
  EXPECT_NE(ensemble.failure().message.find("--llm"), std::string::npos);
}

TEST(LlmFakeProviderTest, AnswersInOrderThenFromTheResponderAndRecordsRequests) {
  FakeProvider fake("fake:test");
  fake.push_text("first");
  fake.push_text("second");
  fake.set_responder([](const CompletionRequest& request) -> core::Result<Completion> {
    Completion completion;
    completion.text = "echo " + request.messages.at(0).content;
    return completion;
  });
  EXPECT_EQ(fake.pending(), 2u);
  EXPECT_EQ(fake.complete(request_with("a"), {})->text, "first");
  EXPECT_EQ(fake.complete(request_with("b"), {})->text, "second");
  auto third = fake.complete(request_with("c"), {});
  ASSERT_TRUE(third.ok());
  EXPECT_EQ(third->text, "echo c");
  EXPECT_EQ(third->provider, "fake:test");
  EXPECT_GT(third->usage.input_tokens, 0);
  EXPECT_GT(third->usage.output_tokens, 0);
  const auto requests = fake.requests();
  ASSERT_EQ(requests.size(), 3u);
  EXPECT_EQ(requests[1].messages.at(0).content, "b");
}

TEST(LlmFakeProviderTest, ExhaustedScriptIsAFailureNotACrash) {
  FakeProvider fake;
  fake.push_text("only");
  ASSERT_TRUE(fake.complete(request_with("a"), {}).ok());
  auto second = fake.complete(request_with("b"), {});
  ASSERT_FALSE(second.ok());
  EXPECT_EQ(second.failure().kind, FailureKind::unavailable);
}

TEST(LlmFakeProviderTest, CancelledTokenIsHonoured) {
  FakeProvider fake;
  fake.push_text("unused");
  core::CancelToken cancel;
  cancel.cancel();
  auto result = fake.complete(request_with("a"), cancel);
  ASSERT_FALSE(result.ok());
  EXPECT_EQ(result.failure().kind, FailureKind::cancelled);
  EXPECT_EQ(fake.pending(), 1u);
}

}  // namespace
}  // namespace autocomp::search::llm
