#include <gtest/gtest.h>
#include <unistd.h>

#include <filesystem>
#include <map>

#include "search/launch/launcher.hpp"
#include "search/launch/proposers.hpp"
#include "search/store/store.hpp"

namespace autocomp::search::launch {
namespace {

namespace fs = std::filesystem;

constexpr const char* k_kernel = "def kernel(a):\n    return a\n";
constexpr const char* k_problem_trn1 = "import numpy as np\nTARGET = \"trn1\"\n";
constexpr const char* k_problem_plain = "import numpy as np\n";

class Launcher : public ::testing::Test {
 protected:
  void SetUp() override {
    m_dir = fs::temp_directory_path() /
            ("launch_test_" + std::to_string(::getpid()) + "_" +
             ::testing::UnitTest::GetInstance()->current_test_info()->name());
    fs::remove_all(m_dir);
    fs::create_directories(m_dir);
    auto opened = store::Store::open((m_dir / "store.db").string());
    ASSERT_TRUE(opened.ok()) << opened.failure().describe();
    m_store = std::move(opened).value();
  }
  void TearDown() override {
    m_store.reset();
    fs::remove_all(m_dir);
  }

  LaunchRequest request(const std::string& problem) const {
    LaunchRequest out;
    out.kernel_path = (m_dir / "kernel.py").string();
    out.kernel_source = k_kernel;
    out.problem_path = (m_dir / "problem.py").string();
    out.problem_source = problem;
    out.shape.beam = 1;
    out.shape.iterations = 1;
    return out;
  }

  // A real simulator backend; remembers the spec and target each request asked for.
  BackendSource recording() {
    return [this](const std::string& spec, const std::string& target) {
      m_asked[spec] = target;
      return fresh_backends("")(spec, target);
    };
  }

  fs::path m_dir;
  std::shared_ptr<store::Store> m_store;
  std::map<std::string, std::string> m_asked;
};

TEST(ResolveTarget, ArgumentThenProblemThenFallbackThenTrn2) {
  EXPECT_EQ(resolve_target("trn2", k_problem_trn1, "trn1"), "trn2");
  EXPECT_EQ(resolve_target("", k_problem_trn1, "trn2"), "trn1");
  EXPECT_EQ(resolve_target("", "TARGET = 'trn1'\n", ""), "trn1");
  EXPECT_EQ(resolve_target("", k_problem_plain, "trn1"), "trn1");
  EXPECT_EQ(resolve_target("", k_problem_plain, ""), "trn2");
  EXPECT_EQ(resolve_target("", "TARGET = \"trn3\"\n", "trn1"), "trn3");
  EXPECT_EQ(resolve_target("trn3", k_problem_trn1, ""), "trn3");
  // A target the product does not know is not taken from the problem.
  EXPECT_EQ(resolve_target("", "TARGET = 'trn7'\n", "trn1"), "trn1");
  // Only an assignment at the start of a line counts.
  EXPECT_EQ(resolve_target("", "# OLD_TARGET = 'trn1'\n", ""), "trn2");
}

TEST_F(Launcher, TheProblemsTargetReachesTheConfigAndTheBackend) {
  auto launch = prepare(request(k_problem_trn1), m_store, recording());
  ASSERT_TRUE(launch.ok()) << launch.failure().describe();
  EXPECT_EQ(launch->config.target, "trn1");
  EXPECT_EQ(m_asked.at("sim"), "trn1");
  EXPECT_EQ(launch->config.kernel_filename, "kernel.py");
  EXPECT_EQ(launch->config.problem_filename, "problem.py");
  EXPECT_EQ(launch->services.facts.backend, "sim");
  EXPECT_EQ(launch->services.facts.kernel_path, (m_dir / "kernel.py").string());
  ASSERT_TRUE(launch->services.backend);
  ASSERT_TRUE(launch->services.store.complete());
}

TEST_F(Launcher, AnExplicitTargetWinsAndTheDefaultTargetFillsIn) {
  auto explicit_target = request(k_problem_trn1);
  explicit_target.target = "trn2";
  auto launch = prepare(explicit_target, m_store, recording());
  ASSERT_TRUE(launch.ok());
  EXPECT_EQ(launch->config.target, "trn2");

  auto defaulted = request(k_problem_plain);
  defaulted.default_target = "trn1";
  launch = prepare(defaulted, m_store, recording());
  ASSERT_TRUE(launch.ok());
  EXPECT_EQ(launch->config.target, "trn1");
}

TEST_F(Launcher, WithoutAModelTheSearchIsAutotuningAndBothKindsAreKnown) {
  auto launch = prepare(request(k_problem_plain), m_store, recording());
  ASSERT_TRUE(launch.ok());
  EXPECT_TRUE(launch->services.providers.empty());
  EXPECT_EQ(launch->config.proposers, std::vector<std::string>{"autotune"});
  ASSERT_TRUE(launch->services.make_proposer);
  for (const char* name : {"llm", "autotune"}) {
    auto proposer = launch->services.make_proposer(name);
    ASSERT_TRUE(proposer.ok()) << name;
    EXPECT_EQ(proposer.value()->name(), name);
  }
  auto unknown = launch->services.make_proposer("nonesuch");
  ASSERT_FALSE(unknown.ok());
  EXPECT_NE(unknown.failure().message.find("autotune"), std::string::npos)
      << "the message lists the known kinds: " << unknown.failure().message;
}

TEST_F(Launcher, BudgetsAndShapeAreKeptAndBadShapesAreRefused) {
  auto asked = request(k_problem_plain);
  engine::Budgets budgets;
  budgets.max_llm_calls = 3;
  asked.budgets = budgets;
  asked.shape.plans = 4;
  asked.shape.seed = 77;
  auto launch = prepare(asked, m_store, recording());
  ASSERT_TRUE(launch.ok());
  EXPECT_EQ(launch->config.budgets.max_llm_calls, 3);
  EXPECT_EQ(launch->config.plans, 4);
  EXPECT_EQ(launch->config.seed, 77u);

  asked.shape.beam = 0;
  auto refused = prepare(asked, m_store, recording());
  ASSERT_FALSE(refused.ok());
  EXPECT_EQ(refused.failure().kind, core::FailureKind::invalid_argument);
}

TEST_F(Launcher, UsageProblemsAreReportedBeforeAnyWork) {
  auto bad_backend = request(k_problem_plain);
  bad_backend.backend_spec = "warp-drive://x";
  auto launch = prepare(bad_backend, m_store);
  ASSERT_FALSE(launch.ok());
  EXPECT_EQ(launch.failure().kind, core::FailureKind::invalid_argument);

  auto bad_model = request(k_problem_plain);
  bad_model.llm_specs = {"no-such-provider:model"};
  launch = prepare(bad_model, m_store, recording());
  ASSERT_FALSE(launch.ok());
  EXPECT_TRUE(m_asked.empty()) << "no backend is made for a request with a bad model spec";

  LaunchRequest unknown_run;
  unknown_run.resume_run_id = "0123456789ab";
  launch = prepare(unknown_run, m_store, recording());
  ASSERT_FALSE(launch.ok());
  EXPECT_NE(launch.failure().message.find("0123456789ab"), std::string::npos);
}

TEST_F(Launcher, TheHarnessFolderIsTheOneAskedFor) {
  auto asked = request(k_problem_plain);
  asked.harness_dir = (m_dir / "no-harness-here").string();
  auto launch = prepare(asked, m_store);
  ASSERT_FALSE(launch.ok());
  EXPECT_NE(launch.failure().message.find("no-harness-here"), std::string::npos)
      << launch.failure().message;
}

TEST(Proposers, TheTableNamesBothKinds) {
  auto names = proposer_names();
  EXPECT_NE(std::find(names.begin(), names.end(), "llm"), names.end());
  EXPECT_NE(std::find(names.begin(), names.end(), "autotune"), names.end());
}

TEST_F(Launcher, AConfirmingDeviceIsMadeForTheRunsTargetAndABadSpecIsRefusedFirst) {
  LaunchRequest asked = request(k_problem_trn1);
  asked.shape.confirm = "local?device=sim-perturbed&seed=3";
  auto launch = prepare(asked, m_store, recording());
  ASSERT_TRUE(launch.ok()) << launch.failure().describe();
  ASSERT_NE(launch->services.confirm_backend, nullptr);
  EXPECT_EQ(m_asked.at("local?device=sim-perturbed&seed=3"), "trn1");
  EXPECT_EQ(launch->config.confirm, "local?device=sim-perturbed&seed=3");

  asked.shape.confirm = "nosuch://device";
  auto refused = prepare(asked, m_store, recording());
  ASSERT_FALSE(refused.ok());
  EXPECT_NE(refused.failure().message.find("confirm 'nosuch://device'"), std::string::npos)
      << refused.failure().message;
}

}  // namespace
}  // namespace autocomp::search::launch
