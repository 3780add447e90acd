#pragma once

#include <cstddef>
#include <optional>
#include <string>
#include <string_view>
#include <vector>

#include "core/result.hpp"

namespace autocomp::search::autotune {

// A tunable constant declared in a kernel's source (syntax in docs/knobs.md):
//
//   # autocomp: knob TILE_N = [512, 256, 128]
//   TILE_N = 512
//
// The comment line lists the candidate values as Python literals (ints, floats, quoted strings,
// True/False/None); the line directly below assigns the knob one literal. Module level and
// indented (inside the kernel function) declarations are both read.
struct Knob {
  std::string name;
  std::vector<std::string> values;  // each declared literal's text, as written in the comment
  std::string current;              // the literal text on the right-hand side of the assignment
  // Index in `values` of the literal equal to `current` (1 == 1, "a" == 'a'); nullopt when the
  // assignment holds a value the comment does not list.
  std::optional<std::size_t> current_index;
  std::size_t line = 0;          // 0-based line number of the assignment
  std::size_t value_offset = 0;  // byte offset of `current` in the source
};

// Every well-formed knob in `source`, in source order. A malformed comment, or a comment whose
// next line is not a plain assignment of one literal to its name, is ignored; a value listed twice
// is kept once. The function never fails.
std::vector<Knob> parse_knobs(std::string_view source);

// `source` with the right-hand side of `knob`'s assignment replaced by `value` (a literal text),
// every other byte unchanged, the knob comment included. invalid_argument when the source no
// longer holds `knob.current` at `knob.value_offset` (the knob came from another source).
core::Result<std::string> set_knob(std::string_view source, const Knob& knob,
                                   std::string_view value);

// A canonical form of a Python literal used to compare values ("i:512", "f:0.5", "s:abc",
// "b:True", "n:None"), or nullopt when `text` is not a literal the knob syntax accepts.
std::optional<std::string> canonical_literal(std::string_view text);

}  // namespace autocomp::search::autotune
