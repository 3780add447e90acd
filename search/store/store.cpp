#include "search/store/store.hpp"

#include <signal.h>
#include <sqlite3.h>
#include <unistd.h>

#include <algorithm>
#include <array>
#include <cctype>
#include <cerrno>
#include <chrono>
#include <cmath>
#include <cstdlib>
#include <cstring>
#include <filesystem>
#include <limits>
#include <mutex>
#include <nlohmann/json.hpp>
#include <random>
#include <set>
#include <stdexcept>
#include <system_error>
#include <unordered_map>
#include <utility>

#include "backends/cacheable.hpp"
#include "core/hash.hpp"
#include "search/store/schema.hpp"

namespace autocomp::search::store {
namespace {

using json = nlohmann::json;
using core::FailureKind;

// Internal error carrier: thrown inside the store and turned into a Failure value at the public
// boundary (Store::Impl::guarded), never seen by callers.
class StoreError : public std::runtime_error {
 public:
  StoreError(FailureKind kind, const std::string& message)
      : std::runtime_error(message), m_kind(kind) {}
  FailureKind kind() const { return m_kind; }

 private:
  FailureKind m_kind;
};

[[noreturn]] void throw_sqlite(sqlite3* db, int rc, std::string_view context) {
  const int primary = rc & 0xff;
  const FailureKind kind =
      primary == SQLITE_CONSTRAINT ? FailureKind::invalid_argument : FailureKind::io_error;
  std::string message(context);
  message += ": ";
  message += db != nullptr ? sqlite3_errmsg(db) : sqlite3_errstr(rc);
  if ((rc & 0xff) == SQLITE_CONSTRAINT && rc == SQLITE_CONSTRAINT_FOREIGNKEY) {
    message += " (a referenced candidate, workload, run or evaluation is not stored)";
  }
  throw StoreError(kind, message);
}

std::int64_t now_ms() {
  return std::chrono::duration_cast<std::chrono::milliseconds>(
             std::chrono::system_clock::now().time_since_epoch())
      .count();
}

std::string this_host() {
  std::array<char, 256> name{};
  if (gethostname(name.data(), name.size() - 1) != 0) {
    return "localhost";
  }
  return std::string(name.data());
}

// A prepared statement borrowed from the connection's cache; reset on destruction so that it can
// be reused and holds no read lock.
class Stmt {
 public:
  Stmt(sqlite3* db, sqlite3_stmt* stmt) : m_db(db), m_stmt(stmt) {}
  ~Stmt() {
    sqlite3_reset(m_stmt);
    sqlite3_clear_bindings(m_stmt);
  }
  Stmt(const Stmt&) = delete;
  Stmt& operator=(const Stmt&) = delete;

  Stmt& bind(std::string_view value) {
    check(sqlite3_bind_text(m_stmt, ++m_index, value.data(), static_cast<int>(value.size()),
                            SQLITE_TRANSIENT));
    return *this;
  }
  Stmt& bind(const std::string& value) { return bind(std::string_view(value)); }
  Stmt& bind_blob(std::string_view value) {
    check(sqlite3_bind_blob(m_stmt, ++m_index, value.data(), static_cast<int>(value.size()),
                            SQLITE_TRANSIENT));
    return *this;
  }
  Stmt& bind(const char* value) { return bind(std::string_view(value)); }
  Stmt& bind(std::int64_t value) {
    check(sqlite3_bind_int64(m_stmt, ++m_index, value));
    return *this;
  }
  Stmt& bind(int value) { return bind(static_cast<std::int64_t>(value)); }
  Stmt& bind(bool value) { return bind(static_cast<std::int64_t>(value ? 1 : 0)); }
  Stmt& bind(double value) {
    check(sqlite3_bind_double(m_stmt, ++m_index, value));
    return *this;
  }
  Stmt& bind(std::nullopt_t) {
    check(sqlite3_bind_null(m_stmt, ++m_index));
    return *this;
  }
  template <class T>
  Stmt& bind(const std::optional<T>& value) {
    if (value.has_value()) {
      return bind(*value);
    }
    return bind(std::nullopt);
  }

  // True when a row is available, false when done; throws on error.
  bool step() {
    const int rc = sqlite3_step(m_stmt);
    if (rc == SQLITE_ROW) {
      return true;
    }
    if (rc == SQLITE_DONE) {
      return false;
    }
    throw_sqlite(m_db, sqlite3_extended_errcode(m_db), "step");
  }
  void run() {
    while (step()) {
    }
  }

  bool is_null(int col) const { return sqlite3_column_type(m_stmt, col) == SQLITE_NULL; }
  std::string text(int col) const {
    const auto* data = sqlite3_column_text(m_stmt, col);
    const int size = sqlite3_column_bytes(m_stmt, col);
    if (data == nullptr) {
      return {};
    }
    return std::string(reinterpret_cast<const char*>(data), static_cast<std::size_t>(size));
  }
  std::int64_t int64(int col) const { return sqlite3_column_int64(m_stmt, col); }
  std::vector<double> doubles(int col) const {
    const void* data = sqlite3_column_blob(m_stmt, col);
    const auto size = static_cast<std::size_t>(sqlite3_column_bytes(m_stmt, col));
    std::vector<double> out(size / sizeof(double));
    if (data != nullptr && !out.empty()) {
      std::memcpy(out.data(), data, out.size() * sizeof(double));
    }
    return out;
  }
  int integer(int col) const { return sqlite3_column_int(m_stmt, col); }
  double real(int col) const { return sqlite3_column_double(m_stmt, col); }
  std::optional<double> opt_real(int col) const {
    return is_null(col) ? std::nullopt : std::optional<double>(real(col));
  }
  std::optional<std::int64_t> opt_int64(int col) const {
    return is_null(col) ? std::nullopt : std::optional<std::int64_t>(int64(col));
  }
  std::optional<std::string> opt_text(int col) const {
    return is_null(col) ? std::nullopt : std::optional<std::string>(text(col));
  }

 private:
  void check(int rc) {
    if (rc != SQLITE_OK) {
      throw_sqlite(m_db, rc, "bind");
    }
  }

  sqlite3* m_db;
  sqlite3_stmt* m_stmt;
  int m_index = 0;
};

// JSON helpers for the text columns. Non-finite numbers are written as null and read back as NaN.
double json_number(const json& value) {
  return value.is_number() ? value.get<double>() : std::numeric_limits<double>::quiet_NaN();
}

std::string map_to_json(const std::map<std::string, double>& values) {
  json out = json::object();
  for (const auto& [name, value] : values) {
    out[name] = std::isfinite(value) ? json(value) : json(nullptr);
  }
  return out.dump(-1, ' ', false, json::error_handler_t::replace);
}

std::map<std::string, double> map_from_json(const std::string& text) {
  std::map<std::string, double> out;
  const json parsed = json::parse(text);
  for (const auto& [name, value] : parsed.items()) {
    out[name] = json_number(value);
  }
  return out;
}

std::string seeds_to_json(const std::vector<backends::SeedCheck>& seeds) {
  json out = json::array();
  for (const auto& seed : seeds) {
    out.push_back(
        {{"seed", seed.seed},
         {"ok", seed.ok},
         {"max_abs_err", std::isfinite(seed.max_abs_err) ? json(seed.max_abs_err) : json(nullptr)},
         {"rel_l2_err", std::isfinite(seed.rel_l2_err) ? json(seed.rel_l2_err) : json(nullptr)},
         {"message", seed.message}});
  }
  return out.dump(-1, ' ', false, json::error_handler_t::replace);
}

std::vector<backends::SeedCheck> seeds_from_json(const std::string& text) {
  std::vector<backends::SeedCheck> out;
  for (const auto& item : json::parse(text)) {
    backends::SeedCheck seed;
    seed.seed = item.value("seed", 0);
    seed.ok = item.value("ok", false);
    seed.max_abs_err = item.contains("max_abs_err") ? json_number(item["max_abs_err"]) : 0.0;
    seed.rel_l2_err = item.contains("rel_l2_err") ? json_number(item["rel_l2_err"]) : 0.0;
    seed.message = item.value("message", "");
    out.push_back(std::move(seed));
  }
  return out;
}

// Latency samples are a BLOB of IEEE-754 doubles in the host's byte order (little-endian on
// every supported platform): decoding them is a copy, which keeps cache hits cheap.
std::string_view samples_to_blob(const std::vector<double>& samples) {
  return std::string_view(reinterpret_cast<const char*>(samples.data()),
                          samples.size() * sizeof(double));
}

std::string steps_to_json(const std::vector<backends::StepTiming>& steps) {
  json out = json::array();
  for (const auto& step : steps) {
    out.push_back({{"step", step.step}, {"ms", std::isfinite(step.ms) ? json(step.ms) : json(0)}});
  }
  return out.dump(-1, ' ', false, json::error_handler_t::replace);
}

std::vector<backends::StepTiming> steps_from_json(const std::string& text) {
  std::vector<backends::StepTiming> out;
  for (const auto& item : json::parse(text)) {
    out.push_back({item.value("step", ""), json_number(item.value("ms", json(0)))});
  }
  return out;
}

std::string strings_to_json(const std::vector<std::string>& values) {
  return json(values).dump(-1, ' ', false, json::error_handler_t::replace);
}

std::vector<std::string> strings_from_json(const std::string& text) {
  return json::parse(text).get<std::vector<std::string>>();
}

// The harness subcommand names (PROTOCOL.md), as stored in evaluations.command.
std::string_view command_name(backends::EvalCommand command) {
  switch (command) {
    case backends::EvalCommand::verify:
      return "verify";
    case backends::EvalCommand::benchmark:
      return "benchmark";
    case backends::EvalCommand::profile:
      return "profile";
    case backends::EvalCommand::evaluate:
      return "evaluate";
    case backends::EvalCommand::signature:  // not an evaluation: never answered from the store
      return "signature";
  }
  return "evaluate";
}

std::optional<backends::EvalCommand> command_from_string(std::string_view name) {
  for (auto command : {backends::EvalCommand::verify, backends::EvalCommand::benchmark,
                       backends::EvalCommand::profile, backends::EvalCommand::evaluate}) {
    if (command_name(command) == name) {
      return command;
    }
  }
  return std::nullopt;
}

// Failures that say something about the kernel (or problem) itself: the one rule of
// backends/cacheable.hpp.
bool is_deterministic_failure(FailureKind kind) {
  return backends::is_deterministic_failure(kind);
}

// Failures after which no command can succeed on this candidate and problem.
bool fails_every_command(FailureKind kind) {
  return kind == FailureKind::compile_error || kind == FailureKind::problem_error;
}

std::string random_run_id() {
  static thread_local std::mt19937_64 generator{std::random_device{}() ^
                                                static_cast<std::uint64_t>(now_ms())};
  static constexpr char k_hex[] = "0123456789abcdef";
  std::uint64_t bits = generator();
  std::string id;
  for (int i = 0; i < 12; ++i) {
    id.push_back(k_hex[bits & 0xf]);
    bits >>= 4;
  }
  return id;
}

bool process_exists(int pid) {
  if (pid <= 0) {
    return false;
  }
  return kill(pid, 0) == 0 || errno == EPERM;
}

// The whole receipt of a result, as stored with it. The backend's view (identity, host) fills
// what the harness left empty.
std::string receipt_text(const backends::EvalResult& result) {
  const backends::Receipt& receipt = result.receipt;
  auto or_else = [](const std::string& value, const std::string& fallback) {
    return value.empty() ? fallback : value;
  };
  json out = {{"device", or_else(receipt.device, result.device)},
              {"target", or_else(receipt.target, result.target)},
              {"backend", or_else(receipt.backend, result.backend_identity)},
              {"host", or_else(receipt.host, result.host)},
              {"job", receipt.job},
              {"node", receipt.node},
              {"harness_version", or_else(receipt.harness_version, result.harness_version)},
              {"simulator_version", receipt.simulator_version},
              {"sdk", receipt.sdk},
              {"neff_hash", receipt.neff_hash},
              {"profile_format", receipt.profile_format},
              {"profile_schema", receipt.profile_schema},
              {"seeds", receipt.seeds},
              {"warmup", receipt.warmup},
              {"iters", receipt.iters},
              {"input_signature", or_else(receipt.input_signature, result.input_signature)}};
  return out.dump(-1, ' ', false, json::error_handler_t::replace);
}

backends::Receipt receipt_from_json(const std::string& text) {
  backends::Receipt receipt;
  json in = json::parse(text, nullptr, false);
  if (!in.is_object()) {
    return receipt;
  }
  auto text_of = [&in](const char* name) {
    auto it = in.find(name);
    return it != in.end() && it->is_string() ? it->get<std::string>() : std::string();
  };
  receipt.device = text_of("device");
  receipt.target = text_of("target");
  receipt.backend = text_of("backend");
  receipt.host = text_of("host");
  receipt.job = text_of("job");
  receipt.node = text_of("node");
  receipt.harness_version = text_of("harness_version");
  receipt.simulator_version = text_of("simulator_version");
  receipt.neff_hash = text_of("neff_hash");
  receipt.profile_format = text_of("profile_format");
  receipt.profile_schema = text_of("profile_schema");
  receipt.input_signature = text_of("input_signature");
  if (auto sdk = in.find("sdk"); sdk != in.end() && sdk->is_object()) {
    for (const auto& [name, version] : sdk->items()) {
      if (version.is_string()) {
        receipt.sdk[name] = version.get<std::string>();
      }
    }
  }
  if (auto seeds = in.find("seeds"); seeds != in.end() && seeds->is_array()) {
    for (const auto& seed : *seeds) {
      if (seed.is_number_integer()) {
        receipt.seeds.push_back(seed.get<int>());
      }
    }
  }
  receipt.warmup = in.value("warmup", 0);
  receipt.iters = in.value("iters", 0);
  return receipt;
}

constexpr std::string_view k_eval_columns =
    "id, candidate_key, problem_key, target, backend_identity, device, harness_version, command, "
    "kernel_name, seeds, warmup, iters, status, failure_kind, failure_stage, failure_message, "
    "failure_line, verified, correct, seed_checks, latency_min_us, latency_median_us, "
    "latency_max_us, latency_samples, metrics, roofline, bottleneck, result_device, result_target, "
    "result_backend, result_harness, host, steps, raw_json, created_at, input_signature, receipt";

StoredEvaluation read_evaluation(const Stmt& row) {
  StoredEvaluation out;
  out.id = row.int64(0);
  EvalKey& key = out.key;
  key.candidate_key = row.text(1);
  key.problem_key = row.text(2);
  key.target = row.text(3);
  key.backend_identity = row.text(4);
  key.device = row.text(5);
  key.harness_version = row.text(6);
  key.command = command_from_string(row.text(7)).value_or(backends::EvalCommand::evaluate);
  key.kernel_name = row.text(8);
  key.seeds = row.text(9);
  key.warmup = row.integer(10);
  key.iters = row.integer(11);
  backends::EvalResult& result = out.result;
  if (!row.is_null(13)) {
    core::Failure failure;
    failure.kind = core::failure_kind_from_string(row.text(13)).value_or(FailureKind::internal);
    failure.stage = row.text(14);
    failure.message = row.text(15);
    if (!row.is_null(16)) {
      failure.line = row.integer(16);
    }
    result.failure = std::move(failure);
  }
  result.verified = row.integer(17) != 0;
  result.correct = row.integer(18) != 0;
  result.seeds = seeds_from_json(row.text(19));
  if (!row.is_null(21)) {
    backends::LatencyStats latency;
    latency.min_us = row.real(20);
    latency.median_us = row.real(21);
    latency.max_us = row.real(22);
    if (!row.is_null(23)) {
      latency.samples_us = row.doubles(23);
    }
    result.latency = std::move(latency);
  }
  result.metrics = map_from_json(row.text(24));
  result.roofline = map_from_json(row.text(25));
  result.bottleneck = row.text(26);
  result.device = row.text(27);
  result.target = row.text(28);
  result.backend_identity = row.text(29);
  result.harness_version = row.text(30);
  result.host = row.text(31);
  result.steps = steps_from_json(row.text(32));
  result.raw_json = row.text(33);
  out.created_at_ms = row.int64(34);
  key.input_signature = row.text(35);
  result.receipt = receipt_from_json(row.text(36));
  result.input_signature = result.receipt.input_signature;
  return out;
}

constexpr std::string_view k_run_columns =
    "id, kernel_path, problem_path, problem_key, seed_candidate_key, target, backend, llm_specs, "
    "beam, plans, impls, iterations, dropout, rng_seed, max_llm_calls, max_tokens, max_cost_usd, "
    "max_wall_s, config_json, status, status_message, owner_pid, owner_host, created_at, "
    "updated_at, finished_at, iteration, best_candidate_key, best_latency_us, baseline_latency_us";

Run read_run(const Stmt& row) {
  Run run;
  run.id = row.text(0);
  RunConfig& config = run.config;
  config.kernel_path = row.text(1);
  config.problem_path = row.text(2);
  config.problem_key = row.text(3);
  config.seed_candidate_key = row.text(4);
  config.target = row.text(5);
  config.backend = row.text(6);
  config.llm_specs = strings_from_json(row.text(7));
  config.beam = row.integer(8);
  config.plans = row.integer(9);
  config.impls = row.integer(10);
  config.iterations = row.integer(11);
  config.dropout = row.real(12);
  config.rng_seed = std::strtoull(row.text(13).c_str(), nullptr, 10);
  if (!row.is_null(14)) {
    config.budgets.max_llm_calls = static_cast<long>(row.int64(14));
  }
  if (!row.is_null(15)) {
    config.budgets.max_tokens = static_cast<long>(row.int64(15));
  }
  config.budgets.max_cost_usd = row.opt_real(16);
  config.budgets.max_wall_s = row.opt_real(17);
  config.config_json = row.text(18);
  run.status = run_status_from_string(row.text(19)).value_or(RunStatus::interrupted);
  run.status_message = row.text(20);
  run.owner_pid = row.integer(21);
  run.owner_host = row.text(22);
  run.created_at_ms = row.int64(23);
  run.updated_at_ms = row.int64(24);
  run.finished_at_ms = row.opt_int64(25);
  run.iteration = row.integer(26);
  run.best_candidate_key = row.opt_text(27);
  run.best_latency_us = row.opt_real(28);
  run.baseline_latency_us = row.opt_real(29);
  return run;
}

constexpr std::string_view k_run_candidate_columns =
    "run_id, iteration, candidate_key, parent_key, plan_text, provider, status, evaluation_id, "
    "median_us, correct, note, created_at, updated_at";

RunCandidate read_run_candidate(const Stmt& row) {
  RunCandidate out;
  out.run_id = row.text(0);
  out.iteration = row.integer(1);
  out.candidate_key = row.text(2);
  out.parent_key = row.text(3);
  out.plan_text = row.text(4);
  out.provider = row.text(5);
  out.status = candidate_status_from_string(row.text(6)).value_or(CandidateStatus::proposed);
  out.evaluation_id = row.opt_int64(7);
  out.median_us = row.opt_real(8);
  out.correct = row.integer(9) != 0;
  out.note = row.text(10);
  out.created_at_ms = row.int64(11);
  out.updated_at_ms = row.int64(12);
  return out;
}

constexpr std::string_view k_llm_columns =
    "run_id, request_hash, purpose, provider, prompt, response, input_tokens, output_tokens, "
    "cost_usd, latency_ms, attempts, created_at";

LlmCall read_llm_call(const Stmt& row) {
  LlmCall call;
  call.run_id = row.text(0);
  call.request_hash = row.text(1);
  call.purpose = row.text(2);
  call.provider = row.text(3);
  call.prompt = row.text(4);
  call.response = row.text(5);
  call.usage.input_tokens = static_cast<long>(row.int64(6));
  call.usage.output_tokens = static_cast<long>(row.int64(7));
  call.usage.cost_usd = row.real(8);
  call.latency_ms = row.real(9);
  call.attempts = row.integer(10);
  call.created_at_ms = row.int64(11);
  return call;
}

std::optional<bool> opt_bool(const Stmt& row, int col) {
  return row.is_null(col) ? std::nullopt : std::optional<bool>(row.integer(col) != 0);
}

std::optional<std::int64_t> opt_bool_as_int(std::optional<bool> value) {
  if (!value.has_value()) {
    return std::nullopt;
  }
  return *value ? 1 : 0;
}

double lesson_value(double speedup) {
  if (!(speedup > 0) || !std::isfinite(speedup)) {
    return 1.0;
  }
  return std::max(speedup, 1.0 / speedup);
}

}  // namespace

// ---------------------------------------------------------------------------------------------

std::string canonical_seeds(const std::vector<int>& seeds) {
  std::string out;
  for (std::size_t i = 0; i < seeds.size(); ++i) {
    if (i > 0) {
      out.push_back(',');
    }
    out += std::to_string(seeds[i]);
  }
  return out;
}

EvalKey make_eval_key(const backends::EvalRequest& request, std::string backend_identity,
                      std::string device, std::string harness_version) {
  EvalKey key;
  key.candidate_key = core::source_key(request.kernel_source);
  key.problem_key = core::source_key(request.problem_source);
  key.target = request.target;
  key.backend_identity = std::move(backend_identity);
  key.device = std::move(device);
  key.harness_version = std::move(harness_version);
  key.command = request.command;
  key.kernel_name = request.kernel_name;
  key.seeds = canonical_seeds(request.seeds);
  key.warmup = request.warmup;
  key.iters = request.iters;
  return key;
}

EvalKey make_eval_key(const backends::EvalRequest& request, const backends::Backend& backend) {
  return make_eval_key(request, backend.identity(), backend.device(), backend.harness_version());
}

std::string receipt_to_json(const backends::EvalResult& result) {
  return receipt_text(result);
}

bool is_cacheable(const backends::EvalResult& result) {
  return !result.failure.has_value() || is_deterministic_failure(result.failure->kind);
}

namespace {
constexpr std::array<std::pair<RunStatus, std::string_view>, 5> k_run_status_names{{
    {RunStatus::running, "running"},
    {RunStatus::completed, "completed"},
    {RunStatus::cancelled, "cancelled"},
    {RunStatus::failed, "failed"},
    {RunStatus::interrupted, "interrupted"},
}};
constexpr std::array<std::pair<CandidateStatus, std::string_view>, 6> k_candidate_status_names{{
    {CandidateStatus::proposed, "proposed"},
    {CandidateStatus::evaluated, "evaluated"},
    {CandidateStatus::accepted, "accepted"},
    {CandidateStatus::rejected, "rejected"},
    {CandidateStatus::failed, "failed"},
    {CandidateStatus::duplicate, "duplicate"},
}};
}  // namespace

std::string_view to_string(RunStatus status) {
  for (const auto& [value, name] : k_run_status_names) {
    if (value == status) {
      return name;
    }
  }
  return "failed";
}

std::optional<RunStatus> run_status_from_string(std::string_view name) {
  for (const auto& [value, n] : k_run_status_names) {
    if (n == name) {
      return value;
    }
  }
  return std::nullopt;
}

std::string_view to_string(CandidateStatus status) {
  for (const auto& [value, name] : k_candidate_status_names) {
    if (value == status) {
      return name;
    }
  }
  return "proposed";
}

std::optional<CandidateStatus> candidate_status_from_string(std::string_view name) {
  for (const auto& [value, n] : k_candidate_status_names) {
    if (n == name) {
      return value;
    }
  }
  return std::nullopt;
}

// ---------------------------------------------------------------------------------------------

struct Store::Impl {
  std::string path;
  StoreOptions options;
  sqlite3* db = nullptr;
  std::mutex mutex;
  std::unordered_map<std::string, sqlite3_stmt*> statements;
  std::string host = this_host();
  bool read_only = false;

  ~Impl() {
    for (auto& [sql, stmt] : statements) {
      sqlite3_finalize(stmt);
    }
    if (db != nullptr) {
      sqlite3_close(db);
    }
  }

  Stmt prepare(std::string_view sql) {
    auto it = statements.find(std::string(sql));
    if (it == statements.end()) {
      sqlite3_stmt* stmt = nullptr;
      const int rc = sqlite3_prepare_v3(db, sql.data(), static_cast<int>(sql.size()),
                                        SQLITE_PREPARE_PERSISTENT, &stmt, nullptr);
      if (rc != SQLITE_OK) {
        throw_sqlite(db, rc, "prepare");
      }
      it = statements.emplace(std::string(sql), stmt).first;
    }
    return Stmt(db, it->second);
  }

  void exec(std::string_view sql) {
    const std::string text(sql);
    char* error = nullptr;
    const int rc = sqlite3_exec(db, text.c_str(), nullptr, nullptr, &error);
    if (rc != SQLITE_OK) {
      std::string message = error != nullptr ? error : sqlite3_errstr(rc);
      sqlite3_free(error);
      throw StoreError(
          (rc & 0xff) == SQLITE_CONSTRAINT ? FailureKind::invalid_argument : FailureKind::io_error,
          message);
    }
  }

  // Runs `body` in one write transaction (BEGIN IMMEDIATE, so that a busy database is waited for
  // up front rather than failing at the first write); rolls back when it throws.
  template <class F>
  auto transaction(F&& body) -> decltype(body()) {
    exec("BEGIN IMMEDIATE");
    try {
      if constexpr (std::is_void_v<decltype(body())>) {
        body();
        exec("COMMIT");
      } else {
        auto value = body();
        exec("COMMIT");
        return value;
      }
    } catch (...) {
      sqlite3_exec(db, "ROLLBACK", nullptr, nullptr, nullptr);
      throw;
    }
  }

  // Serialises access and converts internal errors into failure values.
  template <class F>
  auto guarded(std::string_view what, F&& body) -> core::Result<decltype(body())> {
    std::lock_guard<std::mutex> lock(mutex);
    try {
      return body();
    } catch (const StoreError& error) {
      if (read_only && std::string_view(error.what()).find("readonly") != std::string_view::npos) {
        return core::make_failure(
            FailureKind::io_error, "store",
            std::string(what) + ": the store " + path +
                " is open read-only (it could not be opened for writing), so nothing can be "
                "recorded; reading tools still work. Make it writable or choose another "
                "database with --db");
      }
      return core::make_failure(error.kind(), "store",
                                std::string(what) + " (" + path + "): " + error.what());
    } catch (const json::exception& error) {
      return core::make_failure(
          FailureKind::io_error, "store",
          std::string(what) + " (" + path + "): malformed stored data: " + error.what());
    }
  }

  void require_run(const std::string& run_id) {
    auto stmt = prepare("SELECT 1 FROM runs WHERE id = ?");
    stmt.bind(run_id);
    if (!stmt.step()) {
      throw StoreError(FailureKind::invalid_argument, "no run with id '" + run_id + "'");
    }
  }

  std::optional<StoredEvaluation> evaluation_by_id(std::int64_t id) {
    auto stmt = prepare("SELECT " + std::string(k_eval_columns) + " FROM evaluations WHERE id = ?");
    stmt.bind(id);
    if (!stmt.step()) {
      return std::nullopt;
    }
    return read_evaluation(stmt);
  }

  std::optional<RunCandidate> run_candidate(const std::string& run_id, const std::string& key) {
    auto stmt = prepare("SELECT " + std::string(k_run_candidate_columns) +
                        " FROM run_candidates WHERE run_id = ? AND candidate_key = ?");
    stmt.bind(run_id).bind(key);
    if (!stmt.step()) {
      return std::nullopt;
    }
    return read_run_candidate(stmt);
  }

  void migrate() {
    auto version = [&] {
      auto stmt = prepare("PRAGMA user_version");
      stmt.step();
      return stmt.integer(0);
    };
    const auto& steps = migrations();
    const int latest = steps.empty() ? 0 : steps.back().version;
    if (version() > latest) {
      throw StoreError(FailureKind::invalid_argument,
                       "the database has schema version " + std::to_string(version()) +
                           ", newer than this autocomp-mcp understands (" + std::to_string(latest) +
                           "); upgrade autocomp-mcp or choose another database with --db");
    }
    for (const auto& step : steps) {
      // Re-read inside the transaction: another process may have migrated meanwhile.
      transaction([&] {
        if (version() >= step.version) {
          return;
        }
        exec(step.sql);
        exec("PRAGMA user_version = " + std::to_string(step.version));
      });
    }
  }
};

Store::Store(std::unique_ptr<Impl> impl) : m_impl(std::move(impl)) {}
Store::~Store() = default;

const std::string& Store::path() const {
  return m_impl->path;
}

bool Store::read_only() const {
  return m_impl->read_only;
}

int Store::schema_version() {
  const auto& steps = migrations();
  return steps.empty() ? 0 : steps.back().version;
}

std::string Store::default_path() {
  namespace fs = std::filesystem;
  fs::path base;
  if (const char* xdg = std::getenv("XDG_DATA_HOME"); xdg != nullptr && xdg[0] == '/') {
    base = xdg;
  } else if (const char* home = std::getenv("HOME"); home != nullptr && home[0] != '\0') {
    base = fs::path(home) / ".local" / "share";
  } else {
    base = fs::current_path();
  }
  return (base / "autocomp-mcp" / "autocomp.db").string();
}

core::Result<std::unique_ptr<Store>> Store::open_read_only(const std::string& path,
                                                           const StoreOptions& options) {
  namespace fs = std::filesystem;
  std::error_code error;
  if (path == ":memory:" || !fs::is_regular_file(path, error)) {
    return core::make_failure(FailureKind::io_error, "store",
                              "cannot open database " + path + " read-only: no such file");
  }
  auto impl = std::make_unique<Impl>();
  impl->path = path;
  impl->options = options;
  impl->read_only = true;
  // immutable=1: the media cannot change under us, so no lock or -shm file is needed (a read-only
  // folder cannot hold one).
  std::string uri = "file:";
  static constexpr char k_hex[] = "0123456789ABCDEF";
  for (unsigned char c : fs::absolute(path, error).string()) {
    if (std::isalnum(c) != 0 || c == '/' || c == '.' || c == '-' || c == '_' || c == '~') {
      uri.push_back(static_cast<char>(c));
    } else {
      uri += {'%', k_hex[c >> 4], k_hex[c & 0xf]};
    }
  }
  uri += "?immutable=1";
  const int rc =
      sqlite3_open_v2(uri.c_str(), &impl->db,
                      SQLITE_OPEN_READONLY | SQLITE_OPEN_URI | SQLITE_OPEN_NOMUTEX, nullptr);
  if (rc != SQLITE_OK) {
    std::string message = impl->db != nullptr ? sqlite3_errmsg(impl->db) : sqlite3_errstr(rc);
    return core::make_failure(FailureKind::io_error, "store",
                              "cannot open database " + path + " read-only: " + message);
  }
  sqlite3_extended_result_codes(impl->db, 1);
  Impl& self = *impl;
  auto ready = self.guarded("open", [&] {
    auto stmt = self.prepare("PRAGMA user_version");
    stmt.step();
    const int version = stmt.integer(0);
    if (version > schema_version()) {
      throw StoreError(FailureKind::invalid_argument,
                       "the database has schema version " + std::to_string(version) +
                           ", newer than this autocomp-mcp understands (" +
                           std::to_string(schema_version()) + ")");
    }
    if (version < schema_version()) {
      throw StoreError(FailureKind::io_error,
                       "the database has schema version " + std::to_string(version) +
                           " and cannot be upgraded to " + std::to_string(schema_version()) +
                           " while it is read-only");
    }
    return core::Unit{};
  });
  if (!ready) {
    core::Failure failure = ready.failure();
    failure.message = "cannot open database read-only: " + failure.message;
    return failure;
  }
  return std::unique_ptr<Store>(new Store(std::move(impl)));
}

core::Result<std::unique_ptr<Store>> Store::open(const std::string& path,
                                                 const StoreOptions& options) {
  namespace fs = std::filesystem;
  if (path.empty()) {
    return core::make_failure(FailureKind::invalid_argument, "store", "empty database path");
  }
  const bool in_memory = path == ":memory:";
  if (options.read_only) {
    return open_read_only(path, options);
  }
  if (!in_memory) {
    const fs::path parent = fs::path(path).parent_path();
    if (!parent.empty()) {
      std::error_code error;
      fs::create_directories(parent, error);
      if (error) {
        return core::make_failure(
            FailureKind::io_error, "store",
            "cannot create folder " + parent.string() + ": " + error.message());
      }
    }
  }
  auto impl = std::make_unique<Impl>();
  impl->path = path;
  impl->options = options;
  const int rc =
      sqlite3_open_v2(path.c_str(), &impl->db,
                      SQLITE_OPEN_READWRITE | SQLITE_OPEN_CREATE | SQLITE_OPEN_NOMUTEX, nullptr);
  if (rc != SQLITE_OK) {
    std::string message = impl->db != nullptr ? sqlite3_errmsg(impl->db) : sqlite3_errstr(rc);
    return core::make_failure(FailureKind::io_error, "store",
                              "cannot open database " + path + ": " + message);
  }
  sqlite3_extended_result_codes(impl->db, 1);
  sqlite3_busy_timeout(impl->db, options.busy_timeout_ms);
  Impl& self = *impl;
  auto ready = self.guarded("open", [&] {
    // Reading the header first turns "not a database" into a clear error.
    self.exec("PRAGMA user_version");
    if (!in_memory) {
      auto stmt = self.prepare("PRAGMA journal_mode = WAL");
      stmt.step();
      const std::string mode = stmt.text(0);
      if (mode != "wal") {
        throw StoreError(FailureKind::io_error, "cannot switch to WAL journal mode (got " + mode +
                                                    "); is the folder on a network file system?");
      }
    }
    // NORMAL in WAL mode: a commit survives the process being killed; only a power loss can
    // roll back the last transactions (the database itself stays consistent).
    self.exec("PRAGMA synchronous = NORMAL");
    self.exec("PRAGMA foreign_keys = ON");
    // Up to 32 MB of pages per connection (allocated as used): cache hits then rarely read the
    // file, which keeps their latency low when the database grows to tens of MB.
    self.exec("PRAGMA cache_size = -32000");
    self.migrate();
    return core::Unit{};
  });
  if (!ready) {
    core::Failure failure = ready.failure();
    failure.message = "cannot open database: " + failure.message;
    return failure;
  }
  return std::unique_ptr<Store>(new Store(std::move(impl)));
}

// -- Workloads and candidates ------------------------------------------------------------------

core::Result<std::string> Store::put_workload(std::string_view problem_source,
                                              std::string_view problem_path) {
  const std::string key = core::source_key(problem_source);
  return m_impl->guarded("put_workload", [&] {
    auto stmt = m_impl->prepare(
        "INSERT INTO workloads (problem_key, source, path, created_at) VALUES (?, ?, ?, ?) "
        "ON CONFLICT (problem_key) DO UPDATE SET path = excluded.path "
        "WHERE excluded.path != '' AND excluded.path != workloads.path");
    stmt.bind(key).bind(problem_source).bind(problem_path).bind(now_ms());
    stmt.run();
    return key;
  });
}

core::Result<std::optional<Workload>> Store::get_workload(const std::string& problem_key) {
  return m_impl->guarded("get_workload", [&]() -> std::optional<Workload> {
    auto stmt = m_impl->prepare(
        "SELECT problem_key, source, path, created_at FROM workloads WHERE problem_key = ?");
    stmt.bind(problem_key);
    if (!stmt.step()) {
      return std::nullopt;
    }
    return Workload{stmt.text(0), stmt.text(1), stmt.text(2), stmt.int64(3)};
  });
}

core::Result<std::string> Store::put_candidate(std::string_view source, std::string_view origin) {
  const std::string key = core::source_key(source);
  return m_impl->guarded("put_candidate", [&] {
    auto stmt = m_impl->prepare(
        "INSERT INTO candidates (key, source, origin, created_at) VALUES (?, ?, ?, ?) "
        "ON CONFLICT (key) DO NOTHING");
    stmt.bind(key).bind(source).bind(origin).bind(now_ms());
    stmt.run();
    return key;
  });
}

core::Result<std::optional<Candidate>> Store::get_candidate(const std::string& key) {
  return m_impl->guarded("get_candidate", [&]() -> std::optional<Candidate> {
    auto stmt =
        m_impl->prepare("SELECT key, source, origin, created_at FROM candidates WHERE key = ?");
    stmt.bind(key);
    if (!stmt.step()) {
      return std::nullopt;
    }
    return Candidate{stmt.text(0), stmt.text(1), stmt.text(2), stmt.int64(3)};
  });
}

// -- Evaluations -------------------------------------------------------------------------------

core::Result<std::int64_t> Store::put_evaluation(const EvalKey& key,
                                                 const backends::EvalResult& result) {
  return m_impl->guarded("put_evaluation", [&] {
    auto stmt = m_impl->prepare(
        "INSERT INTO evaluations (candidate_key, problem_key, target, backend_identity, device, "
        "harness_version, command, kernel_name, seeds, warmup, iters, cacheable, status, "
        "failure_kind, failure_stage, failure_message, failure_line, verified, correct, "
        "seed_checks, latency_min_us, latency_median_us, latency_max_us, latency_samples, "
        "has_profile, metrics, roofline, bottleneck, result_device, result_target, "
        "result_backend, result_harness, host, steps, raw_json, created_at, input_signature, "
        "receipt) VALUES (?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?, "
        "?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?)");
    stmt.bind(key.candidate_key)
        .bind(key.problem_key)
        .bind(key.target)
        .bind(key.backend_identity)
        .bind(key.device)
        .bind(key.harness_version)
        .bind(command_name(key.command))
        .bind(key.kernel_name)
        .bind(key.seeds)
        .bind(key.warmup)
        .bind(key.iters)
        .bind(is_cacheable(result))
        .bind(result.failure ? "failed" : "ok");
    if (result.failure) {
      stmt.bind(core::to_string(result.failure->kind))
          .bind(result.failure->stage)
          .bind(result.failure->message)
          .bind(result.failure->line);
    } else {
      stmt.bind(std::nullopt).bind(std::nullopt).bind(std::nullopt).bind(std::nullopt);
    }
    stmt.bind(result.verified).bind(result.correct).bind(seeds_to_json(result.seeds));
    if (result.latency) {
      stmt.bind(result.latency->min_us)
          .bind(result.latency->median_us)
          .bind(result.latency->max_us)
          .bind_blob(samples_to_blob(result.latency->samples_us));
    } else {
      stmt.bind(std::nullopt).bind(std::nullopt).bind(std::nullopt).bind(std::nullopt);
    }
    const bool has_profile =
        !result.metrics.empty() || !result.roofline.empty() || !result.bottleneck.empty();
    stmt.bind(has_profile)
        .bind(map_to_json(result.metrics))
        .bind(map_to_json(result.roofline))
        .bind(result.bottleneck)
        .bind(result.device)
        .bind(result.target)
        .bind(result.backend_identity)
        .bind(result.harness_version)
        .bind(result.host)
        .bind(steps_to_json(result.steps))
        .bind(result.raw_json)
        .bind(now_ms())
        .bind(key.input_signature)
        .bind(receipt_text(result));
    stmt.run();
    return static_cast<std::int64_t>(sqlite3_last_insert_rowid(m_impl->db));
  });
}

core::Result<std::optional<StoredEvaluation>> Store::get_evaluation(std::int64_t id) {
  return m_impl->guarded("get_evaluation", [&] { return m_impl->evaluation_by_id(id); });
}

core::Result<std::optional<StoredEvaluation>> Store::find_evaluation(const EvalKey& key) {
  return m_impl->guarded("find_evaluation", [&]() -> std::optional<StoredEvaluation> {
    auto stmt = m_impl->prepare(
        "SELECT id FROM evaluations WHERE candidate_key = ? AND problem_key = ? AND target = ? "
        "AND backend_identity = ? AND device = ? AND harness_version = ? AND input_signature = ? "
        "AND kernel_name = ? AND seeds = ? AND command = ? AND warmup = ? AND iters = ? AND "
        "cacheable = 1 ORDER BY id DESC LIMIT 1");
    stmt.bind(key.candidate_key)
        .bind(key.problem_key)
        .bind(key.target)
        .bind(key.backend_identity)
        .bind(key.device)
        .bind(key.harness_version)
        .bind(key.input_signature)
        .bind(key.kernel_name)
        .bind(key.seeds)
        .bind(command_name(key.command))
        .bind(key.warmup)
        .bind(key.iters);
    if (!stmt.step()) {
      return std::nullopt;
    }
    const std::int64_t id = stmt.int64(0);
    return m_impl->evaluation_by_id(id);
  });
}

core::Result<std::optional<StoredEvaluation>> Store::find_covering_evaluation(const EvalKey& key) {
  using backends::EvalCommand;
  return m_impl->guarded("find_covering_evaluation", [&]() -> std::optional<StoredEvaluation> {
    auto stmt = m_impl->prepare(
        "SELECT id, command, warmup, iters, failure_kind, latency_median_us IS NOT NULL, "
        "has_profile FROM evaluations WHERE candidate_key = ? AND problem_key = ? AND target = ? "
        "AND backend_identity = ? AND device = ? AND harness_version = ? AND input_signature = ? "
        "AND kernel_name = ? AND seeds = ? AND cacheable = 1 ORDER BY id DESC");
    stmt.bind(key.candidate_key)
        .bind(key.problem_key)
        .bind(key.target)
        .bind(key.backend_identity)
        .bind(key.device)
        .bind(key.harness_version)
        .bind(key.input_signature)
        .bind(key.kernel_name)
        .bind(key.seeds);
    std::optional<std::int64_t> found;
    while (!found && stmt.step()) {
      const auto stored = command_from_string(stmt.text(1));
      if (!stored) {
        continue;
      }
      const bool same_timing = stmt.integer(2) == key.warmup && stmt.integer(3) == key.iters;
      const std::optional<FailureKind> failure =
          stmt.is_null(4) ? std::nullopt : core::failure_kind_from_string(stmt.text(4));
      const bool has_latency = stmt.integer(5) != 0;
      const bool has_profile = stmt.integer(6) != 0;
      bool covers = false;
      if (failure && fails_every_command(*failure)) {
        covers = true;
      } else {
        switch (key.command) {
          case EvalCommand::verify:
            covers = *stored == EvalCommand::verify || *stored == EvalCommand::evaluate;
            break;
          case EvalCommand::benchmark:
            covers = same_timing && (*stored == EvalCommand::benchmark ||
                                     (*stored == EvalCommand::evaluate && has_latency));
            break;
          case EvalCommand::profile:
            covers = *stored == EvalCommand::profile ||
                     (*stored == EvalCommand::evaluate && has_profile);
            break;
          case EvalCommand::evaluate:
            covers = (*stored == EvalCommand::evaluate && same_timing) ||
                     (*stored == EvalCommand::verify && failure.has_value());
            break;
          case EvalCommand::signature:
            covers = false;
            break;
        }
      }
      if (covers) {
        found = stmt.int64(0);
      }
    }
    if (!found) {
      return std::nullopt;
    }
    const std::int64_t id = *found;
    return m_impl->evaluation_by_id(id);
  });
}

core::Result<std::vector<StoredEvaluation>> Store::evaluations_for_candidate(
    const std::string& candidate_key, int limit) {
  return m_impl->guarded("evaluations_for_candidate", [&] {
    std::vector<std::int64_t> ids;
    {
      auto stmt = m_impl->prepare(
          "SELECT id FROM evaluations WHERE candidate_key = ? ORDER BY id DESC LIMIT ?");
      stmt.bind(candidate_key).bind(limit);
      while (stmt.step()) {
        ids.push_back(stmt.int64(0));
      }
    }
    std::vector<StoredEvaluation> out;
    for (std::int64_t id : ids) {
      if (auto evaluation = m_impl->evaluation_by_id(id)) {
        out.push_back(std::move(*evaluation));
      }
    }
    return out;
  });
}

// -- Kernel files ------------------------------------------------------------------------------

core::Status Store::record_file_version(const std::string& abs_path,
                                        const std::string& candidate_key,
                                        const std::string& problem_key, const std::string& target) {
  return m_impl->guarded("record_file_version", [&] {
    auto stmt = m_impl->prepare(
        "INSERT INTO file_versions (path, candidate_key, problem_key, target, recorded_at, seq) "
        "VALUES (?1, ?2, ?3, ?4, ?5, (SELECT coalesce(max(seq), 0) + 1 FROM file_versions "
        "WHERE path = ?1)) "
        "ON CONFLICT (path, candidate_key, problem_key, target) DO UPDATE "
        "SET recorded_at = excluded.recorded_at, seq = excluded.seq");
    stmt.bind(abs_path).bind(candidate_key).bind(problem_key).bind(target).bind(now_ms());
    stmt.run();
    return core::Unit{};
  });
}

core::Result<std::vector<FileVersion>> Store::file_versions(const std::string& abs_path,
                                                            int limit) {
  return m_impl->guarded("file_versions", [&] {
    auto stmt = m_impl->prepare(
        "SELECT id, path, candidate_key, problem_key, target, recorded_at FROM file_versions "
        "WHERE path = ? ORDER BY seq DESC LIMIT ?");
    stmt.bind(abs_path).bind(limit);
    std::vector<FileVersion> out;
    while (stmt.step()) {
      out.push_back(FileVersion{stmt.int64(0), stmt.text(1), stmt.text(2), stmt.text(3),
                                stmt.text(4), stmt.int64(5)});
    }
    return out;
  });
}

namespace {
// The qualifying evaluations of a set of candidates (correct, no failure, a latency) on one
// problem and target. When no backend is named, the backend of the newest qualifying evaluation
// is used, so that simulated and measured latencies are never compared with each other.
constexpr std::string_view k_best_select =
    "SELECT e.id, e.candidate_key, c.source, e.latency_median_us, e.backend_identity, e.device, "
    "e.created_at FROM evaluations e JOIN candidates c ON c.key = e.candidate_key ";
constexpr std::string_view k_best_where =
    " AND e.correct = 1 AND e.failure_kind IS NULL AND e.latency_median_us IS NOT NULL ";

BestVersion read_best(const Stmt& row) {
  BestVersion best;
  best.evaluation_id = row.int64(0);
  best.candidate_key = row.text(1);
  best.source = row.text(2);
  best.median_us = row.real(3);
  best.backend_identity = row.text(4);
  best.device = row.text(5);
  best.evaluated_at_ms = row.int64(6);
  return best;
}
}  // namespace

core::Result<std::optional<BestVersion>> Store::best_for_file(const std::string& abs_path,
                                                              const std::string& problem_key,
                                                              const std::string& target,
                                                              const std::string& backend_identity) {
  return m_impl->guarded("best_for_file", [&]() -> std::optional<BestVersion> {
    const std::string from =
        std::string(k_best_select) +
        "JOIN file_versions f ON f.candidate_key = e.candidate_key AND f.problem_key = "
        "e.problem_key AND f.target = e.target WHERE f.path = ? AND f.problem_key = ? AND "
        "f.target = ?" +
        std::string(k_best_where);
    std::string backend = backend_identity;
    if (backend.empty()) {
      auto newest = m_impl->prepare(from + "ORDER BY e.id DESC LIMIT 1");
      newest.bind(abs_path).bind(problem_key).bind(target);
      if (!newest.step()) {
        return std::nullopt;
      }
      backend = newest.text(4);
    }
    auto stmt = m_impl->prepare(from +
                                "AND e.backend_identity = ? ORDER BY e.latency_median_us ASC, "
                                "e.id DESC LIMIT 1");
    stmt.bind(abs_path).bind(problem_key).bind(target).bind(backend);
    if (!stmt.step()) {
      return std::nullopt;
    }
    return read_best(stmt);
  });
}

core::Result<std::optional<BestVersion>> Store::best_for_run(const std::string& run_id) {
  return m_impl->guarded("best_for_run", [&]() -> std::optional<BestVersion> {
    m_impl->require_run(run_id);
    // The evaluations the run itself used, as linked from its candidates.
    const std::string from = std::string(k_best_select) +
                             "JOIN run_candidates r ON r.evaluation_id = e.id WHERE r.run_id = ?" +
                             std::string(k_best_where);
    auto stmt = m_impl->prepare(from + "ORDER BY e.latency_median_us ASC, e.id DESC LIMIT 1");
    stmt.bind(run_id);
    if (!stmt.step()) {
      return std::nullopt;
    }
    return read_best(stmt);
  });
}

// -- Runs --------------------------------------------------------------------------------------

core::Result<std::string> Store::create_run(const RunConfig& config) {
  return m_impl->guarded("create_run", [&] {
    return m_impl->transaction([&] {
      std::string id;
      for (int attempt = 0;; ++attempt) {
        id = random_run_id();
        auto exists = m_impl->prepare("SELECT 1 FROM runs WHERE id = ?");
        exists.bind(id);
        if (!exists.step()) {
          break;
        }
        if (attempt > 16) {
          throw StoreError(FailureKind::internal, "cannot draw an unused run id");
        }
      }
      const std::int64_t now = now_ms();
      auto stmt = m_impl->prepare(
          "INSERT INTO runs (id, kernel_path, problem_path, problem_key, seed_candidate_key, "
          "target, backend, llm_specs, beam, plans, impls, iterations, dropout, rng_seed, "
          "max_llm_calls, max_tokens, max_cost_usd, max_wall_s, config_json, status, "
          "status_message, owner_pid, owner_host, created_at, updated_at) VALUES (?, ?, ?, ?, ?, "
          "?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?, 'running', '', ?, ?, ?, ?)");
      stmt.bind(id)
          .bind(config.kernel_path)
          .bind(config.problem_path)
          .bind(config.problem_key)
          .bind(config.seed_candidate_key)
          .bind(config.target)
          .bind(config.backend)
          .bind(strings_to_json(config.llm_specs))
          .bind(config.beam)
          .bind(config.plans)
          .bind(config.impls)
          .bind(config.iterations)
          .bind(config.dropout)
          .bind(std::to_string(config.rng_seed));
      if (config.budgets.max_llm_calls) {
        stmt.bind(static_cast<std::int64_t>(*config.budgets.max_llm_calls));
      } else {
        stmt.bind(std::nullopt);
      }
      if (config.budgets.max_tokens) {
        stmt.bind(static_cast<std::int64_t>(*config.budgets.max_tokens));
      } else {
        stmt.bind(std::nullopt);
      }
      stmt.bind(config.budgets.max_cost_usd)
          .bind(config.budgets.max_wall_s)
          .bind(config.config_json)
          .bind(static_cast<int>(getpid()))
          .bind(m_impl->host)
          .bind(now)
          .bind(now);
      stmt.run();
      return id;
    });
  });
}

core::Result<std::optional<Run>> Store::get_run(const std::string& run_id) {
  return m_impl->guarded("get_run", [&]() -> std::optional<Run> {
    {
      auto stmt =
          m_impl->prepare("SELECT " + std::string(k_run_columns) + " FROM runs WHERE id = ?");
      stmt.bind(run_id);
      if (stmt.step()) {
        return read_run(stmt);
      }
    }
    if (run_id.size() < 4 || run_id.size() >= 12 ||
        run_id.find_first_not_of("0123456789abcdef") != std::string::npos) {
      return std::nullopt;
    }
    auto stmt = m_impl->prepare("SELECT " + std::string(k_run_columns) +
                                " FROM runs WHERE substr(id, 1, length(?1)) = ?1 LIMIT 2");
    stmt.bind(run_id);
    if (!stmt.step()) {
      return std::nullopt;
    }
    Run run = read_run(stmt);
    if (stmt.step()) {
      throw StoreError(FailureKind::invalid_argument,
                       "run id prefix '" + run_id + "' is ambiguous; give more characters");
    }
    return run;
  });
}

core::Result<std::vector<Run>> Store::list_runs(int limit) {
  return m_impl->guarded("list_runs", [&] {
    auto stmt = m_impl->prepare("SELECT " + std::string(k_run_columns) +
                                " FROM runs ORDER BY created_at DESC, rowid DESC LIMIT ?");
    stmt.bind(limit);
    std::vector<Run> out;
    while (stmt.step()) {
      out.push_back(read_run(stmt));
    }
    return out;
  });
}

core::Status Store::set_run_status(const std::string& run_id, RunStatus status,
                                   const std::string& message) {
  return m_impl->guarded("set_run_status", [&] {
    const std::int64_t now = now_ms();
    const bool finished = status != RunStatus::running;
    auto stmt = m_impl->prepare(
        "UPDATE runs SET status = ?, status_message = ?, updated_at = ?, finished_at = ? "
        "WHERE id = ?");
    stmt.bind(to_string(status)).bind(message).bind(now);
    if (finished) {
      stmt.bind(now);
    } else {
      stmt.bind(std::nullopt);
    }
    stmt.bind(run_id);
    stmt.run();
    if (sqlite3_changes(m_impl->db) == 0) {
      throw StoreError(FailureKind::invalid_argument, "no run with id '" + run_id + "'");
    }
    return core::Unit{};
  });
}

core::Status Store::claim_run(const std::string& run_id) {
  return m_impl->guarded("claim_run", [&] {
    auto stmt = m_impl->prepare(
        "UPDATE runs SET status = 'running', status_message = '', owner_pid = ?, owner_host = ?, "
        "updated_at = ?, finished_at = NULL WHERE id = ?");
    stmt.bind(static_cast<int>(getpid())).bind(m_impl->host).bind(now_ms()).bind(run_id);
    stmt.run();
    if (sqlite3_changes(m_impl->db) == 0) {
      throw StoreError(FailureKind::invalid_argument, "no run with id '" + run_id + "'");
    }
    return core::Unit{};
  });
}

core::Result<std::vector<std::string>> Store::interrupt_orphaned_runs() {
  return m_impl->guarded("interrupt_orphaned_runs", [&] {
    return m_impl->transaction([&] {
      std::vector<std::string> orphans;
      {
        auto stmt = m_impl->prepare(
            "SELECT id, owner_pid FROM runs WHERE status = 'running' AND owner_host = ?");
        stmt.bind(m_impl->host);
        while (stmt.step()) {
          const int pid = stmt.integer(1);
          if (pid != static_cast<int>(getpid()) && !process_exists(pid)) {
            orphans.push_back(stmt.text(0));
          }
        }
      }
      const std::int64_t now = now_ms();
      for (const auto& id : orphans) {
        auto stmt = m_impl->prepare(
            "UPDATE runs SET status = 'interrupted', status_message = 'the process running it "
            "ended without finishing', updated_at = ?, finished_at = ? WHERE id = ?");
        stmt.bind(now).bind(now).bind(id);
        stmt.run();
      }
      return orphans;
    });
  });
}

core::Status Store::set_run_progress(const std::string& run_id, int iteration,
                                     const std::optional<std::string>& best_candidate_key,
                                     std::optional<double> best_latency_us,
                                     std::optional<double> baseline_latency_us) {
  return m_impl->guarded("set_run_progress", [&] {
    auto stmt = m_impl->prepare(
        "UPDATE runs SET iteration = ?, best_candidate_key = ?, best_latency_us = ?, "
        "baseline_latency_us = coalesce(?, baseline_latency_us), updated_at = ? WHERE id = ?");
    stmt.bind(iteration)
        .bind(best_candidate_key)
        .bind(best_latency_us)
        .bind(baseline_latency_us)
        .bind(now_ms())
        .bind(run_id);
    stmt.run();
    if (sqlite3_changes(m_impl->db) == 0) {
      throw StoreError(FailureKind::invalid_argument, "no run with id '" + run_id + "'");
    }
    return core::Unit{};
  });
}

core::Status Store::record_beam(const std::string& run_id, int iteration,
                                const std::vector<std::string>& candidate_keys) {
  return m_impl->guarded("record_beam", [&] {
    m_impl->transaction([&] {
      m_impl->require_run(run_id);
      {
        auto stmt = m_impl->prepare("DELETE FROM beams WHERE run_id = ? AND iteration = ?");
        stmt.bind(run_id).bind(iteration);
        stmt.run();
      }
      int position = 0;
      for (const auto& key : candidate_keys) {
        auto stmt = m_impl->prepare(
            "INSERT INTO beams (run_id, iteration, position, candidate_key) VALUES (?, ?, ?, ?)");
        stmt.bind(run_id).bind(iteration).bind(position++).bind(key);
        stmt.run();
      }
      auto touch = m_impl->prepare("UPDATE runs SET updated_at = ? WHERE id = ?");
      touch.bind(now_ms()).bind(run_id);
      touch.run();
    });
    return core::Unit{};
  });
}

core::Result<std::vector<Beam>> Store::get_beams(const std::string& run_id) {
  return m_impl->guarded("get_beams", [&] {
    auto stmt = m_impl->prepare(
        "SELECT iteration, candidate_key FROM beams WHERE run_id = ? ORDER BY iteration, "
        "position");
    stmt.bind(run_id);
    std::vector<Beam> out;
    while (stmt.step()) {
      const int iteration = stmt.integer(0);
      if (out.empty() || out.back().iteration != iteration) {
        out.push_back(Beam{iteration, {}});
      }
      out.back().candidate_keys.push_back(stmt.text(1));
    }
    return out;
  });
}

core::Result<bool> Store::add_run_candidate(const RunCandidate& candidate) {
  return m_impl->guarded("add_run_candidate", [&] {
    m_impl->require_run(candidate.run_id);
    std::optional<double> median;
    bool correct = candidate.correct;
    if (candidate.evaluation_id) {
      auto evaluation = m_impl->evaluation_by_id(*candidate.evaluation_id);
      if (!evaluation) {
        throw StoreError(FailureKind::invalid_argument,
                         "no evaluation with id " + std::to_string(*candidate.evaluation_id));
      }
      if (evaluation->result.latency) {
        median = evaluation->result.latency->median_us;
      }
      correct = evaluation->result.correct && evaluation->result.ok();
    }
    if (candidate.median_us) {
      median = candidate.median_us;
    }
    const std::int64_t now = now_ms();
    auto stmt = m_impl->prepare(
        "INSERT INTO run_candidates (run_id, candidate_key, iteration, parent_key, plan_text, "
        "provider, status, evaluation_id, median_us, correct, note, created_at, updated_at) "
        "VALUES (?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?) ON CONFLICT (run_id, candidate_key) DO "
        "NOTHING");
    stmt.bind(candidate.run_id)
        .bind(candidate.candidate_key)
        .bind(candidate.iteration)
        .bind(candidate.parent_key)
        .bind(candidate.plan_text)
        .bind(candidate.provider)
        .bind(to_string(candidate.status))
        .bind(candidate.evaluation_id)
        .bind(median)
        .bind(correct)
        .bind(candidate.note)
        .bind(now)
        .bind(now);
    stmt.run();
    return sqlite3_changes(m_impl->db) > 0;
  });
}

core::Status Store::update_run_candidate(const std::string& run_id,
                                         const std::string& candidate_key, CandidateStatus status,
                                         std::optional<std::int64_t> evaluation_id,
                                         const std::string& note) {
  return m_impl->guarded("update_run_candidate", [&] {
    std::optional<double> median;
    std::optional<bool> correct;
    if (evaluation_id) {
      auto evaluation = m_impl->evaluation_by_id(*evaluation_id);
      if (!evaluation) {
        throw StoreError(FailureKind::invalid_argument,
                         "no evaluation with id " + std::to_string(*evaluation_id));
      }
      if (evaluation->result.latency) {
        median = evaluation->result.latency->median_us;
      }
      correct = evaluation->result.correct && evaluation->result.ok();
    }
    // Without an evaluation id the linked evaluation (and its figures) stay as they were.
    auto stmt = m_impl->prepare(
        "UPDATE run_candidates SET status = ?, evaluation_id = coalesce(?, evaluation_id), "
        "median_us = CASE WHEN ? THEN ? ELSE median_us END, correct = coalesce(?, correct), "
        "note = CASE WHEN ? != '' THEN ? ELSE note END, updated_at = ? WHERE run_id = ? AND "
        "candidate_key = ?");
    stmt.bind(to_string(status))
        .bind(evaluation_id)
        .bind(evaluation_id.has_value())
        .bind(median)
        .bind(correct)
        .bind(note)
        .bind(note)
        .bind(now_ms())
        .bind(run_id)
        .bind(candidate_key);
    stmt.run();
    if (sqlite3_changes(m_impl->db) == 0) {
      throw StoreError(FailureKind::invalid_argument,
                       "candidate " + candidate_key + " is not part of run '" + run_id + "'");
    }
    return core::Unit{};
  });
}

core::Result<std::optional<RunCandidate>> Store::get_run_candidate(
    const std::string& run_id, const std::string& candidate_key) {
  return m_impl->guarded("get_run_candidate",
                         [&] { return m_impl->run_candidate(run_id, candidate_key); });
}

core::Result<std::vector<RunCandidate>> Store::run_candidates(const std::string& run_id) {
  return m_impl->guarded("run_candidates", [&] {
    auto stmt = m_impl->prepare("SELECT " + std::string(k_run_candidate_columns) +
                                " FROM run_candidates WHERE run_id = ? ORDER BY id");
    stmt.bind(run_id);
    std::vector<RunCandidate> out;
    while (stmt.step()) {
      out.push_back(read_run_candidate(stmt));
    }
    return out;
  });
}

core::Result<std::vector<RunCandidate>> Store::lineage(const std::string& run_id,
                                                       const std::string& candidate_key) {
  return m_impl->guarded("lineage", [&] {
    std::vector<RunCandidate> chain;
    std::set<std::string> seen;
    std::string key = candidate_key;
    while (!key.empty() && seen.insert(key).second) {
      auto candidate = m_impl->run_candidate(run_id, key);
      if (!candidate) {
        break;
      }
      key = candidate->parent_key;
      chain.push_back(std::move(*candidate));
    }
    std::reverse(chain.begin(), chain.end());
    return chain;
  });
}

core::Result<RunCounts> Store::run_counts(const std::string& run_id) {
  return m_impl->guarded("run_counts", [&] {
    auto stmt = m_impl->prepare(
        "SELECT status, count(*) FROM run_candidates WHERE run_id = ? GROUP BY status");
    stmt.bind(run_id);
    RunCounts counts;
    while (stmt.step()) {
      const int n = stmt.integer(1);
      counts.candidates += n;
      switch (candidate_status_from_string(stmt.text(0)).value_or(CandidateStatus::proposed)) {
        case CandidateStatus::proposed:
          break;
        case CandidateStatus::evaluated:
          counts.evaluated += n;
          break;
        case CandidateStatus::accepted:
          counts.evaluated += n;
          counts.accepted += n;
          break;
        case CandidateStatus::rejected:
          counts.evaluated += n;
          counts.rejected += n;
          break;
        case CandidateStatus::failed:
          counts.evaluated += n;
          counts.failed += n;
          break;
        case CandidateStatus::duplicate:
          counts.duplicates += n;
          break;
      }
    }
    return counts;
  });
}

// -- LLM calls ---------------------------------------------------------------------------------

core::Result<std::optional<LlmCall>> Store::find_llm_response(const std::string& run_id,
                                                              const std::string& request_hash) {
  return m_impl->guarded("find_llm_response", [&]() -> std::optional<LlmCall> {
    auto stmt = m_impl->prepare("SELECT " + std::string(k_llm_columns) +
                                " FROM llm_calls WHERE run_id = ? AND request_hash = ?");
    stmt.bind(run_id).bind(request_hash);
    if (!stmt.step()) {
      return std::nullopt;
    }
    return read_llm_call(stmt);
  });
}

core::Result<std::int64_t> Store::put_llm_call(const LlmCall& call) {
  return m_impl->guarded("put_llm_call", [&] {
    return m_impl->transaction([&]() -> std::int64_t {
      if (!call.run_id.empty()) {
        m_impl->require_run(call.run_id);
      }
      auto stmt = m_impl->prepare(
          "INSERT INTO llm_calls (run_id, request_hash, purpose, provider, prompt, response, "
          "input_tokens, output_tokens, cost_usd, latency_ms, attempts, created_at) VALUES (?, "
          "?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?) ON CONFLICT (run_id, request_hash) DO NOTHING");
      stmt.bind(call.run_id)
          .bind(call.request_hash)
          .bind(call.purpose)
          .bind(call.provider)
          .bind(call.prompt)
          .bind(call.response)
          .bind(static_cast<std::int64_t>(call.usage.input_tokens))
          .bind(static_cast<std::int64_t>(call.usage.output_tokens))
          .bind(call.usage.cost_usd)
          .bind(call.latency_ms)
          .bind(call.attempts)
          .bind(now_ms());
      stmt.run();
      if (sqlite3_changes(m_impl->db) > 0) {
        return sqlite3_last_insert_rowid(m_impl->db);
      }
      auto existing =
          m_impl->prepare("SELECT id FROM llm_calls WHERE run_id = ? AND request_hash = ?");
      existing.bind(call.run_id).bind(call.request_hash);
      existing.step();
      return existing.int64(0);
    });
  });
}

core::Result<LlmTotals> Store::llm_totals(const std::string& run_id) {
  return m_impl->guarded("llm_totals", [&] {
    auto stmt = m_impl->prepare(
        "SELECT count(*), coalesce(sum(input_tokens), 0), coalesce(sum(output_tokens), 0), "
        "coalesce(sum(cost_usd), 0) FROM llm_calls WHERE run_id = ?");
    stmt.bind(run_id);
    stmt.step();
    return LlmTotals{static_cast<long>(stmt.int64(0)), static_cast<long>(stmt.int64(1)),
                     static_cast<long>(stmt.int64(2)), stmt.real(3)};
  });
}

core::Result<std::vector<LlmCall>> Store::llm_calls(const std::string& run_id) {
  return m_impl->guarded("llm_calls", [&] {
    auto stmt = m_impl->prepare("SELECT " + std::string(k_llm_columns) +
                                " FROM llm_calls WHERE run_id = ? ORDER BY id");
    stmt.bind(run_id);
    std::vector<LlmCall> out;
    while (stmt.step()) {
      out.push_back(read_llm_call(stmt));
    }
    return out;
  });
}

// -- Memory lessons ----------------------------------------------------------------------------

core::Result<std::int64_t> Store::add_lesson(const Lesson& lesson) {
  if (lesson.target.empty() || lesson.text.empty()) {
    return core::make_failure(FailureKind::invalid_argument, "store",
                              "a lesson needs a target and a text");
  }
  return m_impl->guarded("add_lesson", [&] {
    return m_impl->transaction([&] {
      const std::int64_t now = now_ms();
      std::int64_t id = 0;
      {
        auto find =
            m_impl->prepare("SELECT id, speedup FROM lessons WHERE target = ? AND text = ?");
        find.bind(lesson.target).bind(lesson.text);
        if (find.step()) {
          id = find.int64(0);
          const double old_speedup = find.real(1);
          const bool stronger = lesson_value(lesson.speedup) > lesson_value(old_speedup);
          auto update = m_impl->prepare(
              "UPDATE lessons SET created_at = ?, speedup = ?, evidence = ?, kind = ?, "
              "source_run = ?, seq = (SELECT max(seq) + 1 FROM lessons) WHERE id = ?");
          update.bind(now);
          if (stronger) {
            update.bind(lesson.speedup)
                .bind(lesson.evidence)
                .bind(lesson.kind)
                .bind(lesson.source_run);
          } else {
            // Keep the stronger evidence already stored.
            update.bind(old_speedup);
            auto keep =
                m_impl->prepare("SELECT evidence, kind, source_run FROM lessons WHERE id = ?");
            keep.bind(id);
            keep.step();
            update.bind(keep.text(0)).bind(keep.text(1)).bind(keep.text(2));
          }
          update.bind(id);
          update.run();
        }
      }
      if (id == 0) {
        auto insert = m_impl->prepare(
            "INSERT INTO lessons (target, text, kind, source_run, speedup, evidence, created_at, "
            "seq) VALUES (?, ?, ?, ?, ?, ?, ?, (SELECT coalesce(max(seq), 0) + 1 FROM lessons))");
        insert.bind(lesson.target)
            .bind(lesson.text)
            .bind(lesson.kind)
            .bind(lesson.source_run)
            .bind(std::isfinite(lesson.speedup) ? lesson.speedup : 0.0)
            .bind(lesson.evidence)
            .bind(now);
        insert.run();
        id = sqlite3_last_insert_rowid(m_impl->db);
      }
      // Enforce the bound: evict the least valuable others, oldest first among equals.
      const int limit = std::max(1, m_impl->options.lesson_limit);
      struct Entry {
        std::int64_t id;
        double value;
        std::int64_t seq;  // recency: larger is newer
      };
      std::vector<Entry> others;
      {
        auto all = m_impl->prepare("SELECT id, speedup, seq FROM lessons WHERE target = ?");
        all.bind(lesson.target);
        while (all.step()) {
          if (all.int64(0) != id) {
            others.push_back({all.int64(0), lesson_value(all.real(1)), all.int64(2)});
          }
        }
      }
      const auto excess = static_cast<std::ptrdiff_t>(others.size() + 1) - limit;
      if (excess > 0) {
        std::sort(others.begin(), others.end(), [](const Entry& a, const Entry& b) {
          if (a.value != b.value) {
            return a.value < b.value;
          }
          return a.seq < b.seq;
        });
        for (std::ptrdiff_t i = 0; i < excess; ++i) {
          auto evict = m_impl->prepare("DELETE FROM lessons WHERE id = ?");
          evict.bind(others[static_cast<std::size_t>(i)].id);
          evict.run();
        }
      }
      return id;
    });
  });
}

core::Result<std::vector<Lesson>> Store::lessons(const std::string& target, int limit) {
  return m_impl->guarded("lessons", [&] {
    auto stmt = m_impl->prepare(
        "SELECT id, target, text, kind, source_run, speedup, evidence, created_at FROM lessons "
        "WHERE ?1 = '' OR target = ?1 ORDER BY seq DESC LIMIT ?2");
    stmt.bind(target).bind(limit);
    std::vector<Lesson> out;
    while (stmt.step()) {
      Lesson lesson;
      lesson.id = stmt.int64(0);
      lesson.target = stmt.text(1);
      lesson.text = stmt.text(2);
      lesson.kind = stmt.text(3);
      lesson.source_run = stmt.text(4);
      lesson.speedup = stmt.real(5);
      lesson.evidence = stmt.text(6);
      lesson.created_at_ms = stmt.int64(7);
      out.push_back(std::move(lesson));
    }
    return out;
  });
}

core::Result<int> Store::clear_lessons(const std::string& target) {
  return m_impl->guarded("clear_lessons", [&] {
    auto stmt = m_impl->prepare("DELETE FROM lessons WHERE ?1 = '' OR target = ?1");
    stmt.bind(target);
    stmt.run();
    return sqlite3_changes(m_impl->db);
  });
}

// -- Reflexions --------------------------------------------------------------------------------

core::Result<std::int64_t> Store::add_reflexion(const Reflexion& reflexion) {
  if (reflexion.scope.empty()) {
    return core::make_failure(FailureKind::invalid_argument, "store",
                              "a reflexion needs a scope (run id or kernel path)");
  }
  return m_impl->guarded("add_reflexion", [&] {
    auto stmt = m_impl->prepare(
        "INSERT INTO reflexions (scope, candidate_key, diagnosis_right, fix_worked, expected, "
        "actual, lessons, avoid, try_next, raw_text, created_at) VALUES (?, ?, ?, ?, ?, ?, ?, ?, "
        "?, ?, ?)");
    stmt.bind(reflexion.scope)
        .bind(reflexion.candidate_key)
        .bind(opt_bool_as_int(reflexion.diagnosis_right))
        .bind(opt_bool_as_int(reflexion.fix_worked))
        .bind(reflexion.expected)
        .bind(reflexion.actual)
        .bind(reflexion.lessons)
        .bind(reflexion.avoid)
        .bind(reflexion.try_next)
        .bind(reflexion.raw_text)
        .bind(now_ms());
    stmt.run();
    return static_cast<std::int64_t>(sqlite3_last_insert_rowid(m_impl->db));
  });
}

core::Result<std::vector<Reflexion>> Store::recent_reflexions(const std::string& scope, int limit) {
  return m_impl->guarded("recent_reflexions", [&] {
    auto stmt = m_impl->prepare(
        "SELECT id, scope, candidate_key, diagnosis_right, fix_worked, expected, actual, "
        "lessons, avoid, try_next, raw_text, created_at FROM reflexions WHERE scope = ? ORDER BY "
        "id DESC LIMIT ?");
    stmt.bind(scope).bind(limit);
    std::vector<Reflexion> out;
    while (stmt.step()) {
      Reflexion r;
      r.id = stmt.int64(0);
      r.scope = stmt.text(1);
      r.candidate_key = stmt.text(2);
      r.diagnosis_right = opt_bool(stmt, 3);
      r.fix_worked = opt_bool(stmt, 4);
      r.expected = stmt.text(5);
      r.actual = stmt.text(6);
      r.lessons = stmt.text(7);
      r.avoid = stmt.text(8);
      r.try_next = stmt.text(9);
      r.raw_text = stmt.text(10);
      r.created_at_ms = stmt.int64(11);
      out.push_back(std::move(r));
    }
    return out;
  });
}

}  // namespace autocomp::search::store
