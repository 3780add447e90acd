#include <gtest/gtest.h>

#include <map>

#include "measured_candidate.hpp"
#include "search/engine/beam.hpp"

// The beam strategy on its own: given a batch's results, it picks the next generation. No
// proposers, evaluation or store.
namespace autocomp::search::engine {
namespace {

using testing::measured;

Origin child_of(int member, int plan, int iteration = 1) {
  return Origin{iteration, member, plan, 0, 0, "llm"};
}

std::vector<std::string> keys_of(const std::vector<Candidate>& candidates) {
  std::vector<std::string> keys;
  for (const auto& candidate : candidates) {
    keys.push_back(candidate.key);
  }
  return keys;
}

SearchConfig beam_config(int beam) {
  SearchConfig config;
  config.beam = beam;
  config.early_slack = 1.0;  // no slack: only faster children pass
  config.divergence = 0;
  return config;
}

TEST(BeamStrategy, TheNextGenerationIsTheFastestOfTheOldOneAndTheChildrenThatPassed) {
  const SearchConfig config = beam_config(2);
  BeamStrategy strategy(config);
  strategy.start(measured("root", 100));
  auto parents = strategy.generate(1);
  ASSERT_EQ(keys_of(parents), (std::vector<std::string>{"root"}));

  Candidate failed = measured("failed", 10, child_of(0, 2));
  failed.eval.correct = false;
  Candidate duplicate = measured("dup", 5, child_of(0, 3));
  duplicate.duplicate = true;
  const std::vector<Candidate> children{measured("a", 90, child_of(0, 0)),
                                        measured("slower", 120, child_of(0, 1)), failed, duplicate,
                                        measured("b", 70, child_of(0, 4))};
  EXPECT_TRUE(strategy.admits(children[0]));
  EXPECT_FALSE(strategy.admits(children[1])) << "slower than its parent";
  EXPECT_FALSE(strategy.admits(failed));
  EXPECT_FALSE(strategy.admits(duplicate));

  Selection selection = strategy.notify(1, children);
  EXPECT_EQ(keys_of(selection.next), (std::vector<std::string>{"b", "a"}));
  EXPECT_EQ(selection.accepted, 2);
  EXPECT_EQ(selection.diverged, 0);
  EXPECT_EQ(keys_of(strategy.generation()), (std::vector<std::string>{"b", "a"}));

  // The next batch is judged against each child's own parent.
  EXPECT_EQ(keys_of(strategy.generate(2)), (std::vector<std::string>{"b", "a"}));
  EXPECT_TRUE(strategy.admits(measured("c", 80, child_of(1, 0, 2)))) << "faster than a";
  EXPECT_FALSE(strategy.admits(measured("d", 80, child_of(0, 0, 2)))) << "slower than b";
  EXPECT_FALSE(strategy.admits(measured("e", 1, child_of(5, 0, 2)))) << "no such parent";
}

TEST(BeamStrategy, WithoutAnyChildThatPassesTheGenerationStays) {
  const SearchConfig config = beam_config(3);
  BeamStrategy strategy(config);
  strategy.start(measured("root", 100));
  strategy.generate(1);
  Selection selection = strategy.notify(1, {measured("slow", 150, child_of(0, 0))});
  EXPECT_EQ(keys_of(selection.next), (std::vector<std::string>{"root"}));
  EXPECT_EQ(selection.accepted, 0);
}

TEST(BeamStrategy, TheEarlySlackLetsSlightlySlowerChildrenIn) {
  SearchConfig config = beam_config(2);
  config.early_slack = 1.1;
  config.slack_iterations = 1;
  BeamStrategy strategy(config);
  strategy.start(measured("root", 100));
  strategy.generate(1);
  EXPECT_TRUE(strategy.admits(measured("a", 105, child_of(0, 0))));
  Selection selection = strategy.notify(1, {measured("a", 105, child_of(0, 0))});
  EXPECT_EQ(keys_of(selection.next), (std::vector<std::string>{"root", "a"}));
  strategy.generate(2);
  EXPECT_FALSE(strategy.admits(measured("b", 104, child_of(0, 0, 2)))) << "slack is over";
}

TEST(BeamStrategy, TheDivergenceGuardLeavesFarSlowerMembersOut) {
  SearchConfig config = beam_config(3);
  config.divergence = 1.5;
  BeamStrategy strategy(config);
  strategy.start(measured("root", 100));
  strategy.generate(1);
  Selection selection = strategy.notify(
      1, {measured("fast", 40, child_of(0, 0)), measured("ok", 55, child_of(0, 1))});
  EXPECT_EQ(keys_of(selection.next), (std::vector<std::string>{"fast", "ok"}));
  EXPECT_EQ(selection.diverged, 1) << "the input, 2.5x slower than the best, left";
}

TEST(BeamStrategy, ARestoredGenerationContinuesWhereTheStoredRunStopped) {
  const SearchConfig config = beam_config(2);
  BeamStrategy strategy(config);
  strategy.start(measured("root", 100));
  const std::map<std::string, Candidate> known{
      {"root", measured("root", 100)}, {"a", measured("a", 80)}, {"b", measured("b", 90)}};
  EXPECT_FALSE(strategy.restore(store::Beam{2, {"a", "missing"}}, known));
  EXPECT_EQ(keys_of(strategy.generation()), (std::vector<std::string>{"root"}))
      << "unchanged when a member is unknown";

  ASSERT_TRUE(strategy.restore(store::Beam{2, {"a", "b"}}, known));
  EXPECT_EQ(keys_of(strategy.generate(3)), (std::vector<std::string>{"a", "b"}));
  EXPECT_TRUE(strategy.admits(measured("c", 85, child_of(1, 0, 3))));
}

}  // namespace
}  // namespace autocomp::search::engine
