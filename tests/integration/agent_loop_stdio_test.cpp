// The agent's loop as an agent sees it, over the real binary's stdio: the size of every answer of
// a round (verify, benchmark, profile, propose_plan) on a seed, hot lines and the receipt line, a
// search that can do nothing refused, one best across get_search_status, list_runs and
// revert_to_best, record_reflexion after revert_to_best, and the menu ranked by the profile.
#include <gtest/gtest.h>
#include <unistd.h>

#include <algorithm>
#include <chrono>
#include <cstdlib>
#include <filesystem>
#include <fstream>
#include <iostream>
#include <sstream>
#include <string>

#include "integration/server_test_support.hpp"
#include "support/add_workload.hpp"

namespace autocomp::test {
namespace {

namespace fs = std::filesystem;
using nlohmann::json;

std::string read_text(const fs::path& path) {
  std::ifstream in(path, std::ios::binary);
  std::ostringstream text;
  text << in.rdbuf();
  return text.str();
}

void write_text(const fs::path& path, const std::string& text) {
  std::ofstream(path, std::ios::binary | std::ios::trunc) << text;
}

// The add kernel with one declared knob: the slice width.
constexpr const char* k_tunable_add_kernel = R"(import neuronxcc.nki as nki
import neuronxcc.nki.language as nl

@nki.jit
def add_kernel(a, b):
    out = nl.ndarray(a.shape, dtype=a.dtype, buffer=nl.shared_hbm)
    # autocomp: knob W = [8, 128, 512]
    W = 8
    for j in nl.sequential_range(512 // W):
        x = nl.load(a[:, j * W:(j + 1) * W])
        y = nl.load(b[:, j * W:(j + 1) * W])
        nl.store(out[:, j * W:(j + 1) * W], value=nl.add(x, y))
    return out
)";

class AgentLoopStdio : public ::testing::Test {
 protected:
  void SetUp() override {
    ::setenv("AUTOCOMP_SMALL", "1", 1);  // the seeds' small shapes
    ::unsetenv("OPENAI_API_KEY");
    ::unsetenv("ANTHROPIC_API_KEY");
    m_dir = fs::temp_directory_path() /
            ("agent_loop_stdio_" + std::to_string(::getpid()) + "_" +
             ::testing::UnitTest::GetInstance()->current_test_info()->name());
    fs::create_directories(m_dir);
    m_server = std::make_unique<Child>(std::vector<std::string>{
        "--db", (m_dir / "store.db").string(), "--backend", "sim", "--log-level", "warn"});
    m_server->initialize();
  }
  void TearDown() override {
    m_server.reset();
    std::error_code ec;
    fs::remove_all(m_dir, ec);
  }

  std::string copy_seed(const std::string& seed, const std::string& file) {
    const fs::path to = m_dir / (seed + "_" + file);
    fs::copy_file(fs::path(AUTOCOMP_SOURCE_DIR) / "seeds" / seed / file, to,
                  fs::copy_options::overwrite_existing);
    return to.string();
  }
  std::string write(const std::string& name, const std::string& text) {
    write_text(m_dir / name, text);
    return (m_dir / name).string();
  }

  // The whole tools/call result (content and structuredContent), as the client receives it.
  json call(const std::string& tool, const json& arguments,
            std::chrono::seconds timeout = std::chrono::seconds(300)) {
    m_server->send(json{{"jsonrpc", "2.0"},
                        {"id", ++m_id},
                        {"method", "tools/call"},
                        {"params", {{"name", tool}, {"arguments", arguments}}}});
    auto response = m_server->read_response(timeout);
    EXPECT_TRUE(response.has_value()) << tool << " did not answer";
    if (!response || !response->contains("result")) {
      ADD_FAILURE() << tool << ": " << (response ? response->dump() : "no response");
      return json::object();
    }
    return response->at("result");
  }
  static std::string text_of(const json& result) {
    std::string text;
    for (const auto& block : result.value("content", json::array())) {
      text += block.value("text", "");
    }
    return text;
  }
  static json structured(const json& result) { return result.value("structuredContent", json()); }
  static bool is_error(const json& result) { return result.value("isError", false); }

  json wait_for_end(const std::string& run_id) {
    json status;
    for (int i = 0; i < 60; ++i) {
      status = structured(call("get_search_status", {{"run_id", run_id}, {"wait_s", 10}}));
      if (status.value("status", "") != "running") {
        break;
      }
    }
    return status;
  }

  fs::path m_dir;
  std::unique_ptr<Child> m_server;
  long m_id = 0;
};

TEST_F(AgentLoopStdio, ARoundsAnswersStayWithinTheirSizes) {
  const std::string kernel = copy_seed("rmsnorm", "naive.py");
  const std::string problem = copy_seed("rmsnorm", "problem.py");
  const json args = {{"kernel", kernel}, {"problem", problem}};
  struct Limit {
    const char* tool;
    std::size_t max_chars;
  };
  // a profile carries hot lines, waits, floors, percent of peak and the modelled compiler effects
  const Limit limits[] = {{"profile_kernel", 4500},
                          {"propose_plan", 4000},
                          {"verify_kernel", 1200},
                          {"benchmark_kernel", 1200}};
  for (const auto& limit : limits) {
    const json result = call(limit.tool, args);
    ASSERT_FALSE(is_error(result)) << result.dump();
    const std::size_t size = result.dump().size();
    std::cout << "[answer size] " << limit.tool << ": " << size << " chars (limit "
              << limit.max_chars << ")\n";
    EXPECT_LE(size, limit.max_chars) << limit.tool << " answered:\n" << text_of(result);
    const std::string text = text_of(result);
    EXPECT_NE(text.find("measured: sim trn2"), std::string::npos) << text;
    EXPECT_NE(text.find("details: autocomp://evaluations/"), std::string::npos) << text;
    EXPECT_EQ(structured(result).at("measured").get<std::string>().rfind("sim trn2", 0), 0u);
  }

  // The whole record stays one call away.
  json full_args = args;
  full_args["detail"] = "full";
  const json full = call("benchmark_kernel", full_args);
  ASSERT_FALSE(is_error(full)) << full.dump();
  EXPECT_EQ(structured(full).at("latency_us").at("samples").size(), 10u);
  EXPECT_TRUE(structured(full).at("full").at("metrics").contains("hbm_read_bytes"));
}

TEST_F(AgentLoopStdio, ProfileNamesTheHotLinesWhenTheBackendReportsThem) {
  const std::string kernel = copy_seed("rmsnorm", "naive.py");
  const std::string problem = copy_seed("rmsnorm", "problem.py");
  const json result = call("profile_kernel", {{"kernel", kernel}, {"problem", problem}});
  ASSERT_FALSE(is_error(result)) << result.dump();
  const json out = structured(result);
  const std::string text = text_of(result);
  EXPECT_NE(text.find("engines active:"), std::string::npos) << text;
  if (!out.contains("hotspots")) {
    EXPECT_NE(text.find("hot lines: not reported"), std::string::npos) << text;
    GTEST_SKIP() << "this simulator reports no per-line hotspots yet";
  }
  const std::string source = read_text(kernel);
  for (const auto& hotspot : out.at("hotspots")) {
    const int line = hotspot.at("line");
    ASSERT_GT(line, 0);
    ASSERT_TRUE(hotspot.contains("text")) << hotspot.dump();
    EXPECT_NE(source.find(hotspot.at("text").get<std::string>().substr(0, 20)), std::string::npos);
    EXPECT_NE(text.find("line " + std::to_string(line) + " ("), std::string::npos) << text;
  }
}

TEST_F(AgentLoopStdio, ASearchThatCanDoNothingIsRefused) {
  const std::string kernel = write("kernel.py", testing::k_add_slow_kernel);
  const std::string problem = write("problem.py", testing::k_add_problem);
  const json refused = call("run_beam_search", {{"kernel", kernel}, {"problem", problem}});
  ASSERT_TRUE(is_error(refused)) << refused.dump();
  const std::string text = text_of(refused);
  EXPECT_NE(text.find("# autocomp: knob"), std::string::npos) << text;
  EXPECT_NE(text.find("--llm"), std::string::npos) << text;
  const json runs = structured(call("list_runs", json::object()));
  EXPECT_TRUE(runs.at("runs").empty()) << "no run was created";
}

TEST_F(AgentLoopStdio, OneBestInStatusListAndRevertAlsoAfterACancel) {
  const std::string kernel = write("kernel.py", k_tunable_add_kernel);
  const std::string problem = write("problem.py", testing::k_add_problem);
  const json started =
      call("run_beam_search",
           {{"kernel", kernel}, {"problem", problem}, {"beam", 2}, {"iterations", 2}});
  ASSERT_FALSE(is_error(started)) << started.dump();
  const std::string run_id = structured(started).at("run_id");
  const json status = wait_for_end(run_id);
  ASSERT_EQ(status.at("status"), "completed") << status.dump();
  ASSERT_TRUE(status.contains("best_candidate")) << status.dump();
  EXPECT_FALSE(status.contains("result") && status.at("result").contains("best_latency_us"))
      << "one best figure per answer: " << status.dump();
  EXPECT_FALSE(status.contains("live") && status.at("live").contains("best_latency_us"));

  const json runs = structured(call("list_runs", json::object()));
  ASSERT_EQ(runs.at("runs").size(), 1u);
  EXPECT_EQ(runs.at("runs").at(0).at("best_candidate"), status.at("best_candidate"));
  EXPECT_EQ(runs.at("runs").at(0).at("best_latency_us"), status.at("best_latency_us"));

  const json reverted =
      structured(call("revert_to_best", {{"kernel", kernel}, {"run_id", run_id}}));
  EXPECT_EQ(reverted.at("candidate"), status.at("best_candidate")) << reverted.dump();
  EXPECT_EQ(reverted.at("median_us"), status.at("best_latency_us"));
  EXPECT_NE(read_text(kernel).find("W = 512"), std::string::npos) << "the widest slices win";

  // A run cancelled while it works (a changed comment: nothing is answered from the store):
  // list_runs right after the cancel says what get_search_status says.
  write_text(kernel, std::string("# second run\n") + k_tunable_add_kernel);
  const json second =
      call("run_beam_search",
           {{"kernel", kernel}, {"problem", problem}, {"beam", 1}, {"iterations", 50}});
  ASSERT_FALSE(is_error(second)) << second.dump();
  const std::string cancel_run = structured(second).at("run_id");
  const json cancelled = structured(call("cancel_search", {{"run_id", cancel_run}}));
  const json after = structured(call("get_search_status", {{"run_id", cancel_run}}));
  const json listed = structured(call("list_runs", json::object()));
  ASSERT_EQ(listed.at("runs").size(), 2u);
  const json& newest = listed.at("runs").at(0);
  EXPECT_EQ(newest.at("run_id"), cancel_run);
  EXPECT_EQ(newest.at("status"), after.at("status")) << cancelled.dump();
  EXPECT_EQ(newest.at("running_here"), false);
  EXPECT_EQ(newest.value("best_candidate", ""), after.value("best_candidate", ""));
  if (after.contains("best_candidate")) {
    const json restored = structured(
        call("revert_to_best", {{"kernel", kernel}, {"run_id", cancel_run}, {"dry_run", true}}));
    EXPECT_EQ(restored.at("candidate"), after.at("best_candidate")) << restored.dump();
  }
}

TEST_F(AgentLoopStdio, ReflexionAfterRevertDescribesTheAttemptNotTheRestoredFile) {
  const std::string kernel = write("kernel.py", testing::k_add_fast_kernel);
  const std::string problem = write("problem.py", testing::k_add_problem);
  const json args = {{"kernel", kernel}, {"problem", problem}};
  ASSERT_FALSE(is_error(call("benchmark_kernel", args)));
  // CLAUDE.md's order: edit, benchmark (slower), revert_to_best, record_reflexion.
  write_text(kernel, testing::k_add_slow_kernel);
  const json slower = structured(call("benchmark_kernel", args));
  ASSERT_TRUE(slower.contains("previous_version")) << slower.dump();
  EXPECT_NE(slower.at("previous_version").at("change").get<std::string>().find("slower"),
            std::string::npos);
  const json reverted = structured(call("revert_to_best", {{"kernel", kernel}}));
  ASSERT_TRUE(reverted.at("restored").get<bool>()) << reverted.dump();
  ASSERT_EQ(read_text(kernel), testing::k_add_fast_kernel);

  const json recorded = call("record_reflexion", {{"kernel", kernel},
                                                  {"expected", "narrow slices overlap better"},
                                                  {"avoid", "narrow 8-column slices"}});
  ASSERT_FALSE(is_error(recorded)) << recorded.dump();
  const json record = structured(recorded).at("recorded");
  EXPECT_EQ(record.at("fix_worked"), false) << record.dump();
  EXPECT_NE(record.at("actual").get<std::string>().find("slower"), std::string::npos)
      << record.dump();
  EXPECT_EQ(record.at("candidate"), slower.at("candidate")) << "the measured attempt";
}

TEST_F(AgentLoopStdio, PlansWithoutAModelRankTheMenuByTheProfile) {
  const std::string add_kernel = write("add.py", testing::k_add_slow_kernel);
  const std::string add_problem = write("add_problem.py", testing::k_add_problem);
  // rmsnorm's naive kernel is compute-bound on VectorE, the sliced add memory-bound on DMA.
  const std::string norm_kernel = copy_seed("rmsnorm", "naive.py");
  const std::string norm_problem = copy_seed("rmsnorm", "problem.py");

  auto menu_ids = [](const json& out) {
    std::vector<std::string> ids;
    for (const auto& item : out.at("menu")) {
      ids.push_back(item.at("id"));
    }
    return ids;
  };
  auto rank = [](const std::vector<std::string>& ids, const std::string& id) {
    return static_cast<std::size_t>(std::find(ids.begin(), ids.end(), id) - ids.begin());
  };
  const json add =
      structured(call("propose_plan", {{"kernel", add_kernel}, {"problem", add_problem}}));
  ASSERT_EQ(add.at("mode"), "prompt") << add.dump();
  const json norm =
      structured(call("propose_plan", {{"kernel", norm_kernel}, {"problem", norm_problem}}));
  ASSERT_EQ(norm.at("mode"), "prompt") << norm.dump();
  EXPECT_NE(add.at("bottleneck"), norm.at("bottleneck"));
  const auto add_ids = menu_ids(add);
  const auto norm_ids = menu_ids(norm);
  ASSERT_FALSE(add_ids.empty());
  EXPECT_NE(add_ids, norm_ids) << "different bottlenecks, different rankings";
  EXPECT_LT(rank(add_ids, "larger_dma"), 3u) << add.dump();
  EXPECT_EQ(rank(add_ids, "psum_accumulate_k"), add_ids.size()) << "no matmul in the add kernel";
  EXPECT_EQ(rank(norm_ids, "larger_dma"), norm_ids.size()) << norm.dump();
  EXPECT_LT(std::min(rank(norm_ids, "fuse_passes"), rank(norm_ids, "balance_engines")), 3u)
      << norm.dump();

  // An item the file's reflexions name as tried is left out of the next plan.
  const json args = {{"kernel", add_kernel}, {"problem", add_problem}};
  ASSERT_FALSE(is_error(call("benchmark_kernel", args)));
  ASSERT_FALSE(
      is_error(call("record_reflexion", {{"kernel", add_kernel},
                                         {"expected", "larger_dma: one 128x512 load per input"},
                                         {"lessons", "fewer DMAs"}})));
  const json next = structured(call("propose_plan", args));
  EXPECT_EQ(rank(menu_ids(next), "larger_dma"), menu_ids(next).size()) << next.dump();
  EXPECT_EQ(next.at("already_tried"), json::array({"larger_dma"}));
}

}  // namespace
}  // namespace autocomp::test
