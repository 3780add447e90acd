#pragma once

#include <cstdint>
#include <map>
#include <optional>
#include <set>
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
  std::string target;  // "trn1", "trn2", "trn3"
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

// What the menu ranking knows about a kernel: its profile and source, and what was tried on it.
struct MenuContext {
  std::string bottleneck;                  // compute-bound | memory-bound | underutilized | ""
  std::map<std::string, double> metrics;   // neuron-profile summary names
  std::map<std::string, double> roofline;  // PROTOCOL.md roofline names
  std::vector<std::string> hot_engines;    // engines of the hottest source lines, busiest first
  std::string kernel_source;
  std::set<std::string> tried;  // item ids already tried on this kernel
  std::optional<double> rtol;   // the problem's relative tolerance, when it states one
  long long programs = 1;       // programs the evaluation launches (the problem's GRID)
};

// A menu item with how well it fits the kernel and the reasons, in words.
struct RankedItem {
  MenuItem item;
  double score = 0;
  std::vector<std::string> reasons;  // e.g. "memory-bound", "uses matmul"
};

// The menu ordered by fit (best first; ties keep menu order), leaving out tried items. Items the
// kernel cannot use (matmul strategies for a kernel without matmul, masking without a mask) sink
// to the end rather than vanish. Deterministic: no sampling.
std::vector<RankedItem> rank_menu(const std::vector<MenuItem>& items, const MenuContext& context);

// Menu items the kernel already applies, by id, with what in its source shows it (e.g.
// "bf16_compute" -> "it already uses nl.bfloat16"): a planning prompt marks them so a plan does
// not offer what is done. Judged from the source text only; an item absent may still be applied.
std::map<std::string, std::string> applied_items(const std::vector<MenuItem>& items,
                                                 std::string_view kernel_source);

// Ids of `items` that `text` names: the id itself ("double_buffer") or its words ("double
// buffer", "double-buffer"), case-insensitively.
std::set<std::string> mentioned_items(const std::vector<MenuItem>& items, std::string_view text);

}  // namespace autocomp::search::prompts
