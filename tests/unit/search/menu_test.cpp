#include "search/prompts/menu.hpp"

#include <gtest/gtest.h>

#include "core/targets.hpp"

namespace autocomp::search::prompts {
namespace {

std::vector<MenuItem> numbered_items(int count) {
  std::vector<MenuItem> items;
  for (int i = 0; i < count; ++i) {
    items.push_back({"item" + std::to_string(i), "text " + std::to_string(i)});
  }
  return items;
}

std::vector<std::string> ids(const std::vector<MenuItem>& items) {
  std::vector<std::string> out;
  for (const auto& item : items) {
    out.push_back(item.id);
  }
  return out;
}

TEST(MenuTest, ParsesItemsCommentsAndBlankLines) {
  auto menu = parse_menu(
      "# header\n\n- hoist_loads: Hoist loads out of loops.\r\n"
      "- bf16: Compute in bf16: half the bytes.\n",
      "menu.md");
  ASSERT_TRUE(menu.ok()) << menu.failure().describe();
  ASSERT_EQ(menu->items.size(), 2u);
  EXPECT_EQ(menu->items[0].id, "hoist_loads");
  EXPECT_EQ(menu->items[0].text, "Hoist loads out of loops.");
  EXPECT_EQ(menu->items[1].text, "Compute in bf16: half the bytes.");
}

TEST(MenuTest, BadLinesAreReportedWithTheirLineNumber) {
  auto stray = parse_menu("- a: fine\nnot an item\n", "m.md");
  ASSERT_FALSE(stray.ok());
  EXPECT_NE(stray.failure().message.find("m.md:2"), std::string::npos);
  auto duplicate = parse_menu("- a: one\n- a: two\n", "m.md");
  ASSERT_FALSE(duplicate.ok());
  EXPECT_NE(duplicate.failure().message.find("duplicate"), std::string::npos);
  EXPECT_FALSE(parse_menu("- a:\n", "m.md").ok());
  EXPECT_FALSE(parse_menu("- bad id: text\n", "m.md").ok());
}

TEST(MenuTest, ShippedMenusHaveAtLeastThirtyItemsPerTarget) {
  auto library = PromptLibrary::open(std::string(AUTOCOMP_SOURCE_DIR) + "/prompts");
  ASSERT_TRUE(library.ok());
  for (const auto known : core::k_known_targets) {
    const std::string target(known);
    auto menu = load_menu(library.value(), target);
    ASSERT_TRUE(menu.ok()) << menu.failure().describe();
    EXPECT_GE(menu->items.size(), 30u) << target;
    EXPECT_EQ(menu->target, target);
  }
  auto missing = load_menu(library.value(), "trn9");
  ASSERT_FALSE(missing.ok());
  EXPECT_NE(missing.failure().message.find("menus/trn9.md"), std::string::npos);
}

TEST(MenuTest, DropoutIsDeterministicPerSeed) {
  const auto items = numbered_items(40);
  SeededRng first(1234);
  SeededRng second(1234);
  SeededRng other(99);
  const auto a = ids(apply_dropout(items, 0.7, first));
  const auto b = ids(apply_dropout(items, 0.7, second));
  const auto c = ids(apply_dropout(items, 0.7, other));
  EXPECT_EQ(a, b);
  EXPECT_NE(a, c);
}

TEST(MenuTest, DropoutKeepsAboutOneMinusPAndPreservesOrder) {
  const auto items = numbered_items(100);
  std::size_t kept = 0;
  for (std::uint64_t seed = 0; seed < 200; ++seed) {
    SeededRng rng(seed);
    const auto survivors = apply_dropout(items, 0.7, rng);
    kept += survivors.size();
    for (std::size_t i = 1; i < survivors.size(); ++i) {
      EXPECT_LT(std::stoi(survivors[i - 1].id.substr(4)), std::stoi(survivors[i].id.substr(4)));
    }
  }
  const double fraction = static_cast<double>(kept) / (100.0 * 200.0);
  EXPECT_NEAR(fraction, 0.3, 0.02);
}

TEST(MenuTest, DropoutExtremes) {
  const auto items = numbered_items(12);
  SeededRng rng(7);
  EXPECT_EQ(apply_dropout(items, 0.0, rng).size(), 12u);
  EXPECT_TRUE(apply_dropout(items, 1.0, rng).empty());
  // Almost certain to drop everything, yet one item always survives below p = 1.
  for (std::uint64_t seed = 0; seed < 50; ++seed) {
    SeededRng nearly(seed);
    EXPECT_EQ(apply_dropout(items, 0.9999, nearly).size(), 1u);
  }
  SeededRng empty_rng(1);
  EXPECT_TRUE(apply_dropout({}, 0.5, empty_rng).empty());
}

}  // namespace
}  // namespace autocomp::search::prompts
