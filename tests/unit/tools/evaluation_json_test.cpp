#include "tools/evaluation_json.hpp"

#include <gtest/gtest.h>

namespace autocomp::tools {
namespace {

TEST(EvaluationJson, FailureCarriesKindStageMessageAndLine) {
  core::Failure failure{core::FailureKind::compile_error, "verify", "partition dim 256 > 128", 12};
  const auto json = failure_json(failure);
  EXPECT_EQ(json.at("kind"), "compile_error");
  EXPECT_EQ(json.at("stage"), "verify");
  EXPECT_EQ(json.at("line"), 12);
  failure.line.reset();
  EXPECT_FALSE(failure_json(failure).contains("line"));
}

TEST(EvaluationJson, LatencySamplesOnlyWhenAsked) {
  backends::LatencyStats latency{1.0, 2.0, 3.0, {1.0, 2.0, 3.0}};
  EXPECT_FALSE(latency_json(latency, false).contains("samples"));
  EXPECT_EQ(latency_json(latency, true).at("samples").size(), 3u);
  EXPECT_EQ(latency_json(latency, true).at("median"), 2.0);
}

TEST(EvaluationJson, VerdictCountsPassingSeedsOrDescribesTheFailure) {
  backends::EvalResult result;
  result.seeds = {{0, true, 0, 0, ""}, {1, true, 0, 0, ""}};
  EXPECT_EQ(verdict_text(result), "correct on 2/2 seeds");
  result.failure = core::Failure{core::FailureKind::mismatch, "verify", "seed 1 off", std::nullopt};
  EXPECT_EQ(verdict_text(result), "mismatch at verify: seed 1 off");
}

TEST(EvaluationJson, FullResultKeepsMetricsAndProvenance) {
  backends::EvalResult result;
  result.metrics = {{"total_time", 1e-5}};
  result.roofline = {{"hbm_pct", 40.0}};
  result.bottleneck = "memory-bound";
  result.backend_identity = "sim";
  result.steps = {{"run", 12.5}};
  const auto json = full_result_json(result);
  EXPECT_EQ(json.at("metrics").at("total_time"), 1e-5);
  EXPECT_EQ(json.at("bottleneck"), "memory-bound");
  EXPECT_EQ(json.at("backend"), "sim");
  EXPECT_EQ(json.at("steps_ms").at("run"), 12.5);
  EXPECT_FALSE(json.contains("cached"));
}

}  // namespace
}  // namespace autocomp::tools
