// The Slurm backend's queue and run timeouts on a ManualClock with a FakeSlurmHead: a job that
// stays pending, or runs without ever writing a result, is cancelled at its timeout, and the poll
// waits move the fake clock instead of taking real time.
#include <gtest/gtest.h>

#include <chrono>
#include <memory>
#include <mutex>
#include <string>
#include <vector>

#include "backends/slurm_backend.hpp"
#include "backends/slurm_head.hpp"
#include "backends/spec.hpp"
#include "core/clock.hpp"

namespace autocomp::backends {
namespace {

using namespace std::chrono_literals;

// A head that accepts every job as array 42 and reports each task in `state` forever; its
// files live nowhere. Records the commands it was given.
class FakeSlurmHead : public SlurmHead {
 public:
  struct Log {
    std::mutex mutex;
    std::vector<std::string> commands;
    bool has(const std::string& part) {
      std::lock_guard lock(mutex);
      for (const auto& command : commands) {
        if (command.find(part) != std::string::npos) {
          return true;
        }
      }
      return false;
    }
  };

  FakeSlurmHead(std::string state, std::shared_ptr<Log> log)
      : m_state(std::move(state)), m_log(std::move(log)) {}

  std::string label() const override { return "fake-head"; }
  core::Result<ExecOutput> run(const std::string& command, std::chrono::milliseconds,
                               const core::CancelToken&) override {
    {
      std::lock_guard lock(m_log->mutex);
      m_log->commands.push_back(command);
    }
    ExecOutput out;
    out.exit_status = 0;
    if (command.find("sbatch") != std::string::npos) {
      out.stdout_text = "42\n";
    } else if (command.find("scontrol -o show job") != std::string::npos) {
      out.stdout_text = "JobId=43 ArrayJobId=42 ArrayTaskId=0 JobState=" + m_state +
                        (m_state == "RUNNING" ? " Reason=None NodeList=node-1\n"
                                              : " Reason=Priority NodeList=(null)\n");
      out.stdout_text += "@@rc\n";
    }
    return out;
  }
  core::Status write_file(const std::string&, const std::string&) override {
    return core::ok_status();
  }
  core::Result<std::string> read_file(const std::string& path, std::size_t, bool) override {
    return core::make_failure(core::FailureKind::io_error, "read", "no file " + path);
  }
  core::Status make_dirs(const std::string&) override { return core::ok_status(); }
  core::Result<bool> exists(const std::string&) override { return true; }
  core::Status rename(const std::string&, const std::string&) override { return core::ok_status(); }
  core::Result<std::string> home() override { return std::string("/home/fake"); }

 private:
  std::string m_state;
  std::shared_ptr<Log> m_log;
};

std::shared_ptr<Backend> fake_cluster(const std::string& state,
                                      std::shared_ptr<FakeSlurmHead::Log> log,
                                      std::shared_ptr<core::ManualClock> clock) {
  auto spec = parse_spec("slurm:?partition=p&device=fake&queue_timeout=1800");
  EXPECT_TRUE(spec.ok());
  BackendOptions options;
  options.python = AUTOCOMP_PYTHON;
  options.clock = std::move(clock);
  auto backend = make_slurm_backend({spec.value()}, options,
                                    std::make_unique<FakeSlurmHead>(state, std::move(log)));
  EXPECT_TRUE(backend.ok()) << (backend.ok() ? "" : backend.failure().describe());
  return backend.ok() ? backend.value() : nullptr;
}

EvalRequest request() {
  EvalRequest r;
  r.kernel_source = "def kernel(a):\n    return a\n";
  r.problem_source = "import numpy as np\n";
  r.timeout = 20min;
  return r;
}

TEST(SlurmClock, AJobPendingPastTheQueueTimeoutIsCancelled) {
  auto clock = std::make_shared<core::ManualClock>();
  auto log = std::make_shared<FakeSlurmHead::Log>();
  auto backend = fake_cluster("PENDING", log, clock);
  ASSERT_TRUE(backend);
  const auto start = clock->now();
  auto results = backend->evaluate({request()}, {}, {});
  ASSERT_EQ(results.size(), 1u);
  ASSERT_FALSE(results[0].ok());
  EXPECT_EQ(results[0].failure->kind, core::FailureKind::unavailable);
  EXPECT_NE(results[0].failure->message.find("still pending after 1800 s (Priority)"),
            std::string::npos)
      << results[0].failure->message;
  EXPECT_TRUE(log->has("scancel"));
  EXPECT_GE(clock->now() - start, core::Clock::Duration(30min));
  EXPECT_LT(clock->now() - start, core::Clock::Duration(31min));
}

TEST(SlurmClock, ARunningJobWithoutAResultIsCancelledAtItsTimeout) {
  auto clock = std::make_shared<core::ManualClock>();
  auto log = std::make_shared<FakeSlurmHead::Log>();
  auto backend = fake_cluster("RUNNING", log, clock);
  ASSERT_TRUE(backend);
  const auto start = clock->now();
  auto results = backend->evaluate({request()}, {}, {});
  ASSERT_EQ(results.size(), 1u);
  ASSERT_FALSE(results[0].ok());
  EXPECT_EQ(results[0].failure->kind, core::FailureKind::timeout);
  EXPECT_NE(results[0].failure->message.find("on node-1 was cancelled"), std::string::npos)
      << results[0].failure->message;
  EXPECT_TRUE(log->has("scancel"));
  // The request's 20 minutes and the grace (the fake queue is empty at once for the drain).
  EXPECT_GE(clock->now() - start, core::Clock::Duration(20min));
  EXPECT_LT(clock->now() - start, core::Clock::Duration(22min));
}

}  // namespace
}  // namespace autocomp::backends
