// The runner's seams: Generation (children in origin order, evaluated, duplicates marked,
// repairs bounded), after-batch steps, and how a search uses its store (each child written once,
// no reload of the run per iteration).

#include <gtest/gtest.h>

#include <mutex>
#include <string>
#include <thread>
#include <vector>

#include "search/engine/after_batch.hpp"
#include "search/engine/beam.hpp"
#include "search/engine/beam_search.hpp"
#include "search/engine/evaluator.hpp"
#include "search/engine/generation.hpp"
#include "search/engine/run_store.hpp"
#include "unit/search/engine_test_support.hpp"

namespace autocomp::search::engine {
namespace {

using testing::kernel;
using testing::Script;
using testing::small_config;

const std::string k_root = kernel("k", "latency: 100");

// Hands out scripted children in reverse origin order, each from its own thread, and repairs a
// failed child with the kernel the repair table names.
class ScriptedProposer : public Proposer {
 public:
  std::vector<Proposal> children;
  std::map<std::string, std::string> repairs;  // failed source -> repaired source
  std::atomic<int> repair_calls{0};

  std::string name() const override { return "scripted"; }
  void propose(const ProposeContext&, const std::vector<Parent>&, const ChildSink& sink) override {
    std::vector<std::thread> threads;
    for (auto it = children.rbegin(); it != children.rend(); ++it) {
      threads.emplace_back([&sink, proposal = *it] { sink(proposal); });
      threads.back().join();  // one at a time: the latest origin arrives first
    }
  }
  std::optional<Proposal> repair(const ProposeContext&, const RepairInput& input) override {
    ++repair_calls;
    auto it = repairs.find(input.failed.source);
    if (it == repairs.end()) {
      return std::nullopt;
    }
    Proposal repaired = input.failed;
    repaired.origin.repair += 1;
    repaired.source = it->second;
    return repaired;
  }
};

Proposal proposal(int plan, int impl, const std::string& source) {
  Proposal p;
  p.origin = Origin{1, 0, plan, impl, 0, "scripted"};
  p.parent_key = core::source_key(k_root);
  p.plan = "plan " + std::to_string(plan);
  p.source = source;
  return p;
}

struct GenerationRig {
  std::shared_ptr<testing::FakeBackend> backend = std::make_shared<testing::FakeBackend>();
  std::shared_ptr<store::Store> db{store::Store::open(":memory:").value()};
  SearchConfig config = small_config(k_root);
  StopControl stop;
  TaskPool pool{2};
  std::unique_ptr<Evaluator> evaluator;
  BeamStrategy strategy{config};
  Candidate root;

  GenerationRig() {
    evaluator = std::make_unique<Evaluator>(backend, parts_of(db).evaluations, config, stop);
    root.source = k_root;
    root.key = core::source_key(k_root);
    root.eval = evaluator->evaluate_now(root.key, root.source, &root.eval_ref);
    strategy.start(root);
  }
};

TEST(EngineGeneration, ChildrenComeBackInOriginOrderEvaluatedWithDuplicatesMarked) {
  GenerationRig rig;
  auto proposer = std::make_shared<ScriptedProposer>();
  const std::string fast = kernel("a", "latency: 60");
  const std::string slow = kernel("b", "latency: 90");
  const std::string broken = kernel("c", "compile_error");
  const std::string fixed = kernel("c", "latency: 70");
  proposer->children = {proposal(0, 0, fast), proposal(0, 1, slow), proposal(1, 0, broken),
                        proposal(1, 1, fast)};  // the last repeats the first
  proposer->repairs[broken] = fixed;
  std::vector<long> seen_evaluated;
  std::mutex mutex;
  Generation generation({proposer}, *rig.evaluator, rig.pool, rig.strategy, rig.stop,
                        /*repair_tries=*/2, [&](const ChildCounts& counts) {
                          std::lock_guard lock(mutex);
                          seen_evaluated.push_back(counts.evaluated);
                        });
  generation.set_best(100);
  RunKernels known;
  known.add(rig.root);
  const std::vector<Candidate> parents = {rig.root};
  ProposeContext ctx;
  ctx.config = &rig.config;
  ctx.stop = &rig.stop;
  ctx.pool = &rig.pool;

  const auto children = generation.run(ctx, {Parent{0, &parents[0]}}, known);
  ASSERT_EQ(children.size(), 5u) << "four children and one repair";
  for (std::size_t i = 1; i < children.size(); ++i) {
    EXPECT_TRUE(children[i - 1].origin < children[i].origin) << "origin order at " << i;
  }
  for (const auto& child : children) {
    EXPECT_EQ(child.key, core::source_key(child.source));
    EXPECT_FALSE(child.eval_ref.empty()) << child.origin.label() << " has its stored evaluation";
    EXPECT_FALSE(child.source.empty());
  }
  // p0/k0 arrived last but has the earlier origin: it is the original, p1/k1 the duplicate.
  EXPECT_FALSE(children[0].duplicate);
  EXPECT_TRUE(children[0].correct());
  EXPECT_DOUBLE_EQ(children[0].latency_us(), 60);
  EXPECT_EQ(children[2].origin.label(), "i1/m0/p1/k0/r0/scripted");
  EXPECT_EQ(children[2].eval.failure->kind, core::FailureKind::compile_error);
  EXPECT_EQ(children[3].origin.label(), "i1/m0/p1/k0/r1/scripted");
  EXPECT_EQ(children[3].key, core::source_key(fixed));
  EXPECT_TRUE(children[4].duplicate);
  EXPECT_EQ(proposer->repair_calls.load(), 1);
  EXPECT_EQ(rig.backend->evaluations_of(fast), 1);
  const ChildCounts counts = generation.counts();
  EXPECT_EQ(counts.evaluated, 5);
  EXPECT_EQ(counts.failed, 1);
  EXPECT_EQ(counts.duplicates, 1);
  EXPECT_EQ(counts.repairs, 1);
  EXPECT_DOUBLE_EQ(counts.best_latency_us, 60);
  EXPECT_EQ(seen_evaluated.size(), 5u) << "one observation per child";
}

TEST(EngineGeneration, AKernelOfAnEarlierBatchIsNotEvaluatedAgain) {
  GenerationRig rig;
  auto proposer = std::make_shared<ScriptedProposer>();
  proposer->children = {proposal(0, 0, k_root), proposal(0, 1, "")};
  Generation generation({proposer}, *rig.evaluator, rig.pool, rig.strategy, rig.stop, 2, {});
  RunKernels known;
  known.add(rig.root);
  const std::vector<Candidate> parents = {rig.root};
  ProposeContext ctx;
  const auto children = generation.run(ctx, {Parent{0, &parents[0]}}, known);
  ASSERT_EQ(children.size(), 2u);
  EXPECT_TRUE(children[0].duplicate);
  EXPECT_EQ(children[0].eval_ref, rig.root.eval_ref) << "the earlier evaluation is reused";
  EXPECT_TRUE(children[1].key.empty()) << "no code: a failed child without a key";
  ASSERT_TRUE(children[1].eval.failure.has_value());
  EXPECT_EQ(rig.backend->evaluations_of(k_root), 1);
  EXPECT_EQ(generation.counts().failed, 1);
  EXPECT_EQ(generation.counts().evaluated, 0);
}

// Records every batch it is given.
class RecordingStep : public AfterBatch {
 public:
  struct Seen {
    int iteration;
    std::size_t parents;
    std::vector<std::string> children;  // origin labels
    std::size_t next;
    bool finished;
  };
  std::vector<Seen> seen;
  void apply(const Batch& batch) override {
    Seen s{batch.iteration, batch.parents.size(), {}, batch.selection.next.size(), batch.finished};
    for (const auto& child : batch.children) {
      s.children.push_back(child.origin.label());
    }
    seen.push_back(std::move(s));
  }
};

TEST(EngineAfterBatch, AStepReceivesEachIterationOnceWithItsChildrenInOriginOrder) {
  testing::Rig rig;
  Script script;
  script.implement[k_root] = kernel("k", "latency: 90");
  script.implement[kernel("k", "latency: 90")] = kernel("k", "latency: 80");
  rig.provider->set_responder(script.responder());
  auto step = std::make_shared<RecordingStep>();
  SearchServices services = rig.services();
  services.after_batch = {step};
  auto config = small_config(k_root);
  config.iterations = 3;
  config.impls = 2;

  auto outcome = run_search(config, services, {});
  ASSERT_EQ(outcome.status, "completed") << outcome.stop_reason;
  ASSERT_EQ(step->seen.size(), 3u);
  for (int i = 0; i < 3; ++i) {
    const auto& seen = step->seen[static_cast<std::size_t>(i)];
    EXPECT_EQ(seen.iteration, i + 1);
    EXPECT_TRUE(seen.finished);
    EXPECT_EQ(seen.parents, 1u);
    EXPECT_EQ(seen.next, 1u);
    ASSERT_EQ(seen.children.size(), 2u);
    EXPECT_EQ(seen.children[0], "i" + std::to_string(i + 1) + "/m0/p0/k0/r0/llm");
    EXPECT_EQ(seen.children[1], "i" + std::to_string(i + 1) + "/m0/p0/k1/r0/llm");
  }
}

// Counts the statements a store runs, by kind and by the child they name.
struct CountingStore {
  std::mutex mutex;
  std::vector<std::string> statements;
  std::shared_ptr<store::Store> db;

  CountingStore() {
    store::StoreOptions options;
    options.on_statement = [this](std::string_view sql) {
      std::lock_guard lock(mutex);
      statements.emplace_back(sql);
    };
    db = store::Store::open(":memory:", options).value();
  }
  long count(const std::function<bool(const std::string&)>& match) {
    std::lock_guard lock(mutex);
    return std::count_if(statements.begin(), statements.end(), match);
  }
  void clear() {
    std::lock_guard lock(mutex);
    statements.clear();
  }
};

// A write of the run row of `key` (not a row that names it as a parent).
bool writes_run_candidate(const std::string& sql, const std::string& run_id,
                          const std::string& key) {
  if (sql.find("run_candidates") == std::string::npos) {
    return false;
  }
  if (sql.rfind("INSERT", 0) == 0) {
    return sql.find("VALUES ('" + run_id + "', '" + key + "'") != std::string::npos;
  }
  return sql.rfind("UPDATE", 0) == 0 &&
         sql.find("candidate_key = '" + key + "'") != std::string::npos;
}

bool reads_run_candidates(const std::string& sql) {
  return sql.rfind("SELECT", 0) == 0 && sql.find("FROM run_candidates") != std::string::npos;
}

TEST(EngineStoreUse, EachChildIsWrittenOnceAndTheRunIsNotReloadedPerIteration) {
  CountingStore counting;
  testing::Rig rig;
  rig.db = counting.db;
  const std::string broken = kernel("k", "compile_error");
  const std::string fixed = kernel("k", "latency: 90");
  const std::string slower = kernel("k", "latency: 95");
  Script script;
  script.implement[k_root] = broken;
  script.repair[broken] = fixed;
  script.implement[fixed] = slower;
  script.implement[slower] = kernel("k", "latency: 85");
  rig.provider->set_responder(script.responder());
  auto config = small_config(k_root);
  config.iterations = 4;
  config.impls = 2;  // the second implementation repeats the first: a duplicate each iteration

  auto outcome = run_search(config, rig.services(), {});
  ASSERT_EQ(outcome.status, "completed") << outcome.stop_reason;
  EXPECT_EQ(counting.count(reads_run_candidates), 0) << "the run is never read back while it runs";
  auto rows = rig.db->runs().run_candidates(outcome.run_id).value();
  ASSERT_GE(rows.size(), 4u);
  for (const auto& row : rows) {
    EXPECT_EQ(counting.count([&](const std::string& sql) {
      return writes_run_candidate(sql, outcome.run_id, row.candidate_key);
    }),
              1)
        << "writes of " << row.origin;
  }

  // A resumed run reads its candidates once.
  ASSERT_TRUE(rig.db->runs().set_run_status(outcome.run_id, store::RunStatus::interrupted).ok());
  counting.clear();
  auto resumed = resume_search(outcome.run_id, rig.services(), {}, {}, Budgets{});
  ASSERT_EQ(resumed.status, "completed") << resumed.stop_reason;
  EXPECT_EQ(counting.count(reads_run_candidates), 1);
}

// Records the prompt history each iteration was given, then proposes through the LLM proposer.
class HistoryRecorder : public Proposer {
 public:
  std::unique_ptr<Proposer> inner = make_llm_proposer();
  std::map<int, PromptHistory> given;
  std::string name() const override { return "llm"; }
  void propose(const ProposeContext& ctx, const std::vector<Parent>& parents,
               const ChildSink& sink) override {
    given[ctx.iteration] = ctx.history;
    inner->propose(ctx, parents, sink);
  }
  std::optional<Proposal> repair(const ProposeContext& ctx, const RepairInput& input) override {
    return inner->repair(ctx, input);
  }
};

TEST(EngineStoreUse, TheHistoryKeptInMemoryIsTheOneTheStoreGivesBack) {
  testing::Rig rig;
  const std::string broken = kernel("k", "compile_error");
  const std::string fixed = kernel("k", "latency: 90");
  Script script;
  script.implement[k_root] = broken;
  script.repair[broken] = fixed;
  script.implement[fixed] = kernel("k", "latency: 95");
  rig.provider->set_responder(script.responder());
  auto recorder = std::make_shared<HistoryRecorder>();
  SearchServices services = rig.services();
  services.proposers = {recorder};
  auto config = small_config(k_root);
  config.iterations = 3;
  config.impls = 2;

  auto outcome = run_search(config, services, {});
  ASSERT_EQ(outcome.status, "completed") << outcome.stop_reason;
  const auto stored = load_candidates(rig.services().store, outcome.run_id);
  for (int iteration = 2; iteration <= 3; ++iteration) {
    const PromptHistory from_store = prompt_history(stored, outcome.baseline, iteration);
    const PromptHistory& in_memory = recorder->given.at(iteration);
    EXPECT_EQ(in_memory.tried_plans, from_store.tried_plans) << "iteration " << iteration;
    EXPECT_EQ(in_memory.baseline_latency_us, from_store.baseline_latency_us);
    EXPECT_FALSE(in_memory.tried_plans.empty());
  }
}

}  // namespace
}  // namespace autocomp::search::engine
