// The search verifies its winner again (fresh, on all seeds) before reporting it, drops one that
// fails, and sends its work in the background lane.
#include <gtest/gtest.h>

#include <algorithm>

#include "search/engine/beam_search.hpp"
#include "search/engine/input_signature.hpp"
#include "unit/search/engine_test_support.hpp"

namespace autocomp::search::engine {
namespace {

using testing::kernel;
using testing::Rig;
using testing::Script;
using testing::small_config;

const std::string k_root = kernel("k", "latency: 100");

struct StoreRig {
  std::shared_ptr<testing::FakeBackend> backend = std::make_shared<testing::FakeBackend>();
  std::shared_ptr<store::Store> db;
  std::shared_ptr<llm::FakeProvider> provider = std::make_shared<llm::FakeProvider>("fake", 4);

  StoreRig() {
    auto opened = store::Store::open(":memory:");
    EXPECT_TRUE(opened.ok());
    db = std::move(opened).value();
  }
  SearchServices services() const {
    SearchServices services;
    services.backend = backend;
    services.store = parts_of(db);
    services.facts = RunFacts{"k.py", "p.py", "fake", {}};
    services.providers = {provider};
    services.prompts = std::shared_ptr<const PromptFactory>(
        make_template_prompt_factory(std::string(AUTOCOMP_SOURCE_DIR) + "/prompts"));
    return services;
  }
};

TEST(EngineReverify, AWinnerThatPassesIsVerifiedOnceMoreAndReported) {
  Rig rig;
  const std::string child = kernel("k", "latency: 80");
  Script script;
  script.implement[k_root] = child;
  rig.provider->set_responder(script.responder());

  auto outcome = run_search(small_config(k_root), rig.services(), {});
  ASSERT_EQ(outcome.status, "completed") << outcome.stop_reason;
  EXPECT_EQ(outcome.best.key, core::source_key(child));
  EXPECT_EQ(rig.backend->verifications_of(child), 1);
  EXPECT_EQ(rig.backend->evaluations_of(child), 1);
  EXPECT_TRUE(outcome.notes.empty());
}

TEST(EngineReverify, AWinnerThatFailsIsDroppedAndTheNextBestIsRecordedAsTheRunsBest) {
  StoreRig rig;
  // Fast when first measured, wrong when verified again in a fresh process.
  const std::string honest = kernel("k", "latency: 60");
  const std::string cheat = "def k(x):\n    # latency: 50\n    # fails_reverify\n    return x\n";
  Script script;
  script.implement[k_root] = honest;
  script.implement[honest] = cheat;
  rig.provider->set_responder(script.responder());
  auto config = small_config(k_root);
  config.beam = 2;
  config.iterations = 2;
  config.slack_iterations = 0;

  auto outcome = run_search(config, rig.services(), {});
  ASSERT_EQ(outcome.status, "completed") << outcome.stop_reason;
  EXPECT_EQ(rig.backend->verifications_of(cheat), 1);
  EXPECT_EQ(rig.backend->verifications_of(honest), 1);
  EXPECT_EQ(outcome.best.key, core::source_key(honest));
  EXPECT_DOUBLE_EQ(outcome.best.latency_us(), 60);
  ASSERT_EQ(outcome.notes.size(), 1u);
  EXPECT_NE(outcome.notes[0].find(core::source_key(cheat).substr(0, 12)), std::string::npos);
  EXPECT_NE(outcome.notes[0].find("re-verification"), std::string::npos);

  // What get_search_status, list_runs and revert_to_best(run_id) read.
  auto run = rig.db->runs().get_run(outcome.run_id);
  ASSERT_TRUE(run.ok() && run.value().has_value());
  EXPECT_EQ(run.value()->best_candidate_key, core::source_key(honest));
  EXPECT_NE(run.value()->status_message.find("re-verification"), std::string::npos);
  auto best = rig.db->runs().best_for_run(outcome.run_id);
  ASSERT_TRUE(best.ok() && best.value().has_value());
  EXPECT_EQ(best.value()->candidate_key, core::source_key(honest));
  auto dropped = rig.db->runs().get_run_candidate(outcome.run_id, core::source_key(cheat));
  ASSERT_TRUE(dropped.ok() && dropped.value().has_value());
  EXPECT_EQ(dropped.value()->status, store::CandidateStatus::failed);
}

TEST(EngineReverify, ACancelledRunStillReVerifiesItsWinner) {
  Rig rig;
  const std::string cheat = "def k(x):\n    # latency: 20\n    # fails_reverify\n    return x\n";
  Script script;
  script.implement[k_root] = cheat;
  rig.provider->set_responder(script.responder());
  auto config = small_config(k_root);
  config.iterations = 3;
  core::CancelToken cancel;
  SearchHooks hooks;
  hooks.progress = [&cancel](const ProgressEvent& event) {
    if (event.phase == "iteration_done") {
      cancel.cancel();
    }
  };

  auto outcome = run_search(config, rig.services(), cancel, hooks);
  EXPECT_EQ(outcome.status, "cancelled");
  EXPECT_EQ(rig.backend->verifications_of(cheat), 1);
  EXPECT_EQ(outcome.best.key, core::source_key(k_root));
  EXPECT_EQ(outcome.notes.size(), 1u);
}

TEST(EngineLanes, TheSearchSendsEverythingInTheBackgroundLane) {
  Rig rig;
  const std::string child = kernel("k", "latency: 80");
  Script script;
  script.implement[k_root] = child;
  rig.provider->set_responder(script.responder());
  auto config = small_config(k_root);
  config.problem_source = "def inputs(seed):\n    return {}\n# shape: lanes-test\n";

  auto outcome = run_search(config, rig.services(), {});
  ASSERT_EQ(outcome.status, "completed") << outcome.stop_reason;
  const auto lanes = rig.backend->lanes();
  ASSERT_FALSE(lanes.empty());
  EXPECT_TRUE(std::all_of(lanes.begin(), lanes.end(),
                          [](backends::Lane lane) { return lane == backends::Lane::background; }));
}

TEST(EngineSignature, TheProbeRunsOncePerProblemAndBackendAndEntersTheKey) {
  Rig rig;
  auto config = small_config(k_root);
  config.iterations = 0;
  config.problem_source = "def inputs(seed):\n    return {}\n# shape: a:float32[7]\n";
  backends::EvalRequest like;
  like.problem_source = config.problem_source;
  like.target = "trn2";
  EXPECT_EQ(input_signature(*rig.backend, like, {}), "a:float32[7]");
  EXPECT_EQ(input_signature(*rig.backend, like, {}), "a:float32[7]");
  EXPECT_EQ(rig.backend->signatures(), 1);

  // The search keys its evaluations by it: a run log lookup with another signature misses.
  auto outcome = run_search(config, rig.services(), {});
  ASSERT_EQ(outcome.status, "completed") << outcome.stop_reason;
  EXPECT_EQ(rig.backend->signatures(), 1);
  backends::EvalRequest request;
  request.kernel_source = k_root;
  request.problem_source = config.problem_source;
  request.kernel_filename = config.kernel_filename;
  request.problem_filename = config.problem_filename;
  request.target = config.target;
  request.kernel_name = config.kernel_name;
  request.seeds = config.eval_seeds;
  request.warmup = config.warmup;
  request.iters = config.iters;
  request.timeout = config.eval_timeout;
  store::EvalSite site{"fake", "fake", "test", "a:float32[7]"};
  auto& cache = rig.db->evaluations();
  EXPECT_TRUE(cache.lookup(request, site).value().has_value());
  site.input_signature = "a:float32[8]";
  EXPECT_FALSE(cache.lookup(request, site).value().has_value());
}

}  // namespace
}  // namespace autocomp::search::engine
