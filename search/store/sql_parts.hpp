#pragma once

#include <memory>
#include <string_view>

#include "search/store/calibrations.hpp"
#include "search/store/database.hpp"
#include "search/store/evaluation_cache.hpp"
#include "search/store/file_history.hpp"
#include "search/store/llm_call_log.hpp"
#include "search/store/memory.hpp"
#include "search/store/run_journal.hpp"

// The SQLite implementations of the store's parts, each over the shared Database. Internal to
// search/store: callers hold the interfaces through Store.
namespace autocomp::search::store {

// Helpers shared between parts; call inside Database::guarded.
std::optional<StoredEvaluation> evaluation_by_id(Database& db, std::int64_t id);
// Stores a candidate's source (once per key); returns its key.
std::string put_candidate_source(Database& db, std::string_view source, std::string_view origin);
// The qualifying evaluations of a set of candidates (correct, no failure, a latency): a SELECT of
// the columns read_best reads, to which a caller appends its joins, "WHERE ..." and
// best_where().
std::string_view best_select();
std::string_view best_where();
BestVersion read_best(const Stmt& row);

class SqlEvaluationCache final : public EvaluationCache {
 public:
  explicit SqlEvaluationCache(std::shared_ptr<Database> db) : m_db(std::move(db)) {}
  core::Result<std::optional<StoredEvaluation>> lookup(const backends::EvalRequest& request,
                                                       const EvalSite& site) override;
  core::Result<std::int64_t> record(const backends::EvalRequest& request, const EvalSite& site,
                                    const backends::EvalResult& result) override;
  core::Result<std::optional<StoredEvaluation>> get_evaluation(std::int64_t id) override;
  core::Result<std::vector<StoredEvaluation>> evaluations_for_candidate(
      const std::string& candidate_key, int limit) override;
  core::Result<std::string> put_workload(std::string_view problem_source,
                                         std::string_view problem_path) override;
  core::Result<std::optional<Workload>> get_workload(const std::string& problem_key) override;
  core::Result<std::string> put_candidate(std::string_view source,
                                          std::string_view origin) override;
  core::Result<std::optional<Candidate>> get_candidate(const std::string& key) override;

 private:
  std::shared_ptr<Database> m_db;
};

class SqlCalibrations final : public Calibrations {
 public:
  explicit SqlCalibrations(std::shared_ptr<Database> db) : m_db(std::move(db)) {}
  core::Result<std::int64_t> put_profile(const CalibrationProfile& profile) override;
  core::Result<std::optional<CalibrationProfile>> get_profile(const std::string& name) override;
  core::Result<std::optional<CalibrationProfile>> latest_profile(
      const std::string& target) override;
  core::Result<std::vector<CalibrationProfile>> list_profiles() override;
  core::Status record_measurement(const std::string& name, const std::string& device_spec,
                                  const std::string& target,
                                  const CalibrationMeasurement& measurement) override;
  core::Result<std::vector<CalibrationMeasurement>> pending_measurements(
      const std::string& name, const std::string& device_spec, const std::string& target) override;
  core::Result<std::int64_t> record_pair(const DevicePair& pair) override;
  core::Result<std::vector<DevicePair>> pairs(const std::string& target,
                                              const std::string& device_spec) override;
  core::Result<std::vector<DevicePair>> pairs_for_run(const std::string& run_id) override;

 private:
  std::shared_ptr<Database> m_db;
};

class SqlFileHistory final : public FileHistory {
 public:
  explicit SqlFileHistory(std::shared_ptr<Database> db) : m_db(std::move(db)) {}
  core::Status record_file_version(const std::string& abs_path, const std::string& candidate_key,
                                   const std::string& problem_key,
                                   const std::string& target) override;
  core::Result<std::vector<FileVersion>> file_versions(const std::string& abs_path,
                                                       int limit) override;
  core::Result<std::optional<BestVersion>> best_for_file(
      const std::string& abs_path, const std::string& problem_key, const std::string& target,
      const std::string& backend_identity) override;

 private:
  std::shared_ptr<Database> m_db;
};

class SqlRunJournal final : public RunJournal {
 public:
  explicit SqlRunJournal(std::shared_ptr<Database> db) : m_db(std::move(db)) {}
  core::Result<std::string> create_run(const RunConfig& config) override;
  core::Result<std::optional<Run>> get_run(const std::string& run_id) override;
  core::Result<std::vector<Run>> list_runs(int limit) override;
  core::Status set_run_status(const std::string& run_id, RunStatus status,
                              const std::string& message) override;
  core::Status claim_run(const std::string& run_id) override;
  core::Result<std::vector<std::string>> interrupt_orphaned_runs() override;
  core::Status set_run_progress(const std::string& run_id, int iteration,
                                const std::optional<std::string>& best_candidate_key,
                                std::optional<double> best_latency_us,
                                std::optional<double> baseline_latency_us) override;
  core::Status record_beam(const std::string& run_id, int iteration,
                           const std::vector<std::string>& candidate_keys) override;
  core::Result<std::vector<Beam>> get_beams(const std::string& run_id) override;
  core::Status record_iteration(const std::string& run_id, const IterationRecord& record) override;
  core::Result<bool> add_run_candidate(const RunCandidate& candidate) override;
  core::Status update_run_candidate(const std::string& run_id, const std::string& candidate_key,
                                    CandidateStatus status,
                                    std::optional<std::int64_t> evaluation_id,
                                    const std::string& note) override;
  core::Result<std::optional<RunCandidate>> get_run_candidate(
      const std::string& run_id, const std::string& candidate_key) override;
  core::Result<std::vector<RunCandidate>> run_candidates(const std::string& run_id) override;
  core::Result<std::vector<RunCandidate>> lineage(const std::string& run_id,
                                                  const std::string& candidate_key) override;
  core::Result<RunCounts> run_counts(const std::string& run_id) override;
  core::Result<std::optional<BestVersion>> best_for_run(const std::string& run_id) override;

 private:
  std::shared_ptr<Database> m_db;
};

class SqlLlmCallLog final : public LlmCallLog {
 public:
  explicit SqlLlmCallLog(std::shared_ptr<Database> db) : m_db(std::move(db)) {}
  core::Result<std::optional<LlmCall>> find_llm_response(const std::string& run_id,
                                                         const std::string& request_hash) override;
  core::Result<std::int64_t> put_llm_call(const LlmCall& call) override;
  core::Result<LlmTotals> llm_totals(const std::string& run_id) override;
  core::Result<std::vector<LlmCall>> llm_calls(const std::string& run_id) override;

 private:
  std::shared_ptr<Database> m_db;
};

class SqlMemory final : public Memory {
 public:
  explicit SqlMemory(std::shared_ptr<Database> db) : m_db(std::move(db)) {}
  core::Result<std::int64_t> add_lesson(const Lesson& lesson) override;
  core::Result<int> replace_lessons(const std::vector<std::int64_t>& retired,
                                    const std::vector<Lesson>& lessons) override;
  core::Result<std::vector<Lesson>> lessons(const std::string& target, int limit) override;
  core::Result<int> clear_lessons(const std::string& target) override;
  core::Result<std::int64_t> add_reflexion(const Reflexion& reflexion) override;
  core::Result<std::vector<Reflexion>> recent_reflexions(const std::string& scope,
                                                         int limit) override;

 private:
  // add_lesson's work inside an open transaction; returns the lesson's id.
  std::int64_t insert_lesson(const Lesson& lesson);

  std::shared_ptr<Database> m_db;
};

}  // namespace autocomp::search::store
