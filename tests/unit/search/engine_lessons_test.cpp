// Lessons are merged per workload, not appended: the summary prompt shows the recorded lessons
// with their ids and evidence, the shapes, dtypes and each attempt's profile difference; the
// reply is the complete list, replacing the recorded one; merged lessons keep the strongest
// evidence; near-duplicates collapse; nothing is cut mid-sentence.
#include <gtest/gtest.h>

#include "core/hash.hpp"
#include "search/engine/beam_search.hpp"
#include "search/prompts/prompt_builder.hpp"
#include "unit/search/engine_test_support.hpp"

namespace autocomp::search::engine {
namespace {

const std::string k_problem =
    "# shape: x:bfloat16[128,2048]\nKERNEL = \"rows\"\ndef inputs(seed):\n    return {}\n";

llm::FakeProvider::Responder answering(const std::string& summary, const std::string& child) {
  return [summary, child](const llm::CompletionRequest& request) -> core::Result<llm::Completion> {
    llm::Completion completion;
    completion.provider = "fake";
    if (request.purpose == "summarize") {
      completion.text = summary;
    } else if (request.purpose == "plan") {
      completion.text = "Fuse the two passes over each row.";
    } else if (request.purpose == "implement") {
      completion.text = "```python\n" + child + "```\n";
    } else {
      completion.text = "nothing";
    }
    return completion;
  };
}

SearchConfig learning(const std::string& root) {
  auto config = testing::small_config(root);
  config.problem_source = k_problem;
  config.memory = true;
  return config;
}

store::Lesson recorded(const std::string& text, double speedup, const std::string& evidence) {
  store::Lesson lesson;
  lesson.target = "trn2";
  lesson.text = "[rows] " + text;
  lesson.problem_key = core::source_key(k_problem);
  lesson.speedup = speedup;
  lesson.evidence = evidence;
  return lesson;
}

TEST(MergedLessons, RepliesNameTheRecordedLessonsTheyKeepAndAreCutOnlyBetweenSentences) {
  const auto merged = prompts::parse_merged_lessons(
      "- (L3, L7) Fuse the passes. It halves the HBM reads.\n- [L12] Keep rows resident.\n"
      "- A new one.\n");
  ASSERT_EQ(merged.size(), 3u);
  EXPECT_EQ(merged[0].from, (std::vector<std::int64_t>{3, 7}));
  EXPECT_EQ(merged[0].text, "Fuse the passes. It halves the HBM reads.");
  EXPECT_EQ(merged[1].from, (std::vector<std::int64_t>{12}));
  EXPECT_EQ(merged[1].text, "Keep rows resident.");
  EXPECT_TRUE(merged[2].from.empty());
  const std::string two = "First sentence is short. The second one is much longer than the limit.";
  EXPECT_EQ(prompts::cut_at_sentence(two, 40), "First sentence is short.");
  const std::string one = "A single sentence that runs well past the limit without any stop";
  EXPECT_EQ(prompts::cut_at_sentence(one, 20), one) << "never cut mid-sentence";
}

TEST(MergedLessons, TheReplyReplacesTheWorkloadsLessonsKeepingTheStrongestEvidence) {
  testing::Rig rig;
  auto& memory = rig.db->memory();
  const auto weak = memory.add_lesson(recorded("Split the add across engines.", 1.1, "run a"));
  const auto strong =
      memory.add_lesson(recorded("Keep the add on VectorE.", 2.0, "run b kernel 1234"));
  const auto dropped = memory.add_lesson(recorded("Tiles of 64 columns are best.", 1.05, ""));
  store::Lesson other = recorded("Another workload's lesson.", 1.5, "");
  other.text = "[softmax] Another workload's lesson.";
  other.problem_key = "elsewhere";
  ASSERT_TRUE(weak && strong && dropped && memory.add_lesson(other));

  const std::string root = testing::kernel("k", "latency: 100\n    # hot: vector 60 4096");
  const std::string child = testing::kernel("k", "latency: 80\n    # hot: vector 30 1024");
  rig.provider->set_responder(answering("- (L" + std::to_string(*weak) + ", L" +
                                            std::to_string(*strong) +
                                            ") Keep the add on VectorE; splitting it lost.\n"
                                            "- Fuse the two row passes into one.\n"
                                            "- Fuse the two row passes into one pass.\n",
                                        child));
  auto outcome = run_search(learning(root), rig.services(), {});
  ASSERT_EQ(outcome.status, "completed") << outcome.stop_reason;

  std::string prompt;
  for (const auto& request : rig.provider->requests()) {
    if (request.purpose == "summarize") {
      prompt = request.messages.at(0).content;
    }
  }
  ASSERT_FALSE(prompt.empty());
  EXPECT_NE(prompt.find("- x: bfloat16 [128, 2048]"), std::string::npos) << "shapes and dtypes\n"
                                                                         << prompt;
  EXPECT_NE(prompt.find("profile vs parent: latency 100 -> 80 us (-20.00%); busy: VectorE -30 us"),
            std::string::npos)
      << prompt;
  EXPECT_NE(prompt.find("Outcome: faster (latency -20.00%)"), std::string::npos);
  EXPECT_NE(prompt.find("L" + std::to_string(*strong) +
                        ": Keep the add on VectorE. (evidence: a child 2.00x faster; run b "
                        "kernel 1234)"),
            std::string::npos)
      << prompt;
  EXPECT_NE(prompt.find("COMPLETE merged list"), std::string::npos);
  EXPECT_EQ(prompt.find("Another workload"), std::string::npos) << "only this workload's";

  const auto stored = memory.lessons("trn2", 16).value();
  std::vector<std::string> texts;
  for (const auto& lesson : stored) {
    texts.push_back(lesson.text);
  }
  EXPECT_EQ(texts, (std::vector<std::string>{"[rows] Keep the add on VectorE; splitting it lost.",
                                             "[rows] Fuse the two row passes into one.",
                                             "[softmax] Another workload's lesson."}))
      << "merged, deduplicated, the dropped one gone, the other workload's untouched";
  EXPECT_DOUBLE_EQ(stored[0].speedup, 2.0) << "the stronger evidence of the two it merges";
  EXPECT_EQ(stored[0].evidence, "run b kernel 1234");
  EXPECT_DOUBLE_EQ(stored[1].speedup, 1.25) << "a new lesson gets this batch's evidence";
  EXPECT_NE(stored[1].evidence.find(outcome.best.key.substr(0, 12) + " 1.25x faster"),
            std::string::npos)
      << stored[1].evidence;
}

}  // namespace
}  // namespace autocomp::search::engine
