// Plans for one parent differ: each later sibling is shown the plans already chosen; the menu
// marks what the kernel already applies; the beam is refilled when the divergence guard empties
// places.
#include <gtest/gtest.h>

#include <atomic>

#include "measured_candidate.hpp"
#include "search/engine/beam.hpp"
#include "search/engine/beam_search.hpp"
#include "search/prompts/menu.hpp"
#include "search/prompts/prompt_builder.hpp"
#include "unit/search/engine_test_support.hpp"

namespace autocomp::search::engine {
namespace {

std::string user_text(const llm::CompletionRequest& request) {
  return request.messages.at(0).content;
}

TEST(SiblingPlans, EachLaterPlanOfAParentIsShownThePlansAlreadyChosen) {
  testing::Rig rig;
  const std::string root = testing::kernel("k", "latency: 100");
  auto plans_made = std::make_shared<std::atomic<int>>(0);
  rig.provider->set_responder(
      [plans_made](const llm::CompletionRequest& request) -> core::Result<llm::Completion> {
        llm::Completion completion;
        completion.provider = "fake";
        completion.text = request.purpose == "plan"
                              ? "Idea number " + std::to_string(++*plans_made) + ": restructure."
                              : "I cannot help.";
        return completion;
      });
  auto config = testing::small_config(root);
  config.plans = 3;
  auto outcome = run_search(config, rig.services(), {});
  ASSERT_EQ(outcome.status, "completed") << outcome.stop_reason;
  std::vector<std::string> plans;
  for (const auto& request : rig.provider->requests()) {
    if (request.purpose == "plan") {
      plans.push_back(user_text(request));
    }
  }
  ASSERT_EQ(plans.size(), 3u);
  const std::string heading = "Plans already chosen for this kernel in this iteration";
  EXPECT_EQ(plans[0].find(heading), std::string::npos);
  EXPECT_NE(plans[1].find(heading), std::string::npos) << plans[1];
  EXPECT_NE(plans[1].find("- Idea number 1: restructure."), std::string::npos);
  EXPECT_NE(plans[2].find("- Idea number 1: restructure."), std::string::npos);
  EXPECT_NE(plans[2].find("- Idea number 2: restructure."), std::string::npos);
}

TEST(MenuApplied, ItemsTheKernelAlreadyAppliesAreMarked) {
  const std::vector<prompts::MenuItem> items{{"bf16_compute", "Compute in bf16."},
                                             {"bn_stats", "Use bn_stats."},
                                             {"affine_range", "Use affine_range."},
                                             {"larger_dma", "Bigger DMAs."}};
  const auto applied =
      prompts::applied_items(items,
                             "def k(x):\n    t = nl.ndarray((128, 512), dtype=nl.bfloat16)\n"
                             "    for i in nl.affine_range(4):\n        s = nisa.bn_stats(t)\n"
                             "    for j in nl.sequential_range(2):\n        pass\n");
  EXPECT_EQ(applied.count("bf16_compute"), 1u);
  EXPECT_EQ(applied.count("bn_stats"), 1u);
  EXPECT_EQ(applied.count("affine_range"), 0u) << "a sequential_range is left";
  EXPECT_EQ(applied.count("larger_dma"), 0u);

  auto builder = prompts::PromptBuilder::open(std::string(AUTOCOMP_SOURCE_DIR) + "/prompts");
  ASSERT_TRUE(builder.ok());
  prompts::PlanPromptInput input;
  input.target = "trn2";
  input.kernel.source =
      "import neuronxcc.nki.language as nl\n\ndef k(x):\n"
      "    t = nl.ndarray((128, 512), dtype=nl.bfloat16, buffer=nl.sbuf)\n    return t\n";
  input.dropout = 0;
  auto prompt = builder->plan(input);
  ASSERT_TRUE(prompt.ok()) << prompt.failure().describe();
  const auto text = user_text(prompt->request);
  const auto line = text.find("- [bf16_compute]");
  ASSERT_NE(line, std::string::npos) << text;
  const auto end = text.find('\n', line);
  EXPECT_NE(text.substr(line, end - line).find("(ALREADY APPLIED: it already uses bfloat16)"),
            std::string::npos)
      << text.substr(line, end - line);
}

TEST(BeamRefill, PlacesTheGuardEmptiesAreFilledFromTheNextBestChildren) {
  SearchConfig config;
  config.beam = 3;
  config.early_slack = 1.0;
  config.divergence = 1.5;
  BeamStrategy strategy(config);
  std::map<std::string, Candidate> known{{"p2", testing::measured("p2", 25)},
                                         {"p1", testing::measured("p1", 100)}};
  ASSERT_TRUE(strategy.restore(store::Beam{1, {"p2", "p1"}}, known));
  strategy.generate(2);
  const std::vector<Candidate> children{
      testing::measured("a", 20, Origin{2, 0, 0, 0, 0, "llm"}),    // faster than p2: accepted
      testing::measured("d", 26, Origin{2, 0, 1, 0, 0, "llm"}),    // slower than p2: rejected
      testing::measured("e", 150, Origin{2, 1, 0, 0, 0, "llm"})};  // slower than p1: rejected
  const Selection selection = strategy.notify(2, children);
  EXPECT_EQ(selection.diverged, 1) << "p1 (100 us) is more than 1.5x the best (20 us)";
  std::vector<std::string> keys;
  for (const auto& member : selection.next) {
    keys.push_back(member.key);
  }
  EXPECT_EQ(keys, (std::vector<std::string>{"a", "p2", "d"}))
      << "the place p1 left is refilled with the next-best child within the bound, not e";
}

}  // namespace
}  // namespace autocomp::search::engine
