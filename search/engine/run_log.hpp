#pragma once

#include <optional>
#include <string>
#include <vector>

#include "core/result.hpp"
#include "search/engine/candidate.hpp"
#include "search/llm/provider.hpp"
#include "search/prompts/prompt_builder.hpp"
#include "search/store/types.hpp"

namespace autocomp::search::engine {

// Where an evaluation ran: with the request, what the evaluation cache is keyed by.
using EvalSite = store::EvalSite;

// One answered LLM call of a run, stored so that a resumed run replays it instead of asking again
// (request_hash: see LlmGateway; origin: Origin::label() of the child it was for).
using LlmCallRecord = store::LlmCall;

// What a run has spent on LLM calls so far (answered calls only).
struct LlmSpend {
  long calls = 0;
  long tokens = 0;
  double cost_usd = 0;
};

struct RunRecord {
  std::string id;
  std::string config_text;  // config_to_text()
  std::string status;       // running | completed | budget_exhausted | cancelled | failed
  std::string stop_reason;  // in words, for people
};

// A beam as stored after an iteration completes: member candidate keys, best first.
using BeamRecord = store::Beam;

// The engine's journal of a run: the run's settings and status, its answered LLM calls, its
// candidates and beams, and what it learned. Evaluations are cached by a store::EvaluationCache
// (see Evaluator). Every method commits before it returns, so a kill -9 loses at most the calls in
// flight. Implementations are thread-safe. Failures are values; the engine logs them and carries
// on (a run that cannot be stored still returns its result).
class RunLog {
 public:
  virtual ~RunLog() = default;

  virtual core::Result<std::string> create_run(const std::string& config_text) = 0;
  virtual core::Result<RunRecord> load_run(const std::string& run_id) = 0;
  virtual core::Status set_run_status(const std::string& run_id, const std::string& status,
                                      const std::string& stop_reason) = 0;

  virtual std::optional<LlmCallRecord> find_llm_call(const std::string& run_id,
                                                     const std::string& request_hash) = 0;
  virtual core::Status record_llm_call(const std::string& run_id, const LlmCallRecord& call) = 0;
  virtual LlmSpend llm_spend(const std::string& run_id) = 0;

  // A child of the run with its lineage and verdict; recording the same origin again updates it.
  virtual core::Status record_candidate(const std::string& run_id, const Candidate& candidate) = 0;
  virtual std::vector<Candidate> load_candidates(const std::string& run_id) = 0;

  virtual core::Status record_beam(const std::string& run_id, const BeamRecord& beam) = 0;
  virtual std::vector<BeamRecord> load_beams(const std::string& run_id) = 0;  // by iteration

  // Optimization memory: short lessons per target, shared by every run on it (bounded by the
  // implementation), loaded newest first. Defaults keep nothing.
  virtual core::Status record_lesson(const std::string& target, const std::string& text,
                                     const std::string& kind, const std::string& run_id,
                                     double speedup) = 0;
  virtual std::vector<std::string> load_lessons(const std::string& target, int limit) = 0;

  // Reflexions of a run (single-path search), oldest first when loaded; `limit` newest.
  virtual core::Status record_reflexion(const std::string& run_id, const std::string& candidate_key,
                                        const prompts::ReflexionRecord& record) = 0;
  virtual std::vector<prompts::ReflexionRecord> load_reflexions(const std::string& run_id,
                                                                int limit) = 0;

  // Where the run stands, for listings (after every iteration).
  virtual void record_progress(const std::string& run_id, int iteration, const Candidate& best,
                               double baseline_latency_us) = 0;
};

}  // namespace autocomp::search::engine
