#include <gtest/gtest.h>

#include <filesystem>

#include "search/engine/beam_search.hpp"
#include "search/engine/store_run_log.hpp"
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
    services.run_log = std::make_shared<StoreRunLog>(db, StoreRunInfo{"k.py", "p.py", "fake", {}});
    services.evaluations = store::share(db, db->evaluations());
    services.providers = {provider};
    services.prompts = std::shared_ptr<const PromptFactory>(make_template_prompt_factory(std::string(AUTOCOMP_SOURCE_DIR) + "/prompts"));
    config.budgets.max_llm_calls = 4;  // iteration 1 (3 calls) and the plan of iteration 2
    auto stopped = run_search(config, services, {});
    ASSERT_EQ(stopped.status, "budget_exhausted");
    run_id = stopped.run_id;
    auto record = services.run_log->load_run(run_id);
    ASSERT_TRUE(record.ok());
    EXPECT_EQ(record->status, "budget_exhausted");
  }
  auto opened = store::Store::open(path.string());
  ASSERT_TRUE(opened.ok());
  std::shared_ptr<store::Store> db(std::move(opened.value()));
  auto provider = std::make_shared<llm::FakeProvider>();
  provider->set_responder(script.responder());
  SearchServices services;
  services.backend = backend;
  services.run_log = std::make_shared<StoreRunLog>(db, StoreRunInfo{"k.py", "p.py", "fake", {}});
  services.evaluations = store::share(db, db->evaluations());
  services.providers = {provider};
  services.prompts = std::shared_ptr<const PromptFactory>(make_template_prompt_factory(std::string(AUTOCOMP_SOURCE_DIR) + "/prompts"));
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

}  // namespace
}  // namespace autocomp::search::engine
