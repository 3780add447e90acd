#include "core/text.hpp"

#include <gtest/gtest.h>

#include <nlohmann/json.hpp>

namespace autocomp::core {
namespace {

TEST(Utf8Prefix, NeverCutsInsideACharacter) {
  const std::string text = "tile \xE2\x86\x92 128 \xC3\x97 512";  // "tile → 128 × 512"
  for (std::size_t limit = 0; limit <= text.size() + 1; ++limit) {
    const std::string head = utf8_prefix(text, limit);
    const std::string tail = utf8_suffix(text, limit);
    EXPECT_LE(head.size(), limit);
    EXPECT_LE(tail.size(), limit);
    EXPECT_EQ(text.compare(0, head.size(), head), 0);
    EXPECT_EQ(text.compare(text.size() - tail.size(), tail.size(), tail), 0);
    // Valid UTF-8: a strict JSON dump accepts it.
    EXPECT_NO_THROW((void)nlohmann::json(head).dump()) << limit;
    EXPECT_NO_THROW((void)nlohmann::json(tail).dump()) << limit;
  }
  EXPECT_EQ(utf8_prefix(text, 6), "tile ") << "the arrow does not fit whole";
  EXPECT_EQ(utf8_prefix(text, 8), "tile \xE2\x86\x92");
}

}  // namespace
}  // namespace autocomp::core
