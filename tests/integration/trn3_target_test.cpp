// Target trn3 through the product: every tool schema offers it, the evaluation tools run a seed
// kernel of the `nki` namespace on it (from the argument or the problem's TARGET line), a
// `neuronxcc.nki` kernel is refused with the namespace rule (by the tools, and by the harness for a
// search's candidates), and a search runs on it.
#include <gtest/gtest.h>
#include <unistd.h>

#include <cstdlib>
#include <filesystem>
#include <fstream>
#include <regex>
#include <sstream>
#include <string>

#include "core/targets.hpp"
#include "search/store/store.hpp"
#include "server/tool.hpp"
#include "support/add_workload.hpp"
#include "support/search_job.hpp"
#include "tools/product_tools.hpp"
#include "tools/search_tools.hpp"
#include "tools/tool_env.hpp"

namespace autocomp::tools {
namespace {

namespace fs = std::filesystem;
using nlohmann::json;

std::string read(const fs::path& path) {
  std::ifstream in(path, std::ios::binary);
  std::ostringstream text;
  text << in.rdbuf();
  return text.str();
}

class Trn3Target : public ::testing::Test {
 protected:
  void SetUp() override {
    m_dir = fs::temp_directory_path() /
            ("trn3_target_test_" + std::to_string(::getpid()) + "_" +
             ::testing::UnitTest::GetInstance()->current_test_info()->name());
    fs::remove_all(m_dir);
    fs::create_directories(m_dir);
    ::setenv("AUTOCOMP_SMALL", "1", 1);  // the seeds' small shapes
    ::setenv("AUTOCOMP_PYTHON", AUTOCOMP_PYTHON, 1);
    m_options.db_path = (m_dir / "store.db").string();
  }
  void TearDown() override { fs::remove_all(m_dir); }

  void write(const std::string& name, const std::string& text) {
    std::ofstream(m_dir / name, std::ios::binary | std::ios::trunc) << text;
  }
  void copy_seed(const std::string& seed, const std::string& file, const std::string& as,
                 const std::string& extra = "") {
    write(as, read(fs::path(AUTOCOMP_SOURCE_DIR) / "seeds" / seed / file) + extra);
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

  fs::path m_dir;
  ProductToolsOptions m_options;
  server::Registries m_registries;
  bool m_registered = false;
};

TEST_F(Trn3Target, EveryToolThatTakesATargetOffersTheKnownTargets) {
  register_product_tools(m_registries, m_options);
  m_registered = true;
  int with_target = 0;
  for (const char* name : {"verify_kernel", "benchmark_kernel", "profile_kernel", "revert_to_best",
                           "list_lessons", "clear_lessons", "run_beam_search"}) {
    const server::ToolDef* tool = m_registries.tools.find(name);
    ASSERT_NE(tool, nullptr) << name;
    const json& properties = tool->input_schema.at("properties");
    if (!properties.contains("target")) {
      continue;
    }
    ++with_target;
    const json& targets = properties.at("target").at("enum");
    EXPECT_EQ(targets, json(core::known_target_names())) << name;
    EXPECT_NE(std::find(targets.begin(), targets.end(), "trn3"), targets.end()) << name;
  }
  EXPECT_GE(with_target, 5);
}

TEST_F(Trn3Target, AnNkiSeedVerifiesAndBenchmarksOnTrn3FromTheArgumentOrTheProblem) {
  copy_seed("gemm", "naive.py", "gemm.py");
  copy_seed("gemm", "problem.py", "problem.py");
  copy_seed("gemm", "problem.py", "problem_trn3.py", "\nTARGET = \"trn3\"\n");

  auto verified = call("verify_kernel", {{"kernel", "gemm.py"}, {"problem", "problem_trn3.py"}});
  ASSERT_FALSE(verified.is_error) << verified.structured.dump();
  EXPECT_TRUE(verified.structured.at("correct").get<bool>()) << verified.structured.dump();
  EXPECT_EQ(verified.structured.at("measured").get<std::string>().rfind("sim trn3", 0), 0u)
      << verified.structured.dump();

  auto benchmarked = call("benchmark_kernel",
                          {{"kernel", "gemm.py"}, {"problem", "problem.py"}, {"target", "trn3"}});
  ASSERT_FALSE(benchmarked.is_error) << benchmarked.structured.dump();
  EXPECT_EQ(benchmarked.structured.at("measured").get<std::string>().rfind("sim trn3", 0), 0u);
  const double trn3_us = benchmarked.structured.at("latency_us").at("median").get<double>();
  EXPECT_GT(trn3_us, 0.0);

  // The same kernel on trn2 is another evaluation on other hardware.
  auto on_trn2 = call("benchmark_kernel",
                      {{"kernel", "gemm.py"}, {"problem", "problem.py"}, {"target", "trn2"}});
  ASSERT_FALSE(on_trn2.is_error) << on_trn2.structured.dump();
  EXPECT_EQ(on_trn2.structured.at("measured").get<std::string>().rfind("sim trn2", 0), 0u);
  EXPECT_NE(on_trn2.structured.at("latency_us").at("median").get<double>(), trn3_us);
}

TEST_F(Trn3Target, AnUnknownTargetIsRefusedByTheSchema) {
  copy_seed("gemm", "naive.py", "gemm.py");
  copy_seed("gemm", "problem.py", "problem.py");
  auto refused =
      call("verify_kernel", {{"kernel", "gemm.py"}, {"problem", "problem.py"}, {"target", "trn7"}});
  EXPECT_TRUE(refused.is_error) << refused.structured.dump();
  EXPECT_NE(refused.structured.dump().find("trn1, trn2 or trn3"), std::string::npos)
      << refused.structured.dump();
}

TEST_F(Trn3Target, ANeuronxccKernelOnTrn3HardwareGetsTheNamespaceRule) {
  write("problem.py", testing::k_add_problem);
  write("add.py", testing::k_add_fast_kernel);  // imports neuronxcc.nki
  auto refused = call("verify_kernel", {{"kernel", "add.py"},
                                        {"problem", "problem.py"},
                                        {"target", "trn3"},
                                        {"backend", "local?device=neuron"}});
  const std::string answer = refused.structured.dump() + refused.text;
  EXPECT_NE(answer.find("trn3 needs the `nki` namespace"), std::string::npos) << answer;
}

TEST_F(Trn3Target, ANeuronxccKernelOnTrn3IsRefusedOnTheSimulatorTooAndNoSearchStarts) {
  write("problem.py", testing::k_add_problem);
  write("add.py", testing::k_add_fast_kernel);  // imports neuronxcc.nki
  auto refused =
      call("verify_kernel", {{"kernel", "add.py"}, {"problem", "problem.py"}, {"target", "trn3"}});
  EXPECT_TRUE(refused.is_error) << refused.structured.dump();
  EXPECT_NE(refused.structured.dump().find("trn3 needs the `nki` namespace"), std::string::npos)
      << refused.structured.dump();
  // The same kernel on trn2 runs.
  auto trn2 =
      call("verify_kernel", {{"kernel", "add.py"}, {"problem", "problem.py"}, {"target", "trn2"}});
  ASSERT_FALSE(trn2.is_error) << trn2.structured.dump();
  EXPECT_TRUE(trn2.structured.at("correct").get<bool>());

  // A knob, so that the search would have something to run without an LLM.
  write("add.py",
        std::string(testing::k_add_fast_kernel) + "\n# autocomp: knob SPARE = [1, 2]\nSPARE = 1\n");
  auto env = std::make_shared<ToolEnv>(m_options);
  auto tool = make_run_beam_search_tool(env);
  server::ToolContext context;
  auto search = tool.handler({{"kernel", (m_dir / "add.py").string()},
                              {"problem", (m_dir / "problem.py").string()},
                              {"target", "trn3"},
                              {"beam", 1},
                              {"iterations", 1}},
                             context);
  EXPECT_TRUE(search.is_error) << search.structured.dump();
  EXPECT_NE((search.structured.dump() + search.text).find("trn3 needs the `nki` namespace"),
            std::string::npos)
      << search.structured.dump() << search.text;
}

// A search's candidates go to the backend without the tools' request check: the harness applies
// the namespace rule itself, as a compile error of the candidate (the search repairs or drops it).
TEST_F(Trn3Target, TheSimulatorBackendFailsALegacyCandidateOnTrn3AsACompileError) {
  auto env = std::make_shared<ToolEnv>(m_options);
  auto backend = env->backend("sim");
  ASSERT_TRUE(backend.ok()) << backend.failure().message;
  backends::EvalRequest request;
  request.command = backends::EvalCommand::verify;
  request.kernel_source = testing::k_add_fast_kernel;  // imports neuronxcc.nki
  request.problem_source = testing::k_add_problem;
  request.target = "trn3";
  backends::EvalRequest modern = request;
  modern.kernel_source =
      std::regex_replace(request.kernel_source, std::regex("neuronxcc\\.nki"), "nki");
  ASSERT_NE(modern.kernel_source, request.kernel_source);
  backends::EvalRequest on_trn2 = request;
  on_trn2.target = "trn2";
  auto results = backend.value()->evaluate({request, modern, on_trn2}, core::CancelToken{}, {});
  ASSERT_EQ(results.size(), 3u);
  ASSERT_TRUE(results[0].failure) << "a legacy kernel ran on trn3";
  EXPECT_EQ(results[0].failure->kind, core::FailureKind::compile_error);
  EXPECT_NE(results[0].failure->message.find("trn3 needs the `nki` namespace"), std::string::npos)
      << results[0].failure->message;
  EXPECT_TRUE(results[1].ok()) << results[1].failure->message;
  EXPECT_TRUE(results[2].ok()) << results[2].failure->message;
}

TEST_F(Trn3Target, ASearchRunsOnTheTargetTheProblemNames) {
  const fs::path seed = fs::path(AUTOCOMP_SOURCE_DIR) / "seeds" / "gemm";
  // One knob, so that the search has something to try without an LLM (docs/knobs.md).
  std::string kernel = read(seed / "naive.py");
  const std::string fixed = "TILE_N = nl.tile_size.gemm_moving_fmax";
  const auto at = kernel.find(fixed);
  ASSERT_NE(at, std::string::npos);
  kernel.replace(at, fixed.size(), "# autocomp: knob TILE_N = [512, 256]\n    TILE_N = 512");
  write("kernel.py", kernel);
  write("problem.py", read(seed / "problem.py") + "\nTARGET = \"trn3\"\n");
  m_options.target = "trn2";  // the server's default; the problem's TARGET wins over it
  auto env = std::make_shared<ToolEnv>(m_options);
  auto result = testing::start_small_search(env, (m_dir / "kernel.py").string(),
                                            (m_dir / "problem.py").string());
  ASSERT_FALSE(result.is_error) << result.structured.dump();
  const std::string run_id = result.structured.at("run_id");
  EXPECT_EQ(result.structured.at("target"), "trn3");

  auto live = testing::finished_job(*env, run_id);
  ASSERT_TRUE(live);
  ASSERT_TRUE(live->outcome);
  EXPECT_EQ(live->outcome->status, "completed") << live->outcome->stop_reason;
  EXPECT_EQ(live->outcome->config.target, "trn3");
}

}  // namespace
}  // namespace autocomp::tools
