#include "search/store/schema.hpp"

#include <string>

namespace autocomp::search::store {
namespace {

// Version 1: the evaluation cache (workloads, candidates, evaluations) and kernel file tracking.
constexpr std::string_view k_v1 = R"sql(
CREATE TABLE workloads (
  problem_key TEXT PRIMARY KEY,
  source      TEXT NOT NULL,
  path        TEXT NOT NULL DEFAULT '',
  created_at  INTEGER NOT NULL
);
CREATE TABLE candidates (
  key        TEXT PRIMARY KEY,
  source     TEXT NOT NULL,
  origin     TEXT NOT NULL DEFAULT '',
  created_at INTEGER NOT NULL
);
CREATE TABLE evaluations (
  id                INTEGER PRIMARY KEY,
  candidate_key     TEXT NOT NULL REFERENCES candidates(key),
  problem_key       TEXT NOT NULL REFERENCES workloads(problem_key),
  target            TEXT NOT NULL,
  backend_identity  TEXT NOT NULL,
  device            TEXT NOT NULL,
  harness_version   TEXT NOT NULL,
  command           TEXT NOT NULL,
  kernel_name       TEXT NOT NULL,
  seeds             TEXT NOT NULL,
  warmup            INTEGER NOT NULL,
  iters             INTEGER NOT NULL,
  cacheable         INTEGER NOT NULL,
  status            TEXT NOT NULL,
  failure_kind      TEXT,
  failure_stage     TEXT,
  failure_message   TEXT,
  failure_line      INTEGER,
  verified          INTEGER NOT NULL,
  correct           INTEGER NOT NULL,
  seed_checks       TEXT NOT NULL,
  latency_min_us    REAL,
  latency_median_us REAL,
  latency_max_us    REAL,
  latency_samples   BLOB,
  has_profile       INTEGER NOT NULL,
  metrics           TEXT NOT NULL,
  roofline          TEXT NOT NULL,
  bottleneck        TEXT NOT NULL,
  result_device     TEXT NOT NULL,
  result_target     TEXT NOT NULL,
  result_backend    TEXT NOT NULL,
  result_harness    TEXT NOT NULL,
  host              TEXT NOT NULL,
  steps             TEXT NOT NULL,
  raw_json          TEXT NOT NULL,
  created_at        INTEGER NOT NULL
);
CREATE INDEX evaluations_by_identity ON evaluations
  (candidate_key, problem_key, target, backend_identity, device, harness_version, kernel_name,
   seeds, id);
CREATE INDEX evaluations_by_problem ON evaluations (problem_key, target, candidate_key);
CREATE TABLE file_versions (
  id            INTEGER PRIMARY KEY,
  path          TEXT NOT NULL,
  candidate_key TEXT NOT NULL REFERENCES candidates(key),
  problem_key   TEXT NOT NULL REFERENCES workloads(problem_key),
  target        TEXT NOT NULL,
  recorded_at   INTEGER NOT NULL,
  seq           INTEGER NOT NULL,
  UNIQUE (path, candidate_key, problem_key, target)
);
CREATE INDEX file_versions_by_path ON file_versions (path, seq);
)sql";

// Version 2: search runs, their candidates with lineage, beams and LLM calls.
constexpr std::string_view k_v2 = R"sql(
CREATE TABLE runs (
  id                  TEXT PRIMARY KEY,
  kernel_path         TEXT NOT NULL,
  problem_path        TEXT NOT NULL,
  problem_key         TEXT NOT NULL,
  seed_candidate_key  TEXT NOT NULL,
  target              TEXT NOT NULL,
  backend             TEXT NOT NULL,
  llm_specs           TEXT NOT NULL,
  beam                INTEGER NOT NULL,
  plans               INTEGER NOT NULL,
  impls               INTEGER NOT NULL,
  iterations          INTEGER NOT NULL,
  dropout             REAL NOT NULL,
  rng_seed            TEXT NOT NULL,
  max_llm_calls       INTEGER,
  max_tokens          INTEGER,
  max_cost_usd        REAL,
  max_wall_s          REAL,
  config_json         TEXT NOT NULL,
  status              TEXT NOT NULL,
  status_message      TEXT NOT NULL DEFAULT '',
  owner_pid           INTEGER NOT NULL,
  owner_host          TEXT NOT NULL,
  created_at          INTEGER NOT NULL,
  updated_at          INTEGER NOT NULL,
  finished_at         INTEGER,
  iteration           INTEGER NOT NULL DEFAULT 0,
  best_candidate_key  TEXT,
  best_latency_us     REAL,
  baseline_latency_us REAL
);
CREATE INDEX runs_by_time ON runs (created_at);
CREATE TABLE run_candidates (
  id            INTEGER PRIMARY KEY,
  run_id        TEXT NOT NULL REFERENCES runs(id) ON DELETE CASCADE,
  candidate_key TEXT NOT NULL REFERENCES candidates(key),
  iteration     INTEGER NOT NULL,
  parent_key    TEXT NOT NULL,
  plan_text     TEXT NOT NULL,
  provider      TEXT NOT NULL,
  status        TEXT NOT NULL,
  evaluation_id INTEGER REFERENCES evaluations(id),
  median_us     REAL,
  correct       INTEGER NOT NULL DEFAULT 0,
  note          TEXT NOT NULL DEFAULT '',
  created_at    INTEGER NOT NULL,
  updated_at    INTEGER NOT NULL,
  UNIQUE (run_id, candidate_key)
);
CREATE TABLE beams (
  run_id        TEXT NOT NULL REFERENCES runs(id) ON DELETE CASCADE,
  iteration     INTEGER NOT NULL,
  position      INTEGER NOT NULL,
  candidate_key TEXT NOT NULL,
  PRIMARY KEY (run_id, iteration, position)
);
CREATE TABLE llm_calls (
  id            INTEGER PRIMARY KEY,
  run_id        TEXT NOT NULL,
  request_hash  TEXT NOT NULL,
  purpose       TEXT NOT NULL,
  provider      TEXT NOT NULL,
  prompt        TEXT NOT NULL,
  response      TEXT NOT NULL,
  input_tokens  INTEGER NOT NULL,
  output_tokens INTEGER NOT NULL,
  cost_usd      REAL NOT NULL,
  latency_ms    REAL NOT NULL,
  attempts      INTEGER NOT NULL,
  created_at    INTEGER NOT NULL,
  UNIQUE (run_id, request_hash)
);
)sql";

// Version 3: optimization memory and reflexions.
constexpr std::string_view k_v3 = R"sql(
CREATE TABLE lessons (
  id         INTEGER PRIMARY KEY,
  target     TEXT NOT NULL,
  text       TEXT NOT NULL,
  kind       TEXT NOT NULL,
  source_run TEXT NOT NULL,
  speedup    REAL NOT NULL,
  evidence   TEXT NOT NULL,
  created_at INTEGER NOT NULL,
  seq        INTEGER NOT NULL,
  UNIQUE (target, text)
);
CREATE TABLE reflexions (
  id              INTEGER PRIMARY KEY,
  scope           TEXT NOT NULL,
  candidate_key   TEXT NOT NULL,
  diagnosis_right INTEGER,
  fix_worked      INTEGER,
  expected        TEXT NOT NULL,
  actual          TEXT NOT NULL,
  lessons         TEXT NOT NULL,
  avoid           TEXT NOT NULL,
  try_next        TEXT NOT NULL,
  raw_text        TEXT NOT NULL,
  created_at      INTEGER NOT NULL
);
CREATE INDEX reflexions_by_scope ON reflexions (scope, id);
)sql";

// Version 4: complete evaluation keys and stored receipts. The input signature the problem
// produced (names, shapes, dtypes) joins the key; rows recorded before it cannot say which inputs
// they measured, so they get a signature no probe ever produces and are never served again (they
// stay readable as history). The receipt says how each result was measured, whole.
constexpr std::string_view k_v4 = R"sql(
ALTER TABLE evaluations ADD COLUMN input_signature TEXT NOT NULL DEFAULT '';
ALTER TABLE evaluations ADD COLUMN receipt TEXT NOT NULL DEFAULT '{}';
UPDATE evaluations SET input_signature = '?recorded-before-input-signatures';
DROP INDEX evaluations_by_identity;
CREATE INDEX evaluations_by_identity ON evaluations
  (candidate_key, problem_key, target, backend_identity, device, harness_version, input_signature,
   kernel_name, seeds, id);
)sql";

// Version 5: facts that were kept inside text get their own columns. A run candidate's origin
// label (kept as "origin=<label>" in its note), a run stopped by a budget (kept as completed with
// the message "budget_exhausted: <reason>"), an LLM call's origin label (kept in its prompt
// column), the engine's configuration (a key=value text in a
// column called config_json) and the workload a lesson was learned on (new).
constexpr std::string_view k_v5 = R"sql(
ALTER TABLE run_candidates ADD COLUMN origin TEXT NOT NULL DEFAULT '';
UPDATE run_candidates SET origin = substr(note, 8), note = ''
  WHERE substr(note, 1, 7) = 'origin=';
UPDATE runs SET status = 'budget_exhausted', status_message = substr(status_message, 19)
  WHERE status = 'completed' AND substr(status_message, 1, 18) = 'budget_exhausted: ';
ALTER TABLE runs RENAME COLUMN config_json TO engine_config;
ALTER TABLE lessons ADD COLUMN problem_key TEXT NOT NULL DEFAULT '';
ALTER TABLE llm_calls ADD COLUMN origin TEXT NOT NULL DEFAULT '';
UPDATE llm_calls SET origin = prompt, prompt = ''
  WHERE run_id != '' AND prompt GLOB 'i[0-9]*/m[0-9]*/p[0-9]*/k[0-9]*/r[0-9]*/*'
    AND prompt NOT GLOB '*[' || char(10) || ' ]*';
)sql";

// Version 6 helpers. Before it, the engine kept its settings as "key=value" lines (values with
// \\, \n and \r escaped) in runs.engine_config. legacy_value(k) is the SQL for the value of key
// k in that text (NULL when the key is absent).
std::string legacy_value(const std::string& key) {
  const std::string pos = "instr(char(10) || engine_config, char(10) || '" + key + "=')";
  const std::string start = pos + " + " + std::to_string(key.size() + 1);
  return "(CASE WHEN " + pos + " = 0 THEN NULL ELSE substr(engine_config, " + start +
         ", instr(substr(engine_config, " + start + ") || char(10), char(10)) - 1) END)";
}

std::string legacy_text(const std::string& key) {
  return "replace(replace(replace(replace(coalesce(" + legacy_value(key) +
         ", ''), '\\\\', char(1)), '\\n', char(10)), '\\r', char(13)), char(1), '\\')";
}

std::string legacy_number(const std::string& key, const char* type, const char* absent) {
  return "coalesce(CAST(" + legacy_value(key) + " AS " + type + "), " + absent + ")";
}

// Version 6: the engine's settings become a JSON object any reader can take apart (the columns
// that already held a setting keep it; the sources are the run's workload and seed candidate).
// Settings absent from an old text take the values that text meant: no memory, no reflexions, no
// divergence guard, 16 lessons.
const std::string& v6() {
  static const std::string sql = [] {
    std::string settings =
        "json_object("
        "'kernel_filename', " +
        legacy_text("kernel_filename") + ", 'problem_filename', " +
        legacy_text("problem_filename") + ", 'kernel_name', " + legacy_text("kernel_name") +
        ", 'repair_tries', " + legacy_number("repair_tries", "INTEGER", "2") + ", 'early_slack', " +
        legacy_number("early_slack", "REAL", "1.1") + ", 'slack_iterations', " +
        legacy_number("slack_iterations", "INTEGER", "2") + ", 'proposers', json(CASE WHEN " +
        legacy_text("proposers") + " = '' THEN '[]' ELSE '[\"' || replace(" +
        legacy_text("proposers") + ", ',', '\",\"') || '\"]' END)" + ", 'recent_failures', " +
        legacy_number("recent_failures", "INTEGER", "4") + ", 'memory', json(CASE WHEN " +
        legacy_value("memory") + " = '1' THEN 'true' ELSE 'false' END)" + ", 'lesson_limit', " +
        legacy_number("lesson_limit", "INTEGER", "16") + ", 'reflexions', " +
        legacy_number("reflexions", "INTEGER", "0") + ", 'divergence', " +
        legacy_number("divergence", "REAL", "0") + ", 'eval_seeds', json('[' || coalesce(" +
        legacy_value("eval_seeds") + ", '') || ']')" + ", 'warmup', " +
        legacy_number("warmup", "INTEGER", "2") + ", 'iters', " +
        legacy_number("iters", "INTEGER", "10") + ", 'eval_timeout_ms', " +
        legacy_number("eval_timeout_ms", "INTEGER", "300000") + ")";
    return "ALTER TABLE runs ADD COLUMN settings TEXT NOT NULL DEFAULT '{}';\n"
           "UPDATE runs SET settings = " +
           settings +
           " WHERE engine_config != '';\n"
           "ALTER TABLE runs DROP COLUMN engine_config;\n";
  }();
  return sql;
}

// Version 7: device calibration. Profiles (the simulator's cost table fitted to one device), the
// probe measurements of a calibration not yet stored (so an interrupted one resumes), and every
// kernel measured on a device with the simulator's estimate beside it (a search's confirmations,
// benchmark_kernel on a device), from which a profile can be refitted.
constexpr std::string_view k_v7 = R"sql(
CREATE TABLE calibration_profiles (
  id          INTEGER PRIMARY KEY,
  name        TEXT NOT NULL UNIQUE,
  target      TEXT NOT NULL,
  device_spec TEXT NOT NULL,
  versions    TEXT NOT NULL DEFAULT '{}',
  table_json  TEXT NOT NULL,
  fit_json    TEXT NOT NULL,
  source      TEXT NOT NULL DEFAULT 'probes',
  created_at  INTEGER NOT NULL
);
CREATE INDEX calibration_profiles_by_target ON calibration_profiles (target, created_at);
CREATE TABLE calibration_measurements (
  id           INTEGER PRIMARY KEY,
  name         TEXT NOT NULL,
  device_spec  TEXT NOT NULL,
  target       TEXT NOT NULL,
  probe_id     TEXT NOT NULL,
  probe_digest TEXT NOT NULL,
  latency_us   REAL NOT NULL,
  receipt      TEXT NOT NULL DEFAULT '',
  created_at   INTEGER NOT NULL,
  UNIQUE (name, device_spec, target, probe_id, probe_digest)
);
CREATE TABLE device_pairs (
  id             INTEGER PRIMARY KEY,
  kernel_digest  TEXT NOT NULL,
  kernel_source  TEXT NOT NULL,
  kernel_name    TEXT NOT NULL DEFAULT '',
  problem_source TEXT NOT NULL,
  problem_key    TEXT NOT NULL DEFAULT '',
  target         TEXT NOT NULL,
  device_spec    TEXT NOT NULL,
  sim_spec       TEXT NOT NULL,
  measured_us    REAL NOT NULL,
  simulated_us   REAL NOT NULL,
  run_id         TEXT NOT NULL DEFAULT '',
  created_at     INTEGER NOT NULL
);
CREATE INDEX device_pairs_by_target ON device_pairs (target, device_spec, id);
CREATE INDEX device_pairs_by_run ON device_pairs (run_id, id);
)sql";

}  // namespace

const std::vector<Migration>& migrations() {
  static const std::vector<Migration> k_migrations{{1, k_v1}, {2, k_v2}, {3, k_v3}, {4, k_v4},
                                                   {5, k_v5}, {6, v6()}, {7, k_v7}};
  return k_migrations;
}

}  // namespace autocomp::search::store
