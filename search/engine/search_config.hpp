#pragma once

#include <chrono>
#include <cstdint>
#include <optional>
#include <string>
#include <vector>

#include "backends/backend.hpp"
#include "core/result.hpp"
#include "search/store/types.hpp"

namespace autocomp::search::engine {

// Limits on what a run may spend (max_tokens: input + output tokens over all calls of the run;
// max_wall_s: wall time of this process's part of the run). An unset limit is unlimited. When one
// is reached the run stops issuing work and ends with the best kernel found so far; the outcome
// names the limit.
using Budgets = store::RunBudgets;

// Everything that defines a search, as plain values: the MCP job (run_beam_search) and the
// autonomous CLI fill one in and hand it to run_search(). Stored with the run so that a resume
// continues with the same settings.
struct SearchConfig {
  // The workload.
  std::string kernel_source;
  std::string kernel_filename = "kernel.py";
  // The workload's local modules (EvalRequest::kernel_modules): every candidate, a rewrite of
  // the kernel file, runs beside them.
  std::vector<backends::KernelModule> kernel_modules;
  std::string kernel_folder;  // EvalRequest::kernel_folder
  std::string problem_source;
  std::string problem_filename = "problem.py";
  std::string kernel_name;  // function to optimize when the kernel file has several
  std::string target = "trn2";

  // The beam search (defaults from issue #5).
  int beam = 6;          // B: members kept per iteration
  int plans = 6;         // N: plans per beam member
  int impls = 2;         // K: implementations per plan
  int iterations = 10;   // T
  double dropout = 0.7;  // probability that a menu item is left out of one planning prompt
  std::uint64_t seed = 0;
  int repair_tries = 2;      // repair attempts for a child that failed to compile or run
  double early_slack = 1.1;  // a child may be this much slower than its parent ...
  int slack_iterations = 2;  // ... during the first this-many iterations
  std::vector<std::string> proposers{"llm"};  // registered proposer names, in order
  int recent_failures = 4;  // failures of the previous iteration shown to the planner

  // The learning loop (docs/search.md). Both need LLM providers and are skipped without them.
  bool memory = true;     // summarize each iteration's clear wins and losses into target lessons
  int lesson_limit = 16;  // lessons shown to planning prompts
  int reflexions = 3;     // single path (beam 1): reflect on each attempt, show the last this-many
  double divergence = 1.5;  // a member this much slower than the best leaves the beam; 0: off
  // The least latency gain, in percent, for a child to count as faster than its parent (after the
  // early slack). Unset: 0 on deterministic backends (strictly faster), the measured spread of
  // the two evaluations on noisy ones (engine/gain.hpp).
  std::optional<double> min_gain;

  // Evaluation.
  std::vector<int> eval_seeds;  // empty: the problem's SEEDS
  int warmup = 2;
  int iters = 10;
  std::chrono::milliseconds eval_timeout{std::chrono::minutes(5)};

  Budgets budgets;

  // The hardware-confirmed search (search/engine/confirmation.hpp): a backend spec whose
  // measurements rank the beam ("" = none), how many of an iteration's best children it measures,
  // and the seconds it may spend (unset: unlimited; when spent, confirming stops, not the search).
  std::string confirm;
  int confirm_top_k = 2;
  std::optional<double> max_device_s;
};

// Checks ranges (beam >= 1, 0 <= dropout <= 1, ...); invalid_argument with the offending field.
core::Status validate(const SearchConfig& config);

}  // namespace autocomp::search::engine
