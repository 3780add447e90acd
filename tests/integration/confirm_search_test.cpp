// The hardware-confirmed search through the real binary: `--autonomous` with knob autotuning on
// the simulator, confirmed on the fake device `local?device=sim-perturbed&seed=12` (the simulator
// with hidden, seeded costs). The kernel's knob picks the engine of a chain of copies; on trn1
// the shipped simulator prices ScalarE's copies below VectorE's, while seed 12's hidden table
// slows ScalarE's initiation interval (x1.30) and speeds VectorE per element (x0.73), so the fake
// device ranks them the other way round.
#include <gtest/gtest.h>
#include <unistd.h>

#include <filesystem>
#include <fstream>
#include <sstream>
#include <string>

#include "search/store/store.hpp"
#include "server/tool.hpp"
#include "support/run_program.hpp"
#include "tools/product_tools.hpp"

namespace autocomp {
namespace {

namespace fs = std::filesystem;
using nlohmann::json;

const std::string k_device = "local?device=sim-perturbed&seed=12";

constexpr const char* k_kernel = R"(import neuronxcc.nki as nki
import neuronxcc.nki.isa as nisa
import neuronxcc.nki.language as nl

# autocomp: knob ENGINE = ["vector", "gpsimd", "scalar"]
ENGINE = "gpsimd"


@nki.jit
def kernel(x, reps):
    engines = {"vector": nisa.vector_engine, "gpsimd": nisa.gpsimd_engine,
               "scalar": nisa.scalar_engine}
    out = nl.ndarray(x.shape, dtype=x.dtype, buffer=nl.shared_hbm)
    t = nl.load(x)
    for _ in nl.sequential_range(reps):
        t = nisa.tensor_copy(t, engine=engines[ENGINE])
    nl.store(out, value=t)
    return out
)";

constexpr const char* k_problem = R"(import numpy as np

TARGET = "trn1"
W, REPS = 2048, 8


def inputs(seed):
    rng = np.random.default_rng(seed)
    return {"x": rng.standard_normal((128, W), dtype=np.float32), "reps": REPS}


def reference(x, reps):
    return x.copy()
)";

std::string read(const fs::path& path) {
  std::ifstream in(path, std::ios::binary);
  std::ostringstream text;
  text << in.rdbuf();
  return text.str();
}

void write(const fs::path& path, const std::string& text) {
  std::ofstream out(path, std::ios::binary);
  out << text;
}

// The ENGINE a kernel file assigns.
std::string engine_of(const std::string& source) {
  const std::string marker = "\nENGINE = \"";
  auto at = source.find(marker);
  if (at == std::string::npos) {
    return "";
  }
  at += marker.size();
  return source.substr(at, source.find('"', at) - at);
}

class ConfirmSearch : public ::testing::Test {
 protected:
  void SetUp() override {
    m_dir = fs::temp_directory_path() /
            ("confirm_search_test_" + std::to_string(::getpid()) + "_" +
             ::testing::UnitTest::GetInstance()->current_test_info()->name());
    fs::remove_all(m_dir);
    fs::create_directories(m_dir);
    ::setenv("AUTOCOMP_PYTHON", AUTOCOMP_PYTHON, 1);
  }
  void TearDown() override { fs::remove_all(m_dir); }

  // Runs a one-iteration autotuning search of the kernel (in its own folder) and answers the
  // binary's exit status, output and the ENGINE of KERNEL.best.py.
  struct Search {
    int status = -1;
    std::string output;
    std::string best_engine;
  };
  Search search(const std::string& name, const std::vector<std::string>& extra) {
    const fs::path folder = m_dir / name;
    fs::create_directories(folder);
    write(folder / "kernel.py", k_kernel);
    write(folder / "problem.py", k_problem);
    std::vector<std::string> argv = {
        AUTOCOMP_BINARY, "--autonomous",
        "--kernel",      (folder / "kernel.py").string(),
        "--problem",     (folder / "problem.py").string(),
        "--db",          db_path(),
        "--harness-dir", (fs::path(AUTOCOMP_SOURCE_DIR) / "backends").string(),
        "--backend",     "sim",
        "--beam",        "1",
        "--plans",       "2",
        "--impls",       "1",
        "--iterations",  "1",
        "--seed",        "5"};
    argv.insert(argv.end(), extra.begin(), extra.end());
    auto [status, output] = testing::run_program(argv, /*with_stderr=*/true);
    return Search{status, output, engine_of(read(folder / "kernel.best.py"))};
  }
  std::string db_path() const { return (m_dir / "store.db").string(); }
  // A stored kernel's source, by candidate key.
  std::string db_source(const std::string& key) const {
    auto db = search::store::Store::open(db_path()).value();
    auto candidate = db->evaluations().get_candidate(key).value();
    return candidate ? candidate->source : std::string();
  }

  fs::path m_dir;
};

TEST_F(ConfirmSearch, TheConfirmedSearchPicksTheFakeDevicesBestWhereTheSimulatorDiffers) {
  const Search simulated = search("sim_only", {});
  ASSERT_EQ(simulated.status, 0) << simulated.output;
  EXPECT_EQ(simulated.best_engine, "scalar") << simulated.output;

  const Search confirmed = search("confirmed", {"--confirm", k_device});
  ASSERT_EQ(confirmed.status, 0) << confirmed.output;
  EXPECT_EQ(confirmed.best_engine, "vector") << confirmed.output;
  // The input and the simulator's two children were measured on the fake device.
  EXPECT_NE(confirmed.output.find("confirmed on " + k_device + ": 3 measured"), std::string::npos)
      << confirmed.output;

  // The pairs are in the store with the run, and the status tools report their agreement.
  auto db = search::store::Store::open(db_path()).value();
  auto runs = db->runs().list_runs(5).value();
  ASSERT_EQ(runs.size(), 2u);
  const std::string run_id = runs.front().id;  // newest first: the confirmed run
  auto pairs = db->calibrations().pairs_for_run(run_id).value();
  ASSERT_EQ(pairs.size(), 3u);
  for (const auto& pair : pairs) {
    EXPECT_EQ(pair.target, "trn1");
    EXPECT_GT(pair.measured_us, 0);
    EXPECT_GT(pair.simulated_us, 0);
  }

  tools::ProductToolsOptions options;
  options.db_path = db_path();
  options.harness_dir = (fs::path(AUTOCOMP_SOURCE_DIR) / "backends").string();
  server::Registries registries;
  tools::register_product_tools(registries, options);
  auto call = [&registries](const std::string& tool, const json& arguments) {
    server::ToolContext context;
    return registries.tools.find(tool)->handler(arguments, context);
  };
  auto status = call("get_search_status", {{"run_id", run_id}});
  ASSERT_FALSE(status.is_error) << status.text;
  const json& confirm = status.structured.at("confirm");
  EXPECT_EQ(confirm.at("backend"), k_device);
  EXPECT_EQ(confirm.at("pairs"), 3);
  // Scalar and vector swap places between the simulator and the device: the three kernels' ranks
  // agree on one of three pairs of places only.
  EXPECT_LT(confirm.at("rank_correlation").get<double>(), 1.0);
  EXPECT_LE(confirm.at("device_sim_ratio").at("min").get<double>(),
            confirm.at("device_sim_ratio").at("median").get<double>());
  EXPECT_NE(status.text.find("device pairs"), std::string::npos) << status.text;
  // The candidate table shows each measured kernel's device figure beside the simulator's.
  long with_device = 0;
  for (const auto& row : status.structured.at("candidates")) {
    with_device += row.contains("device_us") ? 1 : 0;
  }
  EXPECT_EQ(with_device, 3);
  EXPECT_NE(status.text.find(" us (device "), std::string::npos) << status.text;

  // Pairs that rank the other way round (as a drifted device would give) turn the status into a
  // warning that names the calibrate command for the confirming device.
  for (int i = 0; i < 4; ++i) {
    search::store::DevicePair pair = pairs.front();
    pair.simulated_us = 10.0 + i;
    pair.measured_us = 40.0 - i;
    ASSERT_TRUE(db->calibrations().record_pair(pair).ok());
  }
  auto drifted = call("get_search_status", {{"run_id", run_id}});
  ASSERT_FALSE(drifted.is_error) << drifted.text;
  EXPECT_TRUE(drifted.structured.at("confirm").at("drifted").get<bool>());
  EXPECT_NE(drifted.text.find("warning: the simulator ranks kernels unlike the device"),
            std::string::npos)
      << drifted.text;
  EXPECT_NE(drifted.text.find("autocomp-mcp calibrate --backend '" + k_device + "'"),
            std::string::npos)
      << drifted.text;

  auto listed = call("list_runs", json::object());
  ASSERT_FALSE(listed.is_error) << listed.text;
  EXPECT_EQ(listed.structured.at("runs").at(0).at("confirm").at("pairs"), 7);
  EXPECT_TRUE(listed.structured.at("runs").at(0).at("confirm").at("drifted").get<bool>());
  EXPECT_FALSE(listed.structured.at("runs").at(1).contains("confirm"));
}

// run_beam_search takes confirm: {backend, top_k}; with one kernel confirmed per iteration only
// the simulator's favourite is measured, the other child ranks by its estimate (the price of a
// small k), and the status counts the device's seconds apart.
TEST_F(ConfirmSearch, TheSearchToolConfirmsTheTopKAndReportsDeviceTime) {
  write(m_dir / "kernel.py", k_kernel);
  write(m_dir / "problem.py", k_problem);
  tools::ProductToolsOptions options;
  options.db_path = db_path();
  options.harness_dir = (fs::path(AUTOCOMP_SOURCE_DIR) / "backends").string();
  server::Registries registries;
  tools::register_product_tools(registries, options);
  auto call = [&registries](const std::string& tool, const json& arguments) {
    server::ToolContext context;
    return registries.tools.find(tool)->handler(arguments, context);
  };
  auto started = call("run_beam_search", {{"kernel", (m_dir / "kernel.py").string()},
                                          {"problem", (m_dir / "problem.py").string()},
                                          {"backend", "sim"},
                                          {"confirm", {{"backend", k_device}, {"top_k", 1}}},
                                          {"beam", 1},
                                          {"plans", 2},
                                          {"impls", 1},
                                          {"iterations", 1}});
  ASSERT_FALSE(started.is_error) << started.text;
  const std::string run_id = started.structured.at("run_id");
  // Bad settings are refused before any work, naming the field.
  auto refused = call("run_beam_search", {{"kernel", (m_dir / "kernel.py").string()},
                                          {"problem", (m_dir / "problem.py").string()},
                                          {"confirm", {{"backend", k_device}, {"top_k", 0}}}});
  EXPECT_TRUE(refused.is_error);
  EXPECT_NE(refused.text.find("confirm: 'top_k' must be an integer from 1 to 64"),
            std::string::npos)
      << refused.text;
  refused = call("run_beam_search", {{"kernel", (m_dir / "kernel.py").string()},
                                     {"problem", (m_dir / "problem.py").string()},
                                     {"confirm", {{"device", k_device}}}});
  EXPECT_NE(refused.text.find("unknown field 'device'"), std::string::npos) << refused.text;
  refused = call("run_beam_search", {{"kernel", (m_dir / "kernel.py").string()},
                                     {"problem", (m_dir / "problem.py").string()},
                                     {"confirm", 3}});
  EXPECT_NE(refused.text.find("confirm: expected a device spec"), std::string::npos)
      << refused.text;
  json status;
  for (int i = 0; i < 24; ++i) {
    auto reply = call("get_search_status", {{"run_id", run_id}, {"wait_s", 5}});
    ASSERT_FALSE(reply.is_error) << reply.text;
    status = reply.structured;
    if (status.value("status", "") != "running") {
      break;
    }
  }
  ASSERT_EQ(status.value("status", ""), "completed") << status.dump();
  EXPECT_EQ(status.at("confirm").at("top_k"), 1);
  EXPECT_EQ(status.at("confirm").at("pairs"), 2);  // the input and the simulator's favourite
  EXPECT_GT(status.at("live").at("device_s").get<double>(), 0);
  EXPECT_EQ(status.at("live").at("device_measured"), 2);
  EXPECT_EQ(status.at("result").at("device_measured"), 2);
  EXPECT_EQ(engine_of(db_source(status.at("best_candidate"))), "scalar");
}

}  // namespace
}  // namespace autocomp
