#include "search/engine/confirmation.hpp"

#include <gtest/gtest.h>

#include <regex>

#include "search/engine/beam_search.hpp"
#include "unit/search/engine_test_support.hpp"

namespace autocomp::search::engine {
namespace {

using testing::FakeBackend;
using testing::Rig;
using testing::small_config;

TEST(ConfirmationMath, SpearmanIsOneForTheSameOrderAndMinusOneForTheReverse) {
  EXPECT_DOUBLE_EQ(*spearman({{1, 10}, {2, 30}, {3, 31}, {4, 90}}), 1.0);
  EXPECT_DOUBLE_EQ(*spearman({{1, 90}, {2, 31}, {3, 30}, {4, 10}}), -1.0);
  // One swap among four: 1 - 6 * 2 / (4 * 15) = 0.8.
  EXPECT_NEAR(*spearman({{1, 10}, {2, 30}, {3, 20}, {4, 40}}), 0.8, 1e-12);
  // Ties take their average rank: ranks (1.5, 1.5, 3) against (1, 2, 3).
  EXPECT_NEAR(*spearman({{5, 1}, {5, 2}, {7, 3}}), 0.8660254037844386, 1e-12);
  EXPECT_FALSE(spearman({{1, 2}}).has_value());
  EXPECT_FALSE(spearman({{1, 2}, {1, 3}}).has_value());  // one side constant
}

TEST(ConfirmationMath, MedianOfOddAndEvenCounts) {
  EXPECT_DOUBLE_EQ(median_of({3, 1, 2}), 2);
  EXPECT_DOUBLE_EQ(median_of({4, 1, 3, 2}), 2.5);
  EXPECT_DOUBLE_EQ(median_of({}), 0);
}

TEST(ConfirmationMath, AgreementSaysWhenTheSimulatorDriftsAndSuggestsRecalibrating) {
  // The device runs everything 1.2x slower, in the same order: no drift.
  const Agreement steady = agreement_of({{10, 12}, {20, 24}, {30, 36}, {40, 48}}, "dev");
  EXPECT_EQ(steady.pairs, 4u);
  EXPECT_DOUBLE_EQ(*steady.rank_correlation, 1.0);
  EXPECT_DOUBLE_EQ(steady.ratio_median, 1.2);
  EXPECT_FALSE(steady.drifted);
  EXPECT_TRUE(steady.warning.empty());

  // Reversed order over four pairs: drifted, with the calibrate command for the device.
  const Agreement reversed = agreement_of({{10, 40}, {20, 30}, {30, 20}, {40, 10}}, "dev?x=1");
  EXPECT_TRUE(reversed.drifted);
  EXPECT_NE(reversed.warning.find("rank correlation -1.00"), std::string::npos) << reversed.warning;
  EXPECT_NE(reversed.warning.find("autocomp-mcp calibrate --backend 'dev?x=1'"), std::string::npos);

  // Three reversed pairs are too few to judge the order, but their ratios spread 9x.
  const Agreement few = agreement_of({{10, 30}, {20, 20}, {30, 10}}, "dev");
  EXPECT_TRUE(few.drifted);
  EXPECT_EQ(few.warning.find("rank correlation"), std::string::npos);
  EXPECT_NE(few.warning.find("ratio varies 9.00x"), std::string::npos) << few.warning;

  // A spread of exactly 1.5x is allowed; pairs without figures are skipped.
  EXPECT_FALSE(agreement_of({{10, 10}, {10, 15}, {0, 3}}, "dev").drifted);
  EXPECT_EQ(agreement_of({{10, 10}, {10, 15}, {0, 3}}, "dev").pairs, 2u);
}

// A "device": the fake backend, answering each kernel's "# device: N" marker as its latency.
class FakeDevice : public backends::Backend {
 public:
  std::string identity() const override { return "fake-device"; }
  std::string device() const override { return "fake"; }
  std::string harness_version() const override { return "test"; }
  int slots() const override { return 2; }
  std::vector<backends::EvalResult> evaluate(const std::vector<backends::EvalRequest>& batch,
                                             const core::CancelToken& cancel,
                                             const backends::ProgressFn& progress) override {
    static const std::regex latency(R"(# latency: [0-9.]+)");
    static const std::regex device(R"(# device: ([0-9.]+))");
    std::vector<backends::EvalRequest> rewritten = batch;
    for (auto& request : rewritten) {
      std::smatch found;
      const std::string source = request.kernel_source;
      if (std::regex_search(source, found, device)) {
        request.kernel_source = std::regex_replace(source, latency, "# latency: " + found[1].str());
      }
    }
    return m_inner.evaluate(rewritten, cancel, progress);
  }
  long total_evaluations() const { return m_inner.total_evaluations(); }

 private:
  FakeBackend m_inner;
};

std::string timed(double sim_us, double device_us) {
  return "def k(x):\n    # latency: " + std::to_string(sim_us) +
         "\n    # device: " + std::to_string(device_us) + "\n    return x\n";
}

// Hands every parent the same fixed children.
class ListProposer : public Proposer {
 public:
  explicit ListProposer(std::vector<std::string> children) : m_children(std::move(children)) {}
  std::string name() const override { return "list"; }
  void propose(const ProposeContext& ctx, const std::vector<Parent>& parents,
               const ChildSink& sink) override {
    for (const auto& parent : parents) {
      for (std::size_t i = 0; i < m_children.size(); ++i) {
        Proposal proposal;
        proposal.origin = Origin{ctx.iteration, parent.member, static_cast<int>(i), 0, 0, "list"};
        proposal.parent_key = parent.candidate->key;
        proposal.source = m_children[i];
        sink(std::move(proposal));
      }
    }
  }

 private:
  std::vector<std::string> m_children;
};

// The simulator prefers A (60 us), the device B (50 us); C is third on the simulator, so with
// top-2 it is never measured.
const std::string k_root = timed(100, 100);
const std::string k_a = timed(60, 90);
const std::string k_b = timed(70, 50);
const std::string k_c = timed(80, 40);

SearchConfig confirmed_config(const std::string& confirm) {
  SearchConfig config = small_config(k_root);
  config.proposers = {"list"};
  config.confirm = confirm;
  return config;
}

SearchServices services_for(const Rig& rig, const std::shared_ptr<FakeDevice>& device) {
  SearchServices services = rig.services();
  services.providers.clear();
  services.proposers = {std::make_shared<ListProposer>(std::vector<std::string>{k_a, k_b, k_c})};
  services.confirm_backend = device;
  return services;
}

TEST(ConfirmedSearch, TheBeamRanksByTheDevicesLatenciesWhereTheSimulatorDisagrees) {
  Rig sim_only;
  auto plain = run_search(confirmed_config(""), services_for(sim_only, nullptr), {});
  ASSERT_EQ(plain.status, "completed") << plain.stop_reason;
  EXPECT_EQ(plain.best.key, core::source_key(k_a));

  Rig rig;
  auto device = std::make_shared<FakeDevice>();
  auto outcome = run_search(confirmed_config("fake-device"), services_for(rig, device), {});
  ASSERT_EQ(outcome.status, "completed") << outcome.stop_reason;
  EXPECT_EQ(outcome.best.key, core::source_key(k_b));
  EXPECT_TRUE(outcome.best.device_measured);
  EXPECT_DOUBLE_EQ(outcome.best.latency_us(), 50);       // the device's figure ...
  EXPECT_DOUBLE_EQ(outcome.best.evaluated_us(), 70);     // ... beside the simulator's
  EXPECT_DOUBLE_EQ(outcome.baseline.latency_us(), 100);  // the input was measured too
  EXPECT_DOUBLE_EQ(outcome.speedup(), 2.0);

  // The input and the simulator's top two went to the device; C did not.
  EXPECT_EQ(device->total_evaluations(), 3);
  EXPECT_EQ(outcome.device_measured, 3);
  EXPECT_GE(outcome.device_s, 0.0);
  auto pairs = rig.db->calibrations().pairs_for_run(outcome.run_id).value();
  ASSERT_EQ(pairs.size(), 3u);
  EXPECT_EQ(pairs[0].kernel_digest, core::source_key(k_root));
  EXPECT_EQ(pairs[0].device_spec, "fake-device");
  EXPECT_EQ(pairs[0].sim_spec, "fake");
  EXPECT_DOUBLE_EQ(pairs[1].simulated_us + pairs[2].simulated_us, 130);
  EXPECT_DOUBLE_EQ(pairs[1].measured_us + pairs[2].measured_us, 140);
  // The run's status message carries the confirmation's figures.
  const auto stored = rig.db->runs().get_run(outcome.run_id).value();
  EXPECT_NE(stored->status_message.find("confirmed on fake-device: 3 measured"), std::string::npos)
      << stored->status_message;
  EXPECT_DOUBLE_EQ(*stored->best_latency_us, 50);
}

TEST(ConfirmedSearch, AResumedRunTakesItsDeviceFiguresFromTheStoredPairs) {
  Rig rig;
  auto device = std::make_shared<FakeDevice>();
  auto config = confirmed_config("fake-device");
  config.iterations = 2;
  core::CancelToken cancel;
  SearchHooks hooks;
  hooks.progress = [&cancel](const ProgressEvent& event) {
    if (event.phase == "iteration_done" && event.iteration == 1) {
      cancel.cancel();
    }
  };
  auto first = run_search(config, services_for(rig, device), cancel, hooks);
  ASSERT_EQ(first.status, "cancelled") << first.stop_reason;
  ASSERT_EQ(first.iterations_done, 1);
  EXPECT_EQ(device->total_evaluations(), 3);

  auto resumed = resume_search(first.run_id, services_for(rig, device), {});
  ASSERT_EQ(resumed.status, "completed") << resumed.stop_reason;
  // Nothing is measured again: the input and B keep the figures the device gave the first time.
  EXPECT_EQ(device->total_evaluations(), 3);
  EXPECT_EQ(resumed.best.key, core::source_key(k_b));
  EXPECT_DOUBLE_EQ(resumed.best.latency_us(), 50);
  EXPECT_DOUBLE_EQ(resumed.baseline.latency_us(), 100);
}

TEST(ConfirmedSearch, TopKOneMeasuresOnlyTheSimulatorsBestAndEstimatesTheRest) {
  Rig rig;
  auto device = std::make_shared<FakeDevice>();
  auto config = confirmed_config("fake-device");
  config.confirm_top_k = 1;
  auto outcome = run_search(config, services_for(rig, device), {});
  ASSERT_EQ(outcome.status, "completed") << outcome.stop_reason;
  // Only A was measured (90 us). The ratios 1.0 (input) and 1.5 (A) have median 1.25, so B's
  // estimate is 87.5 us and beats A's measurement; C's is 100 us.
  EXPECT_EQ(device->total_evaluations(), 2);
  EXPECT_EQ(outcome.best.key, core::source_key(k_b));
  EXPECT_FALSE(outcome.best.device_measured);
  EXPECT_DOUBLE_EQ(outcome.best.latency_us(), 87.5);
}

TEST(ConfirmedSearch, ASpentDeviceBudgetStopsConfirmingButNotTheSearch) {
  Rig rig;
  auto device = std::make_shared<FakeDevice>();
  auto config = confirmed_config("fake-device");
  config.iterations = 2;
  config.max_device_s = 1e-9;  // spent by the input kernel's measurement
  auto outcome = run_search(config, services_for(rig, device), {});
  ASSERT_EQ(outcome.status, "completed") << outcome.stop_reason;
  EXPECT_EQ(outcome.iterations_done, 2);
  EXPECT_EQ(device->total_evaluations(), 1);
  // With one pair (ratio 1) the children rank by the simulator: A wins.
  EXPECT_EQ(outcome.best.key, core::source_key(k_a));
}

TEST(ConfirmedSearch, ANamedDeviceWithoutABackendFailsBeforeTheSearch) {
  Rig rig;
  auto outcome = run_search(confirmed_config("fake-device"), services_for(rig, nullptr), {});
  EXPECT_EQ(outcome.status, "failed");
  EXPECT_NE(outcome.stop_reason.find("confirming backend"), std::string::npos);
}

TEST(ConfirmedSearch, TheSettingsAreStoredWithTheRun) {
  Rig rig;
  auto config = confirmed_config("fake-device");
  config.confirm_top_k = 3;
  config.max_device_s = 12.5;
  auto outcome = run_search(config, services_for(rig, std::make_shared<FakeDevice>()), {});
  const auto stored = rig.db->runs().get_run(outcome.run_id).value();
  auto read = config_of(*stored, rig.db->evaluations());
  ASSERT_TRUE(read.ok());
  EXPECT_EQ(read->confirm, "fake-device");
  EXPECT_EQ(read->confirm_top_k, 3);
  EXPECT_DOUBLE_EQ(*read->max_device_s, 12.5);
}

TEST(ConfirmedSearch, BadSettingsAreRefused) {
  auto config = confirmed_config("fake-device");
  config.confirm_top_k = 0;
  EXPECT_FALSE(validate(config).ok());
  config.confirm_top_k = 2;
  config.max_device_s = 0;
  EXPECT_FALSE(validate(config).ok());
}

}  // namespace
}  // namespace autocomp::search::engine
