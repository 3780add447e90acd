#include "search/store/store.hpp"

#include <gtest/gtest.h>
#include <sqlite3.h>
#include <sys/wait.h>
#include <unistd.h>

#include <atomic>
#include <cmath>
#include <cstdlib>
#include <filesystem>
#include <fstream>
#include <nlohmann/json.hpp>
#include <set>
#include <string>
#include <thread>
#include <vector>

#include "core/hash.hpp"
#include "search/store/schema.hpp"

namespace autocomp::search::store {
namespace {

namespace fs = std::filesystem;
using backends::EvalCommand;
using backends::EvalResult;
using core::FailureKind;

class TempDir {
 public:
  TempDir() {
    std::string pattern = (fs::temp_directory_path() / "store_test_XXXXXX").string();
    if (mkdtemp(pattern.data()) == nullptr) {
      throw std::runtime_error("mkdtemp failed");
    }
    m_path = pattern;
  }
  ~TempDir() {
    std::error_code ignored;
    fs::remove_all(m_path, ignored);
  }
  const fs::path& path() const { return m_path; }

 private:
  fs::path m_path;
};

std::unique_ptr<Store> open_store(const fs::path& path, StoreOptions options = {}) {
  auto store = Store::open(path.string(), options);
  if (!store) {
    ADD_FAILURE() << store.failure().describe();
    return nullptr;
  }
  return std::move(store).value();
}

// Runs one SQL statement on a database file outside the store (to craft old or odd files).
void raw_exec(const fs::path& path, const std::string& sql) {
  sqlite3* db = nullptr;
  ASSERT_EQ(sqlite3_open(path.string().c_str(), &db), SQLITE_OK);
  char* error = nullptr;
  const int rc = sqlite3_exec(db, sql.c_str(), nullptr, nullptr, &error);
  std::string message = error != nullptr ? error : "";
  sqlite3_free(error);
  sqlite3_close(db);
  ASSERT_EQ(rc, SQLITE_OK) << message;
}

const char* const k_problem = "def inputs(seed):\n  return {}\n";
const char* const k_kernel_a = "def kernel(a):\n  return a\n";
const char* const k_kernel_b = "def kernel(a):\n  return a * 1\n";

EvalResult correct_result(double median_us, const std::string& backend = "sim") {
  EvalResult result;
  result.verified = true;
  result.correct = true;
  result.seeds = {{0, true, 1e-6, 2e-7, ""}, {1, true, 3e-6, 4e-7, ""}};
  result.latency = backends::LatencyStats{
      median_us - 1, median_us, median_us + 2, {median_us - 1, median_us, median_us + 2}};
  result.metrics = {{"total_time", median_us * 1e-6}, {"tensor_engine_active_time", 1e-6}};
  result.roofline = {{"compute_pct", 12.5}};
  result.bottleneck = "memory-bound";
  result.device = backend == "sim" ? "sim" : "neuron";
  result.target = "trn2";
  result.backend_identity = backend;
  result.host = "localhost";
  result.harness_version = "1.0.0";
  result.steps = {{"run", 120.0}};
  result.raw_json = "{\"status\":\"ok\"}";
  return result;
}

EvalResult failed_result(FailureKind kind, const std::string& stage) {
  EvalResult result;
  result.failure = core::Failure{kind, stage, "it broke", 7};
  result.verified = kind == FailureKind::mismatch;
  result.device = "sim";
  result.target = "trn2";
  result.backend_identity = "sim";
  result.harness_version = "1.0.0";
  return result;
}

// An evaluation request for `kernel` (a source) on `problem` (a source), and where it ran.
struct Probe {
  backends::EvalRequest request;
  EvalSite site;
};

Probe probe_of(const std::string& kernel, const std::string& problem, EvalCommand command,
               const std::string& backend = "sim") {
  Probe probe;
  probe.request.command = command;
  probe.request.kernel_source = kernel;
  probe.request.problem_source = problem;
  probe.request.target = "trn2";
  probe.request.seeds = {0, 1};
  probe.site.backend_identity = backend;
  probe.site.device = backend == "sim" ? "sim" : "neuron";
  probe.site.harness_version = "1.0.0";
  return probe;
}

std::optional<StoredEvaluation> lookup(Store& store, const Probe& probe) {
  auto found = store.evaluations().lookup(probe.request, probe.site);
  EXPECT_TRUE(found.ok()) << (found.ok() ? "" : found.failure().describe());
  return found.ok() ? found.value() : std::nullopt;
}

RunCandidate make_run_candidate(const std::string& run_id, int iteration, const std::string& key,
                                const std::string& parent, const std::string& plan,
                                const std::string& provider) {
  RunCandidate out;
  out.run_id = run_id;
  out.iteration = iteration;
  out.candidate_key = key;
  out.parent_key = parent;
  out.plan_text = plan;
  out.provider = provider;
  return out;
}

class StoreTest : public ::testing::Test {
 protected:
  void SetUp() override {
    m_store = open_store(m_dir.path() / "autocomp.db");
    ASSERT_NE(m_store, nullptr);
    m_problem = m_store->evaluations().put_workload(k_problem, "/work/problem.py").value();
    m_a = m_store->evaluations().put_candidate(k_kernel_a, "user").value();
    m_b = m_store->evaluations().put_candidate(k_kernel_b, "llm").value();
  }

  // A probe for the stored candidate `candidate` (a key) on the fixture's problem.
  Probe probe(const std::string& candidate, EvalCommand command,
              const std::string& backend = "sim") {
    auto stored = m_store->evaluations().get_candidate(candidate);
    EXPECT_TRUE(stored.ok() && stored.value().has_value()) << "candidate " << candidate;
    const std::string source =
        stored.ok() && stored.value() ? stored.value()->source : std::string(k_kernel_a);
    return probe_of(source, k_problem, command, backend);
  }

  std::int64_t put(const std::string& candidate, EvalCommand command, const EvalResult& result,
                   const std::string& backend = "sim") {
    const Probe p = probe(candidate, command, backend);
    auto id = m_store->evaluations().record(p.request, p.site, result);
    EXPECT_TRUE(id.ok()) << (id.ok() ? "" : id.failure().describe());
    return id.ok() ? id.value() : 0;
  }

  std::optional<StoredEvaluation> covering(const std::string& candidate, EvalCommand command) {
    return lookup(*m_store, probe(candidate, command));
  }

  TempDir m_dir;
  std::unique_ptr<Store> m_store;
  std::string m_problem;
  std::string m_a;
  std::string m_b;
};

// -- Opening -----------------------------------------------------------------------------------

TEST(StoreOpen, CreatesMissingFoldersAndUsesWal) {
  TempDir dir;
  const fs::path path = dir.path() / "nested" / "deeper" / "autocomp.db";
  auto store = open_store(path);
  ASSERT_NE(store, nullptr);
  EXPECT_TRUE(fs::exists(path));
  EXPECT_EQ(store->path(), path.string());
  ASSERT_TRUE(store->evaluations().put_candidate(k_kernel_a, "user").ok());
  EXPECT_TRUE(fs::exists(path.string() + "-wal"));
}

TEST(StoreOpen, DefaultPathHonoursXdgDataHomeThenHome) {
  const char* old_xdg = std::getenv("XDG_DATA_HOME");
  const char* old_home = std::getenv("HOME");
  const std::string saved_xdg = old_xdg != nullptr ? old_xdg : "";
  const std::string saved_home = old_home != nullptr ? old_home : "";

  setenv("XDG_DATA_HOME", "/data/xdg", 1);
  setenv("HOME", "/home/someone", 1);
  EXPECT_EQ(Store::default_path(), "/data/xdg/autocomp-mcp/autocomp.db");
  unsetenv("XDG_DATA_HOME");
  EXPECT_EQ(Store::default_path(), "/home/someone/.local/share/autocomp-mcp/autocomp.db");

  if (old_xdg != nullptr) {
    setenv("XDG_DATA_HOME", saved_xdg.c_str(), 1);
  }
  if (old_home != nullptr) {
    setenv("HOME", saved_home.c_str(), 1);
  }
}

TEST(StoreOpen, RefusesAFileThatIsNotADatabase) {
  TempDir dir;
  const fs::path path = dir.path() / "notes.db";
  std::ofstream(path) << "this is a text file, not a database, and it is long enough to matter\n"
                      << std::string(200, 'x');
  auto store = Store::open(path.string());
  ASSERT_FALSE(store.ok());
  EXPECT_EQ(store.failure().kind, FailureKind::io_error);
  EXPECT_NE(store.failure().message.find(path.string()), std::string::npos);
}

TEST(StoreOpen, RefusesADatabaseFromANewerVersion) {
  TempDir dir;
  const fs::path path = dir.path() / "future.db";
  raw_exec(path, "CREATE TABLE something (x); PRAGMA user_version = 999;");
  auto store = Store::open(path.string());
  ASSERT_FALSE(store.ok());
  EXPECT_EQ(store.failure().kind, FailureKind::invalid_argument);
  EXPECT_NE(store.failure().message.find("newer"), std::string::npos) << store.failure().message;
  EXPECT_NE(store.failure().message.find("999"), std::string::npos);
}

TEST(StoreOpen, MigratesAnOldDatabaseAndKeepsItsRows) {
  TempDir dir;
  const fs::path path = dir.path() / "old.db";
  // A database as the first released schema left it, with one candidate in it.
  const auto& steps = migrations();
  ASSERT_GE(steps.size(), 2u);
  raw_exec(path, std::string(steps.front().sql) + "PRAGMA user_version = 1;");
  const std::string key = core::source_key(k_kernel_a);
  raw_exec(path, "INSERT INTO candidates (key, source, origin, created_at) VALUES ('" + key +
                     "', '" + k_kernel_a + "', 'user', 1)");

  auto store = open_store(path);
  ASSERT_NE(store, nullptr);
  auto candidate = store->evaluations().get_candidate(key);
  ASSERT_TRUE(candidate.ok());
  ASSERT_TRUE(candidate.value().has_value());
  EXPECT_EQ(candidate.value()->source, k_kernel_a);
  // The later steps' tables work.
  RunConfig config;
  config.target = "trn2";
  EXPECT_TRUE(store->runs().create_run(config).ok());
  Lesson lesson;
  lesson.target = "trn2";
  lesson.text = "fuse the loads";
  EXPECT_TRUE(store->memory().add_lesson(lesson).ok());
  store.reset();

  sqlite3* db = nullptr;
  ASSERT_EQ(sqlite3_open(path.string().c_str(), &db), SQLITE_OK);
  sqlite3_stmt* stmt = nullptr;
  ASSERT_EQ(sqlite3_prepare_v2(db, "PRAGMA user_version", -1, &stmt, nullptr), SQLITE_OK);
  ASSERT_EQ(sqlite3_step(stmt), SQLITE_ROW);
  EXPECT_EQ(sqlite3_column_int(stmt, 0), Store::schema_version());
  sqlite3_finalize(stmt);
  sqlite3_close(db);
}

// A version-4 database as the previous release left it: facts kept inside text (an origin label in
// a note, a budget stop in a status message, an origin label in an LLM call's prompt, the engine's
// configuration in config_json) move to their own columns, and nothing else changes.
TEST(StoreOpen, MigratesASchema4DatabaseMovingFactsOutOfText) {
  TempDir dir;
  const fs::path path = dir.path() / "v4.db";
  std::string sql;
  for (const auto& step : migrations()) {
    if (step.version <= 4) {
      sql += std::string(step.sql);
    }
  }
  const std::string problem = core::source_key(k_problem);
  const std::string a = core::source_key(k_kernel_a);
  const std::string b = core::source_key(k_kernel_b);
  sql += "INSERT INTO workloads VALUES ('" + problem + "', 'src', '/p.py', 1);";
  sql +=
      "INSERT INTO candidates VALUES ('" + a + "', 'a', 'user', 1), ('" + b + "', 'b', 'llm', 2);";
  const std::string run_columns =
      "(id, kernel_path, problem_path, problem_key, seed_candidate_key, target, backend, "
      "llm_specs, beam, plans, impls, iterations, dropout, rng_seed, config_json, status, "
      "status_message, owner_pid, owner_host, created_at, updated_at) ";
  sql += "INSERT INTO runs " + run_columns + "VALUES ('aaaaaaaaaaaa', 'k.py', 'p.py', '" + problem +
         "', '" + a +
         "', 'trn2', 'sim', '[]', 2, 2, 1, 3, 0.5, '7', 'beam=2\nplans=2\n', 'completed', "
         "'budget_exhausted: LLM call budget reached (4 calls)', 1, 'h', 1, 2);";
  sql += "INSERT INTO runs " + run_columns + "VALUES ('bbbbbbbbbbbb', 'k.py', 'p.py', '" + problem +
         "', '" + a +
         "', 'trn2', 'sim', '[]', 2, 2, 1, 3, 0.5, '7', '', 'completed', "
         "'all iterations done', 1, 'h', 1, 2);";
  sql +=
      "INSERT INTO run_candidates (run_id, candidate_key, iteration, parent_key, plan_text, "
      "provider, status, note, created_at, updated_at) VALUES ('aaaaaaaaaaaa', '" +
      a +
      "', 0, '', '', 'seed', 'accepted', 'origin=i0/m0/p0/k0/r0/seed', 1, 1), ('aaaaaaaaaaaa', '" +
      b + "', 1, '" + a + "', 'plan', 'llm', 'rejected', 'slower than its parent', 1, 1);";
  sql +=
      "INSERT INTO llm_calls (run_id, request_hash, purpose, provider, prompt, response, "
      "input_tokens, output_tokens, cost_usd, latency_ms, attempts, created_at) VALUES "
      "('aaaaaaaaaaaa', 'h1', 'implement', 'fake', 'i1/m0/p0/k0/r0/llm', 'code', 5, 6, 0, 1, 1, "
      "1), ('', 'h2', 'plan', 'fake', 'Plan a faster kernel', 'plan', 1, 1, 0, 1, 1, 1);";
  sql +=
      "INSERT INTO lessons (target, text, kind, source_run, speedup, evidence, created_at, seq) "
      "VALUES ('trn2', 'fuse the loads', 'improvement', 'aaaaaaaaaaaa', 1.5, '', 1, 1);";
  sql += "PRAGMA user_version = 4;";
  raw_exec(path, sql);

  auto store = open_store(path);
  ASSERT_NE(store, nullptr);
  auto budget = store->runs().get_run("aaaaaaaaaaaa").value();
  ASSERT_TRUE(budget.has_value());
  EXPECT_EQ(budget->status, RunStatus::budget_exhausted);
  EXPECT_EQ(budget->status_message, "LLM call budget reached (4 calls)");
  EXPECT_EQ(budget->config.beam, 2);
  // Its settings text had none of the later settings: they take the values it meant.
  auto settings = nlohmann::json::parse(budget->config.settings);
  EXPECT_EQ(settings.at("memory"), false);
  EXPECT_EQ(settings.at("reflexions"), 0);
  EXPECT_EQ(settings.at("lesson_limit"), 16);
  EXPECT_EQ(settings.at("proposers"), nlohmann::json::array());
  auto done = store->runs().get_run("bbbbbbbbbbbb").value();
  ASSERT_TRUE(done.has_value());
  EXPECT_EQ(done->config.settings, "{}") << "a run without settings text has none";
  EXPECT_EQ(done->status, RunStatus::completed);
  EXPECT_EQ(done->status_message, "all iterations done");

  auto candidates = store->runs().run_candidates("aaaaaaaaaaaa").value();
  ASSERT_EQ(candidates.size(), 2u);
  EXPECT_EQ(candidates[0].origin, "i0/m0/p0/k0/r0/seed");
  EXPECT_EQ(candidates[0].note, "");
  EXPECT_EQ(candidates[1].origin, "");
  EXPECT_EQ(candidates[1].note, "slower than its parent");
  EXPECT_EQ(candidates[1].status, CandidateStatus::rejected);

  auto calls = store->llm_calls().llm_calls("aaaaaaaaaaaa").value();
  ASSERT_EQ(calls.size(), 1u);
  EXPECT_EQ(calls[0].origin, "i1/m0/p0/k0/r0/llm");
  EXPECT_EQ(calls[0].prompt, "");
  EXPECT_EQ(calls[0].usage.output_tokens, 6);
  auto outside = store->llm_calls().find_llm_response("", "h2").value();
  ASSERT_TRUE(outside.has_value());
  EXPECT_EQ(outside->origin, "");
  EXPECT_EQ(outside->prompt, "Plan a faster kernel");

  auto lessons = store->memory().lessons("trn2").value();
  ASSERT_EQ(lessons.size(), 1u);
  EXPECT_EQ(lessons[0].text, "fuse the loads");
  EXPECT_EQ(lessons[0].problem_key, "");
  EXPECT_EQ(store->evaluations().get_candidate(b).value()->origin, "llm");

  // The migrated file is now at the current version and takes new rows of every kind.
  Lesson lesson;
  lesson.target = "trn2";
  lesson.text = "keep tiles in SBUF";
  lesson.problem_key = problem;
  ASSERT_TRUE(store->memory().add_lesson(lesson).ok());
  EXPECT_EQ(store->memory().lessons("trn2").value().front().problem_key, problem);
  store.reset();
  sqlite3* db = nullptr;
  ASSERT_EQ(sqlite3_open(path.string().c_str(), &db), SQLITE_OK);
  sqlite3_stmt* stmt = nullptr;
  ASSERT_EQ(sqlite3_prepare_v2(db, "PRAGMA user_version", -1, &stmt, nullptr), SQLITE_OK);
  ASSERT_EQ(sqlite3_step(stmt), SQLITE_ROW);
  EXPECT_EQ(sqlite3_column_int(stmt, 0), Store::schema_version());
  EXPECT_EQ(Store::schema_version(), 7);
  sqlite3_finalize(stmt);
  sqlite3_close(db);
}

// Schema 6: the engine's settings, a key=value text until then, become a JSON object.
TEST(StoreOpen, MigratesASchema5DatabaseTurningTheSettingsTextIntoJson) {
  TempDir dir;
  const fs::path path = dir.path() / "v5.db";
  std::string sql;
  for (const auto& step : migrations()) {
    if (step.version <= 5) {
      sql += std::string(step.sql);
    }
  }
  const std::string problem = core::source_key(k_problem);
  const std::string a = core::source_key(k_kernel_a);
  sql += "INSERT INTO workloads VALUES ('" + problem + "', 'src', '/p.py', 1);";
  sql += "INSERT INTO candidates VALUES ('" + a + "', 'a', 'user', 1);";
  // Values escaped as the old text did: \\ for a backslash, \n for a line break.
  const std::string text =
      "format=autocomp-search-config/1\nkernel_filename=a\\\\b\\nc.py\nproblem_filename=p.py\n"
      "kernel_name=main\ntarget=trn2\nbeam=2\nplans=2\nimpls=1\niterations=3\ndropout=0.5\n"
      "seed=7\nrepair_tries=1\nearly_slack=1.25\nslack_iterations=3\nproposers=llm,autotune\n"
      "recent_failures=5\nmemory=1\nlesson_limit=9\nreflexions=2\ndivergence=1.75\n"
      "eval_seeds=0,21\nwarmup=1\niters=4\neval_timeout_ms=60000\nproblem_source=x\n"
      "kernel_source=y\n";
  sql +=
      "INSERT INTO runs (id, kernel_path, problem_path, problem_key, seed_candidate_key, target, "
      "backend, llm_specs, beam, plans, impls, iterations, dropout, rng_seed, engine_config, "
      "status, owner_pid, owner_host, created_at, updated_at) VALUES ('aaaaaaaaaaaa', 'k.py', "
      "'p.py', '" +
      problem + "', '" + a + "', 'trn2', 'sim', '[]', 2, 2, 1, 3, 0.5, '7', '" + text +
      "', 'completed', 1, 'h', 1, 2);";
  sql += "PRAGMA user_version = 5;";
  raw_exec(path, sql);

  auto store = open_store(path);
  ASSERT_NE(store, nullptr);
  auto run = store->runs().get_run("aaaaaaaaaaaa").value();
  ASSERT_TRUE(run.has_value());
  EXPECT_EQ(run->config.beam, 2);
  const auto settings = nlohmann::json::parse(run->config.settings);
  const auto expected = nlohmann::json::parse(R"({
      "kernel_filename": "a\\b\nc.py", "problem_filename": "p.py", "kernel_name": "main",
      "repair_tries": 1, "early_slack": 1.25, "slack_iterations": 3,
      "proposers": ["llm", "autotune"], "recent_failures": 5, "memory": true, "lesson_limit": 9,
      "reflexions": 2, "divergence": 1.75, "eval_seeds": [0, 21], "warmup": 1, "iters": 4,
      "eval_timeout_ms": 60000})");
  EXPECT_EQ(settings, expected) << settings.dump();

  // New runs take settings after the migration.
  RunConfig config = run->config;
  config.settings = R"({"memory":false})";
  auto id = store->runs().create_run(config);
  ASSERT_TRUE(id.ok()) << id.failure().describe();
  EXPECT_EQ(store->runs().get_run(id.value()).value()->config.settings, config.settings);
}

TEST(StoreOpen, ReopeningKeepsEverythingAndDoesNotMigrateAgain) {
  TempDir dir;
  const fs::path path = dir.path() / "a.db";
  std::string key;
  {
    auto store = open_store(path);
    key = store->evaluations().put_candidate(k_kernel_a, "user").value();
  }
  auto store = open_store(path);
  auto candidate = store->evaluations().get_candidate(key);
  ASSERT_TRUE(candidate.ok() && candidate.value().has_value());
  EXPECT_EQ(candidate.value()->origin, "user");
}

// -- Workloads and candidates -----------------------------------------------------------------

TEST_F(StoreTest, CandidatesAreKeyedByNormalizedSource) {
  EXPECT_EQ(m_a, core::source_key(k_kernel_a));
  // Trailing blanks and CRLF do not make a new candidate.
  auto same =
      m_store->evaluations().put_candidate("def kernel(a):   \r\n  return a\r\n\r\n", "agent");
  ASSERT_TRUE(same.ok());
  EXPECT_EQ(same.value(), m_a);
  auto stored = m_store->evaluations().get_candidate(m_a).value();
  ASSERT_TRUE(stored.has_value());
  EXPECT_EQ(stored->source, k_kernel_a);  // the first text is kept
  EXPECT_EQ(stored->origin, "user");
  EXPECT_FALSE(m_store->evaluations().get_candidate("0000").value().has_value());
}

TEST_F(StoreTest, WorkloadRemembersLatestPath) {
  auto again = m_store->evaluations().put_workload(k_problem, "/elsewhere/problem.py");
  ASSERT_TRUE(again.ok());
  EXPECT_EQ(again.value(), m_problem);
  auto workload = m_store->evaluations().get_workload(m_problem).value();
  ASSERT_TRUE(workload.has_value());
  EXPECT_EQ(workload->path, "/elsewhere/problem.py");
  EXPECT_EQ(workload->source, k_problem);
}

// -- Evaluations -------------------------------------------------------------------------------

TEST_F(StoreTest, EvaluationRoundTripsEveryField) {
  const EvalResult result = correct_result(42.0);
  const std::int64_t id = put(m_a, EvalCommand::evaluate, result);
  auto stored = m_store->evaluations().get_evaluation(id).value();
  ASSERT_TRUE(stored.has_value());
  EXPECT_EQ(stored->id, id);
  EXPECT_EQ(stored->key.candidate_key, m_a);
  EXPECT_EQ(stored->key.command, EvalCommand::evaluate);
  EXPECT_EQ(stored->key.seeds, "0,1");
  const EvalResult& got = stored->result;
  EXPECT_TRUE(got.ok());
  EXPECT_TRUE(got.verified);
  EXPECT_TRUE(got.correct);
  ASSERT_EQ(got.seeds.size(), 2u);
  EXPECT_EQ(got.seeds[1].seed, 1);
  EXPECT_DOUBLE_EQ(got.seeds[1].max_abs_err, 3e-6);
  ASSERT_TRUE(got.latency.has_value());
  EXPECT_DOUBLE_EQ(got.latency->median_us, 42.0);
  EXPECT_EQ(got.latency->samples_us, result.latency->samples_us);
  EXPECT_EQ(got.metrics, result.metrics);
  EXPECT_EQ(got.roofline, result.roofline);
  EXPECT_EQ(got.bottleneck, "memory-bound");
  EXPECT_EQ(got.host, "localhost");
  EXPECT_EQ(got.backend_identity, "sim");
  ASSERT_EQ(got.steps.size(), 1u);
  EXPECT_EQ(got.steps[0].step, "run");
  EXPECT_EQ(got.raw_json, result.raw_json);
  EXPECT_GT(stored->created_at_ms, 0);
}

TEST_F(StoreTest, FailureRoundTripsWithLine) {
  const std::int64_t id =
      put(m_a, EvalCommand::verify, failed_result(FailureKind::compile_error, "load"));
  auto stored = m_store->evaluations().get_evaluation(id).value();
  ASSERT_TRUE(stored.has_value());
  ASSERT_TRUE(stored->result.failure.has_value());
  EXPECT_EQ(stored->result.failure->kind, FailureKind::compile_error);
  EXPECT_EQ(stored->result.failure->stage, "load");
  EXPECT_EQ(stored->result.failure->line, 7);
  EXPECT_FALSE(stored->result.latency.has_value());
}

TEST_F(StoreTest, NonFiniteFiguresSurvive) {
  EvalResult result = correct_result(10.0);
  result.metrics["mfu_estimate"] = std::numeric_limits<double>::quiet_NaN();
  const std::int64_t id = put(m_a, EvalCommand::evaluate, result);
  auto stored = m_store->evaluations().get_evaluation(id).value();
  ASSERT_TRUE(stored.has_value());
  EXPECT_TRUE(std::isnan(stored->result.metrics.at("mfu_estimate")));
}

TEST_F(StoreTest, RecordingAnEvaluationStoresBothSources) {
  const std::string kernel = "def kernel(a):\n  return a + 0\n";
  const std::string problem = "def inputs(seed):\n  return {'a': 1}\n";
  const Probe p = probe_of(kernel, problem, EvalCommand::verify);
  auto id = m_store->evaluations().record(p.request, p.site, correct_result(1));
  ASSERT_TRUE(id.ok()) << id.failure().describe();
  auto candidate = m_store->evaluations().get_candidate(core::source_key(kernel)).value();
  ASSERT_TRUE(candidate.has_value());
  EXPECT_EQ(candidate->source, kernel);
  auto workload = m_store->evaluations().get_workload(core::source_key(problem)).value();
  ASSERT_TRUE(workload.has_value());
  EXPECT_EQ(workload->source, problem);
  // A candidate stored earlier keeps its origin.
  ASSERT_TRUE(m_store->evaluations()
                  .record(probe(m_b, EvalCommand::verify).request, p.site, correct_result(1))
                  .ok());
  EXPECT_EQ(m_store->evaluations().get_candidate(m_b).value()->origin, "llm");
}

TEST_F(StoreTest, FindEvaluationMatchesTheWholeKeyAndPrefersNewest) {
  put(m_a, EvalCommand::benchmark, correct_result(50));
  const std::int64_t newer = put(m_a, EvalCommand::benchmark, correct_result(40));
  auto found = covering(m_a, EvalCommand::benchmark);
  ASSERT_TRUE(found.has_value());
  EXPECT_EQ(found->id, newer);

  Probe other_harness = probe(m_a, EvalCommand::benchmark);
  other_harness.site.harness_version = "1.0.1";
  EXPECT_FALSE(lookup(*m_store, other_harness).has_value());
  Probe other_iters = probe(m_a, EvalCommand::benchmark);
  other_iters.request.iters = 100;
  EXPECT_FALSE(lookup(*m_store, other_iters).has_value());
  EXPECT_FALSE(lookup(*m_store, probe(m_a, EvalCommand::benchmark, "ssh://u@h:22")).has_value());
  EXPECT_FALSE(covering(m_b, EvalCommand::benchmark).has_value());
}

TEST_F(StoreTest, TransientFailuresAreKeptButNeverAnswer) {
  const std::int64_t id = put(m_a, EvalCommand::verify, failed_result(FailureKind::timeout, "run"));
  put(m_a, EvalCommand::verify, failed_result(FailureKind::transport_error, "connect"));
  EXPECT_TRUE(m_store->evaluations().get_evaluation(id).value().has_value());
  EXPECT_FALSE(covering(m_a, EvalCommand::verify).has_value());
  EXPECT_EQ(m_store->evaluations().evaluations_for_candidate(m_a).value().size(), 2u);
}

TEST_F(StoreTest, EvaluateAnswersVerifyBenchmarkAndProfile) {
  const std::int64_t id = put(m_a, EvalCommand::evaluate, correct_result(30));
  for (auto command :
       {EvalCommand::verify, EvalCommand::benchmark, EvalCommand::profile, EvalCommand::evaluate}) {
    auto found = covering(m_a, command);
    ASSERT_TRUE(found.has_value()) << static_cast<int>(command);
    EXPECT_EQ(found->id, id);
  }
}

TEST_F(StoreTest, VerifyDoesNotAnswerBenchmarkOrProfile) {
  put(m_a, EvalCommand::verify, correct_result(30));
  EXPECT_TRUE(covering(m_a, EvalCommand::verify).has_value());
  EXPECT_FALSE(covering(m_a, EvalCommand::benchmark).has_value());
  EXPECT_FALSE(covering(m_a, EvalCommand::profile).has_value());
  EXPECT_FALSE(covering(m_a, EvalCommand::evaluate).has_value());
}

TEST_F(StoreTest, BenchmarkCoverageNeedsSameWarmupAndIters) {
  put(m_a, EvalCommand::evaluate, correct_result(30));
  Probe p = probe(m_a, EvalCommand::benchmark);
  p.request.iters = 50;
  EXPECT_FALSE(lookup(*m_store, p).has_value());
  // Verify ignores timing options.
  p.request.command = EvalCommand::verify;
  EXPECT_TRUE(lookup(*m_store, p).has_value());
  // Different seeds never match.
  p.request.seeds = {0, 1, 2};
  EXPECT_FALSE(lookup(*m_store, p).has_value());
}

TEST_F(StoreTest, IncorrectEvaluateAnswersVerifyButNotBenchmark) {
  put(m_a, EvalCommand::evaluate, failed_result(FailureKind::mismatch, "verify"));
  auto verify = covering(m_a, EvalCommand::verify);
  ASSERT_TRUE(verify.has_value());
  EXPECT_EQ(verify->result.failure->kind, FailureKind::mismatch);
  EXPECT_FALSE(covering(m_a, EvalCommand::benchmark).has_value());
}

TEST_F(StoreTest, FailedVerifyAnswersEvaluate) {
  put(m_a, EvalCommand::verify, failed_result(FailureKind::mismatch, "verify"));
  auto found = covering(m_a, EvalCommand::evaluate);
  ASSERT_TRUE(found.has_value());
  EXPECT_EQ(found->key.command, EvalCommand::verify);
}

TEST_F(StoreTest, CompileErrorAnswersEveryCommand) {
  put(m_a, EvalCommand::verify, failed_result(FailureKind::compile_error, "load"));
  for (auto command :
       {EvalCommand::verify, EvalCommand::benchmark, EvalCommand::profile, EvalCommand::evaluate}) {
    auto found = covering(m_a, command);
    ASSERT_TRUE(found.has_value()) << static_cast<int>(command);
    EXPECT_EQ(found->result.failure->kind, FailureKind::compile_error);
  }
}

TEST_F(StoreTest, FreshReRunIsTheNewAnswer) {
  put(m_a, EvalCommand::evaluate, correct_result(30));
  const std::int64_t fresh = put(m_a, EvalCommand::verify, correct_result(30));
  auto found = covering(m_a, EvalCommand::verify);
  ASSERT_TRUE(found.has_value());
  EXPECT_EQ(found->id, fresh);
}

TEST(StoreKeys, MakeEvalKeyHashesSourcesAndCanonicalisesSeeds) {
  backends::EvalRequest request;
  request.command = EvalCommand::benchmark;
  request.kernel_source = k_kernel_a;
  request.problem_source = k_problem;
  request.target = "trn1";
  request.seeds = {3, 1, 2};
  request.iters = 20;
  const EvalKey key =
      make_eval_key(request, EvalSite{"ssh://u@h:22?device=neuron", "neuron", "2.0", "a:f32[2]"});
  EXPECT_EQ(key.candidate_key, core::source_key(k_kernel_a));
  EXPECT_EQ(key.problem_key, core::source_key(k_problem));
  EXPECT_EQ(key.target, "trn1");
  EXPECT_EQ(key.seeds, "3,1,2");
  EXPECT_EQ(key.iters, 20);
  EXPECT_EQ(key.harness_version, "2.0");
  EXPECT_EQ(key.input_signature, "a:f32[2]");
  EXPECT_EQ(canonical_seeds({}), "");
}

// -- Kernel files ------------------------------------------------------------------------------

TEST_F(StoreTest, BestForFileSurvivesRegressionsAndIgnoresWrongVersions) {
  const std::string path = "/home/u/kernel.py";
  const std::string slow = m_store->evaluations().put_candidate("v1", "agent").value();
  const std::string fast = m_store->evaluations().put_candidate("v2", "agent").value();
  const std::string regressed = m_store->evaluations().put_candidate("v3", "agent").value();
  const std::string wrong = m_store->evaluations().put_candidate("v4", "agent").value();
  const std::string elsewhere = m_store->evaluations().put_candidate("v5", "agent").value();
  put(slow, EvalCommand::evaluate, correct_result(100));
  const std::int64_t fast_id = put(fast, EvalCommand::evaluate, correct_result(80));
  put(regressed, EvalCommand::evaluate, correct_result(120));
  put(wrong, EvalCommand::evaluate, failed_result(FailureKind::mismatch, "verify"));
  put(elsewhere, EvalCommand::evaluate, correct_result(10));  // never in this file
  for (const auto& key : {slow, fast, regressed, wrong}) {
    ASSERT_TRUE(m_store->files().record_file_version(path, key, m_problem, "trn2").ok());
  }
  ASSERT_TRUE(m_store->files().record_file_version("/other.py", elsewhere, m_problem, "trn2").ok());

  auto best = m_store->files().best_for_file(path, m_problem, "trn2").value();
  ASSERT_TRUE(best.has_value());
  EXPECT_EQ(best->candidate_key, fast);
  EXPECT_EQ(best->source, "v2");  // as first stored
  EXPECT_DOUBLE_EQ(best->median_us, 80);
  EXPECT_EQ(best->evaluation_id, fast_id);
  EXPECT_EQ(m_store->files().file_versions(path).value().size(), 4u);
  EXPECT_EQ(m_store->files().file_versions(path).value().front().candidate_key, wrong);
  EXPECT_FALSE(m_store->files().best_for_file(path, m_problem, "trn1").value().has_value());
  EXPECT_FALSE(
      m_store->files().best_for_file("/nothing.py", m_problem, "trn2").value().has_value());
}

TEST_F(StoreTest, BestForFileNeverComparesAcrossBackends) {
  const std::string path = "/k.py";
  ASSERT_TRUE(m_store->files().record_file_version(path, m_a, m_problem, "trn2").ok());
  ASSERT_TRUE(m_store->files().record_file_version(path, m_b, m_problem, "trn2").ok());
  put(m_a, EvalCommand::evaluate, correct_result(5), "sim");  // simulated, looks fast
  put(m_a, EvalCommand::evaluate, correct_result(60), "ssh://u@h:22");
  put(m_b, EvalCommand::evaluate, correct_result(50), "ssh://u@h:22");
  // Newest qualifying evaluation is on the real device: judge there.
  auto best = m_store->files().best_for_file(path, m_problem, "trn2").value();
  ASSERT_TRUE(best.has_value());
  EXPECT_EQ(best->candidate_key, m_b);
  EXPECT_EQ(best->backend_identity, "ssh://u@h:22");
  auto sim = m_store->files().best_for_file(path, m_problem, "trn2", "sim").value();
  ASSERT_TRUE(sim.has_value());
  EXPECT_EQ(sim->candidate_key, m_a);
}

TEST_F(StoreTest, RecordingAVersionAgainMakesItTheNewest) {
  const std::string path = "/k.py";
  ASSERT_TRUE(m_store->files().record_file_version(path, m_a, m_problem, "trn2").ok());
  ASSERT_TRUE(m_store->files().record_file_version(path, m_b, m_problem, "trn2").ok());
  ASSERT_TRUE(m_store->files().record_file_version(path, m_a, m_problem, "trn2").ok());  // reverted
  auto versions = m_store->files().file_versions(path).value();
  ASSERT_EQ(versions.size(), 2u);
  EXPECT_EQ(versions[0].candidate_key, m_a);
  EXPECT_EQ(versions[1].candidate_key, m_b);
}

TEST_F(StoreTest, FileVersionNeedsStoredCandidate) {
  auto status =
      m_store->files().record_file_version("/k.py", std::string(64, 'a'), m_problem, "trn2");
  ASSERT_FALSE(status.ok());
  EXPECT_EQ(status.failure().kind, FailureKind::invalid_argument);
}

// -- Runs --------------------------------------------------------------------------------------

RunConfig sample_config(const std::string& problem_key, const std::string& seed_key) {
  RunConfig config;
  config.kernel_path = "/k.py";
  config.problem_path = "/p.py";
  config.problem_key = problem_key;
  config.seed_candidate_key = seed_key;
  config.target = "trn2";
  config.backend = "sim";
  config.llm_specs = {"openai:gpt-4o", "anthropic:claude"};
  config.beam = 3;
  config.rng_seed = 18446744073709551615ull;
  config.budgets.max_cost_usd = 2.5;
  config.budgets.max_llm_calls = 100;
  config.settings = "{\"repair_tries\":3}";
  return config;
}

TEST_F(StoreTest, RunRoundTripsConfigAndStatus) {
  const std::string id = m_store->runs().create_run(sample_config(m_problem, m_a)).value();
  EXPECT_EQ(id.size(), 12u);
  auto run = m_store->runs().get_run(id).value();
  ASSERT_TRUE(run.has_value());
  EXPECT_EQ(run->status, RunStatus::running);
  EXPECT_EQ(run->config.llm_specs.size(), 2u);
  EXPECT_EQ(run->config.rng_seed, 18446744073709551615ull);
  EXPECT_EQ(run->config.budgets.max_cost_usd, 2.5);
  EXPECT_EQ(run->config.budgets.max_llm_calls, 100);
  EXPECT_FALSE(run->config.budgets.max_tokens.has_value());
  EXPECT_EQ(run->config.settings, "{\"repair_tries\":3}");
  RunConfig not_json = sample_config(m_problem, m_a);
  not_json.settings = "repair_tries=3";
  auto refused = m_store->runs().create_run(not_json);
  ASSERT_FALSE(refused.ok());
  EXPECT_EQ(refused.failure().kind, FailureKind::invalid_argument);
  EXPECT_EQ(run->owner_pid, static_cast<int>(getpid()));
  EXPECT_FALSE(run->finished_at_ms.has_value());

  // A unique prefix finds it.
  auto by_prefix = m_store->runs().get_run(id.substr(0, 6)).value();
  ASSERT_TRUE(by_prefix.has_value());
  EXPECT_EQ(by_prefix->id, id);

  ASSERT_TRUE(m_store->runs().set_run_progress(id, 2, m_b, 20.0, 40.0).ok());
  ASSERT_TRUE(m_store->runs().set_run_status(id, RunStatus::completed, "done").ok());
  run = m_store->runs().get_run(id).value();
  EXPECT_EQ(run->status, RunStatus::completed);
  EXPECT_EQ(run->status_message, "done");
  EXPECT_TRUE(run->finished_at_ms.has_value());
  EXPECT_EQ(run->iteration, 2);
  EXPECT_EQ(run->best_candidate_key, m_b);
  EXPECT_EQ(run->best_latency_us, 20.0);
  EXPECT_EQ(run->baseline_latency_us, 40.0);

  ASSERT_TRUE(m_store->runs().claim_run(id).ok());
  EXPECT_EQ(m_store->runs().get_run(id).value()->status, RunStatus::running);

  EXPECT_FALSE(m_store->runs().set_run_status("nope", RunStatus::failed).ok());
  EXPECT_FALSE(m_store->runs().get_run("zzzz").value().has_value());

  // A run stopped by a budget says so in its status; the message is only the reason.
  ASSERT_TRUE(m_store->runs()
                  .set_run_status(id, RunStatus::budget_exhausted, "LLM call budget reached")
                  .ok());
  run = m_store->runs().get_run(id).value();
  EXPECT_EQ(run->status, RunStatus::budget_exhausted);
  EXPECT_EQ(run->status_message, "LLM call budget reached");
  EXPECT_TRUE(run->finished_at_ms.has_value());
}

TEST_F(StoreTest, OriginsOfRunCandidatesAndLlmCallsHaveTheirOwnColumns) {
  const std::string id = m_store->runs().create_run(sample_config(m_problem, m_a)).value();
  RunCandidate candidate = make_run_candidate(id, 1, m_b, m_a, "plan", "llm");
  candidate.origin = "i1/m0/p2/k1/r0/llm";
  candidate.note = "slower than its parent";
  ASSERT_TRUE(m_store->runs().add_run_candidate(candidate).value());
  auto stored = m_store->runs().get_run_candidate(id, m_b).value();
  ASSERT_TRUE(stored.has_value());
  EXPECT_EQ(stored->origin, "i1/m0/p2/k1/r0/llm");
  EXPECT_EQ(stored->note, "slower than its parent");

  LlmCall call;
  call.run_id = id;
  call.request_hash = "h";
  call.origin = "i1/m0/p2/k1/r0/llm";
  call.prompt = "the prompt";
  ASSERT_TRUE(m_store->llm_calls().put_llm_call(call).ok());
  auto found = m_store->llm_calls().find_llm_response(id, "h").value();
  ASSERT_TRUE(found.has_value());
  EXPECT_EQ(found->origin, "i1/m0/p2/k1/r0/llm");
  EXPECT_EQ(found->prompt, "the prompt");
}

TEST_F(StoreTest, ListRunsNewestFirst) {
  std::vector<std::string> ids;
  for (int i = 0; i < 3; ++i) {
    ids.push_back(m_store->runs().create_run(sample_config(m_problem, m_a)).value());
  }
  auto runs = m_store->runs().list_runs(2).value();
  ASSERT_EQ(runs.size(), 2u);
  EXPECT_EQ(runs[0].id, ids[2]);
  EXPECT_EQ(runs[1].id, ids[1]);
}

TEST_F(StoreTest, BeamsAreReplacedPerIteration) {
  const std::string id = m_store->runs().create_run(sample_config(m_problem, m_a)).value();
  ASSERT_TRUE(m_store->runs().record_beam(id, 0, {m_a}).ok());
  ASSERT_TRUE(m_store->runs().record_beam(id, 1, {m_a, m_b}).ok());
  ASSERT_TRUE(m_store->runs().record_beam(id, 1, {m_b, m_a}).ok());  // re-recorded on resume
  auto beams = m_store->runs().get_beams(id).value();
  ASSERT_EQ(beams.size(), 2u);
  EXPECT_EQ(beams[0].members, std::vector<std::string>{m_a});
  EXPECT_EQ(beams[1].members, (std::vector<std::string>{m_b, m_a}));
  EXPECT_FALSE(m_store->runs().record_beam("missing", 0, {m_a}).ok());
}

TEST_F(StoreTest, RunCandidatesKeepLineageAndAreNeverDuplicated) {
  const std::string id = m_store->runs().create_run(sample_config(m_problem, m_a)).value();
  const std::string c = m_store->evaluations().put_candidate("child of b", "llm").value();
  RunCandidate seed = make_run_candidate(id, 0, m_a, "", "", "seed");
  RunCandidate b = make_run_candidate(id, 1, m_b, m_a, "tile the loop by 128", "openai:gpt-4o");
  RunCandidate child =
      make_run_candidate(id, 2, c, m_b, "double buffer the DMA", "anthropic:claude");
  EXPECT_TRUE(m_store->runs().add_run_candidate(seed).value());
  EXPECT_TRUE(m_store->runs().add_run_candidate(b).value());
  EXPECT_TRUE(m_store->runs().add_run_candidate(child).value());
  RunCandidate again = b;
  again.plan_text = "something else";
  EXPECT_FALSE(
      m_store->runs().add_run_candidate(again).value());  // same source: not twice in a run

  const std::int64_t eval_b = put(m_b, EvalCommand::evaluate, correct_result(25));
  const std::int64_t eval_seed = put(m_a, EvalCommand::evaluate, correct_result(40));
  const std::int64_t eval_c =
      put(c, EvalCommand::evaluate, failed_result(FailureKind::runtime_error, "verify"));
  ASSERT_TRUE(
      m_store->runs().update_run_candidate(id, m_a, CandidateStatus::accepted, eval_seed).ok());
  ASSERT_TRUE(
      m_store->runs().update_run_candidate(id, m_b, CandidateStatus::accepted, eval_b).ok());
  ASSERT_TRUE(
      m_store->runs().update_run_candidate(id, c, CandidateStatus::failed, eval_c, "crash").ok());

  auto got = m_store->runs().get_run_candidate(id, m_b).value();
  ASSERT_TRUE(got.has_value());
  EXPECT_EQ(got->plan_text, "tile the loop by 128");
  EXPECT_EQ(got->status, CandidateStatus::accepted);
  EXPECT_EQ(got->evaluation_id, eval_b);
  EXPECT_EQ(got->median_us, 25.0);
  EXPECT_TRUE(got->correct);

  auto chain = m_store->runs().lineage(id, c).value();
  ASSERT_EQ(chain.size(), 3u);
  EXPECT_EQ(chain[0].candidate_key, m_a);
  EXPECT_EQ(chain[1].candidate_key, m_b);
  EXPECT_EQ(chain[2].note, "crash");

  auto counts = m_store->runs().run_counts(id).value();
  EXPECT_EQ(counts.candidates, 3);
  EXPECT_EQ(counts.evaluated, 3);
  EXPECT_EQ(counts.accepted, 2);
  EXPECT_EQ(counts.failed, 1);

  auto best = m_store->runs().best_for_run(id).value();
  ASSERT_TRUE(best.has_value());
  EXPECT_EQ(best->candidate_key, m_b);
  EXPECT_DOUBLE_EQ(best->median_us, 25.0);
  EXPECT_EQ(m_store->runs().run_candidates(id).value().size(), 3u);

  EXPECT_FALSE(m_store->runs()
                   .update_run_candidate(id, std::string(64, 'd'), CandidateStatus::rejected)
                   .ok());
  EXPECT_FALSE(m_store->runs().best_for_run("nope").ok());
}

TEST_F(StoreTest, StatusUpdateWithoutEvaluationKeepsFigures) {
  const std::string id = m_store->runs().create_run(sample_config(m_problem, m_a)).value();
  const std::int64_t eval = put(m_a, EvalCommand::evaluate, correct_result(33));
  RunCandidate seed = make_run_candidate(id, 0, m_a, "", "", "seed");
  seed.status = CandidateStatus::evaluated;
  seed.evaluation_id = eval;
  ASSERT_TRUE(m_store->runs().add_run_candidate(seed).value());
  ASSERT_TRUE(m_store->runs().update_run_candidate(id, m_a, CandidateStatus::rejected).ok());
  auto got = m_store->runs().get_run_candidate(id, m_a).value();
  EXPECT_EQ(got->status, CandidateStatus::rejected);
  EXPECT_EQ(got->evaluation_id, eval);
  EXPECT_EQ(got->median_us, 33.0);
}

TEST_F(StoreTest, RunsLeftRunningByADeadProcessAreInterrupted) {
  int fds[2];
  ASSERT_EQ(pipe(fds), 0);
  const pid_t child = fork();
  ASSERT_GE(child, 0);
  if (child == 0) {
    close(fds[0]);
    auto store = Store::open((m_dir.path() / "autocomp.db").string());
    std::string id = store ? store.value()->runs().create_run(RunConfig{}).value() : std::string();
    if (write(fds[1], id.data(), id.size()) < 0) {
      _exit(2);
    }
    _exit(0);
  }
  close(fds[1]);
  char buffer[32] = {};
  const ssize_t n = read(fds[0], buffer, sizeof buffer);
  close(fds[0]);
  int status = 0;
  waitpid(child, &status, 0);
  ASSERT_EQ(n, 12);
  const std::string orphan(buffer, 12);
  const std::string mine = m_store->runs().create_run(RunConfig{}).value();

  auto interrupted = m_store->runs().interrupt_orphaned_runs().value();
  EXPECT_EQ(interrupted, std::vector<std::string>{orphan});
  EXPECT_EQ(m_store->runs().get_run(orphan).value()->status, RunStatus::interrupted);
  EXPECT_EQ(m_store->runs().get_run(mine).value()->status, RunStatus::running);
}

// -- LLM calls ---------------------------------------------------------------------------------

TEST_F(StoreTest, LlmResponsesAreFoundAgainAndTotalled) {
  const std::string id = m_store->runs().create_run(sample_config(m_problem, m_a)).value();
  LlmCall call;
  call.run_id = id;
  call.request_hash = "h1";
  call.purpose = "plan";
  call.provider = "openai:gpt-4o";
  call.prompt = "make it fast";
  call.response = "1. tile";
  call.usage = {1000, 200, 0.01};
  call.latency_ms = 1500;
  ASSERT_TRUE(m_store->llm_calls().put_llm_call(call).ok());
  LlmCall second = call;
  second.request_hash = "h2";
  second.usage = {500, 100, 0.005};
  ASSERT_TRUE(m_store->llm_calls().put_llm_call(second).ok());
  LlmCall duplicate = call;
  duplicate.response = "a different answer";
  ASSERT_TRUE(m_store->llm_calls().put_llm_call(duplicate).ok());

  auto found = m_store->llm_calls().find_llm_response(id, "h1").value();
  ASSERT_TRUE(found.has_value());
  EXPECT_EQ(found->response, "1. tile");
  EXPECT_EQ(found->usage.input_tokens, 1000);
  EXPECT_FALSE(m_store->llm_calls().find_llm_response(id, "h3").value().has_value());
  auto totals = m_store->llm_calls().llm_totals(id).value();
  EXPECT_EQ(totals.calls, 2);
  EXPECT_EQ(totals.input_tokens, 1500);
  EXPECT_EQ(totals.output_tokens, 300);
  EXPECT_NEAR(totals.cost_usd, 0.015, 1e-12);
  EXPECT_EQ(m_store->llm_calls().llm_calls(id).value().size(), 2u);

  LlmCall outside = call;
  outside.run_id = "";
  ASSERT_TRUE(m_store->llm_calls().put_llm_call(outside).ok());
  EXPECT_TRUE(m_store->llm_calls().find_llm_response("", "h1").value().has_value());
  LlmCall unknown_run = call;
  unknown_run.run_id = "ffffffffffff";
  EXPECT_FALSE(m_store->llm_calls().put_llm_call(unknown_run).ok());
}

// -- Memory lessons ----------------------------------------------------------------------------

Lesson make_lesson(const std::string& target, const std::string& text, double speedup) {
  Lesson out;
  out.target = target;
  out.text = text;
  out.kind = speedup >= 1 ? "improvement" : "regression";
  out.speedup = speedup;
  return out;
}

TEST(StoreLessons, BoundedPerTargetEvictingTheWeakestFirst) {
  TempDir dir;
  StoreOptions options;
  options.lesson_limit = 4;
  auto store = open_store(dir.path() / "l.db", options);
  ASSERT_TRUE(store->memory().add_lesson(make_lesson("trn2", "big win", 3.0)).ok());
  ASSERT_TRUE(
      store->memory().add_lesson(make_lesson("trn2", "clear regression", 0.4)).ok());  // value 2.5
  ASSERT_TRUE(store->memory().add_lesson(make_lesson("trn2", "small win", 1.05)).ok());
  ASSERT_TRUE(store->memory().add_lesson(make_lesson("trn2", "medium win", 1.5)).ok());
  ASSERT_TRUE(store->memory().add_lesson(make_lesson("trn1", "other target", 1.01)).ok());
  ASSERT_TRUE(store->memory().add_lesson(make_lesson("trn2", "newest small", 1.04)).ok());

  auto kept = store->memory().lessons("trn2", 100).value();
  ASSERT_EQ(kept.size(), 4u);
  std::set<std::string> texts;
  for (const auto& l : kept) {
    texts.insert(l.text);
  }
  EXPECT_EQ(texts,
            (std::set<std::string>{"big win", "clear regression", "medium win", "newest small"}));
  EXPECT_EQ(kept.front().text, "newest small");  // newest first
  EXPECT_EQ(store->memory().lessons("trn1", 100).value().size(), 1u);
  EXPECT_EQ(store->memory().lessons("", 100).value().size(), 5u);
}

TEST(StoreLessons, RepeatedTextRefreshesInsteadOfDuplicating) {
  TempDir dir;
  auto store = open_store(dir.path() / "l.db");
  const auto first =
      store->memory().add_lesson(make_lesson("trn2", "use nc_matmul with 128 tiles", 1.2));
  ASSERT_TRUE(store->memory().add_lesson(make_lesson("trn2", "other", 1.1)).ok());
  const auto second =
      store->memory().add_lesson(make_lesson("trn2", "use nc_matmul with 128 tiles", 1.1));
  ASSERT_TRUE(first.ok() && second.ok());
  EXPECT_EQ(first.value(), second.value());
  auto kept = store->memory().lessons("trn2", 10).value();
  ASSERT_EQ(kept.size(), 2u);
  EXPECT_EQ(kept.front().text, "use nc_matmul with 128 tiles");
  EXPECT_DOUBLE_EQ(kept.front().speedup, 1.2);  // stronger evidence kept
}

TEST(StoreLessons, ClearByTargetOrAll) {
  TempDir dir;
  auto store = open_store(dir.path() / "l.db");
  ASSERT_TRUE(store->memory().add_lesson(make_lesson("trn2", "a", 1.2)).ok());
  ASSERT_TRUE(store->memory().add_lesson(make_lesson("trn2", "b", 1.2)).ok());
  ASSERT_TRUE(store->memory().add_lesson(make_lesson("trn1", "c", 1.2)).ok());
  EXPECT_EQ(store->memory().clear_lessons("trn2").value(), 2);
  EXPECT_EQ(store->memory().lessons("", 10).value().size(), 1u);
  EXPECT_EQ(store->memory().clear_lessons("").value(), 1);
  EXPECT_TRUE(store->memory().lessons("", 10).value().empty());
  EXPECT_FALSE(store->memory().add_lesson(make_lesson("", "no target", 1.2)).ok());
}

// -- Reflexions --------------------------------------------------------------------------------

TEST(StoreReflexions, RecentNewestFirstPerScope) {
  TempDir dir;
  auto store = open_store(dir.path() / "r.db");
  for (int i = 0; i < 4; ++i) {
    Reflexion r;
    r.scope = "/home/u/kernel.py";
    r.candidate_key = "k" + std::to_string(i);
    r.diagnosis_right = i % 2 == 0;
    r.lessons = "lesson " + std::to_string(i);
    r.try_next = "try " + std::to_string(i);
    ASSERT_TRUE(store->memory().add_reflexion(r).ok());
  }
  Reflexion other;
  other.scope = "abcdef123456";
  other.raw_text = "not json at all";
  ASSERT_TRUE(store->memory().add_reflexion(other).ok());

  auto recent = store->memory().recent_reflexions("/home/u/kernel.py", 2).value();
  ASSERT_EQ(recent.size(), 2u);
  EXPECT_EQ(recent[0].lessons, "lesson 3");
  EXPECT_EQ(recent[0].diagnosis_right, false);
  EXPECT_FALSE(recent[0].fix_worked.has_value());
  EXPECT_EQ(recent[1].try_next, "try 2");
  auto others = store->memory().recent_reflexions("abcdef123456", 5).value();
  ASSERT_EQ(others.size(), 1u);
  EXPECT_EQ(others[0].raw_text, "not json at all");
  Reflexion unscoped;
  EXPECT_FALSE(store->memory().add_reflexion(unscoped).ok());
}

// -- Concurrency -------------------------------------------------------------------------------

TEST(StoreConcurrency, ThreadsAndConnectionsWriteAtOnceWithoutLoss) {
  TempDir dir;
  const fs::path path = dir.path() / "c.db";
  auto shared = open_store(path);
  auto second = open_store(path);  // a second connection, as another process would have
  const std::string problem = shared->evaluations().put_workload(k_problem, "").value();
  const std::string run = shared->runs().create_run(RunConfig{}).value();
  constexpr int k_threads = 6;
  constexpr int k_per_thread = 40;
  std::vector<std::thread> threads;
  std::atomic<int> failures{0};
  for (int t = 0; t < k_threads; ++t) {
    threads.emplace_back([&, t] {
      Store& store = t % 2 == 0 ? *shared : *second;
      for (int i = 0; i < k_per_thread; ++i) {
        const std::string source = "kernel " + std::to_string(t) + " " + std::to_string(i);
        auto key = store.evaluations().put_candidate(source, "test");
        if (!key) {
          ++failures;
          continue;
        }
        const Probe evaluated = probe_of(source, k_problem, EvalCommand::evaluate);
        if (!store.evaluations().record(evaluated.request, evaluated.site,
                                        correct_result(10 + i))) {
          ++failures;
        }
        RunCandidate candidate = make_run_candidate(run, i, key.value(), "", "", "test");
        if (!store.runs().add_run_candidate(candidate)) {
          ++failures;
        }
        LlmCall call;
        call.run_id = run;
        call.request_hash = source;
        call.response = "r";
        if (!store.llm_calls().put_llm_call(call)) {
          ++failures;
        }
        if (!lookup(store, probe_of(source, k_problem, EvalCommand::verify)).has_value()) {
          ++failures;
        }
      }
    });
  }
  for (auto& thread : threads) {
    thread.join();
  }
  EXPECT_EQ(failures.load(), 0);
  EXPECT_EQ(shared->runs().run_candidates(run).value().size(),
            static_cast<std::size_t>(k_threads * k_per_thread));
  EXPECT_EQ(second->llm_calls().llm_totals(run).value().calls, k_threads * k_per_thread);
}

}  // namespace
}  // namespace autocomp::search::store
