#include <gtest/gtest.h>

#include "core/targets.hpp"
#include "measured_candidate.hpp"
#include "search/engine/beam.hpp"
#include "search/engine/search_config.hpp"

namespace autocomp::search::engine {
namespace {

using testing::measured;

TEST(EngineBeam, FasterChildIsAcceptedSlowerIsRejectedAfterTheEarlyIterations) {
  SearchConfig config;
  EXPECT_TRUE(accepts(measured("a", 90), 100, 3, config));
  EXPECT_FALSE(accepts(measured("a", 101), 100, 3, config));
  EXPECT_FALSE(accepts(measured("a", 100), 100, 3, config)) << "equal is not faster";
}

TEST(EngineBeam, FirstTwoIterationsAcceptUpToTenPercentSlower) {
  SearchConfig config;
  EXPECT_TRUE(accepts(measured("a", 109), 100, 1, config));
  EXPECT_TRUE(accepts(measured("a", 110), 100, 2, config));
  EXPECT_FALSE(accepts(measured("a", 111), 100, 2, config));
  EXPECT_FALSE(accepts(measured("a", 105), 100, 3, config));
  config.slack_iterations = 0;
  EXPECT_FALSE(accepts(measured("a", 105), 100, 1, config));
}

TEST(EngineBeam, IncorrectOrDuplicateChildrenNeverEnter) {
  SearchConfig config;
  Candidate wrong = measured("a", 10);
  wrong.eval.correct = false;
  wrong.eval.failure = core::make_failure(core::FailureKind::mismatch, "verify", "differs");
  EXPECT_FALSE(accepts(wrong, 100, 5, config));
  Candidate duplicate = measured("b", 10);
  duplicate.duplicate = true;
  EXPECT_FALSE(accepts(duplicate, 100, 5, config));
}

TEST(EngineBeam, NextBeamIsTheBestOfOldAndChildrenWithTiesKeepingTheOldMember) {
  std::vector<Candidate> old{measured("old1", 50), measured("old2", 80)};
  std::vector<Candidate> children{measured("c1", 80, {1, 0, 0, 0, 0, "llm"}),
                                  measured("c2", 40, {1, 0, 1, 0, 0, "llm"}),
                                  measured("c3", 90, {1, 1, 0, 0, 0, "llm"})};
  auto next = select_next_beam(old, children, 3);
  ASSERT_EQ(next.size(), 3u);
  EXPECT_EQ(next[0].key, "c2");
  EXPECT_EQ(next[1].key, "old1");
  EXPECT_EQ(next[2].key, "old2") << "a tie keeps the old member";
}

TEST(EngineBeam, TiesAmongChildrenGoToTheEarlierOriginAndKeysAreUnique) {
  std::vector<Candidate> old{measured("root", 100)};
  std::vector<Candidate> children{measured("late", 60, {1, 0, 2, 0, 0, "llm"}),
                                  measured("early", 60, {1, 0, 1, 0, 0, "llm"}),
                                  measured("root", 10, {1, 0, 3, 0, 0, "llm"})};
  auto next = select_next_beam(old, children, 2);
  ASSERT_EQ(next.size(), 2u);
  EXPECT_EQ(next[0].key, "root");
  EXPECT_EQ(next[1].key, "early");
}

TEST(EngineBeam, DivergenceGuardLeavesOutMembersFarSlowerThanTheBest) {
  std::vector<Candidate> old{measured("root", 100)};
  std::vector<Candidate> children{measured("fast", 40, {1, 0, 0, 0, 0, "llm"}),
                                  measured("near", 59, {1, 0, 1, 0, 0, "llm"}),
                                  measured("far", 70, {1, 0, 2, 0, 0, "llm"})};
  int diverged = -1;
  auto guarded = select_next_beam(old, children, 4, 1.5, &diverged);
  ASSERT_EQ(guarded.size(), 2u);
  EXPECT_EQ(guarded[0].key, "fast");
  EXPECT_EQ(guarded[1].key, "near");
  EXPECT_EQ(diverged, 2) << "far (1.75x) and root (2.5x) left out";

  auto unguarded = select_next_beam(old, children, 4, 0, &diverged);
  EXPECT_EQ(unguarded.size(), 4u);
  EXPECT_EQ(diverged, 0);

  // Only free places count: a 2-wide beam reports at most one diverged kernel here.
  select_next_beam(old, children, 2, 1.5, &diverged);
  EXPECT_EQ(diverged, 0) << "fast and near fill both places";
  std::vector<Candidate> slow_children{measured("s1", 170, {1, 0, 0, 0, 0, "llm"}),
                                       measured("s2", 180, {1, 0, 1, 0, 0, "llm"}),
                                       measured("s3", 190, {1, 0, 2, 0, 0, "llm"})};
  auto narrow = select_next_beam(old, slow_children, 2, 1.5, &diverged);
  ASSERT_EQ(narrow.size(), 1u);
  EXPECT_EQ(diverged, 1);
}

TEST(EngineConfig, ValidationNamesTheBadField) {
  SearchConfig config;
  config.kernel_source = "def k(): pass\n";
  config.problem_source = "x = 1\n";
  EXPECT_TRUE(validate(config).ok());
  config.dropout = 1.5;
  auto status = validate(config);
  ASSERT_FALSE(status.ok());
  EXPECT_NE(status.failure().message.find("dropout"), std::string::npos);
  config.dropout = 0.5;
  config.target = "trn9";
  auto unknown = validate(config);
  ASSERT_FALSE(unknown.ok());
  EXPECT_NE(unknown.failure().message.find("trn1, trn2 or trn3"), std::string::npos)
      << unknown.failure().message;
  for (const auto target : core::k_known_targets) {
    config.target = std::string(target);
    EXPECT_TRUE(validate(config).ok()) << target;
  }
  // trn3 needs the `nki` namespace; the same kernel in `neuronxcc.nki` runs on trn2.
  config.kernel_source = "import neuronxcc.nki as nki\nimport neuronxcc.nki.language as nl\n";
  config.target = "trn3";
  auto legacy = validate(config);
  ASSERT_FALSE(legacy.ok());
  EXPECT_NE(legacy.failure().message.find("trn3 needs the `nki` namespace"), std::string::npos);
  config.target = "trn2";
  EXPECT_TRUE(validate(config).ok());
  config.target = "trn3";
  // every import form the harness reads as the legacy namespace
  for (const char* legacy_import :
       {"from neuronxcc import nki\n", "from neuronxcc.nki.language import par_dim\n",
        "x = 1\n  import neuronxcc.nki.isa as nisa\n"}) {
    config.kernel_source = legacy_import;
    EXPECT_FALSE(validate(config).ok()) << legacy_import;
  }
  config.kernel_source = "import nki\nimport nki.language as nl\n# not neuronxcc.nki\n";
  EXPECT_TRUE(validate(config).ok());
}

}  // namespace
}  // namespace autocomp::search::engine
