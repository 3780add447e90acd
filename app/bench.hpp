#pragma once

#include <nlohmann/json.hpp>
#include <string>
#include <vector>

namespace autocomp::app {

// Entry point of `autocomp-mcp bench SUITE ...`: runs every (kernel, problem) pair of a suite
// through verify_kernel, benchmark_kernel and profile_kernel (the tools `call` runs) and prints
// a table. Returns the process exit code (0 every pair was evaluated, whatever its verdict; 1 the
// tools could not evaluate some pair; 2 bad usage).
int bench_main(int argc, char** argv);

// One (kernel, problem) pair of a suite.
struct BenchPair {
  std::string name;  // "silu/0", "rmsnorm/naive"
  std::string kernel;
  std::string problem;
};

struct SuiteParse {
  std::vector<BenchPair> pairs;
  std::string error;  // non-empty: the suite could not be read
};

// Pairs of SUITE: an NKIBench-style summary.json (or a folder holding one), a manifest
// (JSON list, or {"pairs": [...]}, of {"name", "kernel", "problem"}; paths relative to the
// manifest), a workload folder (problem.py beside kernel files) or a folder of workload folders
// (the repository's seeds/). Sorted by name.
SuiteParse read_suite(const std::string& suite);

// Markdown table of result rows (as written to --json); with `other` rows, side by side.
std::string bench_markdown(const nlohmann::json& rows, const nlohmann::json* other = nullptr);

}  // namespace autocomp::app
