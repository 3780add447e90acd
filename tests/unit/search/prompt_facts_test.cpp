// The facts the prompts carry, on the shipped templates: the problem, the starting latency, the
// plans tried, the notes of instructions a plan introduces, hardware numbers from the simulator's
// generated facts, relevant menu items, merged and scoped lessons, intact reflexions.
#include <gtest/gtest.h>

#include <cstdio>
#include <fstream>
#include <nlohmann/json.hpp>
#include <sstream>

#include "search/engine/beam_search.hpp"
#include "search/engine/prompts.hpp"
#include "search/prompts/facts.hpp"
#include "search/prompts/library.hpp"
#include "search/prompts/menu.hpp"
#include "search/prompts/problem_notes.hpp"
#include "search/prompts/prompt_builder.hpp"
#include "unit/search/engine_test_support.hpp"

namespace autocomp::search::engine {
namespace {

std::string read_file(const std::string& relative) {
  std::ifstream in(std::string(AUTOCOMP_SOURCE_DIR) + "/" + relative);
  std::stringstream text;
  text << in.rdbuf();
  return text.str();
}

std::string user_text(const llm::CompletionRequest& request) {
  return request.messages.at(0).content;
}

std::size_t count(const std::string& text, const std::string& part) {
  std::size_t n = 0;
  for (auto pos = text.find(part); pos != std::string::npos; pos = text.find(part, pos + 1)) {
    ++n;
  }
  return n;
}

const char* k_layernorm_signature =
    "beta:float32[8192];gamma:float32[8192];input_tensor:float32[4096,8192]";

std::unique_ptr<PromptFactory> shipped() {
  return make_template_prompt_factory(std::string(AUTOCOMP_SOURCE_DIR) + "/prompts");
}

backends::EvalResult measured(double us) {
  backends::EvalResult eval;
  eval.correct = true;
  eval.latency = backends::LatencyStats{};
  eval.latency->median_us = us;
  eval.input_signature = k_layernorm_signature;
  return eval;
}

TEST(PromptFacts, PlanPromptForASeedStatesShapesDtypesAndTolerance) {
  const auto eval = measured(900);
  PlanPromptInput input;
  input.target = "trn1";
  input.kernel_source = read_file("seeds/layernorm/naive.py");
  input.evaluation = &eval;
  input.problem_source = read_file("seeds/layernorm/problem.py");
  auto request = shipped()->planning(input);
  ASSERT_TRUE(request.ok()) << request.failure().describe();
  const auto text = user_text(*request);
  EXPECT_NE(text.find("- input_tensor: float32 [4096, 8192]"), std::string::npos) << text;
  EXPECT_NE(text.find("- gamma: float32 [8192]"), std::string::npos);
  EXPECT_NE(text.find("rtol = 1e-4, atol = 1e-4"), std::string::npos);
  EXPECT_NE(text.find("def reference(input_tensor, gamma, beta):"), std::string::npos);
  EXPECT_NE(text.find("Kernel function: layernorm_kernel"), std::string::npos);
  EXPECT_EQ(text.find("{{"), std::string::npos);
}

TEST(PromptFacts, ProblemWithoutASignatureShowsItsInputsFunction) {
  const auto notes = prompts::describe_problem(read_file("seeds/softmax/problem.py"), "");
  EXPECT_NE(notes.find("def inputs(seed):"), std::string::npos) << notes;
  EXPECT_NE(notes.find("atol = 1e-7"), std::string::npos);
  EXPECT_TRUE(prompts::describe_problem("", "").empty());
  EXPECT_TRUE(prompts::parse_input_signature("x:float32[4,a];:f[1];y[2]").empty());
  const auto parsed = prompts::parse_input_signature("s:int32[];x:bfloat16[128, 64]");
  ASSERT_EQ(parsed.size(), 2u);
  EXPECT_TRUE(parsed[0].shape.empty());
  EXPECT_EQ(parsed[1].shape, (std::vector<long long>{128, 64}));
}

TEST(PromptFacts, ImplementationPromptCarriesTheNotesOfInstructionsThePlanIntroduces) {
  ImplementPromptInput input;
  input.target = "trn1";
  input.kernel_source = read_file("seeds/layernorm/naive.py");
  ASSERT_EQ(input.kernel_source.find("bn_stats"), std::string::npos);
  input.plan =
      "Replace the two nl.mean passes by nisa.bn_stats per 512-column chunk and one bn_aggr, then "
      "fold the normalization into activation_reduce.";
  input.problem_source = read_file("seeds/layernorm/problem.py");
  input.input_signature = k_layernorm_signature;
  auto request = shipped()->implementation(input);
  ASSERT_TRUE(request.ok()) << request.failure().describe();
  const auto text = user_text(*request);
  // bn_stats and bn_aggr share one note, sent once, with both signatures from the facts file
  EXPECT_EQ(count(text, "## nisa.bn_stats / nisa.bn_aggr"), 1u) << text;
  // the seed imports neuronxcc.nki: ISA calls return their result there
  EXPECT_NE(text.find("Signature: `y = nisa.bn_stats(data"), std::string::npos);
  EXPECT_NE(text.find("Signature: `y = nisa.bn_aggr(data"), std::string::npos);
  EXPECT_NE(text.find("[P, 6]"), std::string::npos);
  EXPECT_NE(text.find("## nisa.activation_reduce"), std::string::npos);
  EXPECT_NE(text.find("reduce_res is a separate [P, 1] tile"), std::string::npos);
  EXPECT_NE(text.find("- input_tensor: float32 [4096, 8192]"), std::string::npos);
  // the kernel is still the last python block (what a model rewrites)
  EXPECT_NE(testing::kernel_in(*request).find("def layernorm_kernel"), std::string::npos);
}

TEST(PromptFacts, SignaturesFollowTheKernelsNamespace) {
  ImplementPromptInput input;
  input.target = "trn2";
  input.plan = "Fold the shift into nisa.activation(op=nl.exp, bias=...) with reduce_res.";
  input.kernel_source = read_file("seeds/layernorm/naive.py");  // neuronxcc.nki
  auto legacy = shipped()->implementation(input);
  ASSERT_TRUE(legacy.ok()) << legacy.failure().describe();
  EXPECT_NE(user_text(*legacy).find("Signature: `y = nisa.activation(op, data, bias"),
            std::string::npos)
      << user_text(*legacy);
  EXPECT_EQ(user_text(*legacy).find("nisa.activation(dst"), std::string::npos);

  input.kernel_source = read_file("seeds/softmax/naive.py");  // nki (0.3+)
  auto modern = shipped()->implementation(input);
  ASSERT_TRUE(modern.ok()) << modern.failure().describe();
  EXPECT_NE(user_text(*modern).find("Signature: `nisa.activation(dst, op, data, bias"),
            std::string::npos);
  EXPECT_EQ(user_text(*modern).find("y = nisa.activation("), std::string::npos);
}

TEST(PromptFacts, AnNlFunctionsNoteComesOnlyWhenThePlanCallsIt) {
  ImplementPromptInput input;
  input.target = "trn2";
  input.kernel_source = read_file("seeds/softmax/naive.py");
  ASSERT_EQ(input.kernel_source.find("nl.copy"), std::string::npos);
  input.plan = "Use nisa.activation with op=nl.copy and scale=inv as a plain scaling pass.";
  auto as_op = shipped()->implementation(input);
  ASSERT_TRUE(as_op.ok()) << as_op.failure().describe();
  EXPECT_EQ(user_text(*as_op).find("## nl.copy"), std::string::npos) << user_text(*as_op);
  input.plan = "Replace the store of the row by out_tile = nl.copy(row) and one store.";
  auto called = shipped()->implementation(input);
  ASSERT_TRUE(called.ok()) << called.failure().describe();
  EXPECT_NE(user_text(*called).find("## nl.copy"), std::string::npos) << user_text(*called);
}

TEST(PromptFacts, MenuTextsTakeHardwareNumbersFromTheFacts) {
  const auto facts = nlohmann::json::parse(read_file("prompts/generated/facts.json"));
  for (const std::string target : {"trn1", "trn2", "trn3"}) {
    PlanPromptInput input;
    input.target = target;
    input.kernel_source = read_file("seeds/softmax/naive.py");
    input.dropout = 0;
    auto request = shipped()->planning(input);
    ASSERT_TRUE(request.ok()) << request.failure().describe();
    const auto text = user_text(*request);
    std::ostringstream fixed;
    fixed << "~" << facts["targets"][target]["dma_fixed_us"].get<double>() << " us fixed latency";
    const auto item = text.find("[larger_dma]");
    ASSERT_NE(item, std::string::npos) << text;
    EXPECT_NE(text.find(fixed.str(), item), std::string::npos) << target;
    EXPECT_EQ(text.find("{{"), std::string::npos);
  }
}

TEST(PromptFacts, Trn3PromptStatesTrn3ArchitectureAndMxFromTheFacts) {
  const auto facts = nlohmann::json::parse(read_file("prompts/generated/facts.json"));
  const auto& trn3 = facts["targets"]["trn3"];
  PlanPromptInput input;
  input.target = "trn3";
  input.kernel_source = read_file("seeds/gemm/naive.py");
  input.dropout = 0;
  auto request = shipped()->planning(input);
  ASSERT_TRUE(request.ok()) << request.failure().describe();
  const auto text = request->system + "\n" + user_text(*request);
  EXPECT_NE(text.find("Trainium3 (trn3), NeuronCore-v4"), std::string::npos) << text;
  EXPECT_EQ(text.find("Trainium2"), std::string::npos);
  EXPECT_NE(text.find("trn3 accepts only the `nki` namespace"), std::string::npos);
  EXPECT_NE(text.find("nisa.nc_matmul_mx(dst, stationary, moving"), std::string::npos);
  EXPECT_NE(text.find("nisa.quantize_mx(dst, src, dst_scale)"), std::string::npos);
  std::ostringstream numbers;
  numbers << "about " << trn3["peak_mx_tflops"].get<double>() << " TFLOPS";
  EXPECT_NE(text.find(numbers.str()), std::string::npos) << numbers.str();
  std::ostringstream effective;
  effective << "~" << trn3["effective_gbps_per_core"].get<double>() << " GB/s between HBM and SBUF";
  EXPECT_NE(text.find(effective.str()), std::string::npos) << effective.str();
  std::ostringstream tensor;
  tensor << "systolic array at " << trn3["tensor_ghz"].get<double>() << " GHz";
  EXPECT_NE(text.find(tensor.str()), std::string::npos);
  EXPECT_EQ(text.find("{{"), std::string::npos);
}

TEST(PromptFacts, MxMatmulIsOfferedOnlyOnTrn3ForMatmulsWithALooseStatedTolerance) {
  const auto eval = measured(900);
  const std::string problem = read_file("seeds/gemm/problem.py");  // RTOL = 2e-2
  const auto rtol_line = problem.find("RTOL = 2e-2");
  ASSERT_NE(rtol_line, std::string::npos);
  std::string loose = problem;
  loose.replace(rtol_line, 11, "RTOL = 5e-2");
  auto offered = [&](const std::string& target, const std::string& kernel,
                     const std::string& problem_source) {
    PlanPromptInput input;
    input.target = target;
    input.kernel_source = read_file(kernel);
    input.problem_source = problem_source;
    input.evaluation = &eval;
    input.dropout = 0;
    auto request = shipped()->planning(input);
    EXPECT_TRUE(request.ok()) << request.failure().describe();
    return request.ok() && user_text(*request).find("[mx_matmul]") != std::string::npos;
  };
  EXPECT_TRUE(offered("trn3", "seeds/gemm/naive.py", loose));
  EXPECT_FALSE(offered("trn3", "seeds/gemm/naive.py", problem)) << "2e-2 is tighter than fp8";
  EXPECT_FALSE(offered("trn3", "seeds/gemm/naive.py", "import numpy as np\n"))
      << "the default tolerance is not known to admit fp8";
  EXPECT_FALSE(offered("trn3", "seeds/softmax/naive.py", loose)) << "no matmul";
  EXPECT_FALSE(offered("trn2", "seeds/gemm/naive.py", loose)) << "no MX before trn3";
}

TEST(PromptFacts, MenuOffersOnlyItemsThatCanPayForThisKernelAndProblem) {
  const auto eval = measured(900);
  PlanPromptInput input;
  input.target = "trn2";
  input.kernel_source = read_file("seeds/softmax/naive.py");
  input.problem_source = read_file("seeds/softmax/problem.py");  // RTOL = 1e-4, no GRID
  input.evaluation = &eval;
  input.dropout = 0;
  auto softmax = shipped()->planning(input);
  ASSERT_TRUE(softmax.ok()) << softmax.failure().describe();
  auto text = user_text(*softmax);
  EXPECT_EQ(text.find("[tile_partitions_128]"), std::string::npos) << "uses pmax tiles already";
  EXPECT_EQ(text.find("[bf16_compute]"), std::string::npos) << "rtol 1e-4 is tighter than bf16";
  EXPECT_EQ(text.find("[online_softmax]"), std::string::npos) << "no matmul: not attention";
  EXPECT_EQ(text.find("[cross_partition_reduce]"), std::string::npos);
  EXPECT_EQ(text.find("[defer_division]"), std::string::npos) << "no division in the kernel";
  EXPECT_EQ(text.find("[spmd_grid]"), std::string::npos) << "one program is launched";
  EXPECT_EQ(text.find("side by side"), std::string::npos);
  EXPECT_NE(text.find("[activation_reduce]"), std::string::npos);

  input.kernel_source = read_file("seeds/attention/naive.py");
  input.problem_source = read_file("seeds/attention/problem.py") + "\nGRID = (2,)\n";
  auto attention = shipped()->planning(input);
  ASSERT_TRUE(attention.ok()) << attention.failure().describe();
  text = user_text(*attention);
  EXPECT_NE(text.find("[online_softmax]"), std::string::npos) << text;
  EXPECT_NE(text.find("[bf16_compute]"), std::string::npos) << "RTOL = 2e-2";
  EXPECT_NE(text.find("[spmd_grid]"), std::string::npos) << "the problem launches two programs";
}

TEST(PromptFacts, DropoutNeverHidesTheBestItemFromAParentsFirstPlanRequest) {
  const auto eval = measured(900);
  PlanPromptInput input;
  input.target = "trn2";
  input.kernel_source = read_file("seeds/softmax/naive.py");
  input.problem_source = read_file("seeds/softmax/problem.py");
  input.evaluation = &eval;
  input.dropout = 0.95;
  auto library = prompts::PromptLibrary::open(std::string(AUTOCOMP_SOURCE_DIR) + "/prompts");
  ASSERT_TRUE(library.ok());
  auto menu = prompts::load_menu(library.value(), "trn2");
  ASSERT_TRUE(menu.ok());
  prompts::MenuContext context;
  context.kernel_source = input.kernel_source;
  context.rtol = 1e-4;
  const auto best = "[" + prompts::rank_menu(menu->items, context).front().item.id + "]";
  int hidden_elsewhere = 0;
  for (std::uint64_t seed = 1; seed <= 20; ++seed) {
    input.seed = seed;
    input.plan_index = 0;
    auto first = shipped()->planning(input);
    ASSERT_TRUE(first.ok()) << first.failure().describe();
    EXPECT_NE(user_text(*first).find(best), std::string::npos) << "seed " << seed;
    input.plan_index = 1;
    auto second = shipped()->planning(input);
    ASSERT_TRUE(second.ok());
    hidden_elsewhere += user_text(*second).find(best) == std::string::npos ? 1 : 0;
  }
  EXPECT_GT(hidden_elsewhere, 0) << "later requests still sample the menu";
}

TEST(PromptFacts, LessonPromptKeepsEachAttemptsOutcomeAndMergesOnlyWhenThereAreLessons) {
  SummarizePromptInput input;
  input.target = "trn2";
  std::string plan = "Fuse the passes. ";
  for (int i = 0; i < 200; ++i) {
    plan += "Details of the change. ";
  }
  plan += "Risk: the bias tile may need fp32.";
  input.attempts.push_back(LessonAttempt{plan, 100.0, 105.4, "slower (latency +5.4%)"});
  auto first = shipped()->summarize(input);
  ASSERT_TRUE(first.ok()) << first.failure().describe();
  auto text = user_text(*first);
  EXPECT_NE(text.find("Risk: the bias tile may need fp32."), std::string::npos) << text;
  EXPECT_NE(text.find("Outcome: slower (latency +5.4%)"), std::string::npos);
  EXPECT_EQ(text.find("Merge them"), std::string::npos);
  EXPECT_EQ(text.find("recorded so far"), std::string::npos);
  input.existing_lessons = {"Keep rows on partitions."};
  auto later = shipped()->summarize(input);
  ASSERT_TRUE(later.ok());
  text = user_text(*later);
  EXPECT_NE(text.find("Write the COMPLETE merged list"), std::string::npos);
  EXPECT_NE(text.find("- Keep rows on partitions."), std::string::npos);
}

TEST(PromptFacts, ImplementationPromptsCarryBoundedLessonsInOrder) {
  ImplementPromptInput input;
  input.target = "trn1";
  input.kernel_source = read_file("seeds/layernorm/naive.py");
  input.plan = "Fuse the scale and shift.";
  input.lessons = {
      "Fuse the scale and shift.",        "Keep rows on partitions.", "Load whole rows in one DMA.",
      "Use bn_stats per 512 columns.",    "Put exp on ScalarE.",      "Hoist the gamma load.",
      "Store results in one transfer.",   "Avoid fp32 transposes.",   "Prefer affine_range loops.",
      "Split work evenly across engines."};
  auto request = shipped()->implementation(input);
  ASSERT_TRUE(request.ok()) << request.failure().describe();
  const auto text = user_text(*request);
  const auto first = text.find("- Fuse the scale and shift.");
  ASSERT_NE(first, std::string::npos) << text;
  EXPECT_LT(first, text.find("- Keep rows on partitions."));
  EXPECT_NE(text.find("- Avoid fp32 transposes."), std::string::npos) << text;
  EXPECT_EQ(text.find("- Prefer affine_range loops."), std::string::npos) << "bounded";
}

TEST(PromptFacts, HardwareNumbersComeFromTheGeneratedFacts) {
  const auto facts = nlohmann::json::parse(read_file("prompts/generated/facts.json"));
  for (const std::string target : {"trn1", "trn2", "trn3"}) {
    PlanPromptInput input;
    input.target = target;
    input.kernel_source = read_file("seeds/layernorm/naive.py");
    auto request = shipped()->planning(input);
    ASSERT_TRUE(request.ok()) << request.failure().describe();
    const auto text = user_text(*request);
    std::ostringstream effective;
    effective << facts["targets"][target]["effective_gbps_per_core"].get<double>();
    EXPECT_NE(text.find("~" + effective.str() + " GB/s between HBM and SBUF"), std::string::npos)
        << target << "\n"
        << text;
    EXPECT_EQ(text.find("rsqrt runs on GpSimd"), std::string::npos);
    EXPECT_NE(text.find("nl.rsqrt, nl.sqrt, nl.tanh, ...) run on\n  ScalarE"), std::string::npos);
    EXPECT_NE(facts["instructions"]["nl.rsqrt"]["engine"].get<std::string>(), "GpSimdE");
  }
  auto bad = prompts::HardwareFacts::parse("[1]", "facts");
  EXPECT_FALSE(bad.ok());
}

TEST(PromptFacts, MatmulFreeKernelGetsNoMatmulMenuItemsAndTriedPlansAreShown) {
  const auto eval = measured(900);
  PlanPromptInput input;
  input.target = "trn1";
  input.kernel_source = read_file("seeds/layernorm/naive.py");
  input.evaluation = &eval;
  input.dropout = 0;
  input.tried_plans = {"[1.2x faster] double buffer the row loads"};
  auto request = shipped()->planning(input);
  ASSERT_TRUE(request.ok()) << request.failure().describe();
  const auto text = user_text(*request);
  EXPECT_EQ(text.find("[psum_accumulate_k]"), std::string::npos);
  EXPECT_EQ(text.find("[moving_free_512]"), std::string::npos);
  EXPECT_EQ(text.find("[block_k]"), std::string::npos);
  EXPECT_EQ(text.find("[double_buffer]"), std::string::npos);  // tried already
  EXPECT_NE(text.find("[fuse_passes]"), std::string::npos);
  EXPECT_NE(text.find("[1.2x faster] double buffer the row loads"), std::string::npos);
}

TEST(PromptFacts, HistoryHoldsTheStartingLatencyAndEachParentsTriedPlansWithOutcome) {
  Candidate root;
  root.key = "root";
  root.eval = measured(100);
  Candidate faster;
  faster.key = "a";
  faster.parent_key = "root";
  faster.plan = "fuse the passes";
  faster.eval = measured(50);
  faster.origin.iteration = 1;
  Candidate broken = faster;
  broken.key = "b";
  broken.plan = "use bn_stats";
  broken.origin.plan = 1;
  broken.eval.correct = false;
  broken.eval.failure = core::make_failure(core::FailureKind::compile_error, "verify", "boom");
  Candidate slower_twin = faster;  // a second implementation of the same plan: best one shown
  slower_twin.key = "c";
  slower_twin.origin.impl = 1;
  slower_twin.eval = measured(150);
  Candidate later = faster;  // of the iteration being planned: not history yet
  later.key = "d";
  later.plan = "from the future";
  later.origin.iteration = 2;
  const auto history = prompt_history({broken, slower_twin, faster, later}, root, 2);
  ASSERT_TRUE(history.baseline_latency_us);
  EXPECT_EQ(*history.baseline_latency_us, 100);
  ASSERT_EQ(history.tried_plans.count("root"), 1u);
  const auto& tried = history.tried_plans.at("root");
  ASSERT_EQ(tried.size(), 2u);
  EXPECT_NE(tried[0].find("2.00x faster"), std::string::npos) << tried[0];
  EXPECT_NE(tried[0].find("fuse the passes"), std::string::npos);
  EXPECT_NE(tried[1].find("failed: compile_error"), std::string::npos) << tried[1];
  EXPECT_EQ(workload_of("KERNEL = \"layernorm_kernel\"\n"), "layernorm_kernel");
  EXPECT_EQ(workload_of("x = 1\n"), "");
}

TEST(PromptFacts, PromptsAfterTheFirstIterationStateTheStartingLatency) {
  testing::Rig rig;
  testing::Script script;
  const std::string root = testing::kernel("k", "latency: 100");
  const std::string child = testing::kernel("k", "latency: 50");
  script.implement[root] = child;
  script.implement[child] = testing::kernel("k", "latency: 40");
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
  EXPECT_NE(plans[0].find("This is the starting kernel"), std::string::npos) << plans[0];
  EXPECT_NE(plans[1].find("Starting latency (the kernel the search began from): 100 us"),
            std::string::npos)
      << plans[1];
  EXPECT_NE(plans[1].find("Speedup so far: 2x"), std::string::npos);
}

TEST(PromptFacts, ReflectPromptCarriesEngineMetricsBeforeAndAfter) {
  auto before = measured(100);
  before.metrics = {{"vector_engine_active_time_percent", 0.9}};
  auto after = measured(60);
  after.metrics = {{"vector_engine_active_time_percent", 0.4}};
  ReflectPromptInput input;
  input.target = "trn2";
  input.plan = "p";
  input.parent_source = "def k():\n    pass\n";
  input.parent_evaluation = &before;
  input.child_source = "def k():\n    return 1\n";
  input.child_evaluation = &after;
  input.outcome = "1.67x faster";
  auto request = shipped()->reflect(input);
  ASSERT_TRUE(request.ok()) << request.failure().describe();
  EXPECT_NE(user_text(*request).find("vector_engine_active_time_percent: 0.9 -> 0.4"),
            std::string::npos)
      << user_text(*request);
}

TEST(PromptFacts, MissingTemplatesAreAFailureNotAnotherWording) {
  auto factory = make_template_prompt_factory("/nonexistent/prompts");
  PlanPromptInput input;
  input.target = "trn2";
  input.kernel_source = "def k():\n    pass\n";
  EXPECT_FALSE(factory->planning(input).ok());
}

TEST(PromptFacts, LessonsAreMergedScopedAndLabelled) {
  SummarizePromptInput input;
  input.problem_source = "KERNEL = \"layernorm_kernel\"\n";
  input.existing_lessons = {"[layernorm_kernel] Fuse the scale and shift into one tensor_scalar."};
  const auto fresh = shipped()->parse_lessons(
      "- Fuse the scale and shift into one tensor_scalar pass.\n"
      "- bn_stats on 512-column chunks replaced two reduction passes.\n"
      "- bn_stats on 512 column chunks replaced the two reduction passes.\n",
      input);
  ASSERT_EQ(fresh.size(), 1u);
  EXPECT_EQ(fresh[0],
            "[layernorm_kernel] bn_stats on 512-column chunks replaced two reduction "
            "passes.");
  const auto shown = prompts::lessons_for(
      {"[layernorm_kernel] keep rows on partitions", "[softmax_kernel] exp on ScalarE", "plain"},
      "layernorm_kernel");
  EXPECT_EQ(shown, (std::vector<std::string>{"keep rows on partitions",
                                             "(from another workload: softmax_kernel) exp on "
                                             "ScalarE",
                                             "plain"}));
}

TEST(PromptFacts, ReflexionKeepsCodeAndMath) {
  const auto record = prompts::parse_reflexion(
      "**lessons:** use `nisa.activation(op=nl.copy, bias=-mean*rstd, scale=rstd)` in one pass\n"
      "- **avoid**: x**2 via nl.power\n"
      "try_next: *fuse* the two loads\n");
  EXPECT_EQ(record.lessons,
            "use `nisa.activation(op=nl.copy, bias=-mean*rstd, scale=rstd)` in one pass");
  EXPECT_EQ(record.avoid, "x**2 via nl.power");
  EXPECT_EQ(record.try_next, "*fuse* the two loads");
}

// Not a check: prints the plan and implementation prompts for the LayerNorm seed, to read them.
//   unit_search --gtest_also_run_disabled_tests --gtest_filter='*PrintLayernormPrompts'
TEST(PromptFacts, DISABLED_PrintLayernormPrompts) {
  auto eval = measured(500);
  eval.bottleneck = "memory-bound";
  PlanPromptInput plan;
  plan.target = "trn1";
  plan.kernel_source = read_file("seeds/layernorm/naive.py");
  plan.evaluation = &eval;
  plan.problem_source = read_file("seeds/layernorm/problem.py");
  plan.baseline_latency_us = 1000;
  plan.tried_plans = {"[1.30x faster (1000 us -> 769 us)] hoist the gamma and beta loads"};
  plan.iteration = 2;
  plan.iterations = 3;
  plan.seed = 1;
  auto planning = shipped()->planning(plan);
  ASSERT_TRUE(planning.ok()) << planning.failure().describe();
  std::printf("===== plan prompt (user message) =====\n%s\n\n", user_text(*planning).c_str());
  ImplementPromptInput implement;
  implement.target = "trn1";
  implement.kernel_source = plan.kernel_source;
  implement.plan =
      "Replace the two nl.mean reductions by nisa.bn_stats on 512-column chunks and one "
      "nisa.bn_aggr, then normalize with one nisa.tensor_scalar (subtract mean, multiply by rstd).";
  implement.problem_source = plan.problem_source;
  implement.input_signature = k_layernorm_signature;
  auto implementation = shipped()->implementation(implement);
  ASSERT_TRUE(implementation.ok()) << implementation.failure().describe();
  std::printf("===== implementation prompt (user message) =====\n%s\n",
              user_text(*implementation).c_str());
}

}  // namespace
}  // namespace autocomp::search::engine
