#include <gtest/gtest.h>

#include "search/engine/beam_search.hpp"
#include "search/launch/proposers.hpp"
#include "unit/search/engine_test_support.hpp"

namespace autocomp::search::engine {
namespace {

using testing::kernel;
using testing::kernel_in;
using testing::Rig;
using testing::Script;
using testing::small_config;

const std::string k_root = kernel("k", "latency: 100");
// small_config with the learning loop on.
SearchConfig learning_config(const std::string& root) {
  auto config = small_config(root);
  config.memory = true;
  config.reflexions = 3;
  return config;
}

const std::string k_lesson_reply = "- Fuse loops to cut DMA traffic.\n- Keep tiles at 128 rows.\n";

// The script's answers, with a fixed reply to lesson summaries.
llm::FakeProvider::Responder with_summary(const Script& script, const std::string& reply) {
  auto inner = script.responder();
  return [inner, reply](const llm::CompletionRequest& request) -> core::Result<llm::Completion> {
    if (request.purpose == "summarize") {
      llm::Completion completion;
      completion.text = reply;
      completion.provider = "fake";
      return completion;
    }
    return inner(request);
  };
}

std::vector<llm::CompletionRequest> requests_with_purpose(const llm::FakeProvider& provider,
                                                          const std::string& purpose) {
  std::vector<llm::CompletionRequest> out;
  for (const auto& request : provider.requests()) {
    if (request.purpose == purpose) {
      out.push_back(request);
    }
  }
  return out;
}

std::string text_of(const llm::CompletionRequest& request) {
  std::string text = request.system;
  for (const auto& message : request.messages) {
    text += "\n" + message.content;
  }
  return text;
}

TEST(EngineMemory, FasterChildIsSummarizedIntoStoredLessons) {
  Rig rig;
  Script script;
  script.implement[k_root] = kernel("k", "latency: 80");
  rig.provider->set_responder(with_summary(script, k_lesson_reply));

  auto config = learning_config(k_root);
  auto outcome = run_search(config, rig.services(), {});
  ASSERT_EQ(outcome.status, "completed") << outcome.stop_reason;
  auto summaries = requests_with_purpose(*rig.provider, "summarize");
  ASSERT_EQ(summaries.size(), 1u);
  EXPECT_NE(text_of(summaries[0]).find(script.plan), std::string::npos);
  EXPECT_NE(text_of(summaries[0]).find("Outcome: faster (latency -"), std::string::npos)
      << "the outcome states the measured change";
  EXPECT_EQ(text_of(summaries[0]).find("Merge them"), std::string::npos)
      << "nothing to merge with on the first call";
  auto lessons = rig.lessons(config.target);
  ASSERT_EQ(lessons.size(), 2u);
  EXPECT_EQ(lessons[0], "Fuse loops to cut DMA traffic.") << "in the order the reply wrote them";
  EXPECT_EQ(lessons[1], "Keep tiles at 128 rows.");
}

TEST(EngineMemory, LaterRunOnTheSameTargetPlansWithTheLessons) {
  Rig rig;
  Script script;
  script.implement[k_root] = kernel("k", "latency: 80");
  rig.provider->set_responder(with_summary(script, k_lesson_reply));
  ASSERT_EQ(run_search(learning_config(k_root), rig.services(), {}).status, "completed");

  auto second = std::make_shared<llm::FakeProvider>("fake", 4);
  second->set_responder(with_summary(script, k_lesson_reply));
  auto services = rig.services();
  services.providers = {second};
  ASSERT_EQ(run_search(learning_config(k_root), services, {}).status, "completed");
  auto plans = requests_with_purpose(*second, "plan");
  ASSERT_FALSE(plans.empty());
  EXPECT_NE(text_of(plans[0]).find("Fuse loops to cut DMA traffic."), std::string::npos);
  auto implementations = requests_with_purpose(*second, "implement");
  ASSERT_FALSE(implementations.empty());
  const auto implement_text = text_of(implementations[0]);
  const auto first = implement_text.find("Fuse loops to cut DMA traffic.");
  const auto then = implement_text.find("Keep tiles at 128 rows.");
  ASSERT_NE(first, std::string::npos) << "implementation prompts carry the lessons";
  ASSERT_NE(then, std::string::npos);
  EXPECT_LT(first, then) << "in their stored order";
}

TEST(EngineMemory, GarbageSummaryStoresNothingAndTheRunCompletes) {
  Rig rig;
  Script script;
  script.implement[k_root] = kernel("k", "latency: 80");
  rig.provider->set_responder(with_summary(script, "\x01\x02 no list here {]"));

  auto config = learning_config(k_root);
  config.iterations = 2;
  auto outcome = run_search(config, rig.services(), {});
  ASSERT_EQ(outcome.status, "completed") << outcome.stop_reason;
  EXPECT_FALSE(requests_with_purpose(*rig.provider, "summarize").empty());
  EXPECT_TRUE(rig.lessons(config.target).empty());
}

TEST(EngineMemory, NoProvidersMeansNoSummary) {
  Rig rig;
  auto services = rig.services();
  services.providers.clear();
  services.make_proposer = launch::make_proposer;
  auto config = learning_config(k_root);
  config.proposers = {"autotune"};
  auto outcome = run_search(config, services, {});
  EXPECT_EQ(rig.provider->call_count(), 0u);
  EXPECT_TRUE(rig.lessons(config.target).empty());
}

const std::string k_reflection_reply =
    "**diagnosis_right:** yes\n"
    "- fix_worked: yes\n"
    "expected: 20% less DMA time\n"
    "actual: loads overlapped with compute\n"
    "lessons: fusing the loops removed a round trip to HBM\n"
    "avoid: tiles over 128 rows\n"
    "try_next: double buffer the loads\n";

// The script's answers, with fixed replies to reflections (or a failure when `reply` is empty).
llm::FakeProvider::Responder with_reflection(const Script& script, const std::string& reply) {
  auto inner = script.responder();
  return [inner, reply](const llm::CompletionRequest& request) -> core::Result<llm::Completion> {
    if (request.purpose == "reflect") {
      if (reply.empty()) {
        return core::make_failure(core::FailureKind::unavailable, "llm", "reflection refused");
      }
      llm::Completion completion;
      completion.text = reply;
      completion.provider = "fake";
      return completion;
    }
    return inner(request);
  };
}

SearchConfig reflecting_config(const std::string& root) {
  auto config = small_config(root);
  config.reflexions = 3;
  config.iterations = 2;
  return config;
}

Script two_step_script() {
  Script script;
  const std::string first = kernel("k", "latency: 80");
  script.implement[k_root] = first;
  script.implement[first] = kernel("k", "latency: 70");
  return script;
}

TEST(EngineReflexion, EachAttemptIsReflectedOnAndFeedsTheNextPlan) {
  Rig rig;
  rig.provider->set_responder(with_reflection(two_step_script(), k_reflection_reply));
  auto outcome = run_search(reflecting_config(k_root), rig.services(), {});
  ASSERT_EQ(outcome.status, "completed") << outcome.stop_reason;
  EXPECT_DOUBLE_EQ(outcome.best.latency_us(), 70);

  auto reflections = requests_with_purpose(*rig.provider, "reflect");
  ASSERT_EQ(reflections.size(), 2u) << "one per plan, one plan per iteration";
  EXPECT_NE(text_of(reflections[0]).find("1.25x faster"), std::string::npos)
      << "the measured outcome is in the prompt";

  auto records = rig.reflexions(outcome.run_id);
  ASSERT_EQ(records.size(), 2u);
  EXPECT_EQ(records[0].diagnosis_right, true);
  EXPECT_EQ(records[0].fix_worked, true);
  EXPECT_EQ(records[0].avoid, "tiles over 128 rows");
  EXPECT_NE(records[0].actual.find("1.25x faster"), std::string::npos);

  auto plans = requests_with_purpose(*rig.provider, "plan");
  ASSERT_EQ(plans.size(), 2u);
  EXPECT_EQ(text_of(plans[0]).find("tiles over 128 rows"), std::string::npos);
  EXPECT_NE(text_of(plans[1]).find("avoid: tiles over 128 rows"), std::string::npos)
      << text_of(plans[1]);
}

TEST(EngineReflexion, MalformedOrFailedReflectionsNeverBreakTheLoop) {
  for (const std::string& reply : {std::string("\x01 {]] nothing useful"), std::string()}) {
    Rig rig;
    Script script = two_step_script();
    script.implement[k_root] = kernel("k", "latency: 130");  // a slower, correct attempt
    rig.provider->set_responder(with_reflection(script, reply));
    auto outcome = run_search(reflecting_config(k_root), rig.services(), {});
    ASSERT_EQ(outcome.status, "completed") << outcome.stop_reason;
    EXPECT_EQ(outcome.iterations_done, 2);
    // Iteration 2 starts from the input again and repeats the attempt: a duplicate, not
    // reflected on twice.
    auto records = rig.reflexions(outcome.run_id);
    ASSERT_EQ(records.size(), 1u);
    EXPECT_EQ(records[0].fix_worked, false) << "measured, whatever the model said";
    EXPECT_FALSE(records[0].diagnosis_right.has_value());
    auto plans = requests_with_purpose(*rig.provider, "plan");
    ASSERT_EQ(plans.size(), 2u);
    EXPECT_NE(text_of(plans[1]).find("1.30x slower"), std::string::npos) << text_of(plans[1]);
  }
}

TEST(EngineReflexion, WiderBeamsDoNotReflect) {
  Rig rig;
  rig.provider->set_responder(with_reflection(two_step_script(), k_reflection_reply));
  auto config = reflecting_config(k_root);
  config.beam = 2;
  ASSERT_EQ(run_search(config, rig.services(), {}).status, "completed");
  EXPECT_TRUE(requests_with_purpose(*rig.provider, "reflect").empty());
}

TEST(EngineDivergence, MembersFarSlowerThanTheBestAreNotExpanded) {
  Rig rig;
  Script script;
  const std::string fast = kernel("k", "latency: 40");
  script.implement[k_root] = fast;
  script.implement[fast] = kernel("k", "latency: 35");
  rig.provider->set_responder(script.responder());
  auto config = small_config(k_root);
  config.beam = 3;
  config.iterations = 2;
  auto outcome = run_search(config, rig.services(), {});
  ASSERT_EQ(outcome.status, "completed") << outcome.stop_reason;
  ASSERT_EQ(outcome.history.size(), 2u);
  EXPECT_EQ(outcome.history[0].diverged, 1) << "the 100 us input is 2.5x slower than 40 us";
  auto plans = requests_with_purpose(*rig.provider, "plan");
  ASSERT_EQ(plans.size(), 2u) << "iteration 2 plans for the 40 us kernel only";
  EXPECT_NE(kernel_in(plans[1]).find("latency: 40"), std::string::npos);
  EXPECT_DOUBLE_EQ(outcome.best.latency_us(), 35);

  Rig unguarded_rig;
  unguarded_rig.provider->set_responder(script.responder());
  config.divergence = 1000;
  auto unguarded = run_search(config, unguarded_rig.services(), {});
  EXPECT_EQ(unguarded.history[0].diverged, 0);
  EXPECT_EQ(requests_with_purpose(*unguarded_rig.provider, "plan").size(), 3u);
}

}  // namespace
}  // namespace autocomp::search::engine
