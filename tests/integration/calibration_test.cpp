// Device calibration through the product, on the fake device `local?device=sim-perturbed&seed=N`
// (the simulator with hidden, seeded costs): `autocomp-mcp calibrate` recovers the hidden costs,
// resumes an interrupted calibration without measuring a probe twice, the simulator then
// matches the fake device on `sim?calibration=NAME`, and `--from-history` refits from kernels
// benchmarked on the device.
#include <gtest/gtest.h>
#include <unistd.h>

#include <cmath>
#include <cstdlib>
#include <filesystem>
#include <fstream>
#include <nlohmann/json.hpp>
#include <sstream>
#include <string>

#include "backends/backend.hpp"
#include "search/calibration/calibrate.hpp"
#include "search/store/store.hpp"
#include "server/tool.hpp"
#include "support/run_program.hpp"
#include "tools/product_tools.hpp"

namespace autocomp::tools {
namespace {

namespace fs = std::filesystem;
using nlohmann::json;

constexpr int k_seed = 3;
const std::string k_device = "local?device=sim-perturbed&seed=3";

fs::path harness_dir() {
  return fs::path(AUTOCOMP_SOURCE_DIR) / "backends";
}
fs::path probes_dir() {
  return harness_dir() / "nkisim" / "calibration" / "device" / "probes";
}

class Calibration : public ::testing::Test {
 protected:
  void SetUp() override {
    m_dir = fs::temp_directory_path() /
            ("calibration_test_" + std::to_string(::getpid()) + "_" +
             ::testing::UnitTest::GetInstance()->current_test_info()->name());
    fs::remove_all(m_dir);
    fs::create_directories(m_dir);
    ::setenv("AUTOCOMP_PYTHON", AUTOCOMP_PYTHON, 1);
    m_options.db_path = (m_dir / "store.db").string();
    m_options.harness_dir = harness_dir().string();
  }
  void TearDown() override { fs::remove_all(m_dir); }

  std::vector<std::string> calibrate_command(const std::vector<std::string>& extra) const {
    std::vector<std::string> argv = {AUTOCOMP_BINARY,
                                     "calibrate",
                                     "--backend",
                                     k_device,
                                     "--target",
                                     "trn1",
                                     "--name",
                                     "host",
                                     "--json",
                                     "--db",
                                     m_options.db_path,
                                     "--harness-dir",
                                     harness_dir().string()};
    argv.insert(argv.end(), extra.begin(), extra.end());
    return argv;
  }

  server::ToolResult call(const std::string& tool, json arguments) {
    if (!m_registered) {
      register_product_tools(m_registries, m_options);
      m_registered = true;
    }
    const server::ToolDef* def = m_registries.tools.find(tool);
    EXPECT_NE(def, nullptr) << tool;
    if (def == nullptr) {
      return {};
    }
    server::ToolContext context;
    context.working_dir_sink = [this] { return m_dir.string(); };
    return def->handler(arguments, context);
  }

  double benchmark(const std::string& kernel, const std::string& problem,
                   const std::string& backend) {
    auto result = call("benchmark_kernel", {{"kernel", (probes_dir() / kernel).string()},
                                            {"problem", (probes_dir() / problem).string()},
                                            {"target", "trn1"},
                                            {"backend", backend}});
    EXPECT_FALSE(result.is_error) << result.text;
    m_last = result.structured;
    return result.structured.value("latency_us", json::object()).value("median", 0.0);
  }

  fs::path m_dir;
  ProductToolsOptions m_options;
  server::Registries m_registries;
  bool m_registered = false;
  json m_last;
};

TEST_F(Calibration, RecoversTheFakeDevicesCostsResumesAndThenMatchesIt) {
  // Interrupted at a known point: after the fifth probe.
  {
    auto db = search::store::Store::open(m_options.db_path);
    ASSERT_TRUE(db.ok());
    std::shared_ptr<search::store::Store> store = std::move(db).value();
    backends::BackendOptions options;
    options.harness_dir = harness_dir().string();
    options.default_target = "trn1";
    auto device = backends::make_backend(k_device, options);
    ASSERT_TRUE(device.ok());
    search::calibration::CalibrateRequest request;
    request.name = "host";
    request.target = "trn1";
    request.harness_dir = harness_dir().string();
    const core::CancelToken cancel;
    auto stopped = search::calibration::calibrate(request, device.value(), store, cancel,
                                                  [&cancel](int done, int, const std::string&) {
                                                    if (done == 5) {
                                                      cancel.cancel();
                                                    }
                                                  });
    ASSERT_FALSE(stopped.ok());
    EXPECT_EQ(stopped.failure().kind, core::FailureKind::cancelled);
    EXPECT_FALSE(store->calibrations().get_profile("host")->has_value());
  }

  // Resumed by the command: the five are not measured again.
  auto [status, out] = testing::run_program(calibrate_command({}));
  ASSERT_EQ(status, 0) << out;
  json report = json::parse(out, nullptr, false);
  ASSERT_TRUE(report.is_object()) << out;
  EXPECT_EQ(report["resumed"], 5);
  EXPECT_GE(report["measured"].get<int>(), 8);
  EXPECT_EQ(report["name"], "host");

  // The fitted values of the identified parameters are the hidden ones within 5%.
  auto [hidden_status, hidden_text] = testing::run_program(
      {AUTOCOMP_PYTHON,
       (harness_dir() / "nkisim" / "calibration" / "device" / "hidden_factors.py").string(),
       "--seed", std::to_string(k_seed), "--target", "trn1"});
  ASSERT_EQ(hidden_status, 0);
  json hidden = json::parse(hidden_text)["values"];
  int identified = 0;
  for (const auto& parameter : report["parameters"]) {
    if (!parameter["identified"].get<bool>()) {
      continue;
    }
    ++identified;
    const std::string name = parameter["name"];
    ASSERT_TRUE(hidden.contains(name)) << name;
    const double truth = hidden[name].get<double>();
    EXPECT_NEAR(parameter["fitted"].get<double>() / truth, 1.0, 0.05) << name;
  }
  EXPECT_GE(identified, 8);

  // A kernel's latency on the calibrated simulator matches the fake device within 5%; on the
  // shipped costs it did not.
  const double device_us = benchmark("vector_copy.py", "copy_w1024_problem.py", k_device);
  EXPECT_GT(m_last.value("simulator_us", 0.0), 0.0);  // the pair was recorded
  const double calibrated_us =
      benchmark("vector_copy.py", "copy_w1024_problem.py", "sim?calibration=host");
  EXPECT_NE(m_last["measured"].get<std::string>().find("calibration host"), std::string::npos)
      << m_last["measured"];
  const double shipped_us = benchmark("vector_copy.py", "copy_w1024_problem.py", "sim");
  EXPECT_NE(m_last["measured"].get<std::string>().find("shipped costs"), std::string::npos);
  EXPECT_NEAR(calibrated_us / device_us, 1.0, 0.05);
  EXPECT_GT(std::fabs(shipped_us / device_us - 1.0), 0.05);

  // "latest" finds it; an unknown name lists the ones that exist.
  EXPECT_NEAR(benchmark("vector_copy.py", "copy_w1024_problem.py", "sim?calibration=latest"),
              calibrated_us, 1e-6);
  auto unknown =
      call("benchmark_kernel", {{"kernel", (probes_dir() / "vector_copy.py").string()},
                                {"problem", (probes_dir() / "copy_w1024_problem.py").string()},
                                {"target", "trn1"},
                                {"backend", "sim?calibration=nope"}});
  EXPECT_TRUE(unknown.is_error);
  EXPECT_NE(unknown.text.find("host (trn1)"), std::string::npos) << unknown.text;
}

TEST_F(Calibration, RefitsFromKernelsBenchmarkedOnTheDevice) {
  auto [none_status, none_out] = testing::run_program(calibrate_command({"--from-history"}));
  EXPECT_EQ(none_status, 2);  // nothing measured on the device yet

  benchmark("vector_copy.py", "copy_w1024_problem.py", k_device);
  benchmark("add_chain.py", "add_problem_w1024.py", k_device);
  benchmark("dma_chain.py", "chain_problem.py", k_device);
  auto [status, out] = testing::run_program(calibrate_command({"--from-history"}));
  ASSERT_EQ(status, 0) << out;
  json report = json::parse(out, nullptr, false);
  ASSERT_TRUE(report.is_object()) << out;
  EXPECT_EQ(report["source"], "history");
  EXPECT_EQ(report["pairs"], 3);
  double before = 0;
  double after = 0;
  for (const auto& residual : report["residuals"]) {
    before += std::fabs(residual["error_pct_before"].get<double>());
    after += std::fabs(residual["error_pct_after"].get<double>());
  }
  EXPECT_LT(after, before / 2) << out;
}

}  // namespace
}  // namespace autocomp::tools
