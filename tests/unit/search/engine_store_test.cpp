#include <gtest/gtest.h>
#include <sqlite3.h>

#include <filesystem>
#include <nlohmann/json.hpp>

#include "search/engine/beam_search.hpp"
#include "search/engine/run_store.hpp"
#include "search/store/schema.hpp"
#include "search/store/store.hpp"
#include "unit/search/engine_test_support.hpp"

namespace autocomp::search::engine {
namespace {

using testing::kernel;
using testing::Script;

// The resume path over the real SQLite store in a file, as the CLI uses it.
TEST(EngineStore, StoppedRunResumesFromTheStoreWithoutRepeatingWork) {
  auto path = std::filesystem::temp_directory_path() /
              ("engine_store_test_" + std::to_string(::getpid()) + ".db");
  std::filesystem::remove(path);
  const std::string root = kernel("k", "latency: 100");
  Script script;
  std::string parent = root;
  for (int i = 1; i <= 3; ++i) {
    std::string child = kernel("k", "latency: " + std::to_string(100 - 10 * i));
    script.implement[parent] = child;
    parent = child;
  }
  auto config = testing::small_config(root);
  config.iterations = 3;
  config.impls = 2;  // the second implementation is a same-iteration duplicate

  auto backend = std::make_shared<testing::FakeBackend>();
  std::string run_id;
  {
    auto opened = store::Store::open(path.string());
    ASSERT_TRUE(opened.ok());
    std::shared_ptr<store::Store> db(std::move(opened.value()));
    auto provider = std::make_shared<llm::FakeProvider>();
    provider->set_responder(script.responder());
    SearchServices services;
    services.backend = backend;
    services.store = parts_of(db);
    services.facts = RunFacts{"k.py", "p.py", "fake", {}};
    services.providers = {provider};
    services.prompts = std::shared_ptr<const PromptFactory>(
        make_template_prompt_factory(std::string(AUTOCOMP_SOURCE_DIR) + "/prompts"));
    config.budgets.max_llm_calls = 4;  // iteration 1 (3 calls) and the plan of iteration 2
    auto stopped = run_search(config, services, {});
    ASSERT_EQ(stopped.status, "budget_exhausted");
    run_id = stopped.run_id;
    auto record = db->runs().get_run(run_id);
    ASSERT_TRUE(record.ok() && record.value());
    EXPECT_EQ(record.value()->status, store::RunStatus::budget_exhausted);
  }
  auto opened = store::Store::open(path.string());
  ASSERT_TRUE(opened.ok());
  std::shared_ptr<store::Store> db(std::move(opened.value()));
  auto provider = std::make_shared<llm::FakeProvider>();
  provider->set_responder(script.responder());
  SearchServices services;
  services.backend = backend;
  services.store = parts_of(db);
  services.facts = RunFacts{"k.py", "p.py", "fake", {}};
  services.providers = {provider};
  services.prompts = std::shared_ptr<const PromptFactory>(
      make_template_prompt_factory(std::string(AUTOCOMP_SOURCE_DIR) + "/prompts"));
  auto resumed = resume_search(run_id, services, {}, {}, Budgets{});
  ASSERT_EQ(resumed.status, "completed") << resumed.stop_reason;
  EXPECT_EQ(provider->call_count(), 5u) << "iteration 2 minus its stored plan, and iteration 3";
  EXPECT_EQ(resumed.llm_replayed, 1);
  EXPECT_DOUBLE_EQ(resumed.best.latency_us(), 70);
  EXPECT_EQ(resumed.lineage.size(), 4u);
  EXPECT_EQ(resumed.lineage[1].plan, script.plan);
  for (const auto& [from, to] : script.implement) {
    EXPECT_EQ(backend->evaluations_of(to), 1);
  }
  EXPECT_EQ(backend->evaluations_of(root), 1);
  auto beams = db->runs().get_beams(run_id);
  ASSERT_TRUE(beams.ok());
  EXPECT_EQ(beams->size(), 4u);
  auto counts = db->runs().run_counts(run_id);
  ASSERT_TRUE(counts.ok());
  EXPECT_EQ(counts->accepted, 4) << "the input and three improvements";
  std::filesystem::remove(path);
}

TEST(EngineStore, ARunsSettingsRoundTripThroughTheStore) {
  SearchConfig config;
  config.kernel_source = "def k(x):\n    return x  # back\\slash\n";
  config.problem_source = "def inputs(seed):\n    return {}\r\n";
  config.kernel_filename = "my kernel.py";
  config.problem_filename = "p\"q.py";
  config.kernel_name = "k";
  config.target = "trn1";
  config.beam = 3;
  config.plans = 4;
  config.impls = 5;
  config.iterations = 6;
  config.dropout = 0.25;
  config.seed = 18446744073709551615ULL;
  config.repair_tries = 1;
  config.early_slack = 1.2;
  config.slack_iterations = 1;
  config.proposers = {"llm", "autotune"};
  config.recent_failures = 7;
  config.eval_seeds = {0, 21, 42};
  config.warmup = 1;
  config.iters = 3;
  config.eval_timeout = std::chrono::milliseconds(12345);
  config.budgets.max_llm_calls = 10;
  config.budgets.max_cost_usd = 1.5;
  config.memory = false;
  config.lesson_limit = 5;
  config.reflexions = 2;
  config.divergence = 2.5;
  config.min_gain = 0.75;

  std::shared_ptr<store::Store> db(store::Store::open(":memory:").value());
  auto id = create_run(parts_of(db), config, RunFacts{"/k.py", "/p.py", "sim", {"fake"}});
  ASSERT_TRUE(id.ok()) << id.failure().describe();
  auto run = db->runs().get_run(id.value()).value();
  ASSERT_TRUE(run.has_value());
  // Any reader can take the settings apart; the columns are not repeated in them.
  auto settings = nlohmann::json::parse(run->config.settings);
  EXPECT_EQ(settings.at("repair_tries"), 1);
  EXPECT_EQ(settings.at("proposers"), nlohmann::json({"llm", "autotune"}));
  EXPECT_FALSE(settings.contains("beam"));
  EXPECT_FALSE(settings.contains("kernel_source"));

  auto back = config_of(*run, db->evaluations());
  ASSERT_TRUE(back.ok()) << back.failure().describe();
  EXPECT_EQ(back->kernel_source, config.kernel_source);
  EXPECT_EQ(back->problem_source, config.problem_source);
  EXPECT_EQ(back->kernel_filename, "my kernel.py");
  EXPECT_EQ(back->problem_filename, "p\"q.py");
  EXPECT_EQ(back->kernel_name, "k");
  EXPECT_EQ(back->target, "trn1");
  EXPECT_EQ(back->beam, 3);
  EXPECT_EQ(back->plans, 4);
  EXPECT_EQ(back->impls, 5);
  EXPECT_EQ(back->iterations, 6);
  EXPECT_DOUBLE_EQ(back->dropout, 0.25);
  EXPECT_EQ(back->seed, config.seed);
  EXPECT_EQ(back->repair_tries, 1);
  EXPECT_DOUBLE_EQ(back->early_slack, 1.2);
  EXPECT_EQ(back->slack_iterations, 1);
  EXPECT_EQ(back->min_gain, 0.75) << "a resumed run keeps its minimum gain";
  EXPECT_EQ(back->proposers, config.proposers);
  EXPECT_EQ(back->recent_failures, 7);
  EXPECT_EQ(back->eval_seeds, config.eval_seeds);
  EXPECT_EQ(back->warmup, 1);
  EXPECT_EQ(back->iters, 3);
  EXPECT_EQ(back->eval_timeout.count(), 12345);
  EXPECT_EQ(back->budgets.max_llm_calls, 10);
  EXPECT_FALSE(back->budgets.max_tokens.has_value());
  EXPECT_DOUBLE_EQ(*back->budgets.max_cost_usd, 1.5);
  EXPECT_FALSE(back->memory);
  EXPECT_EQ(back->lesson_limit, 5);
  EXPECT_EQ(back->reflexions, 2);
  EXPECT_DOUBLE_EQ(back->divergence, 2.5);
}

// A run stored by schema 5 kept the engine's settings as key=value text; once migrated it resumes
// with the settings it had (text written before the learning loop existed: without it).
TEST(EngineStore, ARunStoredBySchema5ResumesWithItsSettings) {
  const auto path = std::filesystem::temp_directory_path() /
                    ("engine_store_v5_" + std::to_string(::getpid()) + ".db");
  std::filesystem::remove(path);
  const std::string kernel_source = "def k(x):\n    return x\n";
  const std::string problem_source = "def inputs(seed):\n    return {}\n";
  const std::string kernel_key = core::source_key(kernel_source);
  const std::string problem_key = core::source_key(problem_source);
  const std::string text =
      "format=autocomp-search-config/1\nkernel_filename=a\\\\b\\nc.py\nproblem_filename=p.py\n"
      "kernel_name=\ntarget=trn1\nbeam=2\nplans=3\nimpls=1\niterations=4\ndropout=0.5\nseed=7\n"
      "repair_tries=1\nearly_slack=1.2\nslack_iterations=3\nproposers=llm,autotune\n"
      "recent_failures=5\neval_seeds=0,1,2\nwarmup=1\niters=4\neval_timeout_ms=60000\n"
      "max_llm_calls=9\nproblem_source=def inputs(seed):\\n    return {}\\n\n"
      "kernel_source=def k(x):\\n    return x\\n\n";
  std::string sql;
  for (const auto& step : store::migrations()) {
    if (step.version <= 5) {
      sql += std::string(step.sql);
    }
  }
  sql += "PRAGMA user_version = 5;";
  sqlite3* raw = nullptr;
  ASSERT_EQ(sqlite3_open(path.string().c_str(), &raw), SQLITE_OK);
  ASSERT_EQ(sqlite3_exec(raw, sql.c_str(), nullptr, nullptr, nullptr), SQLITE_OK);
  sqlite3_stmt* stmt = nullptr;
  ASSERT_EQ(sqlite3_prepare_v2(raw, "INSERT INTO workloads VALUES (?1, ?2, '/p.py', 1)", -1, &stmt,
                               nullptr),
            SQLITE_OK);
  sqlite3_bind_text(stmt, 1, problem_key.c_str(), -1, SQLITE_TRANSIENT);
  sqlite3_bind_text(stmt, 2, problem_source.c_str(), -1, SQLITE_TRANSIENT);
  ASSERT_EQ(sqlite3_step(stmt), SQLITE_DONE);
  sqlite3_finalize(stmt);
  ASSERT_EQ(sqlite3_prepare_v2(raw, "INSERT INTO candidates VALUES (?1, ?2, 'user', 1)", -1, &stmt,
                               nullptr),
            SQLITE_OK);
  sqlite3_bind_text(stmt, 1, kernel_key.c_str(), -1, SQLITE_TRANSIENT);
  sqlite3_bind_text(stmt, 2, kernel_source.c_str(), -1, SQLITE_TRANSIENT);
  ASSERT_EQ(sqlite3_step(stmt), SQLITE_DONE);
  sqlite3_finalize(stmt);
  ASSERT_EQ(sqlite3_prepare_v2(
                raw,
                "INSERT INTO runs (id, kernel_path, problem_path, problem_key, seed_candidate_key, "
                "target, backend, llm_specs, beam, plans, impls, iterations, dropout, rng_seed, "
                "max_llm_calls, engine_config, status, status_message, owner_pid, owner_host, "
                "created_at, updated_at) VALUES ('aaaaaaaaaaaa', 'k.py', 'p.py', ?1, ?2, 'trn1', "
                "'sim', '[]', 2, 3, 1, 4, 0.5, '7', 9, ?3, 'interrupted', '', 1, 'h', 1, 2)",
                -1, &stmt, nullptr),
            SQLITE_OK);
  sqlite3_bind_text(stmt, 1, problem_key.c_str(), -1, SQLITE_TRANSIENT);
  sqlite3_bind_text(stmt, 2, kernel_key.c_str(), -1, SQLITE_TRANSIENT);
  sqlite3_bind_text(stmt, 3, text.c_str(), -1, SQLITE_TRANSIENT);
  ASSERT_EQ(sqlite3_step(stmt), SQLITE_DONE);
  sqlite3_finalize(stmt);
  sqlite3_close(raw);

  {
    std::shared_ptr<store::Store> db(store::Store::open(path.string()).value());
    auto run = db->runs().get_run("aaaaaaaaaaaa").value();
    ASSERT_TRUE(run.has_value());
    auto config = config_of(*run, db->evaluations());
    ASSERT_TRUE(config.ok()) << config.failure().describe();
    EXPECT_EQ(config->kernel_source, kernel_source);
    EXPECT_EQ(config->problem_source, problem_source);
    EXPECT_EQ(config->kernel_filename, "a\\b\nc.py");
    EXPECT_EQ(config->target, "trn1");
    EXPECT_EQ(config->plans, 3);
    EXPECT_EQ(config->seed, 7u);
    EXPECT_EQ(config->repair_tries, 1);
    EXPECT_DOUBLE_EQ(config->early_slack, 1.2);
    EXPECT_EQ(config->slack_iterations, 3);
    EXPECT_EQ(config->proposers, (std::vector<std::string>{"llm", "autotune"}));
    EXPECT_EQ(config->recent_failures, 5);
    EXPECT_EQ(config->eval_seeds, (std::vector<int>{0, 1, 2}));
    EXPECT_EQ(config->warmup, 1);
    EXPECT_EQ(config->iters, 4);
    EXPECT_EQ(config->eval_timeout.count(), 60000);
    EXPECT_EQ(config->budgets.max_llm_calls, 9);
    // Written before the learning loop: it resumes without it, as it ran.
    EXPECT_FALSE(config->memory);
    EXPECT_EQ(config->lesson_limit, 16);
    EXPECT_EQ(config->reflexions, 0);
    EXPECT_DOUBLE_EQ(config->divergence, 0);
    auto valid = validate(*config);
    EXPECT_TRUE(valid.ok()) << valid.failure().describe();
  }
  std::filesystem::remove(path);
}

}  // namespace
}  // namespace autocomp::search::engine
