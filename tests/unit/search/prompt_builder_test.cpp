#include "search/prompts/prompt_builder.hpp"

#include <gtest/gtest.h>

#include <filesystem>
#include <fstream>
#include <nlohmann/json.hpp>

#include "search/prompts/code_extract.hpp"

namespace autocomp::search::prompts {
namespace {

namespace fs = std::filesystem;

constexpr const char* k_kernel = R"(import nki
import nki.language as nl
import nki.isa as nisa


@nki.jit
def matmul_kernel(lhsT, rhs):
    K, M = lhsT.shape
    _, N = rhs.shape
    result = nl.ndarray((M, N), dtype=lhsT.dtype, buffer=nl.shared_hbm)
    for m in nl.affine_range(M // 128):
        for n in nl.affine_range(N // 512):
            acc = nl.zeros((128, 512), dtype=nl.float32, buffer=nl.psum)
            for k in nl.affine_range(K // 128):
                a = nl.load(lhsT[k * 128:(k + 1) * 128, m * 128:(m + 1) * 128])
                b = nl.load(rhs[k * 128:(k + 1) * 128, n * 512:(n + 1) * 512])
                acc += nisa.nc_matmul(a, b)
            out = nl.copy(acc, dtype=result.dtype)
            nl.store(result[m * 128:(m + 1) * 128, n * 512:(n + 1) * 512], value=out)
    return result
)";

PromptBuilder shipped_builder() {
  auto builder = PromptBuilder::open(std::string(AUTOCOMP_SOURCE_DIR) + "/prompts");
  EXPECT_TRUE(builder.ok()) << (builder.ok() ? "" : builder.failure().describe());
  return std::move(builder).value();
}

PlanPromptInput plan_input() {
  PlanPromptInput input;
  input.target = "trn2";
  input.kernel.source = k_kernel;
  input.kernel.latency_us = 812.5;
  input.kernel.metrics = {{"tensor_engine_active_time_percent", 0.21},
                          {"dma_active_time_percent", 0.93}};
  input.kernel.roofline = {{"compute_pct", 18.0}, {"memory_pct", 71.0}};
  input.kernel.bottleneck = "memory-bound";
  input.baseline_latency_us = 1625;
  input.iteration = 3;
  input.total_iterations = 10;
  input.seed = 42;
  return input;
}

const std::string& user_text(const llm::CompletionRequest& request) {
  return request.messages.at(0).content;
}

TEST(PromptBuilderTest, PlanPromptHoldsEveryRequiredSection) {
  const auto builder = shipped_builder();
  auto input = plan_input();
  input.recent_failures = {"compile_error: Size of partition dimension 256 exceeds 128"};
  input.lessons = {"Hoisting rhs loads out of the K loop halved DMA time on GEMMs."};
  input.reflexions = {"The bf16 cast was applied after the transpose, so nothing was saved."};
  auto prompt = builder.plan(input);
  ASSERT_TRUE(prompt.ok()) << prompt.failure().describe();
  const auto& text = user_text(prompt->request);
  EXPECT_EQ(prompt->request.purpose, "plan");
  EXPECT_NE(prompt->request.system.find("trn2"), std::string::npos);
  EXPECT_NE(text.find("Trainium2"), std::string::npos);          // architecture summary
  EXPECT_NE(text.find("## nisa.nc_matmul"), std::string::npos);  // ISA note of a used call
  EXPECT_NE(text.find("## nl.load"), std::string::npos);
  EXPECT_NE(text.find("def matmul_kernel(lhsT, rhs):"), std::string::npos);  // current code
  EXPECT_NE(text.find("812.5 us"), std::string::npos);                       // latency
  EXPECT_NE(text.find("Speedup so far: 2x"), std::string::npos);  // vs the starting kernel
  EXPECT_NE(text.find("dma_active_time_percent: 0.93"), std::string::npos);  // profile
  EXPECT_NE(text.find("memory_pct: 71"), std::string::npos);                 // roofline
  EXPECT_NE(text.find("Bottleneck: memory-bound"), std::string::npos);
  EXPECT_NE(text.find("exceeds 128"), std::string::npos);            // failures
  EXPECT_NE(text.find("Hoisting rhs loads"), std::string::npos);     // lessons
  EXPECT_NE(text.find("bf16 cast was applied"), std::string::npos);  // reflexions
  EXPECT_NE(text.find("iteration 3 of 10"), std::string::npos);
  EXPECT_NE(text.find("exactly one optimization"), std::string::npos);  // rules
  EXPECT_NE(text.find("partition dimension"), std::string::npos);       // NKI constraints
  EXPECT_EQ(text.find("{{"), std::string::npos);
  for (const auto& id : prompt->menu_ids) {
    EXPECT_NE(text.find("[" + id + "]"), std::string::npos) << id;
  }
  EXPECT_FALSE(prompt->menu_ids.empty());
  EXPECT_NE(std::find(prompt->instructions.begin(), prompt->instructions.end(), "nisa.nc_matmul"),
            prompt->instructions.end());
}

TEST(PromptBuilderTest, EmptyOptionalSectionsAreOmitted) {
  const auto builder = shipped_builder();
  auto input = plan_input();
  input.kernel.metrics.clear();
  input.kernel.roofline.clear();
  input.kernel.bottleneck.clear();
  input.kernel.latency_us.reset();
  auto prompt = builder.plan(input);
  ASSERT_TRUE(prompt.ok());
  const auto& text = user_text(prompt->request);
  EXPECT_EQ(text.find("# Recent attempts that failed"), std::string::npos);
  EXPECT_EQ(text.find("# Lessons"), std::string::npos);
  EXPECT_EQ(text.find("# Reflections"), std::string::npos);
  EXPECT_EQ(text.find("# Its profile"), std::string::npos);
  EXPECT_NE(text.find("not measured yet"), std::string::npos);
  EXPECT_EQ(text.find("\n\n\n"), std::string::npos);
}

TEST(PromptBuilderTest, SameSeedSamePromptDifferentSeedDifferentMenu) {
  const auto builder = shipped_builder();
  auto input = plan_input();
  auto first = builder.plan(input);
  auto again = builder.plan(input);
  input.seed = 43;
  auto other = builder.plan(input);
  ASSERT_TRUE(first.ok() && again.ok() && other.ok());
  EXPECT_EQ(user_text(first->request), user_text(again->request));
  EXPECT_EQ(first->menu_ids, again->menu_ids);
  EXPECT_EQ(first->variant, again->variant);
  EXPECT_NE(first->menu_ids, other->menu_ids);
}

TEST(PromptBuilderTest, InspiredAndUnlikeVariantsComeAboutTenPercentEach) {
  const auto builder = shipped_builder();
  auto input = plan_input();
  int inspired = 0;
  int unlike = 0;
  int pick = 0;
  const int runs = 1000;
  for (int seed = 0; seed < runs; ++seed) {
    input.seed = static_cast<std::uint64_t>(seed) * 7919;
    auto prompt = builder.plan(input);
    ASSERT_TRUE(prompt.ok());
    const auto& text = user_text(prompt->request);
    switch (prompt->variant) {
      case PlanVariant::inspired:
        ++inspired;
        EXPECT_NE(text.find("inspired by the list"), std::string::npos);
        break;
      case PlanVariant::unlike:
        ++unlike;
        EXPECT_NE(text.find("unlike everything on the list"), std::string::npos);
        break;
      case PlanVariant::pick:
        ++pick;
        EXPECT_NE(text.find("Choose the one strategy"), std::string::npos);
        break;
      case PlanVariant::free:
        ADD_FAILURE() << "free variant with a non-empty menu";
        break;
    }
  }
  EXPECT_NEAR(inspired / static_cast<double>(runs), 0.1, 0.03);
  EXPECT_NEAR(unlike / static_cast<double>(runs), 0.1, 0.03);
  EXPECT_NEAR(pick / static_cast<double>(runs), 0.8, 0.04);

  input.inspired_probability = 0;
  input.unlike_probability = 0;
  for (int seed = 0; seed < 50; ++seed) {
    input.seed = static_cast<std::uint64_t>(seed);
    EXPECT_EQ(builder.plan(input)->variant, PlanVariant::pick);
  }
}

TEST(PromptBuilderTest, FullDropoutAsksForAFreeChoiceWithoutAMenu) {
  const auto builder = shipped_builder();
  auto input = plan_input();
  input.dropout = 1.0;
  auto prompt = builder.plan(input);
  ASSERT_TRUE(prompt.ok());
  EXPECT_EQ(prompt->variant, PlanVariant::free);
  EXPECT_TRUE(prompt->menu_ids.empty());
  EXPECT_EQ(user_text(prompt->request).find("strategies to consider"), std::string::npos);
  input.dropout = 0.0;
  auto full = builder.plan(input);
  ASSERT_TRUE(full.ok());
  // the whole relevant menu (items that cannot pay for this kernel are left out)
  EXPECT_GE(full->menu_ids.size(), 25u);
}

TEST(PromptBuilderTest, ImplementationPromptAsksForOneCompleteKernelWithKnobSyntax) {
  const auto builder = shipped_builder();
  ImplementPromptInput input;
  input.target = "trn1";
  input.kernel.source = k_kernel;
  input.plan = "[hoist_loads] Load each lhsT tile once per m iteration.";
  auto request = builder.implement(input);
  ASSERT_TRUE(request.ok()) << request.failure().describe();
  const auto& text = user_text(*request);
  EXPECT_EQ(request->purpose, "implement");
  EXPECT_NE(text.find("Trainium1"), std::string::npos);
  EXPECT_NE(text.find("Load each lhsT tile once"), std::string::npos);
  EXPECT_NE(text.find("def matmul_kernel(lhsT, rhs):"), std::string::npos);
  EXPECT_NE(text.find("`matmul_kernel`"), std::string::npos);
  EXPECT_NE(text.find("```python"), std::string::npos);
  EXPECT_NE(text.find("# autocomp: knob NAME = [v1, v2, v3]"), std::string::npos);
  EXPECT_NE(text.find("NAME = v1"), std::string::npos);
  EXPECT_EQ(text.find("{{"), std::string::npos);
}

TEST(PromptBuilderTest, RepairPromptShowsTheErrorAndTheLinesAroundIt) {
  const auto builder = shipped_builder();
  RepairPromptInput input;
  input.source = k_kernel;
  input.plan = "Use bigger tiles.";
  input.failure = core::make_failure(core::FailureKind::compile_error, "verify",
                                     "Size of partition dimension 256 exceeds 128");
  input.failure.line = 15;
  input.details = std::string(10000, 'x') + "\nFINAL LINE OF TRACEBACK";
  input.attempt = 2;
  auto request = builder.repair(input);
  ASSERT_TRUE(request.ok()) << request.failure().describe();
  const auto& text = user_text(*request);
  EXPECT_EQ(request->purpose, "repair");
  EXPECT_NE(text.find("compile_error during verify"), std::string::npos);
  EXPECT_NE(text.find("exceeds 128"), std::string::npos);
  EXPECT_NE(text.find("line 15"), std::string::npos);
  EXPECT_NE(text.find(">>  15 | "), std::string::npos);
  EXPECT_NE(text.find("  14 | "), std::string::npos);
  EXPECT_NE(text.find("FINAL LINE OF TRACEBACK"), std::string::npos);  // the tail is kept
  EXPECT_EQ(text.find(std::string(5000, 'x')), std::string::npos);     // the middle is not
  EXPECT_NE(text.find("attempt 2 of 2"), std::string::npos);
  EXPECT_NE(text.find("Use bigger tiles."), std::string::npos);
  EXPECT_NE(text.find("`matmul_kernel`"), std::string::npos);
}

TEST(PromptBuilderTest, SummarizeAndReflectPrompts) {
  const auto builder = shipped_builder();
  SummarizeLessonsInput summarize;
  summarize.attempts = {{"hoist loads", 800.0, 400.0, "faster"},
                        {"fp32 to bf16 after transpose", 400.0, 420.0, "slower"}};
  summarize.existing_lessons = {"Big DMAs help."};
  auto lessons = builder.summarize_lessons(summarize);
  ASSERT_TRUE(lessons.ok()) << lessons.failure().describe();
  EXPECT_EQ(lessons->purpose, "summarize");
  EXPECT_NE(user_text(*lessons).find("2x speedup"), std::string::npos);
  EXPECT_NE(user_text(*lessons).find("Big DMAs help."), std::string::npos);

  ReflectInput reflect;
  reflect.plan = "double buffer the loads";
  reflect.parent.source = k_kernel;
  reflect.parent.latency_us = 400;
  reflect.outcome = "mismatch on seed 2";
  auto reflection = builder.reflect(reflect);
  ASSERT_TRUE(reflection.ok()) << reflection.failure().describe();
  EXPECT_EQ(reflection->purpose, "reflect");
  EXPECT_NE(user_text(*reflection).find("mismatch on seed 2"), std::string::npos);
  EXPECT_EQ(user_text(*reflection).find("# After"), std::string::npos);  // no child code

  EXPECT_EQ(parse_lessons("Lessons:\n- one\n* two\n3. three\nprose\n  - four  \n", 3),
            (std::vector<std::string>{"one", "two", "three"}));
}

TEST(PromptBuilderTest, EditedTemplatesAreUsedWithoutRebuildingAndMissingFilesAreNamed) {
  const auto dir = fs::temp_directory_path() / "autocomp_prompt_builder_edit_test";
  fs::remove_all(dir);
  fs::copy(std::string(AUTOCOMP_SOURCE_DIR) + "/prompts", dir, fs::copy_options::recursive);
  {
    std::ofstream out(dir / "templates" / "implement.md");
    out << "CUSTOM TEMPLATE for {{function_name}} on {{target}}\n{{plan}}\n";
  }
  auto builder = PromptBuilder::open(dir.string());
  ASSERT_TRUE(builder.ok());
  ImplementPromptInput input;
  input.kernel.source = k_kernel;
  input.plan = "p";
  auto request = builder->implement(input);
  ASSERT_TRUE(request.ok()) << request.failure().describe();
  EXPECT_EQ(user_text(*request), "CUSTOM TEMPLATE for matmul_kernel on trn2\np\n");

  fs::remove(dir / "templates" / "repair.md");
  RepairPromptInput repair;
  repair.source = k_kernel;
  auto failed = builder->repair(repair);
  ASSERT_FALSE(failed.ok());
  EXPECT_NE(failed.failure().message.find((dir / "templates" / "repair.md").string()),
            std::string::npos);

  PlanPromptInput unknown_target;
  unknown_target.target = "trn7";
  unknown_target.kernel.source = k_kernel;
  auto no_target = builder->plan(unknown_target);
  EXPECT_FALSE(no_target.ok());
  fs::remove_all(dir);
}

}  // namespace
}  // namespace autocomp::search::prompts

namespace autocomp::search::prompts {
namespace {

TEST(ParseReflexion, ReadsTheFieldsWithMarkupAndContinuationLines) {
  auto record = parse_reflexion(
      "Here is my reflection.\n"
      "**Diagnosis right:** No, the kernel was DMA-bound\n"
      "- fix_worked: yes.\n"
      "Expected: 2x from larger tiles\n"
      "actual: 1.1x; the loads\n"
      "  still serialize\n"
      "lessons: tiles alone do not hide DMA\n"
      "AVOID: tiles over 128 partitions\n"
      "try next: double buffering\n");
  ASSERT_TRUE(record.structured());
  EXPECT_EQ(record.diagnosis_right, false);
  EXPECT_EQ(record.fix_worked, true);
  EXPECT_EQ(record.expected, "2x from larger tiles");
  EXPECT_EQ(record.actual, "1.1x; the loads still serialize");
  EXPECT_EQ(record.avoid, "tiles over 128 partitions");
  EXPECT_EQ(record.try_next, "double buffering");
  const std::string line = describe_reflexion(record);
  EXPECT_NE(line.find("fix worked: yes"), std::string::npos) << line;
  EXPECT_NE(line.find("avoid: tiles over 128 partitions"), std::string::npos) << line;
}

TEST(ParseReflexion, GarbageGivesOnlyRawTextAndNoPromptLine) {
  for (const std::string reply : {"", "\x01\x02{]]", "The attempt was fine overall.\n\n"}) {
    auto record = parse_reflexion(reply);
    EXPECT_FALSE(record.structured()) << reply;
    EXPECT_EQ(record.raw_text, reply);
    EXPECT_TRUE(describe_reflexion(record).empty());
  }
  auto unsure = parse_reflexion("diagnosis_right: maybe\n");
  EXPECT_FALSE(unsure.diagnosis_right.has_value());
}

TEST(ParseReflexion, DescriptionIsBounded) {
  ReflexionRecord record;
  record.lessons = std::string(5000, 'x');
  EXPECT_LE(describe_reflexion(record, 100).size(), 103u);
}

}  // namespace
}  // namespace autocomp::search::prompts

namespace autocomp::search::prompts {
namespace {

TEST(ParseReflexion, DescriptionCutsOnCharacterBoundaries) {
  ReflexionRecord record;
  record.lessons = std::string(97, 'x') + "\xE2\x86\x92 more";
  const std::string line = describe_reflexion(record, 108);
  EXPECT_NO_THROW((void)nlohmann::json(line).dump()) << line;
}

}  // namespace
}  // namespace autocomp::search::prompts
