#pragma once

#include <optional>
#include <string>
#include <vector>

#include "backends/backend.hpp"
#include "core/result.hpp"
#include "search/engine/candidate.hpp"
#include "search/llm/provider.hpp"
#include "search/prompts/prompt_builder.hpp"

namespace autocomp::search::engine {

// Where an evaluation ran: with the request, this is what the evaluation cache is keyed by
// (design §5.3).
struct EvalSite {
  std::string backend_identity;
  std::string device;
  std::string harness_version;
  std::string input_signature;  // the inputs the problem produces there (see input_signature.hpp)
};

// A cached evaluation and the store's reference to it (opaque to the engine).
struct StoredResult {
  backends::EvalResult result;
  std::string ref;
};

// One answered LLM call of a run, stored so that a resumed run replays it instead of asking again.
struct LlmCallRecord {
  std::string request_hash;  // see LlmGateway: covers the child's origin and the whole request
  std::string purpose;       // plan | implement | repair
  std::string provider;
  std::string origin;  // Origin::label() of the child it was for
  std::string response;
  llm::Usage usage;
  double latency_ms = 0;
};

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
struct BeamRecord {
  int iteration = 0;
  std::vector<std::string> members;
};

// The engine's view of persistence. Every method commits before it returns, so a kill -9 loses
// at most the calls in flight. Implementations are thread-safe. Failures are values; the engine
// logs them and carries on (a run that cannot be stored still returns its result).
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

  // The evaluation cache, shared by every run. find_evaluation returns only results that may
  // answer the request again (successes and deterministic failures of the kernel);
  // record_evaluation keeps every result it is given and returns its reference.
  virtual std::optional<StoredResult> find_evaluation(const backends::EvalRequest& request,
                                                      const EvalSite& site) = 0;
  virtual core::Result<std::string> record_evaluation(const backends::EvalRequest& request,
                                                      const EvalSite& site,
                                                      const backends::EvalResult& result) = 0;

  // A child of the run with its lineage and verdict; recording the same origin again updates it.
  virtual core::Status record_candidate(const std::string& run_id, const Candidate& candidate) = 0;
  virtual std::vector<Candidate> load_candidates(const std::string& run_id) = 0;

  virtual core::Status record_beam(const std::string& run_id, const BeamRecord& beam) = 0;
  virtual std::vector<BeamRecord> load_beams(const std::string& run_id) = 0;  // by iteration

  // Optimization memory: short lessons per target, shared by every run on it (bounded by the
  // implementation), loaded newest first. Defaults keep nothing.
  virtual core::Status record_lesson(const std::string& /*target*/, const std::string& /*text*/,
                                     const std::string& /*kind*/, const std::string& /*run_id*/,
                                     double /*speedup*/) {
    return core::ok_status();
  }
  virtual std::vector<std::string> load_lessons(const std::string& /*target*/, int /*limit*/) {
    return {};
  }

  // Reflexions of a run (single-path search), oldest first when loaded; `limit` newest.
  virtual core::Status record_reflexion(const std::string& /*run_id*/,
                                        const std::string& /*candidate_key*/,
                                        const prompts::ReflexionRecord& /*record*/) {
    return core::ok_status();
  }
  virtual std::vector<prompts::ReflexionRecord> load_reflexions(const std::string& /*run_id*/,
                                                                int /*limit*/) {
    return {};
  }

  // Where the run stands, for listings (after every iteration).
  virtual void record_progress(const std::string& /*run_id*/, int /*iteration*/,
                               const Candidate& /*best*/, double /*baseline_latency_us*/) {}
};

}  // namespace autocomp::search::engine
