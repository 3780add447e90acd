// Ranking the optimization menu by a kernel's profile and code, on the real trn2 menu.
#include <gtest/gtest.h>

#include <algorithm>

#include "search/prompts/library.hpp"
#include "search/prompts/menu.hpp"

namespace autocomp::search::prompts {
namespace {

std::vector<MenuItem> trn2_menu() {
  auto library = PromptLibrary::open();
  EXPECT_TRUE(library.ok());
  auto menu = load_menu(library.value(), "trn2");
  EXPECT_TRUE(menu.ok());
  return menu.ok() ? menu->items : std::vector<MenuItem>{};
}

std::size_t position(const std::vector<RankedItem>& ranked, const std::string& id) {
  for (std::size_t i = 0; i < ranked.size(); ++i) {
    if (ranked[i].item.id == id) {
      return i;
    }
  }
  return ranked.size();
}

constexpr const char* k_streaming_add = R"(
for j in nl.sequential_range(64):
    x = nl.load(a[:, j * 8:(j + 1) * 8])
    y = nl.load(b[:, j * 8:(j + 1) * 8])
    nl.store(out[:, j * 8:(j + 1) * 8], value=nl.add(x, y))
)";

constexpr const char* k_gemm = R"(
for m in range(M // TILE_M):
    for k in range(K // TILE_K):
        nisa.dma_copy(dst=lhsT_tile, src=lhsT[k, m])
        nisa.dma_copy(dst=rhs_tile, src=rhs[k, n])
        nisa.nc_matmul(dst=acc, stationary=lhsT_tile, moving=rhs_tile)
)";

MenuContext memory_bound_add() {
  MenuContext context;
  context.bottleneck = "memory-bound";
  context.metrics = {{"dma_active_time_percent", 90},
                     {"vector_engine_active_time_percent", 10},
                     {"dma_transfer_average_bytes", 4096}};
  context.kernel_source = k_streaming_add;
  return context;
}

TEST(MenuRanking, MemoryBoundStreamingPutsDmaItemsFirstAndMatmulItemsLast) {
  const auto items = trn2_menu();
  ASSERT_FALSE(items.empty());
  const auto ranked = rank_menu(items, memory_bound_add());
  ASSERT_EQ(ranked.size(), items.size());
  EXPECT_LT(position(ranked, "larger_dma"), 3u);
  EXPECT_LT(position(ranked, "double_buffer"), 8u);
  // Items the kernel cannot use rank below one that applies to any kernel.
  EXPECT_GT(position(ranked, "psum_accumulate_k"), position(ranked, "simplify"));
  EXPECT_GT(position(ranked, "online_softmax"), position(ranked, "simplify"));
  EXPECT_EQ(ranked[position(ranked, "psum_accumulate_k")].reasons,
            std::vector<std::string>{"does not apply as written"});
  const auto& top = ranked.front();
  EXPECT_FALSE(top.reasons.empty());
  EXPECT_GT(top.score, ranked.back().score);
}

TEST(MenuRanking, ComputeBoundMatmulPutsTensorEngineItemsFirst) {
  const auto items = trn2_menu();
  MenuContext context;
  context.bottleneck = "compute-bound";
  context.metrics = {{"tensor_engine_active_time_percent", 85},
                     {"dma_active_time_percent", 30},
                     {"matmul_instruction_count", 64}};
  context.hot_engines = {"tensor"};
  context.kernel_source = k_gemm;
  const auto ranked = rank_menu(items, context);
  EXPECT_LT(position(ranked, "moving_free_512"), 5u);
  EXPECT_LT(position(ranked, "psum_accumulate_k"), 10u);
  EXPECT_GT(position(ranked, "larger_dma"), position(ranked, "moving_free_512"));
  EXPECT_GT(position(ranked, "mask_with_affine_select"), position(ranked, "simplify"));
}

TEST(MenuRanking, TriedItemsAreLeftOutAndRankingIsDeterministic) {
  const auto items = trn2_menu();
  auto context = memory_bound_add();
  const auto first = rank_menu(items, context);
  const auto again = rank_menu(items, context);
  ASSERT_EQ(first.size(), again.size());
  for (std::size_t i = 0; i < first.size(); ++i) {
    EXPECT_EQ(first[i].item.id, again[i].item.id);
  }
  context.tried = {"larger_dma", "double_buffer"};
  const auto rest = rank_menu(items, context);
  EXPECT_EQ(rest.size(), items.size() - 2);
  EXPECT_EQ(position(rest, "larger_dma"), rest.size());
}

TEST(MenuRanking, MentionedItemsMatchIdsAndTheirWords) {
  const auto items = trn2_menu();
  const auto found = mentioned_items(
      items, "Tried Double Buffering of the loads; avoid larger-dma, it spilled. hoist_loads?");
  EXPECT_TRUE(found.count("double_buffer"));
  EXPECT_TRUE(found.count("larger_dma"));
  EXPECT_TRUE(found.count("hoist_loads"));
  EXPECT_FALSE(found.count("bf16_compute"));
  EXPECT_TRUE(mentioned_items(items, "").empty());
}

}  // namespace
}  // namespace autocomp::search::prompts
