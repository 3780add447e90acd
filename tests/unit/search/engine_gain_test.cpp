// Noise language only where the backend is noisy: exact changes on the deterministic simulator,
// "within noise" only inside a measured spread; a minimum gain for acceptance the user can set.
#include <gtest/gtest.h>

#include "search/engine/beam.hpp"
#include "search/engine/beam_search.hpp"
#include "search/engine/gain.hpp"
#include "unit/search/engine_test_support.hpp"

namespace autocomp::search::engine {
namespace {

Candidate on(const std::string& device, const std::string& key, double median,
             std::vector<double> samples = {}) {
  Candidate candidate;
  candidate.key = key;
  candidate.eval.device = device;
  candidate.eval.verified = true;
  candidate.eval.correct = true;
  if (samples.empty()) {
    samples = {median};
  }
  const auto [low, high] = std::minmax_element(samples.begin(), samples.end());
  candidate.eval.latency = backends::LatencyStats{*low, median, *high, samples};
  return candidate;
}

TEST(EngineGain, TheSimulatorReportsEveryChangeExactlyNeverAsNoise) {
  const auto parent = on("sim", "p", 530.987);
  EXPECT_EQ(change_words(parent, on("sim", "a", 530.868)), "faster (latency -0.02%)");
  EXPECT_EQ(change_words(parent, on("sim", "b", 522.5)), "faster (latency -1.60%)");
  EXPECT_EQ(change_words(parent, on("sim", "c", 533.1)), "slower (latency +0.40%)");
  EXPECT_EQ(change_words(parent, on("sim", "d", 530.987)), "unchanged (identical latency)");
  EXPECT_EQ(measured_spread_pct(on("sim", "e", 100, {99, 100, 101}).eval), 0)
      << "the simulator is deterministic whatever its samples say";
}

TEST(EngineGain, HardwareCallsAChangeNoiseOnlyInsideTheMeasuredSpread) {
  const auto parent = on("neuron", "p", 100, {98, 100, 102});  // spread 4%
  EXPECT_NEAR(measured_spread_pct(parent.eval), 4.0, 1e-9);
  EXPECT_EQ(change_words(parent, on("neuron", "a", 99, {98.5, 99, 99.5})),
            "within noise (latency -1.0%, measured spread 4.0%)");
  EXPECT_EQ(change_words(parent, on("neuron", "b", 90, {89.5, 90, 90.5})),
            "faster (latency -10.00%)");
}

TEST(EngineGain, AcceptanceUsesTheSameGainAsTheWordsAndAMinimumTheUserSets) {
  SearchConfig config;
  config.slack_iterations = 0;
  const auto sim_parent = on("sim", "p", 530.987);
  EXPECT_TRUE(accepts(on("sim", "a", 530.868), sim_parent, 3, config))
      << "on the simulator any exact gain counts";
  EXPECT_FALSE(accepts(on("sim", "b", 530.987), sim_parent, 3, config)) << "an exact tie does not";
  config.min_gain = 1.0;
  EXPECT_FALSE(accepts(on("sim", "a", 530.868), sim_parent, 3, config))
      << "below the user's minimum gain";
  EXPECT_TRUE(accepts(on("sim", "c", 520), sim_parent, 3, config));

  SearchConfig noisy;
  noisy.slack_iterations = 0;
  const auto hw_parent = on("neuron", "p", 100, {98, 100, 102});
  EXPECT_FALSE(accepts(on("neuron", "a", 98, {97.5, 98, 98.5}), hw_parent, 3, noisy))
      << "a 2% gain inside a 4% spread is not a gain";
  EXPECT_TRUE(accepts(on("neuron", "b", 95, {94.5, 95, 95.5}), hw_parent, 3, noisy));
  noisy.min_gain = 0;
  EXPECT_TRUE(accepts(on("neuron", "a", 98, {97.5, 98, 98.5}), hw_parent, 3, noisy))
      << "a minimum the user set replaces the measured spread";
}

TEST(EngineGain, AMinimumGainOutsideZeroToHundredIsRefused) {
  auto config = testing::small_config(testing::kernel("k", "latency: 100"));
  config.min_gain = -1;
  EXPECT_FALSE(validate(config).ok());
  config.min_gain = 100;
  EXPECT_FALSE(validate(config).ok());
  config.min_gain = 0.5;
  EXPECT_TRUE(validate(config).ok());
}

TEST(EngineGain, ASearchWithAMinimumGainKeepsTheParentForASmallerStep) {
  testing::Rig rig;
  testing::Script script;
  const std::string root = testing::kernel("k", "latency: 100");
  script.implement[root] = testing::kernel("k", "latency: 99.5");  // 0.5% faster
  rig.provider->set_responder(script.responder());
  auto config = testing::small_config(root);
  config.slack_iterations = 0;
  config.min_gain = 1.0;
  auto outcome = run_search(config, rig.services(), {});
  ASSERT_EQ(outcome.status, "completed") << outcome.stop_reason;
  EXPECT_EQ(outcome.best.key, outcome.baseline.key) << "0.5% is under the 1% minimum";

  testing::Rig again;
  again.provider->set_responder(script.responder());
  config.min_gain.reset();
  outcome = run_search(config, again.services(), {});
  ASSERT_EQ(outcome.status, "completed") << outcome.stop_reason;
  EXPECT_NE(outcome.best.key, outcome.baseline.key) << "without a minimum, 0.5% is a real gain";
}

}  // namespace
}  // namespace autocomp::search::engine
