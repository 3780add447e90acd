// The one cache-through path the tools and the search's Evaluator share.
#include "search/engine/evaluation_service.hpp"

#include <gtest/gtest.h>

#include <stdexcept>

#include "search/store/store.hpp"
#include "unit/search/engine_test_support.hpp"

namespace autocomp::search::engine {
namespace {

using testing::kernel;

const std::string k_problem = "def inputs(seed):\n    return {}\n";

backends::EvalRequest request_of(const std::string& source) {
  backends::EvalRequest request;
  request.command = backends::EvalCommand::evaluate;
  request.kernel_source = source;
  request.kernel_filename = "k.py";
  request.problem_source = k_problem;
  request.problem_filename = "p.py";
  request.target = "trn2";
  return request;
}

// A backend that answers with one fixed result (or throws, or answers nothing) and counts calls.
class FixedBackend : public backends::Backend {
 public:
  enum class Mode { answer, nothing, throws };
  explicit FixedBackend(backends::EvalResult result, Mode mode = Mode::answer)
      : m_result(std::move(result)), m_mode(mode) {}
  std::string identity() const override { return "fixed"; }
  std::string device() const override { return "fixed"; }
  std::string harness_version() const override { return "test"; }
  int slots() const override { return 1; }
  std::vector<backends::EvalResult> evaluate(const std::vector<backends::EvalRequest>& batch,
                                             const core::CancelToken&,
                                             const backends::ProgressFn&) override {
    ++calls;
    if (m_mode == Mode::throws) {
      throw std::runtime_error("device lost");
    }
    if (m_mode == Mode::nothing) {
      return {};
    }
    return std::vector<backends::EvalResult>(batch.size(), m_result);
  }
  int calls = 0;

 private:
  backends::EvalResult m_result;
  Mode m_mode;
};

struct Rig {
  std::shared_ptr<store::Store> db;
  Rig() {
    auto opened = store::Store::open(":memory:");
    EXPECT_TRUE(opened.ok());
    db = std::move(opened).value();
  }
  EvaluationService service(std::shared_ptr<backends::Backend> backend, bool files = true) const {
    return EvaluationService(std::move(backend), store::share(db, db->evaluations()),
                             files ? store::share(db, db->files()) : nullptr);
  }
};

TEST(EvaluationService, RunsOnceThenAnswersFromTheCache) {
  Rig rig;
  auto backend = std::make_shared<testing::FakeBackend>();
  auto service = rig.service(backend);
  const auto request = request_of(kernel("k", "latency: 40"));
  const auto site = service.site_for(request, core::CancelToken{});
  EXPECT_EQ(site.backend_identity, "fake");
  EXPECT_FALSE(site.input_signature.empty());

  auto first = service.evaluate(request, site, core::CancelToken{});
  ASSERT_TRUE(first.ok()) << first.failure().describe();
  EXPECT_FALSE(first.value().cached);
  EXPECT_GT(first.value().id, 0);
  ASSERT_TRUE(first.value().result.latency.has_value());
  EXPECT_DOUBLE_EQ(first.value().result.latency->median_us, 40);

  auto second = service.evaluate(request, site, core::CancelToken{});
  ASSERT_TRUE(second.ok());
  EXPECT_TRUE(second.value().cached);
  EXPECT_EQ(second.value().id, first.value().id);
  EXPECT_EQ(backend->evaluations_of(request.kernel_source), 1);

  // fresh runs again and records a new evaluation.
  auto fresh = service.evaluate(request, site, core::CancelToken{}, /*fresh=*/true);
  ASSERT_TRUE(fresh.ok());
  EXPECT_FALSE(fresh.value().cached);
  EXPECT_NE(fresh.value().id, first.value().id);
  EXPECT_EQ(backend->evaluations_of(request.kernel_source), 2);
}

TEST(EvaluationService, ATimeoutIsRecordedButNeverServed) {
  Rig rig;
  backends::EvalResult timed_out;
  timed_out.failure = core::make_failure(core::FailureKind::timeout, "benchmark", "too slow");
  auto backend = std::make_shared<FixedBackend>(timed_out);
  auto service = rig.service(backend);
  const auto request = request_of("def k(): pass\n");
  const auto site = store::site_of(*backend);

  auto first = service.evaluate(request, site, core::CancelToken{});
  ASSERT_TRUE(first.ok());
  EXPECT_GT(first.value().id, 0);
  auto stored = rig.db->evaluations().get_evaluation(first.value().id);
  ASSERT_TRUE(stored.ok() && stored.value().has_value());
  auto second = service.evaluate(request, site, core::CancelToken{});
  ASSERT_TRUE(second.ok());
  EXPECT_FALSE(second.value().cached);
  EXPECT_EQ(backend->calls, 2);
}

TEST(EvaluationService, ABackendThatThrowsGivesInternalFailures) {
  Rig rig;
  auto backend = std::make_shared<FixedBackend>(backends::EvalResult{}, FixedBackend::Mode::throws);
  auto service = rig.service(backend);
  const auto site = store::site_of(*backend);
  auto ran = service.run({request_of("a = 1\n"), request_of("b = 2\n")}, site, core::CancelToken{});
  ASSERT_EQ(ran.size(), 2u);
  for (const auto& entry : ran) {
    ASSERT_TRUE(entry.result.failure.has_value());
    EXPECT_EQ(entry.result.failure->kind, core::FailureKind::internal);
    EXPECT_NE(entry.result.failure->message.find("device lost"), std::string::npos);
    EXPECT_TRUE(entry.ran);
    ASSERT_TRUE(entry.stored.has_value());
    EXPECT_TRUE(entry.stored->ok());
  }
}

TEST(EvaluationService, NoResultIsAFailureOfTheCallAndNothingIsRecorded) {
  Rig rig;
  auto backend =
      std::make_shared<FixedBackend>(backends::EvalResult{}, FixedBackend::Mode::nothing);
  auto service = rig.service(backend);
  const auto site = store::site_of(*backend);
  auto ran = service.run({request_of("a = 1\n")}, site, core::CancelToken{});
  ASSERT_EQ(ran.size(), 1u);
  EXPECT_TRUE(ran.front().missing);
  EXPECT_FALSE(ran.front().ran);
  EXPECT_FALSE(ran.front().stored.has_value());

  auto evaluated = service.evaluate(request_of("a = 1\n"), site, core::CancelToken{});
  ASSERT_FALSE(evaluated.ok());
  EXPECT_EQ(evaluated.failure().kind, core::FailureKind::internal);
  auto history = rig.db->evaluations().evaluations_for_candidate(core::source_key("a = 1\n"));
  ASSERT_TRUE(history.ok());
  EXPECT_TRUE(history.value().empty());
}

TEST(EvaluationService, ACancelledCallNeverReachesTheBackend) {
  Rig rig;
  auto backend = std::make_shared<FixedBackend>(backends::EvalResult{});
  auto service = rig.service(backend);
  core::CancelToken cancel;
  cancel.cancel();
  auto evaluated = service.evaluate(request_of("a = 1\n"), store::site_of(*backend), cancel);
  ASSERT_FALSE(evaluated.ok());
  EXPECT_EQ(evaluated.failure().kind, core::FailureKind::cancelled);
  EXPECT_EQ(backend->calls, 0);
}

TEST(EvaluationService, WithoutACacheItRunsEveryTimeAndStoresNothing) {
  auto backend = std::make_shared<testing::FakeBackend>();
  EvaluationService service(backend, nullptr);
  EXPECT_FALSE(service.has_cache());
  const auto request = request_of(kernel("k", "latency: 10"));
  const auto site = store::site_of(*backend);
  for (int i = 0; i < 2; ++i) {
    auto evaluated = service.evaluate(request, site, core::CancelToken{});
    ASSERT_TRUE(evaluated.ok());
    EXPECT_FALSE(evaluated.value().cached);
    EXPECT_EQ(evaluated.value().id, 0);
  }
  EXPECT_EQ(backend->evaluations_of(request.kernel_source), 2);
  auto best = service.record_file("/tmp/k.py", "c", "p", "trn2");
  ASSERT_TRUE(best.ok());
  EXPECT_FALSE(best.value().has_value());
}

TEST(EvaluationService, RecordsFileHistoryAndAnswersTheBestVersion) {
  Rig rig;
  auto backend = std::make_shared<testing::FakeBackend>();
  auto service = rig.service(backend);
  const std::string path = "/work/k.py";
  auto problem_key = rig.db->evaluations().put_workload(k_problem, "/work/p.py");
  ASSERT_TRUE(problem_key.ok());
  std::string fast_key;
  for (const auto* latency : {"latency: 50", "latency: 20", "latency: 70"}) {
    const auto request = request_of(kernel("k", latency));
    auto key = rig.db->evaluations().put_candidate(request.kernel_source, "agent");
    ASSERT_TRUE(key.ok());
    if (std::string(latency) == "latency: 20") {
      fast_key = key.value();
    }
    auto evaluated = service.evaluate(request, service.site_for(request, core::CancelToken{}),
                                      core::CancelToken{});
    ASSERT_TRUE(evaluated.ok());
    auto best = service.record_file(path, key.value(), problem_key.value(), "trn2");
    ASSERT_TRUE(best.ok()) << best.failure().describe();
    ASSERT_TRUE(best.value().has_value());
  }
  auto versions = rig.db->files().file_versions(path);
  ASSERT_TRUE(versions.ok());
  EXPECT_EQ(versions.value().size(), 3u);
  auto best = service.record_file(path, fast_key, problem_key.value(), "trn2");
  ASSERT_TRUE(best.ok() && best.value().has_value());
  EXPECT_EQ(best.value()->candidate_key, fast_key);
  EXPECT_DOUBLE_EQ(best.value()->median_us, 20);
}

}  // namespace
}  // namespace autocomp::search::engine
