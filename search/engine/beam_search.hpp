#pragma once

#include <functional>
#include <memory>
#include <optional>
#include <string>
#include <vector>

#include "backends/backend.hpp"
#include "core/cancel.hpp"
#include "core/clock.hpp"
#include "search/engine/after_batch.hpp"
#include "search/engine/candidate.hpp"
#include "search/engine/progress.hpp"
#include "search/engine/prompts.hpp"
#include "search/engine/proposer.hpp"
#include "search/engine/run_store.hpp"
#include "search/engine/search_config.hpp"
#include "search/llm/provider.hpp"

namespace autocomp::search::engine {

// The collaborators a search runs with. Only backend and store are required.
struct SearchServices {
  std::shared_ptr<backends::Backend> backend;
  // Where the run is recorded, and the evaluation cache (e.g. parts_of(a store)).
  RunStore store;
  RunFacts facts;                                         // what listings show about a new run
  std::vector<std::shared_ptr<llm::Provider>> providers;  // the ensemble; may be empty
  std::shared_ptr<const PromptFactory> prompts;           // null: make_default_prompt_factory()
  // Proposers to use instead of those named in the config (tests and plug-ins).
  std::vector<std::shared_ptr<Proposer>> proposers;
  // Makes the proposers the config names; null: only the engine's own "llm" is known.
  ProposerMaker make_proposer;
  // Time for the wall-time budget and elapsed figures; null: the steady clock.
  std::shared_ptr<const core::Clock> clock;
  // Steps to run after every batch, after the run's own (journal, prompt history, lessons,
  // reflexions).
  std::vector<std::shared_ptr<AfterBatch>> after_batch;
  // The confirming backend of a hardware-confirmed search (SearchConfig::confirm, made from that
  // spec); required when the config names one.
  std::shared_ptr<backends::Backend> confirm_backend;
};

struct SearchHooks {
  // Called once, before any LLM call or evaluation, with the run id (new or resumed).
  std::function<void(const std::string& run_id)> started;
  ProgressCallback progress;
};

struct IterationSummary {
  int iteration = 0;
  double best_latency_us = 0;
  long evaluated = 0;  // children of the iteration whose evaluation returned
  long accepted = 0;   // children that passed the gate
  long diverged = 0;   // members left out for being far slower than the best (divergence guard)
};

struct SearchOutcome {
  std::string run_id;
  // completed | budget_exhausted | cancelled | failed
  std::string status;
  std::string stop_reason;               // in words; empty for completed
  std::optional<core::Failure> failure;  // set when status == failed
  SearchConfig config;

  Candidate baseline;  // the input kernel as measured
  // The fastest correct kernel found that passed re-verification (a fresh verify on all the
  // problem's seeds, never from the cache); the baseline when nothing faster passed.
  Candidate best;
  // What re-verification changed, in words (e.g. a winner dropped and why); empty when the first
  // choice passed.
  std::vector<std::string> notes;
  std::vector<Candidate> lineage;         // input kernel first, best last
  std::vector<IterationSummary> history;  // one entry per finished iteration, resumed ones too
  int iterations_done = 0;

  long candidates_evaluated = 0;  // children whose evaluation returned in this process
  long candidates_failed = 0;
  long duplicates = 0;
  long repairs = 0;
  long backend_evaluations = 0;  // evaluations actually sent to the backend by this process
  long cache_hits = 0;
  long llm_replayed = 0;  // answers taken from the store instead of asking again
  long llm_calls = 0;     // whole run
  long tokens = 0;
  double cost_usd = 0;
  double elapsed_s = 0;
  // A confirmed search: seconds spent on the confirming backend, kernels measured there, and the
  // confirmation's summary in words (search/engine/confirmation.hpp); empty otherwise.
  double device_s = 0;
  long device_measured = 0;
  std::string confirmation;

  double speedup() const {
    return best.latency_us() > 0 ? baseline.latency_us() / best.latency_us() : 0.0;
  }
};

// Runs a new search to completion, to a budget, or to cancellation, storing everything as it
// happens. Never throws for search problems: a broken input kernel, an unusable backend or a
// store failure ends with status "failed" and a failure value.
SearchOutcome run_search(const SearchConfig& config, const SearchServices& services,
                         const core::CancelToken& cancel, const SearchHooks& hooks = {});

// Continues a stored run with its stored config: finished iterations are not repeated, stored
// LLM answers are replayed instead of asked again, and evaluations come from the cache. `budgets`
// replace the stored ones when given.
SearchOutcome resume_search(const std::string& run_id, const SearchServices& services,
                            const core::CancelToken& cancel, const SearchHooks& hooks = {},
                            const std::optional<Budgets>& budgets = std::nullopt);

}  // namespace autocomp::search::engine
