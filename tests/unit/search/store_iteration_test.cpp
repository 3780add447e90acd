// RunJournal::record_iteration: one search iteration in one transaction.

#include <gtest/gtest.h>

#include "core/hash.hpp"
#include "search/store/store.hpp"

namespace autocomp::search::store {
namespace {

IterationChild child(const std::string& run_id, int iteration, const std::string& source,
                     const std::string& parent_key, CandidateStatus status) {
  IterationChild out;
  out.source = source;
  out.row.run_id = run_id;
  out.row.iteration = iteration;
  out.row.candidate_key = core::source_key(source);
  out.row.parent_key = parent_key;
  out.row.plan_text = "plan of " + source;
  out.row.provider = "llm";
  out.row.origin = "i" + std::to_string(iteration) + "/m0/p0/k0/r0/llm";
  out.row.status = status;
  out.row.median_us = 50;
  out.row.correct = status != CandidateStatus::failed;
  return out;
}

TEST(StoreIteration, AnIterationsChildrenBeamAndProgressAreWrittenTogether) {
  auto store = Store::open(":memory:").value();
  RunConfig config;
  config.target = "trn2";
  const std::string run_id = store->runs().create_run(config).value();
  const std::string a = "def k(x):\n    return x + 1\n";
  const std::string b = "def k(x):\n    return x + 2\n";

  IterationRecord record;
  record.iteration = 1;
  record.children = {child(run_id, 1, a, "", CandidateStatus::accepted),
                     child(run_id, 1, b, "", CandidateStatus::failed)};
  record.beam = std::vector<std::string>{core::source_key(a)};
  record.progress = RunProgress{1, core::source_key(a), 50.0, 100.0};
  ASSERT_TRUE(store->runs().record_iteration(run_id, record).ok());

  auto rows = store->runs().run_candidates(run_id).value();
  ASSERT_EQ(rows.size(), 2u);
  EXPECT_EQ(rows[0].status, CandidateStatus::accepted);
  EXPECT_EQ(rows[1].status, CandidateStatus::failed);
  EXPECT_EQ(store->evaluations().get_candidate(core::source_key(b)).value()->source, b)
      << "the child's source is stored with its row";
  auto beams = store->runs().get_beams(run_id).value();
  ASSERT_EQ(beams.size(), 1u);
  EXPECT_EQ(beams[0].members, std::vector<std::string>{core::source_key(a)});
  auto run = store->runs().get_run(run_id).value();
  EXPECT_EQ(run->iteration, 1);
  ASSERT_TRUE(run->best_latency_us.has_value());
  EXPECT_DOUBLE_EQ(*run->best_latency_us, 50);

  // The same iteration again (a resume): an original brings its new status, a duplicate of a key
  // already in the run changes nothing, and the beam is replaced.
  IterationRecord again;
  again.iteration = 1;
  again.children = {child(run_id, 1, b, "", CandidateStatus::rejected),
                    child(run_id, 2, a, core::source_key(b), CandidateStatus::duplicate)};
  again.beam = std::vector<std::string>{core::source_key(b)};
  ASSERT_TRUE(store->runs().record_iteration(run_id, again).ok());
  rows = store->runs().run_candidates(run_id).value();
  ASSERT_EQ(rows.size(), 2u);
  EXPECT_EQ(rows[0].status, CandidateStatus::accepted);
  EXPECT_EQ(rows[0].parent_key, "") << "a duplicate never changes the original's row";
  EXPECT_EQ(rows[1].status, CandidateStatus::rejected);
  beams = store->runs().get_beams(run_id).value();
  ASSERT_EQ(beams.size(), 1u);
  EXPECT_EQ(beams[0].members, std::vector<std::string>{core::source_key(b)});
}

TEST(StoreIteration, AnUnknownRunWritesNothing) {
  auto store = Store::open(":memory:").value();
  const std::string a = "def k(x):\n    return x + 3\n";
  IterationRecord record;
  record.iteration = 1;
  record.children = {child("nope", 1, a, "", CandidateStatus::evaluated)};
  auto status = store->runs().record_iteration("nope", record);
  ASSERT_FALSE(status.ok());
  EXPECT_EQ(status.failure().kind, core::FailureKind::invalid_argument);
  EXPECT_FALSE(store->evaluations().get_candidate(core::source_key(a)).value().has_value());
}

}  // namespace
}  // namespace autocomp::search::store
