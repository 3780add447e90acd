#pragma once

// The one place where a search is assembled: the run_beam_search tool and `--autonomous` each turn
// their own arguments into a LaunchRequest, and prepare() builds the rest the same way for both
// (target, backend, LLM providers, proposers, run log, budgets).

#include <functional>
#include <memory>
#include <optional>
#include <string>
#include <vector>

#include "backends/backend.hpp"
#include "core/cancel.hpp"
#include "core/result.hpp"
#include "search/engine/beam_search.hpp"
#include "search/llm/provider.hpp"

namespace autocomp::search::store {
class Store;
}

namespace autocomp::search::launch {

// What a front end asks for, already parsed from its own syntax.
struct LaunchRequest {
  // A new run: the kernel and problem files as read by the caller (paths are recorded with the
  // run and name the files the results belong to).
  std::string kernel_path;
  std::string kernel_source;
  std::string problem_path;
  std::string problem_source;
  // Or a stored run to continue ("" = a new run). Its stored settings are kept; only `budgets`
  // replace the stored ones.
  std::string resume_run_id;

  std::string target;          // explicit choice; "" = the problem's TARGET, else default_target
  std::string default_target;  // the process's --target; "" = trn2
  std::string backend_spec;    // "" = a resumed run's own backend, else default_backend_spec
  std::string default_backend_spec = "sim";
  std::string harness_dir;  // "" = the installed or source harness

  std::vector<std::string> llm_specs;  // providers made here ("openai:MODEL", ...)
  // Providers the caller made itself (the MCP client's model through sampling).
  std::vector<std::shared_ptr<llm::Provider>> extra_providers;
  // What the run records as its model specs; empty: llm_specs.
  std::vector<std::string> recorded_llm_specs;

  // The search shape and learning settings (beam, plans, impls, iterations, dropout, seed, memory,
  // reflexions, divergence, evaluation options). The workload, target and proposers are filled in
  // by prepare().
  engine::SearchConfig shape;
  std::optional<engine::Budgets> budgets;
};

// A search ready to run.
struct Launch {
  engine::SearchConfig config;  // a new run's config (unused for a resume: the stored one rules)
  engine::SearchServices services;
  std::string resume_run_id;  // the stored run's full id; "" for a new run
  std::optional<engine::Budgets> budgets;
  std::string backend_spec;  // the spec the backend was made from
};

// Makes (or hands out a kept) backend for `spec`; `target` is the run's target (the default for
// requests that name none).
using BackendSource = std::function<core::Result<std::shared_ptr<backends::Backend>>(
    const std::string& spec, const std::string& target)>;

// A BackendSource that builds a fresh backend with the given harness folder.
// With `db`, specs may name a calibration profile of it ("sim?calibration=NAME").
BackendSource fresh_backends(std::string harness_dir, std::shared_ptr<store::Store> db = nullptr);

// A known target (core/targets.hpp): `explicit_target` when set, else the problem's `TARGET =
// "..."` line, else `fallback` when set, else trn2. A TARGET line naming an unknown target is
// ignored.
std::string resolve_target(const std::string& explicit_target, const std::string& problem_source,
                           const std::string& fallback);

// Builds the search: failures are usage problems (a bad LLM spec or key, an unknown backend, a run
// that does not exist, out-of-range settings) reported before any work starts.
core::Result<Launch> prepare(const LaunchRequest& request, std::shared_ptr<store::Store> db,
                             const BackendSource& backends = {});

// Runs (or resumes) the prepared search to its end on the calling thread.
engine::SearchOutcome run(const Launch& launch, const core::CancelToken& cancel,
                          const engine::SearchHooks& hooks = {});

}  // namespace autocomp::search::launch
