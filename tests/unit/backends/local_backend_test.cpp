#include "backends/local_backend.hpp"

#include <gtest/gtest.h>
#include <stdlib.h>

#include <algorithm>
#include <atomic>
#include <filesystem>
#include <fstream>
#include <thread>

#include "backends/spec.hpp"
#include "core/clock.hpp"
#include "core/process.hpp"
#include "support/fake_process_runner.hpp"

namespace autocomp::backends {
namespace {

namespace fs = std::filesystem;
using namespace std::chrono_literals;

std::shared_ptr<Backend> make(const std::string& text, BackendOptions options = {}) {
  options.python = AUTOCOMP_PYTHON;
  auto spec = parse_spec(text);
  EXPECT_TRUE(spec.ok());
  auto backend = make_local_backend({spec.value()}, options);
  EXPECT_TRUE(backend.ok()) << (backend.ok() ? "" : backend.failure().describe());
  return backend.ok() ? backend.value() : nullptr;
}

EvalRequest fake_request() {
  EvalRequest request;
  request.kernel_source = "def kernel(a):\n    return a\n";
  request.problem_source = "import numpy as np\n";
  request.seeds = {0};
  request.warmup = 0;
  request.iters = 2;
  request.timeout = 30s;
  return request;
}

bool has_step(const EvalResult& result, const std::string& name) {
  return std::any_of(result.steps.begin(), result.steps.end(),
                     [&](const StepTiming& s) { return s.step == name; });
}

// A private TMPDIR for this test process, so leftover work folders can be counted.
class LocalBackendTest : public ::testing::Test {
 protected:
  void SetUp() override {
    std::string pattern = (fs::temp_directory_path() / "autocomp-local-test-XXXXXX").string();
    ASSERT_NE(::mkdtemp(pattern.data()), nullptr);
    m_tmp = pattern;
    m_old_tmp = std::getenv("TMPDIR") ? std::getenv("TMPDIR") : "";
    ::setenv("TMPDIR", m_tmp.c_str(), 1);
  }
  void TearDown() override {
    if (m_old_tmp.empty()) {
      ::unsetenv("TMPDIR");
    } else {
      ::setenv("TMPDIR", m_old_tmp.c_str(), 1);
    }
    fs::remove_all(m_tmp);
  }
  std::size_t leftover_folders() const {
    return static_cast<std::size_t>(
        std::distance(fs::directory_iterator(m_tmp), fs::directory_iterator()));
  }

  fs::path m_tmp;
  std::string m_old_tmp;
};

TEST_F(LocalBackendTest, FakeDeviceEvaluatesAndNamesItself) {
  auto backend = make("local?device=fake&fake_ms=10&slots=3");
  ASSERT_TRUE(backend);
  EXPECT_EQ(backend->identity(), "local?device=fake&fake_ms=10");
  EXPECT_EQ(backend->device(), "fake");
  EXPECT_EQ(backend->slots(), 3);
  std::size_t progress_calls = 0;
  auto results = backend->evaluate({fake_request(), fake_request()}, {},
                                   [&](std::size_t, std::size_t total, const std::string&) {
                                     EXPECT_EQ(total, 2u);
                                     ++progress_calls;
                                   });
  ASSERT_EQ(results.size(), 2u);
  EXPECT_EQ(progress_calls, 2u);
  for (const auto& result : results) {
    ASSERT_TRUE(result.ok()) << result.failure->describe();
    EXPECT_TRUE(result.correct);
    ASSERT_TRUE(result.latency.has_value());
    EXPECT_EQ(result.latency->samples_us.size(), 2u);
    EXPECT_GE(result.latency->min_us, 10000 * 0.9);
    EXPECT_EQ(result.host, "localhost");
    EXPECT_EQ(result.backend_identity, "local?device=fake&fake_ms=10");
    EXPECT_EQ(result.harness_version, backend->harness_version());
    for (const char* step : {"write", "run", "parse", "cleanup"}) {
      EXPECT_TRUE(has_step(result, step)) << step;
    }
  }
  EXPECT_EQ(leftover_folders(), 0u);
}

TEST_F(LocalBackendTest, WhatTheHarnessAnswersIsWhatTheCallerGets) {
  // The process runner seam: the harness's answers are scripted, no process is started, so
  // each kind of ending is tested exactly.
  int call = 0;
  auto runner = std::make_shared<testing::FakeProcessRunner>(
      [&](const core::ProcessSpec&) -> core::Result<core::ProcessResult> {
        switch (call++) {
          case 0:
            return testing::FakeProcessRunner::exited(
                0, R"({"schema":"autocomp-harness/1","status":"ok","verify":{"correct":true},)"
                   R"("benchmark":{"latency_us":{"median":7.5,"samples":[7.0,7.5,8.0]}}})"
                   "\n");
          case 1: {
            core::ProcessResult killed;
            killed.signal = 9;
            killed.stderr_text = "Killed";
            return killed;
          }
          case 2: {
            core::ProcessResult late;
            late.timed_out = true;
            return late;
          }
          default:
            return core::make_failure(core::FailureKind::io_error, "spawn", "no such program");
        }
      });
  BackendOptions options;
  options.process_runner = runner;
  auto backend = make("local?device=fake&slots=1", options);
  ASSERT_TRUE(backend);
  auto results =
      backend->evaluate({fake_request(), fake_request(), fake_request(), fake_request()}, {}, {});
  ASSERT_EQ(results.size(), 4u);
  ASSERT_TRUE(results[0].ok()) << results[0].failure->describe();
  EXPECT_TRUE(results[0].correct);
  ASSERT_TRUE(results[0].latency.has_value());
  EXPECT_DOUBLE_EQ(results[0].latency->median_us, 7.5);
  ASSERT_FALSE(results[1].ok());
  EXPECT_NE(results[1].failure->describe().find("signal 9"), std::string::npos)
      << results[1].failure->describe();
  ASSERT_FALSE(results[2].ok());
  EXPECT_EQ(results[2].failure->kind, core::FailureKind::timeout);
  ASSERT_FALSE(results[3].ok());
  EXPECT_EQ(results[3].failure->stage, "run");
  // Each run was the harness on its own work folder, isolated, with the request's timeout.
  const auto specs = runner->specs();
  ASSERT_EQ(specs.size(), 4u);
  for (const auto& spec : specs) {
    EXPECT_TRUE(spec.isolate);
    EXPECT_TRUE(spec.minimal_environment);
    EXPECT_EQ(spec.timeout, fake_request().timeout);
    EXPECT_EQ(spec.cwd, spec.remove_if_abandoned);
  }
  EXPECT_EQ(leftover_folders(), 0u);
}

TEST_F(LocalBackendTest, SimIsTheDefaultIdentityAndVersionTracksTheBundle) {
  auto backend = make("sim");
  ASSERT_TRUE(backend);
  EXPECT_EQ(backend->identity(), "sim");
  EXPECT_EQ(backend->device(), "sim");
  EXPECT_EQ(backend->slots(), 1);
  auto version = backend->harness_version();
  EXPECT_FALSE(version.empty());
  EXPECT_NE(version.find('+'), std::string::npos);
  EXPECT_EQ(version.rfind("unknown", 0), std::string::npos) << version;
}

TEST_F(LocalBackendTest, BrokenProblemIsAProblemErrorAndResultsStayAligned) {
  auto backend = make("local?device=sim&slots=2");
  ASSERT_TRUE(backend);
  EvalRequest broken = fake_request();
  broken.problem_source = "raise RuntimeError('no inputs here')\n";
  EvalRequest fine = fake_request();
  fine.problem_source = "def inputs(seed):\n    return {}\n";  // still no reference
  auto results = backend->evaluate({broken, fine}, {}, {});
  ASSERT_EQ(results.size(), 2u);
  ASSERT_FALSE(results[0].ok());
  EXPECT_EQ(results[0].failure->kind, core::FailureKind::problem_error);
  EXPECT_NE(results[0].failure->message.find("no inputs here"), std::string::npos)
      << results[0].failure->message;
  ASSERT_FALSE(results[1].ok());
  EXPECT_EQ(results[1].failure->kind, core::FailureKind::problem_error);
  EXPECT_NE(results[1].failure->message.find("reference"), std::string::npos)
      << results[1].failure->message;
  EXPECT_EQ(leftover_folders(), 0u);
}

TEST_F(LocalBackendTest, TimeoutKillsTheHarnessAndCleansUp) {
  auto backend = make("local?device=fake&fake_ms=60000");
  ASSERT_TRUE(backend);
  EvalRequest request = fake_request();
  request.timeout = 1500ms;
  auto results = backend->evaluate({request}, {}, {});
  ASSERT_EQ(results.size(), 1u);
  ASSERT_FALSE(results[0].ok());
  EXPECT_EQ(results[0].failure->kind, core::FailureKind::timeout) << results[0].failure->describe();
  EXPECT_EQ(leftover_folders(), 0u);
}

// The same on a ManualClock: the harness (which would run for an hour) is killed at a timeout of
// ten minutes without the test waiting for them.
TEST_F(LocalBackendTest, TimeoutOnAManualClockCostsNoRealTime) {
  auto clock = std::make_shared<core::ManualClock>();
  BackendOptions options;
  options.clock = clock;
  auto backend = make("local?device=fake&fake_ms=3600000", options);
  ASSERT_TRUE(backend);
  EvalRequest request = fake_request();
  request.timeout = 10min;
  const auto start = clock->now();
  auto results = backend->evaluate({request}, {}, {});
  ASSERT_EQ(results.size(), 1u);
  ASSERT_FALSE(results[0].ok());
  EXPECT_EQ(results[0].failure->kind, core::FailureKind::timeout) << results[0].failure->describe();
  EXPECT_NE(results[0].failure->message.find("within 600000 ms"), std::string::npos)
      << results[0].failure->message;
  EXPECT_GE(clock->now() - start, core::Clock::Duration(10min));
  EXPECT_EQ(leftover_folders(), 0u);
}

TEST_F(LocalBackendTest, CancelledBatchReportsCancelled) {
  auto backend = make("local?device=fake&fake_ms=10");
  ASSERT_TRUE(backend);
  core::CancelToken cancel;
  cancel.cancel();
  auto results = backend->evaluate({fake_request(), fake_request()}, cancel, {});
  ASSERT_EQ(results.size(), 2u);
  for (const auto& result : results) {
    ASSERT_FALSE(result.ok());
    EXPECT_EQ(result.failure->kind, core::FailureKind::cancelled);
  }
}

TEST_F(LocalBackendTest, HarnessThatCrashesIsReportedWithItsTraceback) {
  fs::path root = m_tmp / "broken-bundle";
  fs::create_directories(root / "harness");
  std::ofstream(root / "harness" / "autocomp_harness.py")
      << "import sys\n"
         "if sys.argv[1] == 'version':\n"
         "    print('{\"schema\":\"autocomp-harness/1\",\"harness_version\":\"9\"}')\n"
         "    sys.exit(0)\n"
         "raise ImportError('simulated missing dependency xyzzy')\n";
  BackendOptions options;
  options.harness_dir = root.string();
  auto backend = make("local?device=sim", options);
  ASSERT_TRUE(backend);
  EXPECT_EQ(backend->harness_version().rfind("9+", 0), 0u);
  auto results = backend->evaluate({fake_request()}, {}, {});
  ASSERT_EQ(results.size(), 1u);
  ASSERT_FALSE(results[0].ok());
  EXPECT_EQ(results[0].failure->kind, core::FailureKind::harness_error);
  EXPECT_NE(results[0].failure->message.find("xyzzy"), std::string::npos)
      << results[0].failure->message;
  EXPECT_NE(results[0].failure->message.find("exit code 1"), std::string::npos);
}

// True while any process whose command line contains `marker` is alive.
bool process_alive(const std::string& marker) {
  core::ProcessSpec spec;
  spec.argv = {"pgrep", "-f", marker};
  auto check = core::run_process(spec);
  return check.ok() && check->exited && check->exit_code == 0;
}

TEST_F(LocalBackendTest, HostileCodeCannotHurtTheServerNorSeeItsSecretsNorOutliveTheRun) {
  const std::string marker = "autocomp_hostile_" + std::to_string(::getpid());
  ::setenv("AUTOCOMP_TEST_API_KEY", "sk-hostile-test-secret", 1);
  auto backend = make("local?device=sim");
  ASSERT_TRUE(backend);
  EvalRequest request = fake_request();
  // The problem file runs when the harness loads it: the same power a kernel has.
  request.problem_source =
      "import os, signal, subprocess\n"
      "subprocess.Popen(['sh', '-c', 'sleep 30; : " +
      marker +
      "'], start_new_session=True)\n"
      "if os.fork() == 0:\n"
      "    os.setsid()\n"
      "    subprocess.Popen(['sh', '-c', 'sleep 30; : " +
      marker +
      "'])\n"
      "    os._exit(0)\n"
      "for sig in (signal.SIGSTOP, signal.SIGKILL):\n"
      "    try:\n"
      "        os.kill(os.getppid(), sig)\n"
      "    except OSError:\n"
      "        pass\n"
      "raise RuntimeError('seen: ' + ' '.join(sorted(os.environ)))\n";
  auto results = backend->evaluate({request}, {}, {});
  ::unsetenv("AUTOCOMP_TEST_API_KEY");
  ASSERT_EQ(results.size(), 1u);
  ASSERT_FALSE(results[0].ok());
  const std::string& message = results[0].failure->message;
  // Still here (neither killed nor stopped), and the harness reported the problem's error.
  EXPECT_EQ(results[0].failure->kind, core::FailureKind::problem_error) << message;
  EXPECT_NE(message.find("seen: "), std::string::npos) << message;
  EXPECT_EQ(message.find("AUTOCOMP_TEST_API_KEY"), std::string::npos) << message;
  EXPECT_FALSE(process_alive(marker)) << "a process started by the problem outlived the run";
  EXPECT_EQ(leftover_folders(), 0u);
}

TEST_F(LocalBackendTest, InteractiveRequestsDoNotWaitBehindABackgroundBatch) {
  auto backend = make("local?device=fake&fake_ms=500&slots=1");
  ASSERT_TRUE(backend);
  backend->harness_version();  // warm, so both batches start at once
  EvalRequest background = fake_request();
  background.lane = Lane::background;
  background.iters = 1;
  std::atomic<bool> background_done{false};
  std::thread search([&] {
    auto results = backend->evaluate({background, background}, {}, {});
    background_done = true;
    for (const auto& result : results) {
      EXPECT_TRUE(result.ok()) << result.failure->describe();
    }
  });
  std::this_thread::sleep_for(300ms);  // the search takes the only regular slot
  EvalRequest interactive = fake_request();
  interactive.iters = 1;
  std::vector<std::string> messages;
  auto results = backend->evaluate(
      {interactive}, {},
      [&](std::size_t, std::size_t, const std::string& message) { messages.push_back(message); });
  // The two background evaluations run one after the other; the interactive one ran beside them.
  EXPECT_FALSE(background_done.load());
  search.join();
  ASSERT_EQ(results.size(), 1u);
  EXPECT_TRUE(results[0].ok()) << results[0].failure->describe();
  EXPECT_EQ(messages, std::vector<std::string>{"evaluated"});
}

TEST(LocalBackendSpec, RejectsUnknownOptionsNamingTheKnownOnes) {
  for (const char* text : {"sim?devcie=sim", "local?device=fake&slot=2", "sim?timeout=5"}) {
    auto spec = parse_spec(text);
    ASSERT_TRUE(spec.ok()) << text;
    auto bad = make_local_backend({spec.value()}, {});
    ASSERT_FALSE(bad.ok()) << text;
    EXPECT_EQ(bad.failure().kind, core::FailureKind::invalid_argument);
    const std::string& message = bad.failure().message;
    EXPECT_NE(message.find("unknown option"), std::string::npos) << message;
    EXPECT_NE(message.find("device, fake_ms, slots, target, python"), std::string::npos) << message;
  }
  auto typo = make_local_backend({parse_spec("sim?devcie=sim").value()}, {});
  ASSERT_FALSE(typo.ok());
  EXPECT_NE(typo.failure().message.find("'devcie'"), std::string::npos);
}

TEST(LocalBackendSpec, RejectsUnknownDeviceAndMissingHarness) {
  auto spec = parse_spec("local?device=gpu");
  ASSERT_TRUE(spec.ok());
  auto bad = make_local_backend({spec.value()}, {});
  ASSERT_FALSE(bad.ok());
  EXPECT_NE(bad.failure().message.find("gpu"), std::string::npos);

  BackendOptions options;
  options.harness_dir = "/nonexistent/autocomp-harness";
  auto sim = parse_spec("sim");
  auto missing = make_local_backend({sim.value()}, options);
  ASSERT_FALSE(missing.ok());
  EXPECT_EQ(missing.failure().kind, core::FailureKind::unavailable);
  EXPECT_NE(missing.failure().message.find("AUTOCOMP_HARNESS_DIR"), std::string::npos);
}

}  // namespace
}  // namespace autocomp::backends
