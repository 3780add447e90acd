#include "search/autotune/autotune_proposer.hpp"

#include <gtest/gtest.h>

#include <set>
#include <string>
#include <vector>

#include "core/hash.hpp"
#include "engine_test_support.hpp"

namespace autocomp::search::autotune {
namespace {

using engine::Candidate;
using engine::Parent;
using engine::Proposal;

Candidate candidate(const std::string& source) {
  Candidate c;
  c.source = source;
  c.key = core::source_key(source);
  return c;
}

std::vector<Proposal> run(engine::Proposer& proposer, const engine::SearchConfig& config,
                          int iteration, const std::vector<Parent>& parents) {
  engine::ProposeContext ctx;
  ctx.iteration = iteration;
  ctx.config = &config;
  std::vector<Proposal> children;
  proposer.propose(ctx, parents, [&](Proposal p) { children.push_back(std::move(p)); });
  return children;
}

const std::string k_three_knobs =
    "# autocomp: knob TILE = [128, 256, 512, 1024]\n"
    "TILE = 256\n"
    "def kernel(x):\n"
    "    # autocomp: knob BUFS = [1, 2, 3]\n"
    "    BUFS = 1\n"
    "    # autocomp: knob MODE = ['a', 'b']\n"
    "    MODE = 'a'\n"
    "    return x\n";

engine::SearchConfig config_with(int plans, int impls, std::uint64_t seed = 3) {
  engine::SearchConfig config;
  config.plans = plans;
  config.impls = impls;
  config.seed = seed;
  return config;
}

TEST(AutotuneProposer, NeighbouringValuesComeFirstAndEachChildSaysWhatChanged) {
  auto proposer = make_autotune_proposer();
  EXPECT_EQ(proposer->name(), "autotune");
  Candidate parent = candidate(k_three_knobs);
  // Neighbours: TILE 512 and 128, BUFS 2, MODE 'b'.
  auto children = run(*proposer, config_with(2, 2), 1, {{0, &parent}});
  ASSERT_EQ(children.size(), 4u);
  std::set<std::string> plans;
  for (const auto& child : children) {
    plans.insert(child.plan);
    EXPECT_EQ(child.origin.proposer, "autotune");
    EXPECT_EQ(child.origin.iteration, 1);
    EXPECT_EQ(child.parent_key, parent.key);
    EXPECT_NE(child.source, parent.source);
    EXPECT_FALSE(child.failure.has_value());
    // Every child still declares its knobs.
    EXPECT_EQ(parse_knobs(child.source).size(), 3u);
  }
  EXPECT_EQ(plans, (std::set<std::string>{"autotune: TILE 256 -> 512", "autotune: TILE 256 -> 128",
                                          "autotune: BUFS 1 -> 2", "autotune: MODE 'a' -> 'b'"}));
  for (const auto& child : children) {
    if (child.plan == "autotune: BUFS 1 -> 2") {
      EXPECT_NE(child.source.find("\n    BUFS = 2\n"), std::string::npos);
      EXPECT_NE(child.source.find("\nTILE = 256\n"), std::string::npos);
    }
  }
}

TEST(AutotuneProposer, AfterTheNeighboursComeTwoKnobCombinationsThenFartherValues) {
  auto proposer = make_autotune_proposer();
  Candidate parent = candidate(k_three_knobs);
  auto children = run(*proposer, config_with(6, 2), 1, {{0, &parent}});
  // 4 neighbours + 4 pairs (of 5 possible) + TILE 1024 and BUFS 3 (distance 2) = 10, under the
  // cap of 12.
  ASSERT_EQ(children.size(), 10u);
  for (std::size_t i = 0; i < 4; ++i) {
    EXPECT_EQ(children[i].plan.find(", "), std::string::npos) << children[i].plan;
  }
  for (std::size_t i = 4; i < 8; ++i) {
    EXPECT_NE(children[i].plan.find(", "), std::string::npos) << children[i].plan;
  }
  EXPECT_EQ(children[8].plan, "autotune: TILE 256 -> 1024");
  EXPECT_EQ(children[9].plan, "autotune: BUFS 1 -> 3");
  std::set<std::string> labels;
  std::set<std::string> keys;
  for (const auto& child : children) {
    labels.insert(child.origin.label());
    keys.insert(core::source_key(child.source));
  }
  EXPECT_EQ(labels.size(), children.size());
  EXPECT_EQ(keys.size(), children.size());
}

TEST(AutotuneProposer, ChildrenPerParentAreCappedByPlansTimesImplsAndTwelve) {
  std::string many;
  for (int k = 0; k < 10; ++k) {
    std::string name = "K" + std::to_string(k);
    many += "# autocomp: knob " + name + " = [1, 2, 3]\n" + name + " = 2\n";
  }
  Candidate parent = candidate(many);
  auto small = make_autotune_proposer();
  EXPECT_EQ(run(*small, config_with(1, 3), 1, {{0, &parent}}).size(), 3u);
  auto large = make_autotune_proposer();
  EXPECT_EQ(run(*large, config_with(10, 10), 1, {{0, &parent}}).size(),
            static_cast<std::size_t>(k_max_children));
}

TEST(AutotuneProposer, SameSeedSameChildrenInTheSameOrderOtherSeedsReorder) {
  Candidate parent = candidate(k_three_knobs);
  auto plans_of = [&](std::uint64_t seed, int iteration) {
    auto proposer = make_autotune_proposer();
    std::vector<std::string> plans;
    for (const auto& child : run(*proposer, config_with(6, 2, seed), iteration, {{0, &parent}})) {
      plans.push_back(child.origin.label() + " " + child.plan);
    }
    return plans;
  };
  EXPECT_EQ(plans_of(3, 1), plans_of(3, 1));
  bool some_differ = false;
  for (std::uint64_t seed = 4; seed < 12; ++seed) {
    some_differ = some_differ || plans_of(seed, 1) != plans_of(3, 1);
  }
  EXPECT_TRUE(some_differ);
}

TEST(AutotuneProposer, ValuesAlreadyTriedInThisRunAreNotProposedAgain) {
  auto proposer = make_autotune_proposer();
  Candidate parent = candidate(k_three_knobs);
  auto first = run(*proposer, config_with(6, 2), 1, {{0, &parent}});
  ASSERT_FALSE(first.empty());
  // The parent stays in the beam: nothing new can be made from it.
  EXPECT_TRUE(run(*proposer, config_with(6, 2), 2, {{0, &parent}}).empty());

  // A child of the first round becomes a parent: going back to its parent's source is skipped.
  Candidate child;
  for (const auto& proposal : first) {
    if (proposal.plan == "autotune: BUFS 1 -> 2") {
      child = candidate(proposal.source);
    }
  }
  ASSERT_FALSE(child.source.empty());
  for (const auto& grandchild : run(*proposer, config_with(6, 2), 2, {{0, &child}})) {
    EXPECT_NE(grandchild.source, parent.source);
    EXPECT_NE(grandchild.plan, "autotune: BUFS 2 -> 1");
    for (const auto& earlier : first) {
      EXPECT_NE(grandchild.source, earlier.source) << grandchild.plan;
    }
  }
}

TEST(AutotuneProposer, TwoParentsReachingTheSameKernelYieldItOnce) {
  auto proposer = make_autotune_proposer();
  Candidate low = candidate("# autocomp: knob N = [1, 2, 3]\nN = 1\n");
  Candidate high = candidate("# autocomp: knob N = [1, 2, 3]\nN = 3\n");
  auto children = run(*proposer, config_with(6, 2), 1, {{0, &low}, {1, &high}});
  // low -> 2, 3 (3 is a beam member); high -> 2 (already made), 1 (a beam member).
  ASSERT_EQ(children.size(), 1u);
  EXPECT_EQ(children[0].plan, "autotune: N 1 -> 2");
  EXPECT_EQ(children[0].origin.member, 0);
}

TEST(AutotuneProposer, KernelsWithoutKnobsGetNoChildrenAndRepairIsDeclined) {
  auto proposer = make_autotune_proposer();
  Candidate parent = candidate("def kernel(x):\n    return x\n");
  EXPECT_TRUE(run(*proposer, config_with(6, 2), 1, {{0, &parent}}).empty());
  engine::ProposeContext ctx;
  EXPECT_FALSE(proposer->repair(ctx, engine::RepairInput{}).has_value());
}

TEST(AutotuneProposer, StopsProposingOnceTheRunIsStopping) {
  auto proposer = make_autotune_proposer();
  Candidate parent = candidate(k_three_knobs);
  engine::StopControl stop;
  stop.stop("cancelled", "test", true);
  engine::SearchConfig config = config_with(6, 2);
  engine::ProposeContext ctx;
  ctx.config = &config;
  ctx.stop = &stop;
  int children = 0;
  proposer->propose(ctx, {{0, &parent}}, [&](Proposal) { ++children; });
  EXPECT_EQ(children, 0);
}

// Evaluates a kernel as the fake backend evaluates one marked "# latency: <SPEED>", SPEED being
// the kernel's knob: the knob alone decides how fast the kernel is.
class KnobLatencyBackend : public backends::Backend {
 public:
  std::string identity() const override { return "knob-latency"; }
  std::string device() const override { return m_inner.device(); }
  std::string harness_version() const override { return m_inner.harness_version(); }
  int slots() const override { return m_inner.slots(); }
  std::vector<backends::EvalResult> evaluate(const std::vector<backends::EvalRequest>& batch,
                                             const core::CancelToken& cancel,
                                             const backends::ProgressFn& progress) override {
    std::vector<backends::EvalRequest> marked = batch;
    for (auto& request : marked) {
      std::string latency = "none";
      for (const auto& knob : parse_knobs(request.kernel_source)) {
        if (knob.name == "SPEED") {
          latency = knob.current;
        }
      }
      request.kernel_source = engine::testing::kernel("kernel", "latency: " + latency);
    }
    return m_inner.evaluate(marked, cancel, progress);
  }

 private:
  engine::testing::FakeBackend m_inner;
};

// The whole engine with autotune as its only proposer finds the fastest declared value, two steps
// away from the start, without a single LLM call.
TEST(AutotuneProposer, AutotuningAloneImprovesAKernelWithoutCallingTheLlm) {
  const std::string root =
      "def kernel(x):\n"
      "    # autocomp: knob SPEED = [90, 70, 50, 60]\n"
      "    SPEED = 90\n"
      "    return x\n";
  engine::testing::Rig rig;
  engine::SearchServices services = rig.services();
  services.backend = std::make_shared<KnobLatencyBackend>();
  services.proposers = {std::shared_ptr<engine::Proposer>(make_autotune_proposer())};
  engine::SearchConfig config = engine::testing::small_config(root);
  config.proposers = {"autotune"};
  config.plans = 1;
  config.impls = 1;
  config.iterations = 3;
  auto outcome = engine::run_search(config, services, {});
  EXPECT_EQ(outcome.status, "completed");
  EXPECT_DOUBLE_EQ(outcome.best.latency_us(), 50.0);
  EXPECT_NE(outcome.best.source.find("    SPEED = 50\n"), std::string::npos);
  EXPECT_EQ(outcome.best.plan, "autotune: SPEED 70 -> 50");
  EXPECT_EQ(rig.provider->call_count(), 0u);
}

TEST(AutotuneProposer, AutotuningRunsWithNoLlmProviderAtAll) {
  const std::string root =
      "# autocomp: knob SPEED = [90, 70, 50]\n"
      "SPEED = 90\n"
      "def kernel(x):\n"
      "    return x\n";
  engine::testing::Rig rig;
  engine::SearchServices services = rig.services();
  services.providers.clear();
  services.backend = std::make_shared<KnobLatencyBackend>();
  services.proposers = {std::shared_ptr<engine::Proposer>(make_autotune_proposer())};
  engine::SearchConfig config = engine::testing::small_config(root);
  config.proposers = {"autotune"};
  config.iterations = 2;
  auto outcome = engine::run_search(config, services, {});
  EXPECT_EQ(outcome.status, "completed");
  EXPECT_DOUBLE_EQ(outcome.best.latency_us(), 50.0);
}

}  // namespace
}  // namespace autocomp::search::autotune
