#include <gtest/gtest.h>

#include <algorithm>
#include <filesystem>
#include <fstream>
#include <sstream>

#include "backends/backend.hpp"
#include "backends/calibrated_backend.hpp"
#include "backends/harness_bundle.hpp"
#include "support/fake_process_runner.hpp"

// The device and calibration options of backend specs: "device=sim-perturbed&seed=N" reaches the
// harness as --device sim-perturbed --device-seed N, and "calibration=NAME" sends the profile's
// table with each request (--cost-table) and keys results by its digest.
namespace autocomp::backends {
namespace {

namespace fs = std::filesystem;

const std::string k_ok_line =
    R"({"schema":"autocomp-harness/1","device":"sim","target":"trn1","harness_version":"1",)"
    R"("cost_table":{"name":"host-a","digest":"0123456789abcdef"},)"
    R"("benchmark":{"latency_us":{"min":1,"median":1,"max":1,"samples":[1]}}})";

struct Recorded {
  std::vector<std::string> argv;
  std::string table_text;  // the --cost-table file as the harness would have read it
};

struct Fixture {
  std::vector<Recorded> runs;
  std::shared_ptr<testing::FakeProcessRunner> runner =
      std::make_shared<testing::FakeProcessRunner>([this](const core::ProcessSpec& spec) {
        Recorded recorded{spec.argv, ""};
        auto flag = std::find(spec.argv.begin(), spec.argv.end(), "--cost-table");
        if (flag != spec.argv.end() && flag + 1 != spec.argv.end()) {
          std::ifstream in(*(flag + 1));
          std::ostringstream text;
          text << in.rdbuf();
          recorded.table_text = text.str();
        }
        runs.push_back(recorded);
        return testing::FakeProcessRunner::exited(0, k_ok_line + "\n");
      });

  BackendOptions options(CalibrationResolver resolver = {}) {
    BackendOptions out;
    out.python = AUTOCOMP_PYTHON;
    out.process_runner = runner;
    out.resolve_calibration = std::move(resolver);
    out.default_target = "trn1";
    return out;
  }
};

std::string value_after(const std::vector<std::string>& argv, const std::string& flag) {
  auto it = std::find(argv.begin(), argv.end(), flag);
  return it == argv.end() || it + 1 == argv.end() ? std::string("<absent>") : *(it + 1);
}

EvalRequest request() {
  EvalRequest out;
  out.command = EvalCommand::benchmark;
  out.kernel_source = "def kernel(a):\n    return a\n";
  out.problem_source = "import numpy as np\n";
  out.target = "trn1";
  return out;
}

CalibrationResolver one_profile(std::string json) {
  return
      [json](const std::string& name, const std::string& target) -> core::Result<CalibrationTable> {
        if (name != "host-a" && name != "latest") {
          return core::make_failure(
              core::FailureKind::invalid_argument, "backend",
              "no calibration profile named '" + name + "'; the profiles are: host-a (trn1)");
        }
        return CalibrationTable{"host-a", target, json};
      };
}

TEST(CalibrationSpec, FakeDeviceSeedReachesTheHarnessAndTheIdentity) {
  Fixture fixture;
  auto backend = make_backend("local?device=sim-perturbed&seed=7", fixture.options());
  ASSERT_TRUE(backend.ok()) << backend.failure().describe();
  EXPECT_EQ(backend.value()->identity(), "local?device=sim-perturbed&seed=7");
  EXPECT_EQ(backend.value()->device(), "sim-perturbed");
  backend.value()->evaluate({request()}, core::CancelToken{}, {});
  ASSERT_EQ(fixture.runs.size(), 1u);
  EXPECT_EQ(value_after(fixture.runs[0].argv, "--device"), "sim-perturbed");
  EXPECT_EQ(value_after(fixture.runs[0].argv, "--device-seed"), "7");
  EXPECT_EQ(value_after(fixture.runs[0].argv, "--cost-table"), "<absent>");

  // Another seed is another device: results are never shared between them.
  auto other = make_backend("local?device=sim-perturbed&seed=8", fixture.options());
  ASSERT_TRUE(other.ok());
  EXPECT_NE(other.value()->identity(), backend.value()->identity());
}

TEST(CalibrationSpec, BadSeedsAreRefusedWithTheReason) {
  Fixture fixture;
  auto negative = make_backend("local?device=sim-perturbed&seed=-1", fixture.options());
  ASSERT_FALSE(negative.ok());
  EXPECT_NE(negative.failure().message.find("non-negative integer"), std::string::npos);
  auto on_sim = make_backend("local?device=sim&seed=3", fixture.options());
  ASSERT_FALSE(on_sim.ok());
  EXPECT_NE(on_sim.failure().message.find("sim-perturbed only"), std::string::npos);
  auto ssh = make_backend("ssh://u@h?device=sim-perturbed&seed=x", fixture.options());
  ASSERT_FALSE(ssh.ok());
  EXPECT_NE(ssh.failure().message.find("seed must be"), std::string::npos);
}

TEST(CalibrationSpec, RemoteSpecsNameTheFakeDeviceSeed) {
  Fixture fixture;
  auto ssh = make_backend("ssh://u@h:2222?device=sim-perturbed&seed=4", fixture.options());
  ASSERT_TRUE(ssh.ok()) << ssh.failure().describe();
  EXPECT_EQ(ssh.value()->identity(), "ssh://u@h:2222?device=sim-perturbed&seed=4");
  auto slurm = make_backend("slurm:?partition=p&device=sim-perturbed&seed=4", fixture.options());
  ASSERT_TRUE(slurm.ok()) << slurm.failure().describe();
  EXPECT_NE(slurm.value()->identity().find("device=sim-perturbed&seed=4"), std::string::npos);
}

TEST(CalibrationSpec, ACalibrationTravelsWithEachRequestAndKeysItsResults) {
  Fixture fixture;
  const std::string table = R"({"target":"trn1","name":"host-a","values":{"dma_fixed_ns":900}})";
  auto backend = make_backend("sim?calibration=host-a", fixture.options(one_profile(table)));
  ASSERT_TRUE(backend.ok()) << backend.failure().describe();
  EXPECT_EQ(backend.value()->identity(), "sim?calibration=host-a@" + cost_table_digest(table));
  EXPECT_EQ(backend.value()->device(), "sim");
  auto results = backend.value()->evaluate({request()}, core::CancelToken{}, {});
  ASSERT_EQ(fixture.runs.size(), 1u);
  const std::string path = value_after(fixture.runs[0].argv, "--cost-table");
  EXPECT_EQ(fs::path(path).filename(), "cost_table.json");
  EXPECT_EQ(fixture.runs[0].table_text, table);
  ASSERT_EQ(results.size(), 1u);
  EXPECT_EQ(results[0].backend_identity, backend.value()->identity());
  EXPECT_NE(results[0].receipt.summary().find("calibration host-a"), std::string::npos)
      << results[0].receipt.summary();

  // Another table under the same name is another identity: no cached answer crosses over.
  auto refitted = make_backend(
      "sim?calibration=host-a",
      fixture.options(one_profile(R"({"target":"trn1","name":"host-a","values":{}})")));
  ASSERT_TRUE(refitted.ok());
  EXPECT_NE(refitted.value()->identity(), backend.value()->identity());
}

TEST(CalibrationSpec, UnknownProfilesAndNonSimulatorDevicesAreRefused) {
  Fixture fixture;
  auto unknown = make_backend("sim?calibration=nope", fixture.options(one_profile("{}")));
  ASSERT_FALSE(unknown.ok());
  EXPECT_NE(unknown.failure().message.find("the profiles are: host-a"), std::string::npos);
  auto no_store = make_backend("sim?calibration=host-a", fixture.options());
  ASSERT_FALSE(no_store.ok());
  EXPECT_NE(no_store.failure().message.find("store"), std::string::npos);
  auto device =
      make_backend("local?device=fake&calibration=host-a", fixture.options(one_profile("{}")));
  ASSERT_FALSE(device.ok());
  EXPECT_NE(device.failure().message.find("prices the simulator"), std::string::npos);
}

TEST(CalibrationSpec, TheMeasuredLineNamesTheCosts) {
  Receipt receipt;
  receipt.device = "sim";
  receipt.target = "trn1";
  EXPECT_NE(receipt.summary().find("shipped costs"), std::string::npos);
  receipt.cost_table = "host-a";
  EXPECT_NE(receipt.summary().find("calibration host-a"), std::string::npos);
  receipt.device = "sim-perturbed";
  receipt.cost_table = "hidden";
  EXPECT_EQ(receipt.summary().find("costs"), std::string::npos);
  EXPECT_EQ(receipt.summary().find("hidden"), std::string::npos);
}

}  // namespace
}  // namespace autocomp::backends
