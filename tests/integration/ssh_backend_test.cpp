// The SSH backend against real OpenSSH servers on loopback. The "remote" is this machine, so the
// uploaded harness runs with the same Python and simulator as the local backend.

#include "backends/ssh_backend.hpp"

#include <gtest/gtest.h>
#include <unistd.h>

#include <algorithm>
#include <atomic>
#include <filesystem>
#include <fstream>
#include <set>
#include <thread>

#include "backends/backend.hpp"
#include "core/clock.hpp"
#include "support/sshd_fixture.hpp"

namespace autocomp::backends {
namespace {

namespace fs = std::filesystem;
using namespace std::chrono_literals;
using testing::LoopbackSshd;
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

bool has_step(const EvalResult& result, const std::string& name) {
  return std::any_of(result.steps.begin(), result.steps.end(),
                     [&](const StepTiming& s) { return s.step == name; });
}

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

class SshBackendTest : public ::testing::Test {
 protected:
  void SetUp() override {
    m_tmp = std::make_unique<TempDir>("autocomp-ssh-test");
    m_key = m_tmp->path() / "user_key";
    testing::generate_key(m_key);
    m_remote_dir = m_tmp->path() / "remote";
  }

  LoopbackSshd& start_server(const std::string& name) {
    m_servers.push_back(
        std::make_unique<LoopbackSshd>(m_tmp->path() / name, fs::path(m_key.string() + ".pub")));
    return *m_servers.back();
  }

  // A known_hosts file trusting `servers`.
  fs::path known_hosts(const std::vector<LoopbackSshd*>& servers, const std::string& name) {
    fs::path path = m_tmp->path() / name;
    std::ofstream out(path);
    for (auto* server : servers) {
      out << server->known_hosts_line();
    }
    return path;
  }

  // A private copy of the harness bundle, so that edits to the source tree during the test
  // cannot change its hash.
  BackendOptions private_bundle() const {
    fs::path root = m_tmp->path() / "bundle";
    if (!fs::exists(root)) {
      fs::create_directories(root);
      for (const char* part : {"harness", "nkisim"}) {
        fs::copy(fs::path(AUTOCOMP_SOURCE_DIR) / "backends" / part, root / part,
                 fs::copy_options::recursive);
      }
    }
    BackendOptions options;
    options.harness_dir = root.string();
    return options;
  }

  std::string spec_for(const LoopbackSshd& server, const fs::path& known,
                       const std::string& extra) const {
    return "ssh://root@127.0.0.1:" + std::to_string(server.port()) + "?key=" + m_key.string() +
           "&known_hosts=" + known.string() + "&python=" AUTOCOMP_PYTHON +
           "&remote_dir=" + m_remote_dir.string() + (extra.empty() ? "" : "&" + extra);
  }

  static std::shared_ptr<Backend> make(const std::string& spec,
                                       const BackendOptions& options = {}) {
    auto backend = make_backend(spec, options);
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
  fs::path m_key;
  fs::path m_remote_dir;
  std::vector<std::unique_ptr<LoopbackSshd>> m_servers;
};

TEST_F(SshBackendTest, SimulatorResultOverSshEqualsTheLocalOne) {
  auto& server = start_server("a");
  auto known = known_hosts({&server}, "known_hosts");
  EvalRequest request;
  request.kernel_source =
      testing::read_text(fs::path(AUTOCOMP_SOURCE_DIR) / "seeds" / "transpose" / "naive.py");
  ASSERT_FALSE(request.kernel_source.empty());
  request.problem_source = k_tiny_transpose_problem;
  request.iters = 3;
  request.timeout = 120s;

  auto local = make("sim");
  auto remote = make(spec_for(server, known, "device=sim"));
  ASSERT_TRUE(local && remote);
  auto local_results = local->evaluate({request}, {}, {});
  auto remote_results = remote->evaluate({request}, {}, {});
  ASSERT_EQ(remote_results.size(), 1u);
  const auto& l = local_results[0];
  const auto& r = remote_results[0];
  ASSERT_TRUE(l.ok()) << l.failure->describe();
  ASSERT_TRUE(r.ok()) << r.failure->describe();
  EXPECT_TRUE(r.correct);
  EXPECT_EQ(r.seeds.size(), 2u);
  ASSERT_TRUE(l.latency && r.latency);
  EXPECT_DOUBLE_EQ(r.latency->median_us, l.latency->median_us);
  EXPECT_EQ(r.metrics, l.metrics);
  EXPECT_EQ(r.bottleneck, l.bottleneck);
  EXPECT_EQ(r.device, "sim");
  EXPECT_EQ(r.host, "root@127.0.0.1:" + std::to_string(server.port()));
  EXPECT_EQ(r.harness_version, l.harness_version);
  for (const char* step : {"connect", "upload", "run", "fetch", "cleanup"}) {
    EXPECT_TRUE(has_step(r, step)) << step;
  }
}

TEST_F(SshBackendTest, UploadsTheBundleOncePerHashAndCleansEveryWorkFolder) {
  auto& server = start_server("a");
  auto known = known_hosts({&server}, "known_hosts");
  auto spec = spec_for(server, known, "device=fake&fake_ms=10&slots=2");
  auto options = private_bundle();
  auto backend = make(spec, options);
  ASSERT_TRUE(backend);
  EXPECT_EQ(backend->slots(), 2);
  EXPECT_EQ(backend->device(), "fake");
  for (int round = 0; round < 2; ++round) {
    auto results = backend->evaluate({fake_request(), fake_request(), fake_request()}, {}, {});
    ASSERT_EQ(results.size(), 3u);
    for (const auto& result : results) {
      ASSERT_TRUE(result.ok()) << result.failure->describe();
      ASSERT_TRUE(result.latency.has_value());
      EXPECT_EQ(result.backend_identity, backend->identity());
    }
  }
  auto status = ssh_pool_status(*backend);
  ASSERT_EQ(status.size(), 1u);
  EXPECT_EQ(status[0].bundle_uploads, 1);
  EXPECT_EQ(status[0].evaluations, 6);
  EXPECT_EQ(entries_in(m_remote_dir / "work"), 0u);
  std::size_t bundles = 0;
  for (const auto& entry : fs::directory_iterator(m_remote_dir)) {
    bundles += entry.path().filename().string().rfind("harness-", 0) == 0 ? 1 : 0;
    EXPECT_NE(entry.path().filename().string().rfind(".upload-", 0), 0u) << entry.path();
  }
  EXPECT_EQ(bundles, 1u);

  // A new process (a new backend) finds the bundle in place and does not upload it again.
  auto again = make(spec, options);
  ASSERT_TRUE(again);
  auto results = again->evaluate({fake_request()}, {}, {});
  ASSERT_TRUE(results[0].ok()) << results[0].failure->describe();
  EXPECT_EQ(ssh_pool_status(*again)[0].bundle_uploads, 0);
}

TEST_F(SshBackendTest, UnknownHostKeyIsRefusedWithItsFingerprint) {
  auto& server = start_server("a");
  fs::path empty_known = m_tmp->path() / "empty_known_hosts";
  std::ofstream(empty_known).close();
  auto backend = make(spec_for(server, empty_known, "device=fake&fake_ms=10"));
  ASSERT_TRUE(backend);
  auto results = backend->evaluate({fake_request()}, {}, {});
  ASSERT_FALSE(results[0].ok());
  const auto& message = results[0].failure->message;
  EXPECT_EQ(results[0].failure->kind, core::FailureKind::unavailable);
  EXPECT_NE(message.find("host key refused"), std::string::npos) << message;
  EXPECT_NE(message.find("SHA256:"), std::string::npos) << message;
  EXPECT_NE(message.find("accept_new_host_key=1"), std::string::npos) << message;
  EXPECT_EQ(testing::read_text(empty_known), "");

  // Opting in records the key and the evaluation runs.
  auto accepting =
      make(spec_for(server, empty_known, "device=fake&fake_ms=10&accept_new_host_key=1"));
  ASSERT_TRUE(accepting);
  auto accepted = accepting->evaluate({fake_request()}, {}, {});
  ASSERT_TRUE(accepted[0].ok()) << accepted[0].failure->describe();
  EXPECT_NE(testing::read_text(empty_known).find("[127.0.0.1]:" + std::to_string(server.port())),
            std::string::npos);
}

TEST_F(SshBackendTest, ChangedHostKeyIsRefusedEvenWithAcceptNew) {
  auto& a = start_server("a");
  auto& b = start_server("b");
  // known_hosts claims a's address has b's key.
  fs::path wrong = m_tmp->path() / "wrong_known_hosts";
  std::string line = b.known_hosts_line();
  line.replace(0, line.find(' '), "[127.0.0.1]:" + std::to_string(a.port()));
  std::ofstream(wrong) << line;
  auto backend = make(spec_for(a, wrong, "device=fake&accept_new_host_key=1"));
  ASSERT_TRUE(backend);
  auto results = backend->evaluate({fake_request()}, {}, {});
  ASSERT_FALSE(results[0].ok());
  EXPECT_NE(results[0].failure->message.find("does not match"), std::string::npos)
      << results[0].failure->message;
  EXPECT_NE(results[0].failure->message.find("SHA256:"), std::string::npos);
}

TEST_F(SshBackendTest, WrongUserKeyIsRefusedWithAClearMessage) {
  auto& server = start_server("a");
  auto known = known_hosts({&server}, "known_hosts");
  fs::path other_key = m_tmp->path() / "other_key";
  testing::generate_key(other_key);
  std::string spec = spec_for(server, known, "device=fake");
  spec.replace(spec.find(m_key.string()), m_key.string().size(), other_key.string());
  auto backend = make(spec);
  ASSERT_TRUE(backend);
  auto results = backend->evaluate({fake_request()}, {}, {});
  ASSERT_FALSE(results[0].ok());
  const auto& message = results[0].failure->message;
  EXPECT_NE(message.find("authentication failed"), std::string::npos) << message;
  EXPECT_NE(message.find(other_key.string() + " (rejected)"), std::string::npos) << message;
  EXPECT_NE(message.find("all 1 host out of rotation"), std::string::npos) << message;
}

TEST_F(SshBackendTest, WhenEveryHostIsDownTheResultsSaySo) {
  auto& a = start_server("a");
  auto& b = start_server("b");
  auto known = known_hosts({&a, &b}, "known_hosts");
  auto backend = make(spec_for(a, known, "device=fake") + "," + spec_for(b, known, "device=fake"));
  ASSERT_TRUE(backend);
  a.kill();
  b.kill();
  auto results = backend->evaluate({fake_request(), fake_request()}, {}, {});
  ASSERT_EQ(results.size(), 2u);
  for (const auto& result : results) {
    ASSERT_FALSE(result.ok());
    EXPECT_EQ(result.failure->kind, core::FailureKind::unavailable);
    const auto& message = result.failure->message;
    EXPECT_EQ(message.rfind("all 2 hosts out of rotation: host root@127.0.0.1:", 0), 0u) << message;
    EXPECT_NE(message.find(std::to_string(a.port())), std::string::npos);
    EXPECT_NE(message.find(std::to_string(b.port())), std::string::npos);
  }
}

TEST_F(SshBackendTest, KillingOneHostMidBatchFinishesOnTheOther) {
  auto& a = start_server("a");
  auto& b = start_server("b");
  auto known = known_hosts({&a, &b}, "known_hosts");
  // The pool's back-off runs on a clock that stands still, so a host taken out stays out while
  // the test runs, however slow the machine.
  BackendOptions options;
  options.clock = std::make_shared<core::ManualClock>();
  auto backend = make(spec_for(a, known, "device=fake&fake_ms=150") + "," +
                          spec_for(b, known, "device=fake&fake_ms=150"),
                      options);
  ASSERT_TRUE(backend);
  const std::string a_label = "root@127.0.0.1:" + std::to_string(a.port());
  // `a` goes down at a known point, not at a moment: as its second attempt starts, after one
  // evaluation on it, with its connection open and idle. (Six requests on two one-slot hosts:
  // the slot freed on `a` takes the next request, so that attempt comes.)
  std::atomic<int> attempts_on_a{0};
  ASSERT_TRUE(set_ssh_attempt_hook(*backend, [&](const std::string& host, int attempt) {
    if (host == a_label) {
      attempts_on_a = attempt;
      if (attempt == 2) {
        a.kill();
      }
    }
  }));
  std::vector<EvalRequest> batch(6, fake_request());
  auto results = backend->evaluate(batch, {}, {});
  ASSERT_EQ(results.size(), batch.size());
  for (const auto& result : results) {
    ASSERT_TRUE(result.ok()) << result.failure->describe();
  }
  ASSERT_GE(attempts_on_a.load(), 2);
  auto status = ssh_pool_status(*backend);
  ASSERT_EQ(status.size(), 2u);
  EXPECT_EQ(status[0].host, a_label);
  EXPECT_EQ(status[0].evaluations, 1);  // the one before it went down
  EXPECT_GE(status[0].errors, 1);
  EXPECT_EQ(status[1].evaluations, 5);
  // A request cut off on `a` is a transport error (a host leaves after three in a row); the next
  // attempt on `a` cannot connect, which takes it out at once. Whether this batch made that
  // attempt depends on which slot freed first; a batch wider than `b` alone starts one on `a`
  // whenever `a` is still in rotation (both slots are free), and still succeeds.
  std::vector<EvalRequest> wide(static_cast<std::size_t>(status[1].slots) + 1, fake_request());
  auto more = backend->evaluate(wide, {}, {});
  ASSERT_EQ(more.size(), wide.size());
  for (const auto& result : more) {
    ASSERT_TRUE(result.ok()) << result.failure->describe();
  }
  status = ssh_pool_status(*backend);
  EXPECT_FALSE(status[0].in_rotation);
  EXPECT_NE(status[0].reason, "");
  EXPECT_EQ(status[0].evaluations, 1);
  EXPECT_TRUE(status[1].in_rotation);
}

TEST_F(SshBackendTest, KernelThatNeverReturnsIsKilledAtTheTimeout) {
  auto& server = start_server("a");
  auto known = known_hosts({&server}, "known_hosts");
  auto backend = make(spec_for(server, known, "device=sim"));
  ASSERT_TRUE(backend);
  const std::string marker = "autocomp_spin_" + std::to_string(::getpid());
  // Importing this problem ignores the harness's own alarm, starts a helper process and spins,
  // so only the remote process-group kill can end it. (A kernel file doing this is refused by
  // the harness's static scan before it runs; problem files are trusted and not scanned.)
  EvalRequest request = fake_request();
  request.kernel_filename = marker + ".py";
  request.problem_source =
      "import signal, subprocess, time\n"
      "signal.signal(signal.SIGALRM, signal.SIG_IGN)\n"
      "signal.signal(signal.SIGTERM, signal.SIG_IGN)\n"
      "subprocess.Popen(['sh', '-c', 'sleep 600; : " +
      marker +
      "_child'])\n"
      "while True:\n"
      "    time.sleep(0.05)\n";
  request.timeout = 2s;
  auto start = std::chrono::steady_clock::now();
  auto results = backend->evaluate({request}, {}, {});
  auto elapsed = std::chrono::steady_clock::now() - start;
  ASSERT_FALSE(results[0].ok());
  EXPECT_EQ(results[0].failure->kind, core::FailureKind::timeout) << results[0].failure->describe();
  EXPECT_LT(elapsed, 30s);
  EXPECT_FALSE(process_alive(marker)) << "a process of the timed-out run is still alive";
  EXPECT_EQ(entries_in(m_remote_dir / "work"), 0u);
  EXPECT_EQ(ssh_pool_status(*backend)[0].timeouts, 1);
  EXPECT_TRUE(ssh_pool_status(*backend)[0].in_rotation);
}

TEST_F(SshBackendTest, ProcessesThatEscapeWithSetsidDoNotOutliveTheRun) {
  auto& server = start_server("a");
  auto known = known_hosts({&server}, "known_hosts");
  auto backend = make(spec_for(server, known, "device=sim"));
  ASSERT_TRUE(backend);
  const std::string marker = "autocomp_escape_" + std::to_string(::getpid());
  // The problem file runs when the harness loads it: a new session, a double fork, then an
  // ordinary failure. The run ends by itself; what it started must end with it.
  EvalRequest request = fake_request();
  request.problem_source =
      "import os, subprocess\n"
      "subprocess.Popen(['sh', '-c', 'sleep 600; : " +
      marker +
      "'], start_new_session=True, stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL)\n"
      "if os.fork() == 0:\n"
      "    os.setsid()\n"
      "    subprocess.Popen(['sh', '-c', 'sleep 600; : " +
      marker +
      "'], stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL)\n"
      "    os._exit(0)\n"
      "secrets = [n for n in os.environ if 'API_KEY' in n or n.startswith('ANTHROPIC_')]\n"
      "raise RuntimeError('escaped; secrets seen: %d' % len(secrets))\n";
  auto results = backend->evaluate({request}, {}, {});
  ASSERT_FALSE(results[0].ok());
  EXPECT_EQ(results[0].failure->kind, core::FailureKind::problem_error)
      << results[0].failure->describe();
  EXPECT_NE(results[0].failure->message.find("secrets seen: 0"), std::string::npos)
      << results[0].failure->message;
  bool gone = false;
  for (int i = 0; i < 40 && !gone; ++i) {
    gone = !process_alive(marker);
    if (!gone) {
      std::this_thread::sleep_for(50ms);
    }
  }
  EXPECT_TRUE(gone) << "a process started by the run is still alive";
  EXPECT_EQ(entries_in(m_remote_dir / "work"), 0u);
}

TEST_F(SshBackendTest, HarnessFailuresComeBackAsValues) {
  auto& server = start_server("a");
  auto known = known_hosts({&server}, "known_hosts");
  auto backend = make(spec_for(server, known, "device=sim"));
  ASSERT_TRUE(backend);
  EvalRequest broken = fake_request();
  broken.problem_source = "raise RuntimeError('problem exploded')\n";
  auto results = backend->evaluate({broken}, {}, {});
  ASSERT_FALSE(results[0].ok());
  EXPECT_EQ(results[0].failure->kind, core::FailureKind::problem_error);
  EXPECT_NE(results[0].failure->message.find("problem exploded"), std::string::npos);
  EXPECT_TRUE(ssh_pool_status(*backend)[0].in_rotation);
}

TEST_F(SshBackendTest, HostsFilePoolEvaluatesOnItsHosts) {
  auto& a = start_server("a");
  auto& b = start_server("b");
  auto known = known_hosts({&a, &b}, "known_hosts");
  const fs::path hosts = m_tmp->path() / "fleet.hosts";
  std::ofstream(hosts) << "# loopback fleet\n\n  " << spec_for(a, known, "device=sim")
                       << "  # first\n\t" << spec_for(b, known, "device=sim") << "\n";
  auto backend = make("hosts:" + hosts.string());
  ASSERT_TRUE(backend);
  EXPECT_EQ(backend->slots(), 2);
  EvalRequest request = fake_request();
  request.kernel_source =
      testing::read_text(fs::path(AUTOCOMP_SOURCE_DIR) / "seeds" / "transpose" / "naive.py");
  request.problem_source = k_tiny_transpose_problem;
  auto results = backend->evaluate({request, request}, {}, {});
  ASSERT_EQ(results.size(), 2u);
  std::set<std::string> used;
  for (const auto& result : results) {
    ASSERT_TRUE(result.ok()) << result.failure->describe();
    EXPECT_TRUE(result.correct);
    EXPECT_EQ(result.backend_identity, backend->identity());
    used.insert(result.host);
  }
  const std::set<std::string> expected{"root@127.0.0.1:" + std::to_string(a.port()),
                                       "root@127.0.0.1:" + std::to_string(b.port())};
  EXPECT_EQ(used, expected);
}

// Calibration over SSH: the fake device's seed and a calibration profile's table reach the
// remote harness (the table travels with the request), and the answers equal the local ones.
TEST_F(SshBackendTest, FakeDeviceSeedAndCalibrationTableTravelToTheHost) {
  auto& server = start_server("a");
  auto known = known_hosts({&server}, "known_hosts");
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

  BackendOptions options = private_bundle();
  options.default_target = "trn1";
  options.resolve_calibration = [](const std::string& name,
                                   const std::string& target) -> core::Result<CalibrationTable> {
    return CalibrationTable{
        name, target,
        R"({"target": "trn1", "name": "slow-vector", "values": {"vector_cycles_per_elem": 2.0}})"};
  };
  auto median = [&](const std::string& spec) {
    auto backend = make(spec, options);
    EXPECT_TRUE(backend);
    if (!backend) {
      return 0.0;
    }
    auto results = backend->evaluate({request}, {}, {});
    EXPECT_TRUE(results.at(0).ok()) << spec << ": " << results.at(0).failure->describe();
    return results.at(0).latency ? results.at(0).latency->median_us : 0.0;
  };
  const double remote_fake = median(spec_for(server, known, "device=sim-perturbed&seed=3"));
  const double local_fake = median("local?device=sim-perturbed&seed=3");
  const double remote_calibrated =
      median(spec_for(server, known, "device=sim&calibration=slow-vector"));
  const double local_calibrated = median("sim?calibration=slow-vector");
  const double shipped = median("sim");
  EXPECT_NEAR(remote_fake, local_fake, local_fake * 0.02);
  EXPECT_NE(local_fake, shipped);  // the fake device is not the simulator
  EXPECT_DOUBLE_EQ(remote_calibrated, local_calibrated);
  EXPECT_GT(local_calibrated, shipped * 1.3);  // twice the VectorE cost per element shows
}

}  // namespace
}  // namespace autocomp::backends
