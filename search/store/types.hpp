#pragma once

#include <cstdint>
#include <functional>
#include <optional>
#include <string>
#include <string_view>
#include <vector>

#include "backends/backend.hpp"
#include "search/llm/provider.hpp"
#include "search/prompts/reflexion_record.hpp"

// The values the store records, shared by its interfaces (evaluation_cache.hpp, file_history.hpp,
// run_journal.hpp, llm_call_log.hpp, memory.hpp) and by their callers. Times are milliseconds since
// the Unix epoch (UTC).
namespace autocomp::search::store {

struct StoreOptions {
  int busy_timeout_ms = 10000;
  // At most this many memory lessons are kept per target (see add_lesson for the policy).
  int lesson_limit = 16;
  // Open an existing database for reading only (e.g. on read-only media): nothing is created or
  // migrated, and every write fails with a message saying the store is read-only.
  bool read_only = false;
  // Called with the text of every statement the store runs, its parameters filled in (after the
  // migration at open). For measuring how a caller uses the store; empty in the product.
  std::function<void(std::string_view sql)> on_statement;
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

// Where an evaluation ran: with the request, this is what an evaluation is keyed by.
struct EvalSite {
  std::string backend_identity;
  std::string device;
  std::string harness_version;
  std::string input_signature;  // the inputs the problem produces there ("" = unknown)
};

// The site of `backend` (its identity, device and harness version; no input signature).
EvalSite site_of(const backends::Backend& backend);
// The key of `request` when run at `site` (hashes both sources).
EvalKey make_eval_key(const backends::EvalRequest& request, const EvalSite& site);
// "0,1,2" for {0,1,2}; "" for empty.
std::string canonical_seeds(const std::vector<int>& seeds);

struct StoredEvaluation {
  std::int64_t id = 0;
  EvalKey key;
  backends::EvalResult result;
  std::int64_t created_at_ms = 0;
};

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

// budget_exhausted: the run stopped at a budget (LLM calls, tokens, cost, wall time) and ended
// with the best kernel found so far; the status message names the budget.
enum class RunStatus { running, completed, budget_exhausted, cancelled, failed, interrupted };
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
  // The engine's other settings as one JSON object (e.g. {"repair_tries":2,"memory":true,...});
  // written and read by the engine in one place (engine/run_store.cpp). The fields above are not
  // repeated in it; the sources are the workload and candidate named by the keys above.
  std::string settings = "{}";
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
  // Where the candidate came from within the run (the engine's origin label, e.g.
  // "i2/m0/p3/k1/r0/llm"); "" when not known.
  std::string origin;
  CandidateStatus status = CandidateStatus::proposed;
  std::optional<std::int64_t> evaluation_id;
  std::optional<double> median_us;  // copied from the evaluation for quick listing
  bool correct = false;
  std::string note;  // e.g. why it was rejected
  std::int64_t created_at_ms = 0;
  std::int64_t updated_at_ms = 0;
};

// A child of a search iteration as the journal records it: its run row and its source (stored
// under row.candidate_key when the store does not hold it yet).
struct IterationChild {
  RunCandidate row;
  std::string source;
};

// Where a run stands after an iteration, for listings.
struct RunProgress {
  int iteration = 0;
  std::optional<std::string> best_candidate_key;
  std::optional<double> best_latency_us;
  std::optional<double> baseline_latency_us;  // absent: keep the stored one
};

// Everything one search iteration leaves in the journal, written in one transaction.
struct IterationRecord {
  int iteration = 0;
  std::vector<IterationChild> children;  // in origin order, each with its final status
  // The next generation, best first; absent for an unfinished iteration (a resumed run runs it
  // again), which records only its children.
  std::optional<std::vector<std::string>> beam;
  std::optional<RunProgress> progress;
};

// A beam as recorded after an iteration: member candidate keys, best first.
struct Beam {
  int iteration = 0;  // 0 = the initial beam
  std::vector<std::string> members;
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
  std::string origin;  // the engine's origin label of the child it was for ("" outside a search)
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

  long tokens() const { return input_tokens + output_tokens; }
};

// ---------------------------------------------------------------------------------------------
// Memory and reflexion

struct Lesson {
  std::int64_t id = 0;
  std::string target;
  std::string text;
  std::string kind;        // "improvement" | "regression" | "" (free form)
  std::string source_run;  // "" when not from a run
  // The workload it was learned on (a problem key; "" = unknown), so that prompts can tell
  // lessons from other workloads apart.
  std::string problem_key;
  double speedup = 0;    // evidence: child/parent speedup (>1 faster, <1 slower); 0 = unknown
  std::string evidence;  // free text, e.g. "abc123 -> def456, 41.2us -> 30.1us"
  std::int64_t created_at_ms = 0;
};

// A reflexion as stored: what one attempt taught (the fields of prompts::ReflexionRecord, so a
// stored one is handed to the prompts as it is) and where it belongs.
struct Reflexion : prompts::ReflexionRecord {
  std::int64_t id = 0;
  std::string scope;  // a run id or an absolute kernel path
  std::string candidate_key;
  std::int64_t created_at_ms = 0;
};

// ---------------------------------------------------------------------------------------------

}  // namespace autocomp::search::store
