#pragma once

#include <map>
#include <mutex>
#include <vector>

#include "search/engine/run_log.hpp"

namespace autocomp::search::engine {

// A RunLog held in memory: for tests, benchmarks and runs that need no record. Several engines
// may share one to simulate a process that stops and resumes.
class MemoryRunLog : public RunLog {
 public:
  core::Result<std::string> create_run(const std::string& config_text) override;
  core::Result<RunRecord> load_run(const std::string& run_id) override;
  core::Status set_run_status(const std::string& run_id, const std::string& status,
                              const std::string& stop_reason) override;
  std::optional<LlmCallRecord> find_llm_call(const std::string& run_id,
                                             const std::string& request_hash) override;
  core::Status record_llm_call(const std::string& run_id, const LlmCallRecord& call) override;
  LlmSpend llm_spend(const std::string& run_id) override;
  std::optional<StoredResult> find_evaluation(const backends::EvalRequest& request,
                                              const EvalSite& site) override;
  core::Result<std::string> record_evaluation(const backends::EvalRequest& request,
                                              const EvalSite& site,
                                              const backends::EvalResult& result) override;
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

  std::size_t llm_call_count(const std::string& run_id) const;
  std::size_t evaluation_count() const;  // evaluations recorded, cacheable or not

  // The text an evaluation is cached under.
  static std::string eval_key_text(const backends::EvalRequest& request, const EvalSite& site);

 private:
  struct Run {
    RunRecord record;
    std::map<std::string, LlmCallRecord> calls;
    std::map<std::string, Candidate> candidates;  // by origin label
    std::map<int, BeamRecord> beams;
  };

  mutable std::mutex m_mutex;
  std::map<std::string, Run> m_runs;
  std::map<std::string, backends::EvalResult> m_evaluations;  // cacheable, by key text
  std::map<std::string, std::vector<std::string>> m_lessons;  // by target, oldest first
  std::map<std::string, std::vector<std::pair<std::string, prompts::ReflexionRecord>>>
      m_reflexions;  // by run, oldest first, with the candidate key
  std::size_t m_recorded_evaluations = 0;
  int m_next_id = 1;
};

}  // namespace autocomp::search::engine
