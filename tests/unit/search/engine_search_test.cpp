#include <gtest/gtest.h>

#include <atomic>

#include "search/engine/beam_search.hpp"
#include "unit/search/engine_test_support.hpp"

namespace autocomp::search::engine {
namespace {

using testing::kernel;
using testing::Rig;
using testing::Script;
using testing::small_config;

const std::string k_root = kernel("k", "latency: 100");

std::vector<std::string> beam_of(const Rig& rig, const std::string& run_id, int iteration) {
  for (const auto& beam : rig.beams(run_id)) {
    if (beam.iteration == iteration) {
      return beam.members;
    }
  }
  return {};
}

long requests_with_purpose(const llm::FakeProvider& provider, const std::string& purpose) {
  long count = 0;
  for (const auto& request : provider.requests()) {
    count += request.purpose == purpose ? 1 : 0;
  }
  return count;
}

TEST(EngineSearch, FasterChildIsKeptWithItsPlanInTheLineage) {
  Rig rig;
  const std::string child = kernel("k", "latency: 80");
  Script script;
  script.implement[k_root] = child;
  rig.provider->set_responder(script.responder());

  auto outcome = run_search(small_config(k_root), rig.services(), {});
  ASSERT_EQ(outcome.status, "completed") << outcome.stop_reason;
  EXPECT_EQ(outcome.best.key, core::source_key(child));
  EXPECT_DOUBLE_EQ(outcome.speedup(), 1.25);
  ASSERT_EQ(outcome.lineage.size(), 2u);
  EXPECT_EQ(outcome.lineage[0].key, core::source_key(k_root));
  EXPECT_EQ(outcome.lineage[1].plan, script.plan);
  ASSERT_EQ(outcome.history.size(), 1u);
  EXPECT_DOUBLE_EQ(outcome.history[0].best_latency_us, 80);
}

TEST(EngineSearch, SlowerChildIsRejectedOnceTheSlackIsOver) {
  Rig rig;
  const std::string child = kernel("k", "latency: 120");
  Script script;
  script.implement[k_root] = child;
  rig.provider->set_responder(script.responder());
  auto config = small_config(k_root);
  config.slack_iterations = 0;

  auto outcome = run_search(config, rig.services(), {});
  EXPECT_EQ(outcome.best.key, core::source_key(k_root));
  EXPECT_EQ(rig.backend->evaluations_of(child), 1);
  EXPECT_EQ(beam_of(rig, outcome.run_id, 1), std::vector<std::string>{core::source_key(k_root)});
  bool rejected = false;
  for (const auto& candidate : load_candidates(rig.services().store, outcome.run_id)) {
    rejected |= candidate.key == core::source_key(child) && candidate.verdict == "rejected";
  }
  EXPECT_TRUE(rejected);
}

TEST(EngineSearch, EarlyIterationsLetASlightlySlowerChildIntoTheBeam) {
  Rig rig;
  const std::string child = kernel("k", "latency: 105");
  Script script;
  script.implement[k_root] = child;
  rig.provider->set_responder(script.responder());
  auto config = small_config(k_root);
  config.beam = 2;

  auto outcome = run_search(config, rig.services(), {});
  EXPECT_EQ(beam_of(rig, outcome.run_id, 1),
            (std::vector<std::string>{core::source_key(k_root), core::source_key(child)}));
  EXPECT_EQ(outcome.best.key, core::source_key(k_root)) << "the best is still the faster root";
}

TEST(EngineSearch, TieKeepsTheOldMember) {
  Rig rig;
  const std::string child = kernel("twin", "latency: 100");
  Script script;
  script.implement[k_root] = child;
  rig.provider->set_responder(script.responder());

  auto outcome = run_search(small_config(k_root), rig.services(), {});
  EXPECT_EQ(beam_of(rig, outcome.run_id, 1), std::vector<std::string>{core::source_key(k_root)});
}

TEST(EngineSearch, CompileErrorIsSentBackAndTheRepairIsKept) {
  Rig rig;
  const std::string broken = kernel("k", "compile_error");
  const std::string fixed = kernel("k", "latency: 70");
  Script script;
  script.implement[k_root] = broken;
  script.repair[broken] = fixed;
  rig.provider->set_responder(script.responder());

  auto outcome = run_search(small_config(k_root), rig.services(), {});
  EXPECT_EQ(outcome.best.key, core::source_key(fixed));
  EXPECT_EQ(outcome.repairs, 1);
  bool error_sent = false;
  for (const auto& request : rig.provider->requests()) {
    if (request.purpose == "repair") {
      const auto& text = request.messages.back().content;
      error_sent = text.find("tile exceeds 128 partitions") != std::string::npos &&
                   text.find("line 3") != std::string::npos;
    }
  }
  EXPECT_TRUE(error_sent);
}

TEST(EngineSearch, RepairLoopIsBounded) {
  Rig rig;
  Script script;
  std::vector<std::string> broken;
  for (int i = 0; i < 5; ++i) {
    broken.push_back(kernel("k" + std::to_string(i), "runtime_error"));
  }
  script.implement[k_root] = broken[0];
  for (int i = 0; i + 1 < 5; ++i) {
    script.repair[broken[i]] = broken[i + 1];
  }
  rig.provider->set_responder(script.responder());

  auto outcome = run_search(small_config(k_root), rig.services(), {});
  EXPECT_EQ(requests_with_purpose(*rig.provider, "repair"), 2);
  EXPECT_EQ(rig.backend->evaluations_of(broken[3]), 0);
  EXPECT_EQ(outcome.best.key, core::source_key(k_root));
}

TEST(EngineSearch, IdenticalChildrenAreEvaluatedOnce) {
  Rig rig;
  const std::string child = kernel("k", "latency: 80");
  Script script;
  script.implement[k_root] = child;  // both implementations give the same code
  rig.provider->set_responder(script.responder());
  auto config = small_config(k_root);
  config.impls = 2;

  auto outcome = run_search(config, rig.services(), {});
  EXPECT_EQ(rig.backend->evaluations_of(child), 1);
  EXPECT_EQ(outcome.duplicates, 1);
  EXPECT_EQ(outcome.best.key, core::source_key(child));
}

TEST(EngineSearch, KernelSeenInAnEarlierIterationNeverReentersTheBeam) {
  Rig rig;
  const std::string child = kernel("k", "latency: 80");
  Script script;
  script.implement[k_root] = child;
  script.implement[child] = k_root;  // the model "undoes" the change
  rig.provider->set_responder(script.responder());
  auto config = small_config(k_root);
  config.iterations = 2;
  config.beam = 2;

  auto outcome = run_search(config, rig.services(), {});
  EXPECT_EQ(rig.backend->evaluations_of(k_root), 1);
  EXPECT_GE(outcome.duplicates, 1);
  auto beam = beam_of(rig, outcome.run_id, 2);
  EXPECT_EQ(std::count(beam.begin(), beam.end(), core::source_key(k_root)), 1);
}

TEST(EngineSearch, AnswerWithoutCodeCountsAsAFailedChild) {
  Rig rig;
  Script script;  // no implementation scripted: the model answers with prose
  rig.provider->set_responder(script.responder());
  auto outcome = run_search(small_config(k_root), rig.services(), {});
  EXPECT_EQ(outcome.status, "completed");
  EXPECT_EQ(outcome.candidates_failed, 1);
  EXPECT_EQ(outcome.best.key, core::source_key(k_root));
}

TEST(EngineSearch, IncorrectInputKernelFailsClearly) {
  Rig rig;
  auto outcome = run_search(small_config(kernel("k", "wrong")), rig.services(), {});
  EXPECT_EQ(outcome.status, "failed");
  ASSERT_TRUE(outcome.failure.has_value());
  EXPECT_NE(outcome.failure->message.find("input kernel"), std::string::npos);
  EXPECT_EQ(rig.provider->call_count(), 0u);
}

// root -> 90 -> 80 -> 70 -> ...: every iteration improves on the last.
Script chain(int length) {
  Script script;
  std::string parent = k_root;
  for (int i = 1; i <= length; ++i) {
    std::string child = kernel("k", "latency: " + std::to_string(100 - 5 * i));
    script.implement[parent] = child;
    parent = child;
  }
  return script;
}

TEST(EngineSearch, CallBudgetStopsTheRunWithTheBestSoFar) {
  Rig rig;
  rig.provider->set_responder(chain(10).responder());
  auto config = small_config(k_root);
  config.iterations = 10;
  config.budgets.max_llm_calls = 3;

  auto outcome = run_search(config, rig.services(), {});
  EXPECT_EQ(outcome.status, "budget_exhausted");
  EXPECT_NE(outcome.stop_reason.find("LLM call budget"), std::string::npos) << outcome.stop_reason;
  EXPECT_EQ(rig.provider->call_count(), 3u);
  EXPECT_DOUBLE_EQ(outcome.best.latency_us(), 95);
  EXPECT_EQ(rig.status(outcome.run_id), store::RunStatus::budget_exhausted);
}

TEST(EngineSearch, TokenBudgetStopsTheRun) {
  Rig rig;
  rig.provider->set_responder(chain(10).responder());
  auto config = small_config(k_root);
  config.iterations = 10;
  config.budgets.max_tokens = 1;
  auto outcome = run_search(config, rig.services(), {});
  EXPECT_EQ(outcome.status, "budget_exhausted");
  EXPECT_NE(outcome.stop_reason.find("token"), std::string::npos);
  EXPECT_LE(rig.provider->call_count(), 2u);
}

TEST(EngineSearch, CostBudgetStopsTheRun) {
  Rig rig;
  rig.provider->set_responder(chain(10).responder());
  rig.provider->set_cost_per_call(0.5);
  auto config = small_config(k_root);
  config.iterations = 10;
  config.budgets.max_cost_usd = 1.0;
  auto outcome = run_search(config, rig.services(), {});
  EXPECT_EQ(outcome.status, "budget_exhausted");
  EXPECT_NE(outcome.stop_reason.find("cost"), std::string::npos);
  EXPECT_EQ(rig.provider->call_count(), 2u);
  EXPECT_DOUBLE_EQ(outcome.cost_usd, 1.0);
}

TEST(EngineSearch, WallTimeBudgetStopsTheRun) {
  // Each model answer takes ten seconds of the run's clock; no real time passes.
  Rig rig;
  auto clock = std::make_shared<core::ManualClock>();
  auto script = chain(50);
  auto answer = script.responder();
  rig.provider->set_responder([clock, answer](const llm::CompletionRequest& request) {
    clock->advance(std::chrono::seconds(10));
    return answer(request);
  });
  auto services = rig.services();
  services.clock = clock;
  auto config = small_config(k_root);
  config.iterations = 50;
  config.budgets.max_wall_s = 35;
  auto outcome = run_search(config, services, {});
  EXPECT_EQ(outcome.status, "budget_exhausted");
  EXPECT_NE(outcome.stop_reason.find("wall"), std::string::npos) << outcome.stop_reason;
  EXPECT_NE(outcome.stop_reason.find("35 s"), std::string::npos) << outcome.stop_reason;
  EXPECT_LT(rig.provider->call_count(), 50u) << "the budget stopped the run early";
  EXPECT_GE(outcome.elapsed_s, 35.0) << "elapsed time is the run's clock";
  EXPECT_LT(outcome.best.latency_us(), 100);
}

TEST(EngineSearch, CancellationStopsPromptly) {
  Rig rig;
  auto script = chain(50);
  script.delay = std::chrono::milliseconds(20);
  rig.provider->set_responder(script.responder());
  auto config = small_config(k_root);
  config.iterations = 50;
  core::CancelToken cancel;
  SearchHooks hooks;
  hooks.progress = [&cancel](const ProgressEvent& event) {
    if (event.candidates_evaluated >= 2) {
      cancel.cancel();
    }
  };
  auto outcome = run_search(config, rig.services(), cancel, hooks);
  EXPECT_EQ(outcome.status, "cancelled");
  EXPECT_LE(rig.provider->call_count(), 6u);
  EXPECT_LT(outcome.elapsed_s, 2.0);
  EXPECT_EQ(rig.status(outcome.run_id), store::RunStatus::cancelled);
}

TEST(EngineSearch, ProgressReportsIterationEvaluationsBestAndSpend) {
  Rig rig;
  rig.provider->set_responder(chain(3).responder());
  rig.provider->set_cost_per_call(0.01);
  auto config = small_config(k_root);
  config.iterations = 3;
  std::mutex mutex;
  std::vector<ProgressEvent> events;
  std::string started_id;
  SearchHooks hooks;
  hooks.started = [&started_id](const std::string& id) { started_id = id; };
  hooks.progress = [&](const ProgressEvent& event) {
    std::lock_guard lock(mutex);
    events.push_back(event);
  };
  auto outcome = run_search(config, rig.services(), {}, hooks);
  EXPECT_EQ(started_id, outcome.run_id);
  ASSERT_FALSE(events.empty());
  const auto& last = events.back();
  EXPECT_TRUE(last.finished);
  EXPECT_EQ(last.iteration, 3);
  EXPECT_EQ(last.candidates_evaluated, 3);
  EXPECT_DOUBLE_EQ(last.best_latency_us, 85);
  EXPECT_NEAR(last.speedup, 100.0 / 85.0, 1e-9);
  EXPECT_EQ(last.llm_calls, 6);
  EXPECT_NEAR(last.cost_usd, 0.06, 1e-9);
}

TEST(EngineSearch, ResumeReplaysAnswersAndSkipsEvaluatedKernels) {
  Rig first;
  Script script = chain(3);
  first.provider->set_responder(script.responder());
  auto config = small_config(k_root);
  config.iterations = 3;
  core::CancelToken cancel;
  SearchHooks hooks;
  hooks.progress = [&cancel](const ProgressEvent& event) {
    if (event.iteration == 2 && event.candidates_evaluated >= 2) {
      cancel.cancel();  // as if killed right after iteration 2's child was measured
    }
  };
  auto stopped = run_search(config, first.services(), cancel, hooks);
  ASSERT_EQ(stopped.status, "cancelled");
  ASSERT_EQ(first.provider->call_count(), 4u);

  Rig second;
  second.db = first.db;
  second.backend = first.backend;
  second.provider->set_responder(script.responder());
  auto resumed = resume_search(stopped.run_id, second.services(), {});
  ASSERT_EQ(resumed.status, "completed") << resumed.stop_reason;
  EXPECT_EQ(second.provider->call_count(), 2u) << "only iteration 3 asks anything new";
  EXPECT_EQ(resumed.llm_replayed, 2);
  for (const auto& [parent, child] : script.implement) {
    EXPECT_LE(first.backend->evaluations_of(child), 1) << "evaluated twice";
  }
  EXPECT_EQ(first.backend->evaluations_of(k_root), 1);
  EXPECT_DOUBLE_EQ(resumed.best.latency_us(), 85);
  EXPECT_EQ(resumed.history.size(), 3u);
  EXPECT_EQ(resumed.lineage.size(), 4u);
  EXPECT_EQ(resumed.llm_calls, 6);
}

// Children whose latency depends on the exact prompt: any change in what is asked shows.
llm::FakeProvider::Responder hashing_responder() {
  return [](const llm::CompletionRequest& request) -> core::Result<llm::Completion> {
    const std::string digest = core::sha256_hex(request.messages.back().content);
    llm::Completion completion;
    if (request.purpose == "plan") {
      completion.text = "plan " + digest.substr(0, 8);
    } else {
      int latency = 50 + static_cast<int>(std::stoul(digest.substr(0, 4), nullptr, 16) % 60);
      completion.text =
          testing::fenced(kernel("k" + digest.substr(0, 6), "latency: " + std::to_string(latency)));
    }
    return completion;
  };
}

TEST(EngineSearch, SameSeedGivesTheSameSearch) {
  auto run = [](std::uint64_t seed, std::vector<std::string>& prompts) {
    Rig rig;
    rig.provider->set_responder(hashing_responder());
    auto config = small_config(k_root);
    config.beam = 2;
    config.plans = 2;
    config.impls = 2;
    config.iterations = 3;
    config.seed = seed;
    auto outcome = run_search(config, rig.services(), {});
    for (const auto& request : rig.provider->requests()) {
      prompts.push_back(request.messages.back().content);
    }
    std::sort(prompts.begin(), prompts.end());
    std::vector<std::vector<std::string>> beams;
    for (const auto& beam : rig.beams(outcome.run_id)) {
      beams.push_back(beam.members);
    }
    return std::make_pair(outcome.best.key, beams);
  };
  std::vector<std::string> prompts_a, prompts_b, prompts_c;
  auto a = run(11, prompts_a);
  auto b = run(11, prompts_b);
  auto c = run(12, prompts_c);
  EXPECT_EQ(a, b);
  EXPECT_EQ(prompts_a, prompts_b);
  EXPECT_NE(prompts_a, prompts_c);
}

TEST(EngineSearch, UnknownProposerIsAClearFailure) {
  Rig rig;
  auto config = small_config(k_root);
  config.proposers = {"nonesuch"};
  auto outcome = run_search(config, rig.services(), {});
  EXPECT_EQ(outcome.status, "failed");
  EXPECT_NE(outcome.stop_reason.find("nonesuch"), std::string::npos);
}

}  // namespace
}  // namespace autocomp::search::engine
