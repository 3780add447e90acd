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

namespace autocomp::tools {
namespace {

constexpr const char* k_kernel = "import nki\n\ndef k(a):\n    x = nl.load(a)\n    return x\n";

TEST(EvaluationJson, HotspotsTakeMissingTextFromTheKernelSource) {
  std::vector<backends::Hotspot> hotspots = {{4, "", "dma", 61.04, 3.5, 2},
                                             {3, "def k(a):", "vector", 20.0, 1.0, 1},
                                             {9, "", "scalar", 5.0, 0.1, 1}};
  const auto json = hotspots_json(hotspots, k_kernel, 2);
  ASSERT_EQ(json.size(), 2u);
  EXPECT_EQ(json.at(0).at("text"), "x = nl.load(a)");
  EXPECT_EQ(json.at(0).at("share_pct"), 61.0);
  EXPECT_EQ(json.at(0).at("instructions"), 2);
  EXPECT_EQ(json.at(1).at("text"), "def k(a):");
  EXPECT_EQ(describe_hotspot(json.at(0)),
            "line 4 (DMA 61%, 2 instr, 1.75 us each): x = nl.load(a)");
  const auto beyond = hotspots_json({hotspots[2]}, k_kernel, 5);
  EXPECT_FALSE(beyond.at(0).contains("text")) << "line 9 is past the end of the source";
}

TEST(EvaluationJson, WaitsReadAsSentences) {
  std::vector<backends::EngineWait> waits = {{"vector", "dma", 40.04, 31},
                                             {"tensor", "vector", 12.5, 0}};
  const auto json = waits_json(waits, 5);
  ASSERT_EQ(json.size(), 2u);
  EXPECT_EQ(describe_wait(json.at(0)), "VectorE idle 40% waiting on DMA at line 31");
  EXPECT_EQ(describe_wait(json.at(1)), "TensorE idle 12.5% waiting on VectorE");
  EXPECT_EQ(waits_json(waits, 1).size(), 1u);
}

TEST(EvaluationJson, SourceLinesAreTrimmedAndCut) {
  EXPECT_EQ(source_line(k_kernel, 1), "import nki");
  EXPECT_EQ(source_line(k_kernel, 2), "");
  EXPECT_EQ(source_line(k_kernel, 0), "");
  EXPECT_EQ(source_line("    " + std::string(200, 'x'), 1, 20), std::string(17, 'x') + "...");
}

TEST(EvaluationJson, ReceiptLineFallsBackToTheResultsOwnProvenance) {
  backends::EvalResult result;
  result.device = "sim";
  result.target = "trn2";
  result.host = "localhost";
  EXPECT_EQ(receipt_line(result), "sim trn2 shipped costs on localhost");
  result.receipt.device = "sim";
  result.receipt.target = "trn2";
  result.receipt.simulator_version = "0.1.0";
  result.receipt.seeds = {0, 1, 2, 3, 4};
  result.receipt.iters = 10;
  result.receipt.host = "localhost";
  EXPECT_EQ(receipt_line(result), "sim trn2 nkisim 0.1.0 seeds 0-4 x10 shipped costs on localhost");
}

TEST(EvaluationJson, FullResultCarriesHotspotsWaitsAndTheReceipt) {
  backends::EvalResult result;
  result.device = "sim";
  result.hotspots = {{4, "x = nl.load(a)", "dma", 61.0, 3.5, 2}};
  result.waits = {{"vector", "dma", 40.0, 4}};
  const auto json = full_result_json(result);
  EXPECT_EQ(json.at("hotspots").at(0).at("line"), 4);
  EXPECT_EQ(json.at("waits").at(0).at("waiting_on"), "dma");
  EXPECT_EQ(json.at("measured"), "sim shipped costs");
}

TEST(EvaluationJson, DetailIsBriefUnlessFullIsAsked) {
  EXPECT_EQ(parse_detail(nlohmann::json::object()), Detail::brief);
  EXPECT_EQ(parse_detail({{"detail", "full"}}), Detail::full);
  const auto schema = with_detail_argument({{"type", "object"}, {"properties", {}}});
  EXPECT_EQ(schema.at("properties").at("detail").at("enum").size(), 2u);
  EXPECT_EQ(format_number(19.623696), "19.62");
  EXPECT_EQ(round_sig(7.152557373046875e-07), 7.153e-07);
}

}  // namespace
}  // namespace autocomp::tools
