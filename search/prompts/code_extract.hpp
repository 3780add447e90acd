#pragma once

#include <cstddef>
#include <string>
#include <string_view>
#include <vector>

#include "core/result.hpp"

namespace autocomp::search::prompts {

// Pulls one kernel's Python source out of a model's reply. Accepts fenced blocks (```python,
// ```py, ``` or ~~~), several of them (the one defining `function_name` wins, else the longest
// that looks like code), replies that are bare code with prose before or after, CRLF line ends,
// and an unterminated final fence. Returns the code with LF line ends and a final newline.
// Fails (kind invalid_argument, stage "extract") when nothing looks like a kernel: no block or
// text defining a Python function (`def`), or, when `function_name` is given, no definition of it
// anywhere in the reply.
core::Result<std::string> extract_kernel_code(std::string_view reply,
                                              std::string_view function_name = {});

// A plan from a model's reply: drops reasoning blocks (<think>...</think>, or everything before a
// lone </think>), leading pleasantries ("Sure", "Here is ..."), and surrounding whitespace;
// normalizes CRLF; cuts at `max_chars` on a line boundary when longer (marking the cut).
// Returns an empty string when nothing is left.
std::string extract_plan(std::string_view reply, std::size_t max_chars = 4000);

// The kernel function of a source file: the first top-level `def` decorated with a jit-like
// decorator (@nki.jit, @nki.baremetal, @jit...), else the first top-level `def`. Empty if none.
std::string detect_kernel_function(std::string_view source);

// The `def NAME(...)` line of `function_name` (joined when it spans several lines), or empty.
std::string function_signature(std::string_view source, std::string_view function_name);

// NKI calls used by a source, e.g. {"nisa.nc_matmul", "nl.load", "nl.matmul"}: sorted, unique,
// with the module spelled as `nl` (nki.language / neuronxcc.nki.language) or `nisa` (nki.isa)
// whatever alias the source imported it under.
std::vector<std::string> detect_instructions(std::string_view source);

}  // namespace autocomp::search::prompts
