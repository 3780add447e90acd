#include <cmath>
#include <limits>
#include <map>

#include "backends/cacheable.hpp"
#include "backends/harness_output.hpp"
#include "backends/kernel_modules.hpp"
#include "core/hash.hpp"
#include "search/store/sql_parts.hpp"

// The evaluation cache over SQLite: sources, evaluations and the rule for which stored result
// answers which request.
namespace autocomp::search::store {
namespace {

using json = nlohmann::json;
using core::FailureKind;

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

// Failures after which no command can succeed on this candidate and problem.
bool fails_every_command(FailureKind kind) {
  return kind == FailureKind::compile_error || kind == FailureKind::problem_error ||
         kind == FailureKind::forbidden_access;
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
              {"cost_table", receipt.cost_table},
              {"cost_table_digest", receipt.cost_table_digest},
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
  receipt.cost_table = text_of("cost_table");
  receipt.cost_table_digest = text_of("cost_table_digest");
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
  // Hot lines, engine waits and compiler effects are kept only in the harness's line: read
  // them back from it.
  if (!result.raw_json.empty()) {
    auto reread = backends::parse_harness_output(result.raw_json, "");
    result.hotspots = std::move(reread.hotspots);
    result.waits = std::move(reread.waits);
    result.bottleneck_engine = std::move(reread.bottleneck_engine);
    result.compiler_effects = std::move(reread.compiler_effects);
  }
  out.created_at_ms = row.int64(34);
  key.input_signature = row.text(35);
  result.receipt = receipt_from_json(row.text(36));
  result.input_signature = result.receipt.input_signature;
  return out;
}

std::int64_t insert_evaluation(Database& db, const EvalKey& key,
                               const backends::EvalResult& result) {
  auto stmt = db.prepare(
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
      .bind(backends::cacheable(result))
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
  return db.last_insert_rowid();
}

// The newest cacheable evaluation whose command covers the key's (docs/store.md).
std::optional<std::int64_t> covering_evaluation(Database& db, const EvalKey& key) {
  using backends::EvalCommand;
  auto stmt = db.prepare(
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
          covers =
              *stored == EvalCommand::profile || (*stored == EvalCommand::evaluate && has_profile);
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
  return found;
}

std::string put_source(Database& db, std::string_view table_sql, std::string_view source,
                       std::string_view detail) {
  const std::string key = core::source_key(source);
  auto stmt = db.prepare(table_sql);
  stmt.bind(key).bind(source).bind(detail).bind(now_ms());
  stmt.run();
  return key;
}

constexpr std::string_view k_put_workload =
    "INSERT INTO workloads (problem_key, source, path, created_at) VALUES (?, ?, ?, ?) "
    "ON CONFLICT (problem_key) DO UPDATE SET path = excluded.path "
    "WHERE excluded.path != '' AND excluded.path != workloads.path";
constexpr std::string_view k_put_candidate =
    "INSERT INTO candidates (key, source, origin, created_at) VALUES (?, ?, ?, ?) "
    "ON CONFLICT (key) DO NOTHING";

}  // namespace

std::string put_candidate_source(Database& db, std::string_view source, std::string_view origin) {
  return put_source(db, k_put_candidate, source, origin);
}

std::optional<StoredEvaluation> evaluation_by_id(Database& db, std::int64_t id) {
  auto stmt =
      db.prepare("SELECT " + std::string(k_eval_columns) + " FROM evaluations WHERE id = ?");
  stmt.bind(id);
  if (!stmt.step()) {
    return std::nullopt;
  }
  return read_evaluation(stmt);
}

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

EvalSite site_of(const backends::Backend& backend) {
  return EvalSite{backend.identity(), backend.device(), backend.harness_version(), ""};
}

EvalKey make_eval_key(const backends::EvalRequest& request, const EvalSite& site) {
  EvalKey key;
  key.candidate_key = core::source_key(request.kernel_source);
  key.problem_key = core::source_key(request.problem_source);
  key.target = request.target;
  key.backend_identity = site.backend_identity;
  key.device = site.device;
  key.harness_version = site.harness_version;
  // The code that runs besides the kernel file: a kernel's local modules are part of what is
  // measured, so an edited helper module never matches an evaluation of the old one.
  if (const auto modules =
          backends::kernel_modules_digest(request.kernel_modules, request.kernel_folder);
      !modules.empty()) {
    key.harness_version += "+modules." + modules.substr(0, 16);
  }
  key.input_signature = site.input_signature;
  key.command = request.command;
  key.kernel_name = request.kernel_name;
  key.seeds = canonical_seeds(request.seeds);
  key.warmup = request.warmup;
  key.iters = request.iters;
  return key;
}

std::string receipt_to_json(const backends::EvalResult& result) {
  return receipt_text(result);
}

// -- Evaluations -------------------------------------------------------------------------------

core::Result<std::optional<StoredEvaluation>> SqlEvaluationCache::lookup(
    const backends::EvalRequest& request, const EvalSite& site) {
  const EvalKey key = make_eval_key(request, site);
  return m_db->guarded("lookup", [&]() -> std::optional<StoredEvaluation> {
    const auto id = covering_evaluation(*m_db, key);
    if (!id) {
      return std::nullopt;
    }
    return evaluation_by_id(*m_db, *id);
  });
}

core::Result<std::int64_t> SqlEvaluationCache::record(const backends::EvalRequest& request,
                                                      const EvalSite& site,
                                                      const backends::EvalResult& result) {
  const EvalKey key = make_eval_key(request, site);
  return m_db->guarded("record", [&] {
    return m_db->transaction([&] {
      put_source(*m_db, k_put_workload, request.problem_source, "");
      put_source(*m_db, k_put_candidate, request.kernel_source, "");
      return insert_evaluation(*m_db, key, result);
    });
  });
}

core::Result<std::optional<StoredEvaluation>> SqlEvaluationCache::get_evaluation(std::int64_t id) {
  return m_db->guarded("get_evaluation", [&] { return evaluation_by_id(*m_db, id); });
}

core::Result<std::vector<StoredEvaluation>> SqlEvaluationCache::evaluations_for_candidate(
    const std::string& candidate_key, int limit) {
  return m_db->guarded("evaluations_for_candidate", [&] {
    std::vector<std::int64_t> ids;
    {
      auto stmt = m_db->prepare(
          "SELECT id FROM evaluations WHERE candidate_key = ? ORDER BY id DESC LIMIT ?");
      stmt.bind(candidate_key).bind(limit);
      while (stmt.step()) {
        ids.push_back(stmt.int64(0));
      }
    }
    std::vector<StoredEvaluation> out;
    for (std::int64_t id : ids) {
      if (auto evaluation = evaluation_by_id(*m_db, id)) {
        out.push_back(std::move(*evaluation));
      }
    }
    return out;
  });
}

// -- Sources -----------------------------------------------------------------------------------

core::Result<std::string> SqlEvaluationCache::put_workload(std::string_view problem_source,
                                                           std::string_view problem_path) {
  return m_db->guarded("put_workload", [&] {
    return put_source(*m_db, k_put_workload, problem_source, problem_path);
  });
}

core::Result<std::optional<Workload>> SqlEvaluationCache::get_workload(
    const std::string& problem_key) {
  return m_db->guarded("get_workload", [&]() -> std::optional<Workload> {
    auto stmt = m_db->prepare(
        "SELECT problem_key, source, path, created_at FROM workloads WHERE problem_key = ?");
    stmt.bind(problem_key);
    if (!stmt.step()) {
      return std::nullopt;
    }
    return Workload{stmt.text(0), stmt.text(1), stmt.text(2), stmt.int64(3)};
  });
}

core::Result<std::string> SqlEvaluationCache::put_candidate(std::string_view source,
                                                            std::string_view origin) {
  return m_db->guarded("put_candidate",
                       [&] { return put_candidate_source(*m_db, source, origin); });
}

core::Result<std::optional<Candidate>> SqlEvaluationCache::get_candidate(const std::string& key) {
  return m_db->guarded("get_candidate", [&]() -> std::optional<Candidate> {
    auto stmt =
        m_db->prepare("SELECT key, source, origin, created_at FROM candidates WHERE key = ?");
    stmt.bind(key);
    if (!stmt.step()) {
      return std::nullopt;
    }
    return Candidate{stmt.text(0), stmt.text(1), stmt.text(2), stmt.int64(3)};
  });
}

}  // namespace autocomp::search::store
