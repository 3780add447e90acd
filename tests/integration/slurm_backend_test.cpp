// The Slurm backend against a real single-node cluster on loopback (munged, slurmctld, slurmd
// started by the test). The compute node is this machine, so the staged harness runs with the
// same Python and simulator as the local backend.

#include "backends/slurm_backend.hpp"

#include <gtest/gtest.h>
#include <unistd.h>

#include <algorithm>
#include <atomic>
#include <cstdlib>
#include <filesystem>
#include <set>
#include <thread>

#include "backends/backend.hpp"
#include "support/slurm_cluster.hpp"

namespace autocomp::backends {
namespace {

namespace fs = std::filesystem;
using namespace std::chrono_literals;
using testing::SlurmCluster;
using testing::TempDir;

const char* k_tiny_transpose_problem = R"(import numpy as np

KERNEL = "transpose_kernel"
RTOL = 0.0
ATOL = 0.0
SEEDS = [0, 1]


def inputs(seed):
    rng = np.random.default_rng(seed)
    return {"x": rng.standard_normal((1, 128, 256), dtype=np.float32)}


def reference(x):
    return np.ascontiguousarray(np.transpose(x, (0, 2, 1)))
)";

bool process_alive(const std::string& marker) {
  auto result = testing::run_tool({"pgrep", "-f", marker});
  return result.exited && result.exit_code == 0;
}

std::size_t entries_in(const fs::path& dir) {
  std::error_code ec;
  if (!fs::is_directory(dir, ec)) {
    return 0;
  }
  return static_cast<std::size_t>(
      std::distance(fs::directory_iterator(dir), fs::directory_iterator()));
}

class SlurmBackendTest : public ::testing::Test {
 protected:
  void SetUp() override {
    if (auto missing = SlurmCluster::missing_binaries(); !missing.empty()) {
      GTEST_SKIP() << "Slurm is not installed (missing " << missing
                   << "); scripts/install-deps.sh installs slurm-wlm and munge";
    }
    m_tmp = std::make_unique<TempDir>("autocomp-slurm-test");
    m_cluster = std::make_unique<SlurmCluster>(m_tmp->path() / "cluster");
    m_stage = m_tmp->path() / "stage";
  }
  void TearDown() override {
    m_cluster.reset();
    m_tmp.reset();
  }

  std::string spec(const std::string& extra) const {
    return std::string("slurm:?partition=") + SlurmCluster::k_partition +
           "&python=" AUTOCOMP_PYTHON "&stage=" + m_stage.string() + "&poll_ms=50" +
           (extra.empty() ? "" : "&" + extra);
  }

  static std::shared_ptr<Backend> make(const std::string& text) {
    auto backend = make_backend(text, {});
    EXPECT_TRUE(backend.ok()) << (backend.ok() ? "" : backend.failure().describe());
    return backend.ok() ? backend.value() : nullptr;
  }

  static EvalRequest fake_request() {
    EvalRequest request;
    request.kernel_source = "def kernel(a):\n    return a\n";
    request.problem_source = "import numpy as np\n";
    request.seeds = {0};
    request.warmup = 0;
    request.iters = 1;
    request.timeout = 60s;
    return request;
  }

  std::unique_ptr<TempDir> m_tmp;
  std::unique_ptr<SlurmCluster> m_cluster;
  fs::path m_stage;
};

TEST_F(SlurmBackendTest, SimulatorResultThroughSlurmEqualsTheLocalOne) {
  EvalRequest request;
  request.kernel_source =
      testing::read_text(fs::path(AUTOCOMP_SOURCE_DIR) / "seeds" / "transpose" / "naive.py");
  ASSERT_FALSE(request.kernel_source.empty());
  request.problem_source = k_tiny_transpose_problem;
  request.iters = 3;
  request.timeout = 120s;

  auto local = make("sim");
  auto slurm = make(spec("device=sim"));
  ASSERT_TRUE(local && slurm);
  EXPECT_EQ(slurm->identity(), "slurm:?partition=eval&device=sim");
  auto local_results = local->evaluate({request}, {}, {});
  auto slurm_results = slurm->evaluate({request}, {}, {});
  ASSERT_EQ(slurm_results.size(), 1u);
  const auto& l = local_results[0];
  const auto& r = slurm_results[0];
  ASSERT_TRUE(l.ok()) << l.failure->describe();
  ASSERT_TRUE(r.ok()) << r.failure->describe();
  EXPECT_TRUE(r.correct);
  EXPECT_EQ(r.seeds.size(), 2u);
  ASSERT_TRUE(l.latency && r.latency);
  EXPECT_DOUBLE_EQ(r.latency->median_us, l.latency->median_us);
  EXPECT_EQ(r.metrics, l.metrics);
  EXPECT_EQ(r.bottleneck, l.bottleneck);
  EXPECT_EQ(r.device, "sim");
  EXPECT_EQ(r.harness_version, l.harness_version);
  EXPECT_EQ(r.receipt.node, SlurmCluster::k_node);
  EXPECT_EQ(r.host, SlurmCluster::k_node);
  EXPECT_EQ(r.receipt.backend, slurm->identity());
  EXPECT_FALSE(r.receipt.job.empty());
  EXPECT_NE(r.receipt.summary().find("job " + r.receipt.job + " on node1"), std::string::npos)
      << r.receipt.summary();
  // The bundle is staged once under its hash; the work folders are gone.
  EXPECT_EQ(entries_in(m_stage / "work"), 0u);
  std::size_t bundles = 0;
  for (const auto& entry : fs::directory_iterator(m_stage)) {
    bundles += entry.path().filename().string().rfind("harness-", 0) == 0 ? 1 : 0;
  }
  EXPECT_EQ(bundles, 1u);
  EXPECT_TRUE(m_cluster->queued_jobs().empty());
}

// Calibration through Slurm: the fake device's seed and a calibration profile's table reach the
// job (the table travels with the request) and its answers equal the local ones.
TEST_F(SlurmBackendTest, FakeDeviceSeedAndCalibrationTableReachTheJob) {
  const fs::path probes =
      fs::path(AUTOCOMP_SOURCE_DIR) / "backends" / "nkisim" / "calibration" / "device" / "probes";
  EvalRequest request;
  request.command = EvalCommand::benchmark;
  request.kernel_source = testing::read_text(probes / "vector_copy.py");
  request.problem_source = testing::read_text(probes / "copy_w1024_problem.py");
  ASSERT_FALSE(request.kernel_source.empty() || request.problem_source.empty());
  request.target = "trn1";
  request.iters = 2;
  request.timeout = 120s;

  BackendOptions options;
  options.default_target = "trn1";
  options.resolve_calibration = [](const std::string& name,
                                   const std::string& target) -> core::Result<CalibrationTable> {
    return CalibrationTable{
        name, target,
        R"({"target": "trn1", "name": "slow-vector", "values": {"vector_cycles_per_elem": 2.0}})"};
  };
  auto median = [&](const std::string& text) {
    auto backend = make_backend(text, options);
    EXPECT_TRUE(backend.ok()) << (backend.ok() ? "" : backend.failure().describe());
    if (!backend.ok()) {
      return 0.0;
    }
    auto results = backend.value()->evaluate({request}, {}, {});
    EXPECT_TRUE(results.at(0).ok()) << text << ": " << results.at(0).failure->describe();
    return results.at(0).latency ? results.at(0).latency->median_us : 0.0;
  };
  const double job_fake = median(spec("device=sim-perturbed&seed=3"));
  const double local_fake = median("local?device=sim-perturbed&seed=3");
  const double job_calibrated = median(spec("device=sim&calibration=slow-vector"));
  const double local_calibrated = median("sim?calibration=slow-vector");
  const double shipped = median("sim");
  EXPECT_NEAR(job_fake, local_fake, local_fake * 0.02);
  EXPECT_NE(local_fake, shipped);  // the fake device is not the simulator
  EXPECT_DOUBLE_EQ(job_calibrated, local_calibrated);
  EXPECT_GT(local_calibrated, shipped * 1.3);  // twice the VectorE cost per element shows
  EXPECT_TRUE(m_cluster->queued_jobs().empty());
}

// A job sees the harness allow-list of the submitting environment (core/environment.hpp), the
// same list the local and SSH backends apply: NEURON_* passes, API keys and tokens never do.
TEST_F(SlurmBackendTest, JobsSeeTheHarnessAllowListAndNoSecrets) {
  ::setenv("OPENAI_API_KEY", "sk-slurm-test", 1);
  ::setenv("AUTOCOMP_SLURM_TEST_TOKEN", "t", 1);
  ::setenv("NEURON_SLURM_TEST_MARK", "1", 1);
  auto slurm = make(spec("device=sim"));
  ASSERT_TRUE(slurm);
  EvalRequest request = fake_request();
  request.problem_source =
      "import os\n"
      "secrets = [n for n in os.environ if 'API_KEY' in n or 'TOKEN' in n]\n"
      "raise RuntimeError('secrets seen: %d; neuron mark: %s' % (len(secrets),\n"
      "                   os.environ.get('NEURON_SLURM_TEST_MARK', 'absent')))\n";
  auto results = slurm->evaluate({request}, {}, {});
  ::unsetenv("OPENAI_API_KEY");
  ::unsetenv("AUTOCOMP_SLURM_TEST_TOKEN");
  ::unsetenv("NEURON_SLURM_TEST_MARK");
  ASSERT_EQ(results.size(), 1u);
  ASSERT_FALSE(results[0].ok());
  EXPECT_EQ(results[0].failure->kind, core::FailureKind::problem_error)
      << results[0].failure->describe();
  EXPECT_NE(results[0].failure->message.find("secrets seen: 0; neuron mark: 1"), std::string::npos)
      << results[0].failure->message;
}

TEST_F(SlurmBackendTest, ABatchOfEightRunsAsOneJobArrayInParallel) {
  // Each evaluation sleeps 2.5 s per unit of work (several units), so all eight overlap when
  // Slurm runs them side by side; a watcher counts the tasks squeue lists as running at once.
  auto backend = make(spec("device=fake&fake_ms=2500"));
  ASSERT_TRUE(backend);
  std::vector<EvalRequest> batch(8, fake_request());
  std::atomic<std::size_t> reported{0};
  std::atomic<bool> finished{false};
  std::atomic<std::size_t> most_running{0};
  std::thread watcher([&] {
    while (!finished) {
      auto running = testing::run_tool({"squeue", "-h", "-t", "RUNNING", "-o", "%i"});
      std::size_t count = static_cast<std::size_t>(
          std::count(running.stdout_text.begin(), running.stdout_text.end(), '\n'));
      most_running = std::max<std::size_t>(most_running, count);
      std::this_thread::sleep_for(100ms);
    }
  });
  auto results =
      backend->evaluate(batch, {}, [&](std::size_t done, std::size_t total, const std::string&) {
        EXPECT_EQ(total, 8u);
        reported = std::max<std::size_t>(reported, done);
      });
  finished = true;
  watcher.join();
  ASSERT_EQ(results.size(), 8u);
  std::set<std::string> jobs;
  std::set<std::string> arrays;
  for (const auto& result : results) {
    ASSERT_TRUE(result.ok()) << result.failure->describe();
    EXPECT_EQ(result.device, "fake");
    EXPECT_EQ(result.receipt.node, SlurmCluster::k_node);
    jobs.insert(result.receipt.job);
    arrays.insert(result.receipt.job.substr(0, result.receipt.job.find('_')));
  }
  EXPECT_EQ(jobs.size(), 8u) << "each evaluation is its own array task";
  EXPECT_EQ(arrays.size(), 1u) << "the batch is one job array";
  EXPECT_EQ(reported.load(), 8u);
  EXPECT_EQ(most_running.load(), 8u) << "the eight array tasks did not all run at once";
  EXPECT_TRUE(m_cluster->queued_jobs().empty());
}

TEST_F(SlurmBackendTest, HungKernelIsKilledAtItsTimeoutAndLeavesNoJob) {
  auto backend = make(spec("device=sim"));
  ASSERT_TRUE(backend);
  const std::string marker = "autocomp_slurm_spin_" + std::to_string(::getpid());
  // Importing this problem ignores the harness's own alarm and SIGTERM, starts a helper process
  // and spins. (A kernel file doing this is refused by the harness's static scan before it runs;
  // problem files are trusted and not scanned.)
  EvalRequest request = fake_request();
  request.kernel_filename = marker + ".py";
  request.kernel_source =
      testing::read_text(fs::path(AUTOCOMP_SOURCE_DIR) / "seeds" / "transpose" / "naive.py");
  request.problem_source =
      "import signal, subprocess, time\n"
      "signal.signal(signal.SIGALRM, signal.SIG_IGN)\n"
      "signal.signal(signal.SIGTERM, signal.SIG_IGN)\n"
      "subprocess.Popen(['sh', '-c', 'sleep 600; : " +
      marker +
      "_child'])\n"
      "while True:\n"
      "    time.sleep(0.05)\n";
  request.timeout = 3s;
  auto start = std::chrono::steady_clock::now();
  auto results = backend->evaluate({request}, {}, {});
  auto elapsed = std::chrono::steady_clock::now() - start;
  ASSERT_FALSE(results[0].ok());
  EXPECT_EQ(results[0].failure->kind, core::FailureKind::timeout) << results[0].failure->describe();
  EXPECT_NE(results[0].failure->message.find("Slurm job"), std::string::npos);
  EXPECT_LT(elapsed, 40s);
  EXPECT_TRUE(m_cluster->queued_jobs().empty()) << "a job is left in the queue";
  EXPECT_FALSE(process_alive(marker)) << "a process of the timed-out job is still alive";
  EXPECT_EQ(entries_in(m_stage / "work"), 0u);
}

TEST_F(SlurmBackendTest, CancellingABatchScancelsItsJobs) {
  auto backend = make(spec("device=fake&fake_ms=20000"));
  ASSERT_TRUE(backend);
  core::CancelToken cancel;
  std::thread canceller([&] {
    auto deadline = std::chrono::steady_clock::now() + 30s;
    while (m_cluster->queued_jobs().size() < 3 && std::chrono::steady_clock::now() < deadline) {
      std::this_thread::sleep_for(100ms);
    }
    cancel.cancel();
  });
  auto results = backend->evaluate(std::vector<EvalRequest>(3, fake_request()), cancel, {});
  canceller.join();
  for (const auto& result : results) {
    ASSERT_FALSE(result.ok());
    EXPECT_EQ(result.failure->kind, core::FailureKind::cancelled) << result.failure->describe();
  }
  EXPECT_TRUE(m_cluster->queued_jobs().empty()) << "a job is left in the queue";
}

TEST_F(SlurmBackendTest, KilledSlurmdMidJobComesBackAsANodeFailure) {
  auto backend = make(spec("device=fake&fake_ms=60000&queue_timeout=20"));
  ASSERT_TRUE(backend);
  std::thread killer([&] {
    auto deadline = std::chrono::steady_clock::now() + 30s;
    while (std::chrono::steady_clock::now() < deadline) {
      auto running = testing::run_tool({"squeue", "-h", "-t", "RUNNING", "-o", "%i"});
      if (!running.stdout_text.empty()) {
        break;
      }
      std::this_thread::sleep_for(100ms);
    }
    std::this_thread::sleep_for(500ms);
    m_cluster->kill_node();
  });
  auto results = backend->evaluate({fake_request()}, {}, {});
  killer.join();
  ASSERT_FALSE(results[0].ok());
  const auto& failure = *results[0].failure;
  EXPECT_EQ(failure.kind, core::FailureKind::transport_error) << failure.describe();
  EXPECT_NE(failure.message.find("node failure"), std::string::npos) << failure.describe();
  EXPECT_NE(failure.message.find("node1"), std::string::npos) << failure.describe();
  EXPECT_EQ(results[0].receipt.node, SlurmCluster::k_node);
  EXPECT_TRUE(m_cluster->queued_jobs().empty()) << "a job is left in the queue";
}

TEST_F(SlurmBackendTest, BadSpecsAndRejectedSubmissionsAreClearFailures) {
  auto unknown = make_backend(spec("colour=blue"), {});
  ASSERT_FALSE(unknown.ok());
  EXPECT_NE(unknown.failure().message.find("unknown option 'colour'"), std::string::npos);
  auto hosted = make_backend("slurm://head?partition=eval", {});
  ASSERT_FALSE(hosted.ok());

  auto backend =
      make("slurm:?partition=no_such_partition&python=" AUTOCOMP_PYTHON "&device=fake&stage=" +
           m_stage.string());
  ASSERT_TRUE(backend);
  auto results = backend->evaluate({fake_request()}, {}, {});
  ASSERT_FALSE(results[0].ok());
  EXPECT_EQ(results[0].failure->kind, core::FailureKind::unavailable);
  EXPECT_EQ(results[0].failure->stage, "submit");
  EXPECT_NE(results[0].failure->message.find("sbatch"), std::string::npos)
      << results[0].failure->describe();
  EXPECT_EQ(entries_in(m_stage / "work"), 0u);
}

}  // namespace
}  // namespace autocomp::backends
