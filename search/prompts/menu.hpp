#pragma once

#include <cstdint>
#include <string>
#include <string_view>
#include <vector>

#include "core/result.hpp"
#include "search/prompts/library.hpp"

namespace autocomp::search::prompts {

// One optimization strategy: a short stable id and one line of text (what and why).
struct MenuItem {
  std::string id;
  std::string text;
};

struct Menu {
  std::string target;  // "trn1", "trn2"
  std::vector<MenuItem> items;
};

// Menu file format (prompts/menus/<target>.md): one item per line, "- id: text". Lines starting
// with '#' and blank lines are ignored; any other line is an invalid_argument failure naming the
// line number, as is a duplicate id.
core::Result<Menu> parse_menu(std::string_view text, std::string_view origin);
core::Result<Menu> load_menu(const PromptLibrary& library, const std::string& target);

// A small deterministic random source (splitmix64) so that a seed gives the same draws on every
// platform and standard library.
class SeededRng {
 public:
  explicit SeededRng(std::uint64_t seed) : m_state(seed) {}
  std::uint64_t next();
  double uniform();                      // in [0, 1)
  std::size_t below(std::size_t bound);  // in [0, bound), bound > 0

 private:
  std::uint64_t m_state;
};

// Menu dropout: each item is dropped with probability `drop_probability` (kept with 1 - p),
// independently, in menu order. p <= 0 keeps every item; p >= 1 keeps none. For 0 < p < 1, when
// the draw would leave nothing from a non-empty menu, one item chosen by the same generator is
// kept, so that a "pick one strategy" prompt always has something to pick.
std::vector<MenuItem> apply_dropout(const std::vector<MenuItem>& items, double drop_probability,
                                    SeededRng& rng);

}  // namespace autocomp::search::prompts
