#pragma once

#include <cstddef>
#include <optional>
#include <string>
#include <string_view>
#include <vector>

namespace autocomp::search::prompts {

// One kernel input as the harness measured it.
struct InputSpec {
  std::string name;
  std::string dtype;
  std::vector<long long> shape;
};

// Parses a canonical input signature ("name:dtype[d0,d1];...", backends/harness/PROTOCOL.md).
// Malformed entries are skipped.
std::vector<InputSpec> parse_input_signature(std::string_view signature);

// The problem as a prompt states it: the kernel function, the problem's description, every input's
// name, dtype and shape (from `input_signature`, else the source of inputs()), the tolerances
// (RTOL/ATOL), the module's plain constants that reference() (or inputs(), when shown) uses, e.g.
// `EPS = 1e-5`, and the reference's source, bounded to `max_code_chars`. Empty when both
// arguments are empty. A reference module (NKIBench's get_inputs()/forward(...)) is described by
// forward's source, its transform_to_nki_inputs(), the relative-L2 rule, and its inputs in the
// order they bind by position (also for BIND = "position").
// What a problem file says about how its kernel is evaluated: the relative tolerance when RTOL
// is a number, and how many programs its launch grid (GRID, e.g. `(2,)`) runs; 1 without GRID.
struct ProblemLaunch {
  std::optional<double> rtol;
  long long programs = 1;
};
ProblemLaunch problem_launch(std::string_view problem_source);

std::string describe_problem(std::string_view problem_source, std::string_view input_signature,
                             std::size_t max_code_chars = 2000);

}  // namespace autocomp::search::prompts
