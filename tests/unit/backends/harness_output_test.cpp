#include "backends/harness_output.hpp"

#include <gtest/gtest.h>

namespace autocomp::backends {
namespace {

const char* k_full_result =
    R"({"schema":"autocomp-harness/1","harness_version":"1.0.0","command":"evaluate",)"
    R"("status":"ok","device":"sim","target":"trn2","failure":null,)"
    R"("verify":{"correct":true,"seeds":[{"seed":0,"ok":true,"max_abs_err":1e-6,"rel_l2_err":2e-7,"message":""}]},)"
    R"("benchmark":{"warmup":2,"iters":3,"latency_us":{"min":10.0,"median":11.0,"max":12.5,"samples":[10.0,11.0,12.5]}},)"
    R"("profile":{"metrics":{"total_time":1.1e-5,"spills":0},"roofline":{"hbm_pct":6.9},"bottleneck":"memory-bound"},)"
    R"("timings_ms":{"load":12.0,"verify":30.5}})";

TEST(HarnessOutput, ReadsEverySectionOfTheLastLine) {
  auto result = parse_harness_output(std::string("progress noise\n") + k_full_result + "\n\n", "");
  ASSERT_TRUE(result.ok()) << result.failure->describe();
  EXPECT_TRUE(result.verified);
  EXPECT_TRUE(result.correct);
  ASSERT_EQ(result.seeds.size(), 1u);
  EXPECT_DOUBLE_EQ(result.seeds[0].max_abs_err, 1e-6);
  ASSERT_TRUE(result.latency.has_value());
  EXPECT_DOUBLE_EQ(result.latency->median_us, 11.0);
  EXPECT_EQ(result.latency->samples_us.size(), 3u);
  EXPECT_DOUBLE_EQ(result.metrics.at("total_time"), 1.1e-5);
  EXPECT_DOUBLE_EQ(result.roofline.at("hbm_pct"), 6.9);
  EXPECT_EQ(result.bottleneck, "memory-bound");
  EXPECT_EQ(result.device, "sim");
  EXPECT_EQ(result.harness_version, "1.0.0");
  ASSERT_EQ(result.steps.size(), 2u);
  EXPECT_EQ(result.steps[0].step, "harness.load");
  EXPECT_EQ(result.raw_json, k_full_result);
}

TEST(HarnessOutput, ReadsTheLimitingEngineAndTheModelledCompilerEffects) {
  auto result = parse_harness_output(
      R"j({"schema":"autocomp-harness/1","status":"ok","profile":{"bottleneck":"compute-bound",)j"
      R"j("bottleneck_engine":"VectorE-bound","compiler_effects":["line 12: 4,096 instructions )j"
      R"j(grouped into 64 (narrow)",7,"line 20: 9 fill instruction(s) not issued (lazy)"]}})j",
      "");
  ASSERT_TRUE(result.ok()) << result.failure->describe();
  EXPECT_EQ(result.bottleneck_engine, "VectorE-bound");
  ASSERT_EQ(result.compiler_effects.size(), 2u);  // the number is not an effect
  EXPECT_EQ(result.compiler_effects[0], "line 12: 4,096 instructions grouped into 64 (narrow)");
}

TEST(HarnessOutput, EachPhysicalCoresEndBecomesAMetric) {
  auto result =
      parse_harness_output(R"j({"schema":"autocomp-harness/1","status":"ok","profile":{"lnc":2,)j"
                           R"j("core_end_us":[42.5,"x",40.25],"metrics":{"total_time":4.25e-5}}})j",
                           "");
  ASSERT_TRUE(result.ok()) << result.failure->describe();
  EXPECT_DOUBLE_EQ(result.metrics.at("lnc"), 2);
  EXPECT_DOUBLE_EQ(result.metrics.at("core0_end_us"), 42.5);
  EXPECT_DOUBLE_EQ(result.metrics.at("core1_end_us"), 40.25);  // a non-number is skipped
  EXPECT_EQ(result.metrics.count("core2_end_us"), 0u);
}

TEST(HarnessOutput, MissingSectionsAndMetricsAreNormal) {
  auto result = parse_harness_output(
      R"({"schema":"autocomp-harness/1","status":"ok","benchmark":{"latency_us":{"median":5}}})",
      "");
  ASSERT_TRUE(result.ok());
  EXPECT_FALSE(result.verified);
  ASSERT_TRUE(result.latency.has_value());
  EXPECT_DOUBLE_EQ(result.latency->median_us, 5);
  EXPECT_TRUE(result.latency->samples_us.empty());
  EXPECT_TRUE(result.metrics.empty());
}

TEST(HarnessOutput, CarriesTheHarnessFailureWithItsLine) {
  auto result = parse_harness_output(
      R"({"schema":"autocomp-harness/1","status":"failed","failure":{"kind":"compile_error",)"
      R"("stage":"load","message":"partition dim 256 exceeds 128","line":7}})",
      "");
  ASSERT_FALSE(result.ok());
  EXPECT_EQ(result.failure->kind, core::FailureKind::compile_error);
  EXPECT_EQ(result.failure->stage, "load");
  EXPECT_EQ(result.failure->line, 7);
  EXPECT_EQ(result.failure->message, "partition dim 256 exceeds 128");
}

TEST(HarnessOutput, MismatchKeepsTheVerifySection) {
  auto result = parse_harness_output(
      R"({"schema":"autocomp-harness/1","status":"failed","failure":{"kind":"mismatch","stage":"verify","message":"seed 1"},)"
      R"("verify":{"correct":false,"seeds":[{"seed":1,"ok":false,"max_abs_err":3.0}]}})",
      "");
  ASSERT_FALSE(result.ok());
  EXPECT_EQ(result.failure->kind, core::FailureKind::mismatch);
  EXPECT_TRUE(result.verified);
  EXPECT_FALSE(result.correct);
  ASSERT_EQ(result.seeds.size(), 1u);
  EXPECT_FALSE(result.seeds[0].ok);
}

TEST(HarnessOutput, UnknownFailureKindBecomesHarnessError) {
  auto result = parse_harness_output(
      R"({"schema":"autocomp-harness/1","status":"failed","failure":{"kind":"gremlins","message":"m"}})",
      "");
  ASSERT_FALSE(result.ok());
  EXPECT_EQ(result.failure->kind, core::FailureKind::harness_error);
  EXPECT_NE(result.failure->message.find("gremlins"), std::string::npos);
}

TEST(HarnessOutput, NoJsonQuotesTheEndOfStderr) {
  std::string stderr_text = std::string(5000, '.') +
                            "\nTraceback (most recent call last):\n"
                            "ModuleNotFoundError: No module named 'numpy'\n";
  auto result = parse_harness_output("", stderr_text, "exit code 1");
  ASSERT_FALSE(result.ok());
  EXPECT_EQ(result.failure->kind, core::FailureKind::harness_error);
  const std::string& message = result.failure->message;
  EXPECT_NE(message.find("No module named 'numpy'"), std::string::npos);
  EXPECT_NE(message.find("exit code 1"), std::string::npos);
  EXPECT_LT(message.size(), k_stderr_tail_bytes + 300);
}

TEST(HarnessOutput, GarbageLastLineIsAHarnessError) {
  for (const char* out : {"not json at all\n", "[1,2,3]\n", "{\"schema\":\"other/1\"}\n",
                          "{\"schema\":\"autocomp-harness/1\",\"status\":\"failed\"}\n"}) {
    auto result = parse_harness_output(out, "boom");
    ASSERT_FALSE(result.ok()) << out;
    EXPECT_EQ(result.failure->kind, core::FailureKind::harness_error) << out;
    EXPECT_NE(result.failure->message.find("boom"), std::string::npos) << out;
  }
}

TEST(HarnessOutput, ParsesTheVersionLine) {
  auto version = parse_version_output(
      "x\n{\"schema\":\"autocomp-harness/1\",\"harness_version\":\"1.2\"}\n", "");
  ASSERT_TRUE(version.ok());
  EXPECT_EQ(version->harness_version, "1.2");
  EXPECT_FALSE(parse_version_output("{}", "").ok());
}

TEST(NeuronLs, CountsCoresTolerantly) {
  EXPECT_EQ(
      count_neuron_cores(R"([{"neuron_device":0,"nc_count":8},{"neuron_device":1,"nc_count":8}])")
          .value(),
      16);
  EXPECT_EQ(count_neuron_cores(R"({"neuron_devices":[{"neuroncore_count":2}]})").value(), 2);
  EXPECT_FALSE(count_neuron_cores("neuron-ls: command not found").ok());
  EXPECT_FALSE(count_neuron_cores("[]").ok());
}

}  // namespace
}  // namespace autocomp::backends
