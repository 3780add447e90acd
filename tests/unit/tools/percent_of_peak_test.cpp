#include <gtest/gtest.h>

#include "tools/evaluation_json.hpp"

namespace autocomp::tools {
namespace {

TEST(PercentOfPeak, NamesEachRuleWithItsPeaks) {
  const std::map<std::string, double> roofline = {
      {"hbm_pct", 31.3},
      {"peak_tflops", 91.75},
      {"peak_hbm_gbps", 272.0},
      {"pct_of_peak_accelopt", 19.35},
      {"theoretical_us_accelopt", 2.382},
      {"peak_vector_gflops_accelopt", 286.72},
      {"peak_matmul_tflops_accelopt", 23.75},
      {"peak_hbm_gibps_accelopt", 410.0},
      {"pct_of_peak_roofline", 31.3},
  };
  const auto peak = percent_of_peak_json(roofline);
  EXPECT_EQ(peak.at("rule"), "accelopt");
  EXPECT_DOUBLE_EQ(peak.at("accelopt").at("percent").get<double>(), 19.35);
  EXPECT_DOUBLE_EQ(peak.at("accelopt").at("theoretical_us").get<double>(), 2.382);
  EXPECT_DOUBLE_EQ(peak.at("accelopt").at("peaks").at("matmul_fp32_tflops").get<double>(), 23.75);
  EXPECT_DOUBLE_EQ(peak.at("roofline").at("peaks").at("hbm_gbps").get<double>(), 272.0);
  EXPECT_FALSE(peak.contains("floor"));
}

TEST(PercentOfPeak, RooflineAloneIsTheHeadlineAndNothingIsEmpty) {
  EXPECT_TRUE(percent_of_peak_json({{"hbm_pct", 40.0}}).empty());
  const auto peak = percent_of_peak_json({{"pct_of_peak_roofline", 40.0}});
  EXPECT_EQ(peak.at("rule"), "roofline");
}

TEST(PercentOfPeak, FullResultCarriesIt) {
  backends::EvalResult result;
  result.roofline = {{"pct_of_peak_floor", 12.0}};
  EXPECT_EQ(full_result_json(result).at("percent_of_peak").at("rule"), "floor");
  result.roofline = {{"hbm_pct", 40.0}};
  EXPECT_FALSE(full_result_json(result).contains("percent_of_peak"));
}

}  // namespace
}  // namespace autocomp::tools
