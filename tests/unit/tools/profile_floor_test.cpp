// Floors and the profile-led menu order (tools/profile_floor.hpp), on profiles shaped like the
// simulator's.
#include "tools/profile_floor.hpp"

#include <gtest/gtest.h>

#include <algorithm>

namespace autocomp::tools {
namespace {

using nlohmann::json;

// A memory-bound kernel that moves its bytes once in `transfer`-byte DMAs, with the DMA bandwidth
// busy `busy_pct` of `latency_us`, at `gbps` while busy; the model's best rate is 113 GB/s.
backends::EvalResult dma_bound(double latency_us, double busy_pct, double transfer,
                               double gbps = 113.0) {
  backends::EvalResult result;
  const double busy_ns = latency_us * 1e3 * busy_pct / 100;
  const double bytes = busy_ns * gbps;
  result.metrics = {{"total_time", latency_us * 1e-6},
                    {"dma_active_time", latency_us * 1e-6 * busy_pct / 100},
                    {"vector_engine_active_time", latency_us * 1e-6 * 0.2},
                    {"dma_bandwidth_busy_percent", busy_pct},
                    {"dma_transfer_total_bytes", bytes},
                    {"dma_transfer_average_bytes", transfer},
                    {"hbm_read_bytes", bytes / 2},
                    {"hbm_write_bytes", bytes / 2},
                    {"total_instruction_count", 300}};
  result.raw_json = json{{"schema", "autocomp-harness/1"},
                         {"benchmark",
                          {{"floor",
                            {{"hbm_bytes", bytes},
                             {"peak_hbm_gbps", 410.0},
                             {"dma_gbps", 113.0},
                             {"floor_us", 1.0}}}}}}
                        .dump();
  return result;
}

std::vector<search::prompts::RankedItem> ranked_menu(const backends::EvalResult& result,
                                                     const std::string& source) {
  std::vector<search::prompts::MenuItem> items;
  for (const char* id :
       {"balance_engines", "activation_reduce", "bn_stats", "hoist_loads", "keep_resident",
        "double_buffer", "affine_range", "reduce_instruction_count"}) {
    items.push_back({id, std::string(id) + " text"});
  }
  search::prompts::MenuContext context;
  context.bottleneck = "memory-bound";
  context.metrics = result.metrics;
  context.kernel_source = source;
  for (const auto& hotspot : result.hotspots) {
    context.hot_engines.push_back(hotspot.engine);
  }
  return search::prompts::rank_menu(items, context);
}

std::vector<std::string> ids(const std::vector<search::prompts::RankedItem>& ranked) {
  std::vector<std::string> out;
  for (const auto& entry : ranked) {
    out.push_back(entry.item.id);
  }
  return out;
}

constexpr const char* k_source =
    "for i in nl.affine_range(4):\n  x = nl.load(a[i])\n  y = nl.load(b[i])\n"
    "  s = nl.sum(x, axis=1)\n";

TEST(ProfileFloors, AKernelMovingEveryByteOnceAtTheModelledRateIsAtTheDmaFloor) {
  const auto floors = compute_floors(dma_bound(600, 99.8, 65536));
  ASSERT_TRUE(floors.has_value());
  EXPECT_NEAR(floors->latency_us, 600, 1e-6);
  EXPECT_NEAR(*floors->dma_rate_gbps, 113, 0.01);
  EXPECT_NEAR(*floors->dma_floor_us, 598.8, 0.01);
  EXPECT_NEAR(*floors->floor_pct, 99.8, 0.01);
  EXPECT_TRUE(floors->dma_bound);
  EXPECT_TRUE(floors->at_floor);
  EXPECT_NEAR(floors->busy_us.at("vector"), 120, 1e-6);
  const auto lines = floors_lines(*floors);
  const bool says_floor = std::any_of(lines.begin(), lines.end(), [](const std::string& line) {
    return line.find("at the modelled floor") != std::string::npos;
  });
  EXPECT_TRUE(says_floor);
  const json out = floors_json(*floors);
  EXPECT_EQ(out.at("at_floor"), true);
  EXPECT_EQ(out.at("floor_pct"), 99.8);
}

TEST(ProfileFloors, AKernelThatReloadsOrUsesTinyTransfersIsNotAtTheFloor) {
  auto reloads = dma_bound(600, 99.8, 65536);
  auto document = json::parse(reloads.raw_json);
  const double once = document["benchmark"]["floor"]["hbm_bytes"].get<double>() / 3;
  document["benchmark"]["floor"]["hbm_bytes"] = once;  // it moves every byte three times
  reloads.raw_json = document.dump();
  const auto floors = compute_floors(reloads);
  ASSERT_TRUE(floors.has_value());
  EXPECT_NEAR(*floors->floor_pct, 33.27, 0.01);
  EXPECT_FALSE(floors->at_floor);
  EXPECT_NE(floors_lines(*floors).front().find("it moves 3x those bytes"), std::string::npos);

  // Narrow transfers keep the DMA busy at a fraction of the modelled rate: far from the floor.
  const auto tiny = compute_floors(dma_bound(600, 99.8, 512, 30.0));
  ASSERT_TRUE(tiny.has_value());
  EXPECT_FALSE(tiny->at_floor);
  EXPECT_NEAR(*tiny->floor_pct, 99.8 * 30 / 113, 0.01);

  EXPECT_FALSE(compute_floors(backends::EvalResult{}).has_value());
}

TEST(ProfileFloors, ManyTinyInstructionsPutReduceInstructionCountFirst) {
  backends::EvalResult result;
  result.metrics = {{"total_time", 8e-3},
                    {"vector_engine_active_time_percent", 95},
                    {"dma_active_time_percent", 40},
                    {"total_instruction_count", 131072}};
  backends::Hotspot hot;
  hot.line = 90;
  hot.engine = "vector";
  hot.share_pct = 49.6;
  hot.time_us = 3968;
  hot.instructions = 65536;
  result.hotspots.push_back(hot);
  const auto tiny = tiny_instructions(result);
  ASSERT_TRUE(tiny.has_value());
  EXPECT_EQ(tiny->line, 90);
  EXPECT_EQ(tiny->describe(), "131072 instructions; line 90: 65536 of 0.06055 us each");

  auto ranked = ranked_menu(result, k_source);
  ASSERT_NE(ids(ranked).front(), "reduce_instruction_count") << "the code-led order buries it";
  rank_menu_by_profile(ranked, std::nullopt, tiny);
  EXPECT_EQ(ids(ranked).front(), "reduce_instruction_count");
  EXPECT_NE(ranked.front().reasons.front().find("65536"), std::string::npos);
  // An item that does not apply to this kernel stays last, with its reason.
  EXPECT_EQ(ids(ranked).back(), "affine_range");
}

TEST(ProfileFloors, AtTheDmaFloorDataMovementItemsLeaveTheMenu) {
  const auto result = dma_bound(600, 99.8, 65536);
  auto ranked = ranked_menu(result, k_source);
  const auto before = ids(ranked);
  ASSERT_NE(std::find(before.begin(), before.end(), "hoist_loads"), before.end());
  const auto left_out = rank_menu_by_profile(ranked, compute_floors(result), std::nullopt);
  const auto after = ids(ranked);
  for (const char* id : {"hoist_loads", "keep_resident", "double_buffer"}) {
    EXPECT_EQ(std::find(after.begin(), after.end(), id), after.end()) << id;
    EXPECT_NE(std::find(left_out.begin(), left_out.end(), id), left_out.end()) << id;
  }
  EXPECT_NE(std::find(after.begin(), after.end(), "balance_engines"), after.end());
}

}  // namespace
}  // namespace autocomp::tools
