#pragma once

#include <memory>
#include <string>
#include <vector>

#include "core/result.hpp"
#include "search/engine/candidate.hpp"
#include "search/engine/search_config.hpp"
#include "search/store/calibrations.hpp"
#include "search/store/evaluation_cache.hpp"
#include "search/store/llm_call_log.hpp"
#include "search/store/memory.hpp"
#include "search/store/run_journal.hpp"

namespace autocomp::search::store {
class Store;
}

// Where a search records itself: the store's small interfaces, and the one place where the
// engine's values become store rows and back (a run's settings, a run candidate).
namespace autocomp::search::engine {

// The parts of the store a search uses. All are required: the journal keeps the run, its
// candidates and beams; the LLM call log lets a resumed run replay answers; memory keeps lessons
// and reflexions; the evaluation cache keeps the sources and results.
struct RunStore {
  std::shared_ptr<store::RunJournal> runs;
  std::shared_ptr<store::LlmCallLog> llm_calls;
  std::shared_ptr<store::Memory> memory;
  std::shared_ptr<store::EvaluationCache> evaluations;
  // Where a confirmed search stores its (simulated, measured) pairs; optional.
  std::shared_ptr<store::Calibrations> calibrations;

  bool complete() const { return runs && llm_calls && memory && evaluations; }
};

// The parts of one store, each keeping the whole store alive (":memory:" for a run that needs
// no file).
RunStore parts_of(const std::shared_ptr<store::Store>& store);

// Facts about a run that its SearchConfig does not hold but listings show.
struct RunFacts {
  std::string kernel_path;
  std::string problem_path;
  std::string backend;
  std::vector<std::string> llm_specs;
};

// Stores the sources and creates the run for `config`; returns the run id.
core::Result<std::string> create_run(const RunStore& parts, const SearchConfig& config,
                                     const RunFacts& facts);
// The config a stored run was created with (its sources read back by key).
core::Result<SearchConfig> config_of(const store::Run& run, store::EvaluationCache& sources);

// A child of the run as a journal row: its lineage, origin, evaluation and status (from its
// duplicate mark, correctness and verdict).
store::RunCandidate run_row(const std::string& run_id, const Candidate& candidate);
// The run's candidates in recording order, with their sources and stored evaluations.
std::vector<Candidate> load_candidates(const RunStore& parts, const std::string& run_id);

}  // namespace autocomp::search::engine
