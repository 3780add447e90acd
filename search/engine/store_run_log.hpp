#pragma once

#include <memory>
#include <string>
#include <vector>

#include "search/engine/run_log.hpp"
#include "search/store/store.hpp"

namespace autocomp::search::engine {

// Facts about a run that the engine's config does not hold but listings show.
struct StoreRunInfo {
  std::string kernel_path;
  std::string problem_path;
  std::string backend;
  std::vector<std::string> llm_specs;
};

// The RunLog over the SQLite store (use ":memory:" for a run that needs no file). Run candidates
// keep their origin label so that a resume can rebuild the same prompts.
class StoreRunLog : public RunLog {
 public:
  StoreRunLog(std::shared_ptr<store::Store> store, StoreRunInfo info);

  core::Result<std::string> create_run(const std::string& config_text) override;
  core::Result<RunRecord> load_run(const std::string& run_id) override;
  core::Status set_run_status(const std::string& run_id, const std::string& status,
                              const std::string& stop_reason) override;
  std::optional<LlmCallRecord> find_llm_call(const std::string& run_id,
                                             const std::string& request_hash) override;
  core::Status record_llm_call(const std::string& run_id, const LlmCallRecord& call) override;
  LlmSpend llm_spend(const std::string& run_id) override;
  core::Status record_candidate(const std::string& run_id, const Candidate& candidate) override;
  std::vector<Candidate> load_candidates(const std::string& run_id) override;
  core::Status record_beam(const std::string& run_id, const BeamRecord& beam) override;
  std::vector<BeamRecord> load_beams(const std::string& run_id) override;
  core::Status record_lesson(const std::string& target, const std::string& text,
                             const std::string& kind, const std::string& run_id,
                             double speedup) override;
  std::vector<std::string> load_lessons(const std::string& target, int limit) override;
  core::Status record_reflexion(const std::string& run_id, const std::string& candidate_key,
                                const prompts::ReflexionRecord& record) override;
  std::vector<prompts::ReflexionRecord> load_reflexions(const std::string& run_id,
                                                        int limit) override;
  void record_progress(const std::string& run_id, int iteration, const Candidate& best,
                       double baseline_latency_us) override;

  const std::shared_ptr<store::Store>& store() const { return m_store; }

 private:
  std::shared_ptr<store::Store> m_store;
  StoreRunInfo m_info;
};

// A stored reflexion as the prompts use it.
prompts::ReflexionRecord to_reflexion_record(const store::Reflexion& stored);

}  // namespace autocomp::search::engine
