// What the planning prompt shows of a profile: the parent's hot lines (instruction, share, us per
// instruction), its engine waits, busy time per engine and the modelled floor; and what each
// child of the previous iteration did, as a profile difference from its parent.
#include <gtest/gtest.h>

#include <nlohmann/json.hpp>

#include "search/engine/beam_search.hpp"
#include "search/engine/prompts.hpp"
#include "search/prompts/profile_text.hpp"
#include "unit/search/engine_test_support.hpp"

namespace autocomp::search::engine {
namespace {

std::string user_text(const llm::CompletionRequest& request) {
  return request.messages.at(0).content;
}

// A profiled evaluation: `us` latency, VectorE busy `vector_us`, DMA busy `dma_us`, one hot line.
backends::EvalResult profiled(double us, double vector_us, double dma_us, long instructions,
                              const std::string& floor_section = "") {
  backends::EvalResult eval;
  eval.verified = true;
  eval.correct = true;
  eval.latency = backends::LatencyStats{us, us, us, {us}};
  eval.metrics["total_time"] = us * 1e-6;
  eval.metrics["vector_engine_active_time"] = vector_us * 1e-6;
  eval.metrics["dma_active_time"] = dma_us * 1e-6;
  eval.hotspots.push_back(backends::Hotspot{42, "acc = nl.add(acc, row)", "vector",
                                            100 * vector_us / us, vector_us, instructions});
  eval.waits.push_back(backends::EngineWait{"tensor", "vector", 12.5, 42});
  if (!floor_section.empty()) {
    eval.raw_json = R"({"schema":"autocomp-harness/1","status":"ok","benchmark":{"floor":)" +
                    floor_section + "}}";
  }
  return eval;
}

std::string kernel_source() {
  std::string source = "def k(x):\n";
  for (int line = 2; line < 50; ++line) {
    source += line == 42 ? "    acc = nl.add(acc, row)\n" : "    pass\n";
  }
  return source;
}

TEST(PromptProfile, PlanningPromptShowsHotLinesWaitsBusyTimeAndTheFloor) {
  const auto eval = profiled(200, 120, 150, 4096, R"({"hbm_bytes": 19000000, "dma_gbps": 100})");
  PlanPromptInput input;
  input.target = "trn2";
  input.kernel_source = kernel_source();
  input.evaluation = &eval;
  input.dropout = 0;
  auto request =
      make_template_prompt_factory(std::string(AUTOCOMP_SOURCE_DIR) + "/prompts")->planning(input);
  ASSERT_TRUE(request.ok()) << request.failure().describe();
  const auto text = user_text(*request);
  EXPECT_NE(text.find("Hot lines"), std::string::npos) << text;
  EXPECT_NE(text.find("line 42 `acc = nl.add(acc, row)`: VectorE 60% of the time, 120 us over "
                      "4096 instructions (0.0293 us each)"),
            std::string::npos)
      << text;
  EXPECT_NE(text.find("TensorE idle 12.5% of the time waiting on VectorE (line 42)"),
            std::string::npos);
  EXPECT_NE(text.find("Busy time per engine, us: VectorE 120, DMA 150"), std::string::npos);
  // 19 MB at 100 GB/s = 190 us of a 200 us kernel: 95%, at the floor.
  EXPECT_NE(text.find("Modelled floor: 190 us (DMA-bound"), std::string::npos) << text;
  EXPECT_NE(text.find("reaches 95% of it: it is AT THE MODELLED FLOOR"), std::string::npos);
}

TEST(PromptProfile, TheRooflineFloorsAreLabelledAsTheKernelsOwnNotTheModelledFloor) {
  auto eval = profiled(200, 120, 150, 4096, R"({"hbm_bytes": 19000000, "dma_gbps": 100})");
  eval.roofline["floor_dma_us"] = 210;
  eval.roofline["floor_vector_us"] = 118;
  PlanPromptInput input;
  input.target = "trn2";
  input.kernel_source = kernel_source();
  input.evaluation = &eval;
  input.dropout = 0;
  auto request =
      make_template_prompt_factory(std::string(AUTOCOMP_SOURCE_DIR) + "/prompts")->planning(input);
  ASSERT_TRUE(request.ok()) << request.failure().describe();
  const auto text = user_text(*request);
  EXPECT_NE(text.find("floor_dma_us: 210 (the bytes this kernel moves, at the rate its average "
                      "run reaches; not the modelled floor)"),
            std::string::npos)
      << text;
  EXPECT_NE(text.find("floor_vector_us: 118 (this kernel's own work on that engine alone)"),
            std::string::npos);
}

TEST(PromptProfile, AKernelFarFromTheFloorIsNotCalledAtIt) {
  const auto eval = profiled(400, 120, 150, 4096, R"({"hbm_bytes": 19000000, "dma_gbps": 100})");
  const auto floors = prompts::compute_floors(eval);
  ASSERT_TRUE(floors);
  const auto line = prompts::floor_line(*floors);
  EXPECT_NE(line.find("reaches 47.5% of it"), std::string::npos) << line;
  EXPECT_EQ(line.find("AT THE MODELLED FLOOR"), std::string::npos) << line;
}

TEST(PromptProfile, ProfileDifferenceNamesLatencyBusyDeltasAndTheChangedHotLine) {
  const auto parent = profiled(200, 120, 150, 4096);
  const auto child = profiled(180, 80, 150, 1024);
  const auto difference = prompts::profile_difference(parent, child);
  EXPECT_NE(difference.find("latency 200 -> 180 us (-10.00%)"), std::string::npos) << difference;
  EXPECT_NE(difference.find("busy: VectorE -40 us"), std::string::npos) << difference;
  EXPECT_EQ(difference.find("DMA"), std::string::npos) << "an unchanged engine is not listed";
  EXPECT_NE(difference.find("4096 -> 1024 instructions"), std::string::npos) << difference;
  EXPECT_NE(difference.find("largest wait: TensorE 12.5% on VectorE"), std::string::npos);
  // Another statement now on line 42 is not compared with the old one.
  auto moved = child;
  moved.hotspots[0].text = "acc = nl.multiply(acc, row)";
  EXPECT_NE(prompts::profile_difference(parent, moved).find("(new hot line, 1024 instructions)"),
            std::string::npos);
}

TEST(PromptProfile, HistoryCarriesEachChildOfTheLastIterationWithItsProfileDifference) {
  Candidate root;
  root.key = "root";
  root.eval = profiled(200, 120, 150, 4096);
  Candidate slower;
  slower.key = "a";
  slower.parent_key = "root";
  slower.plan = "split the tap chain across engines";
  slower.origin.iteration = 1;
  slower.eval = profiled(220, 160, 150, 8192);
  Candidate older = slower;  // two iterations back: tried plans only
  older.key = "b";
  older.plan = "an old idea";
  older.origin.iteration = 0;
  const auto history = prompt_history({slower, older}, root, 2);
  ASSERT_EQ(history.recent_results.size(), 1u);
  const auto& line = history.recent_results[0];
  EXPECT_NE(line.find("1.10x slower"), std::string::npos) << line;
  EXPECT_NE(line.find("split the tap chain"), std::string::npos) << line;
  EXPECT_NE(line.find("profile vs parent: latency 200 -> 220 us (+10.00%); busy: VectorE +40 us"),
            std::string::npos)
      << line;
}

TEST(PromptProfile, TheSearchShowsTheNextPromptWhatEachChildDidAndWhereTheParentSpendsTime) {
  testing::Rig rig;
  testing::Script script;
  const std::string root = testing::kernel("k", "latency: 100\n    # hot: vector 60 4096");
  const std::string child = testing::kernel("k", "latency: 90\n    # hot: vector 45 1024");
  script.implement[root] = child;
  script.implement[child] = testing::kernel("k", "latency: 80");
  rig.provider->set_responder(script.responder());
  auto config = testing::small_config(root);
  config.iterations = 2;
  auto outcome = run_search(config, rig.services(), {});
  ASSERT_EQ(outcome.status, "completed") << outcome.stop_reason;
  std::vector<std::string> plans;
  for (const auto& request : rig.provider->requests()) {
    if (request.purpose == "plan") {
      plans.push_back(user_text(request));
    }
  }
  ASSERT_EQ(plans.size(), 2u);
  // Iteration 1: the input's hot line; iteration 2: the child's, and what the child did.
  EXPECT_NE(plans[0].find("VectorE 60% of the time, 60 us over 4096 instructions"),
            std::string::npos)
      << plans[0];
  EXPECT_EQ(plans[0].find("What the last iteration's attempts did"), std::string::npos);
  EXPECT_NE(plans[1].find("VectorE 50% of the time, 45 us over 1024 instructions"),
            std::string::npos)
      << plans[1];
  EXPECT_NE(plans[1].find("What the last iteration's attempts did"), std::string::npos);
  EXPECT_NE(plans[1].find("latency 100 -> 90 us (-10.00%); busy: VectorE -15 us; top line 2 "
                          "VectorE 50% (was 60%, 4096 -> 1024 instructions)"),
            std::string::npos)
      << plans[1];
}

}  // namespace
}  // namespace autocomp::search::engine
