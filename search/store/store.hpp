#pragma once

#include <cstdint>
#include <memory>
#include <optional>
#include <string>
#include <string_view>
#include <vector>

#include "backends/backend.hpp"
#include "core/result.hpp"
#include "search/llm/provider.hpp"

// The SQLite store: the one database that records workloads, candidate kernels, evaluations (it is
// also the evaluation cache), search runs with their beams, candidates and LLM calls, optimization
// memory lessons and reflexions. docs/store.md describes the schema, keys and durability.
//
// Contract shared by every method:
// - Thread-safe: one connection guarded by a mutex; several processes may open the same file (WAL,
//   busy timeout).
// - Every write is committed before the method returns; a multi-row write is one transaction, so a
//   kill -9 leaves either all of it or none of it.
// - Failures are values: io_error for database trouble (disk full, locked past the busy timeout,
//   corrupt file), invalid_argument for a bad argument or a reference to a row that does not exist.
// - Times are milliseconds since the Unix epoch (UTC).
namespace autocomp::search::store {

struct StoreOptions {
  int busy_timeout_ms = 10000;
  // At most this many memory lessons are kept per target (see add_lesson for the policy).
  int lesson_limit = 16;
  // Open an existing database for reading only (e.g. on read-only media): nothing is created or
  // migrated, and every write fails with a message saying the store is read-only.
  bool read_only = false;
};

// ---------------------------------------------------------------------------------------------
// Workloads and candidates

struct Workload {
  std::string problem_key;  // core::source_key(source)
  std::string source;
  std::string path;  // where it was last seen (informational)
  std::int64_t created_at_ms = 0;
};

struct Candidate {
  std::string key;     // core::source_key(source)
  std::string source;  // the text as first stored
  std::string origin;  // who made it first: "user", "seed", "llm", "repair", "autotune", "agent"...
  std::int64_t created_at_ms = 0;
};

// ---------------------------------------------------------------------------------------------
// Evaluations (design §5.3). Two evaluations with equal keys are interchangeable.

struct EvalKey {
  std::string candidate_key;
  std::string problem_key;
  std::string target;
  std::string backend_identity;
  std::string device;
  std::string harness_version;
  // The inputs the problem produces (the harness's `signature`): a result measured at one shape
  // never answers for another. "" when the backend could not say (then only rows stored with ""
  // match; rows from before signatures existed never do).
  std::string input_signature;
  backends::EvalCommand command = backends::EvalCommand::evaluate;
  std::string kernel_name;  // "" = the harness picks
  std::string seeds;        // canonical "0,1,2"; "" = the problem's SEEDS / harness default
  int warmup = 2;
  int iters = 10;
};

// The key of `request` when run on `backend` (hashes both sources).
EvalKey make_eval_key(const backends::EvalRequest& request, const backends::Backend& backend);
// Same, with the backend's identity, device and harness version given directly.
EvalKey make_eval_key(const backends::EvalRequest& request, std::string backend_identity,
                      std::string device, std::string harness_version);
// "0,1,2" for {0,1,2}; "" for empty.
std::string canonical_seeds(const std::vector<int>& seeds);

struct StoredEvaluation {
  std::int64_t id = 0;
  EvalKey key;
  backends::EvalResult result;
  std::int64_t created_at_ms = 0;
};

// Whether a stored result may answer a later request with the same key: successes and
// deterministic failures (compile_error, runtime_error, mismatch, problem_error) are answers;
// timeouts, transport, harness, unavailable, cancelled and internal failures are not (they are
// kept as history only).
bool is_cacheable(const backends::EvalResult& result);

// The whole receipt of `result` as stored with it (a JSON object: device, target, backend, host,
// job, node, harness_version, simulator_version, sdk, neff_hash, profile_format, profile_schema,
// seeds, warmup, iters, input_signature); the backend's fields fill what the harness left empty.
std::string receipt_to_json(const backends::EvalResult& result);

// ---------------------------------------------------------------------------------------------
// Kernel files (revert_to_best)

struct FileVersion {
  std::int64_t id = 0;
  std::string path;  // absolute path
  std::string candidate_key;
  std::string problem_key;
  std::string target;
  std::int64_t recorded_at_ms = 0;
};

// The best-known correct version: correct, no failure, lowest median latency.
struct BestVersion {
  std::string candidate_key;
  std::string source;
  double median_us = 0;
  std::int64_t evaluation_id = 0;
  std::string backend_identity;
  std::string device;
  std::int64_t evaluated_at_ms = 0;
};

// ---------------------------------------------------------------------------------------------
// Runs

enum class RunStatus { running, completed, cancelled, failed, interrupted };
std::string_view to_string(RunStatus status);
std::optional<RunStatus> run_status_from_string(std::string_view name);

struct RunBudgets {
  std::optional<long> max_llm_calls;
  std::optional<long> max_tokens;
  std::optional<double> max_cost_usd;
  std::optional<double> max_wall_s;
};

struct RunConfig {
  std::string kernel_path;
  std::string problem_path;
  std::string problem_key;
  std::string seed_candidate_key;  // the starting kernel (optional; must be stored if set)
  std::string target;
  std::string backend;
  std::vector<std::string> llm_specs;
  int beam = 6;
  int plans = 6;
  int impls = 2;
  int iterations = 10;
  double dropout = 0.7;
  std::uint64_t rng_seed = 0;
  RunBudgets budgets;
  std::string config_json;  // the engine's full configuration, opaque to the store
};

struct Run {
  std::string id;  // 12 lower-case hex characters
  RunConfig config;
  RunStatus status = RunStatus::running;
  std::string status_message;
  int owner_pid = 0;  // process that last claimed the run
  std::string owner_host;
  std::int64_t created_at_ms = 0;
  std::int64_t updated_at_ms = 0;
  std::optional<std::int64_t> finished_at_ms;
  // Progress, as last reported with set_run_progress.
  int iteration = 0;  // iterations completed
  std::optional<std::string> best_candidate_key;
  std::optional<double> best_latency_us;
  std::optional<double> baseline_latency_us;
};

// Status of a candidate within a run. proposed: code obtained, not yet evaluated; evaluated: has a
// result; accepted: entered the beam; rejected: correct but not good enough; failed: a failure
// (see its evaluation); duplicate: its source was already seen in the run.
enum class CandidateStatus { proposed, evaluated, accepted, rejected, failed, duplicate };
std::string_view to_string(CandidateStatus status);
std::optional<CandidateStatus> candidate_status_from_string(std::string_view name);

struct RunCandidate {
  std::string run_id;
  int iteration = 0;
  std::string candidate_key;
  std::string parent_key;  // "" for the seed
  std::string plan_text;
  std::string provider;  // LLM spec, "autotune", "seed", ...
  CandidateStatus status = CandidateStatus::proposed;
  std::optional<std::int64_t> evaluation_id;
  std::optional<double> median_us;  // copied from the evaluation for quick listing
  bool correct = false;
  std::string note;  // e.g. why it was rejected
  std::int64_t created_at_ms = 0;
  std::int64_t updated_at_ms = 0;
};

struct Beam {
  int iteration = 0;  // 0 = the initial beam
  std::vector<std::string> candidate_keys;
};

struct RunCounts {
  int candidates = 0;
  int evaluated = 0;  // evaluated + accepted + rejected + failed
  int accepted = 0;
  int rejected = 0;
  int failed = 0;
  int duplicates = 0;
};

// ---------------------------------------------------------------------------------------------
// LLM calls

struct LlmCall {
  std::string run_id;        // "" for calls outside a run (e.g. propose_plan)
  std::string request_hash;  // opaque; computed by the engine
  std::string purpose;       // plan | implement | repair | summarize | reflect
  std::string provider;
  std::string prompt;  // optional, may be empty
  std::string response;
  llm::Usage usage;
  double latency_ms = 0;
  int attempts = 1;
  std::int64_t created_at_ms = 0;
};

struct LlmTotals {
  long calls = 0;
  long input_tokens = 0;
  long output_tokens = 0;
  double cost_usd = 0;
};

// ---------------------------------------------------------------------------------------------
// Memory and reflexion

struct Lesson {
  std::int64_t id = 0;
  std::string target;
  std::string text;
  std::string kind;        // "improvement" | "regression" | "" (free form)
  std::string source_run;  // "" when not from a run
  double speedup = 0;      // evidence: child/parent speedup (>1 faster, <1 slower); 0 = unknown
  std::string evidence;    // free text, e.g. "abc123 -> def456, 41.2us -> 30.1us"
  std::int64_t created_at_ms = 0;
};

struct Reflexion {
  std::int64_t id = 0;
  std::string scope;  // a run id or an absolute kernel path
  std::string candidate_key;
  std::optional<bool> diagnosis_right;
  std::optional<bool> fix_worked;
  std::string expected;
  std::string actual;
  std::string lessons;
  std::string avoid;
  std::string try_next;
  std::string raw_text;  // the model's output as received (kept when parsing failed)
  std::int64_t created_at_ms = 0;
};

// ---------------------------------------------------------------------------------------------

class Store {
 public:
  // Opens (creating if needed, with parent folders) and migrates the database at `path`.
  // ":memory:" gives a private in-memory store. Fails with io_error when the file cannot be opened
  // or is not a database, and with invalid_argument when it was written by a newer version.
  static core::Result<std::unique_ptr<Store>> open(const std::string& path,
                                                   const StoreOptions& options = {});
  // $XDG_DATA_HOME/autocomp-mcp/autocomp.db, else $HOME/.local/share/autocomp-mcp/autocomp.db.
  static std::string default_path();
  // The schema version this build writes.
  static int schema_version();

  ~Store();
  Store(const Store&) = delete;
  Store& operator=(const Store&) = delete;

  const std::string& path() const;
  // Whether the store was opened with StoreOptions::read_only.
  bool read_only() const;

  // -- Workloads and candidates. Putting an existing key is a no-op returning the key.
  core::Result<std::string> put_workload(std::string_view problem_source,
                                         std::string_view problem_path);
  core::Result<std::optional<Workload>> get_workload(const std::string& problem_key);
  core::Result<std::string> put_candidate(std::string_view source, std::string_view origin);
  core::Result<std::optional<Candidate>> get_candidate(const std::string& key);

  // -- Evaluations. put_evaluation always inserts (history is kept); the candidate and workload
  // must have been put first.
  core::Result<std::int64_t> put_evaluation(const EvalKey& key, const backends::EvalResult& result);
  core::Result<std::optional<StoredEvaluation>> get_evaluation(std::int64_t id);
  // Newest cacheable evaluation with exactly this key.
  core::Result<std::optional<StoredEvaluation>> find_evaluation(const EvalKey& key);
  // Newest cacheable evaluation that answers `key`'s command with the same identity and options:
  //   verify    <- verify | evaluate                     (same seeds, kernel_name)
  //   benchmark <- benchmark | evaluate with latency     (same seeds, kernel_name, warmup, iters)
  //   profile   <- profile | evaluate with a profile     (same seeds, kernel_name)
  //   evaluate  <- evaluate (all options) | a verify that failed deterministically (evaluate
  //                stops there too)
  // An evaluate, benchmark or profile that failed with compile_error answers every command.
  core::Result<std::optional<StoredEvaluation>> find_covering_evaluation(const EvalKey& key);
  // Newest first.
  core::Result<std::vector<StoredEvaluation>> evaluations_for_candidate(
      const std::string& candidate_key, int limit = 100);

  // -- Kernel files. Records that the file at `abs_path` held `candidate_key` when a tool looked
  // at it (the candidate and workload must exist). Recording the same version again refreshes it.
  core::Status record_file_version(const std::string& abs_path, const std::string& candidate_key,
                                   const std::string& problem_key, const std::string& target);
  // Newest first.
  core::Result<std::vector<FileVersion>> file_versions(const std::string& abs_path,
                                                       int limit = 100);
  // Best among the versions recorded for the path with this problem and target, judged by the
  // stored evaluations of each version (any backend when backend_identity is empty).
  core::Result<std::optional<BestVersion>> best_for_file(const std::string& abs_path,
                                                         const std::string& problem_key,
                                                         const std::string& target,
                                                         const std::string& backend_identity = "");
  // Best among the run's candidates, judged on the run's problem and target.
  core::Result<std::optional<BestVersion>> best_for_run(const std::string& run_id);

  // -- Runs
  core::Result<std::string> create_run(const RunConfig& config);
  // Exact id, or a unique prefix of at least 4 characters.
  core::Result<std::optional<Run>> get_run(const std::string& run_id);
  // Newest first.
  core::Result<std::vector<Run>> list_runs(int limit = 20);
  core::Status set_run_status(const std::string& run_id, RunStatus status,
                              const std::string& message = "");
  // Marks the run running and owned by this process (used by --resume and job restarts).
  core::Status claim_run(const std::string& run_id);
  // Marks every `running` run owned by a process on this host that no longer exists as
  // interrupted; returns their ids. Call once at startup.
  core::Result<std::vector<std::string>> interrupt_orphaned_runs();
  core::Status set_run_progress(const std::string& run_id, int iteration,
                                const std::optional<std::string>& best_candidate_key,
                                std::optional<double> best_latency_us,
                                std::optional<double> baseline_latency_us);
  // Replaces the beam recorded for this iteration (idempotent on resume).
  core::Status record_beam(const std::string& run_id, int iteration,
                           const std::vector<std::string>& candidate_keys);
  // Ordered by iteration.
  core::Result<std::vector<Beam>> get_beams(const std::string& run_id);
  // Returns false (and changes nothing) when the candidate is already part of the run: identical
  // sources are never evaluated twice within a run. The candidate must have been put first.
  core::Result<bool> add_run_candidate(const RunCandidate& candidate);
  // Updates status, evaluation id, median, correct and note of a run candidate.
  core::Status update_run_candidate(const std::string& run_id, const std::string& candidate_key,
                                    CandidateStatus status,
                                    std::optional<std::int64_t> evaluation_id = std::nullopt,
                                    const std::string& note = "");
  core::Result<std::optional<RunCandidate>> get_run_candidate(const std::string& run_id,
                                                              const std::string& candidate_key);
  // In insertion order.
  core::Result<std::vector<RunCandidate>> run_candidates(const std::string& run_id);
  // From the run's root down to `candidate_key` (following parent keys within the run).
  core::Result<std::vector<RunCandidate>> lineage(const std::string& run_id,
                                                  const std::string& candidate_key);
  core::Result<RunCounts> run_counts(const std::string& run_id);

  // -- LLM calls. A response recorded for (run, request hash) is returned instead of asking again.
  core::Result<std::optional<LlmCall>> find_llm_response(const std::string& run_id,
                                                         const std::string& request_hash);
  // Recording the same (run, request hash) twice keeps the first.
  core::Result<std::int64_t> put_llm_call(const LlmCall& call);
  core::Result<LlmTotals> llm_totals(const std::string& run_id);
  core::Result<std::vector<LlmCall>> llm_calls(const std::string& run_id);

  // -- Memory lessons, bounded per target by StoreOptions::lesson_limit. Adding a text already
  // stored for the target refreshes it (newer time, stronger evidence kept) instead of duplicating.
  // When over the bound, lessons are evicted, never the one just added, in order of least value:
  // value = max(speedup, 1/speedup) (unknown counts as 1), ties broken by age (oldest first).
  core::Result<std::int64_t> add_lesson(const Lesson& lesson);
  // Newest first; empty target = all targets.
  core::Result<std::vector<Lesson>> lessons(const std::string& target, int limit = 16);
  // Returns how many were removed; empty target = all targets.
  core::Result<int> clear_lessons(const std::string& target);

  // -- Reflexions
  core::Result<std::int64_t> add_reflexion(const Reflexion& reflexion);
  // Newest first.
  core::Result<std::vector<Reflexion>> recent_reflexions(const std::string& scope, int limit = 5);

 private:
  struct Impl;
  explicit Store(std::unique_ptr<Impl> impl);
  static core::Result<std::unique_ptr<Store>> open_read_only(const std::string& path,
                                                             const StoreOptions& options);
  std::unique_ptr<Impl> m_impl;
};

}  // namespace autocomp::search::store
