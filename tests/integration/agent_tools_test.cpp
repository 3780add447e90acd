// propose_plan, run_beam_search, get_search_status, cancel_search, list_runs and revert_to_best by
// run, against the real simulator, a real store, and a scripted OpenAI-compatible LLM server on
// loopback (a test double: no real model is reachable here).
#include <gtest/gtest.h>
#include <unistd.h>

#include <chrono>
#include <cstdlib>
#include <filesystem>
#include <fstream>
#include <string>
#include <thread>

#include "server/tool.hpp"
#include "support/add_workload.hpp"
#include "support/scripted_llm_server.hpp"
#include "tools/product_tools.hpp"

namespace autocomp::tools {
namespace {

namespace fs = std::filesystem;
using autocomp::testing::ScriptedLlmServer;
using autocomp::testing::ScriptedResponse;
using nlohmann::json;

class AgentToolsTest : public ::testing::Test {
 protected:
  void SetUp() override {
    m_dir = fs::temp_directory_path() / ("agent_tools_test_" + std::to_string(::getpid()));
    fs::create_directories(m_dir);
    write("problem.py", testing::k_add_problem);
    write("kernel.py", testing::k_add_slow_kernel);
    ::setenv("OPENAI_BASE_URL", m_llm.openai_base_url().c_str(), 1);
    ::setenv("OPENAI_API_KEY", "test-key-not-secret", 1);
    ProductToolsOptions options;
    options.db_path = (m_dir / "store.db").string();
    register_product_tools(*m_registries, options);
  }
  void TearDown() override {
    m_registries.reset();  // stops running searches before the folder goes
    m_llm.stop();
    fs::remove_all(m_dir);
  }

  void write(const std::string& name, const std::string& text) {
    std::ofstream(m_dir / name, std::ios::binary | std::ios::trunc) << text;
  }
  std::string read(const std::string& name) {
    std::ifstream in(m_dir / name);
    return {std::istreambuf_iterator<char>(in), {}};
  }

  server::ToolResult call(const std::string& tool, json arguments) {
    const server::ToolDef* def = m_registries->tools.find(tool);
    EXPECT_NE(def, nullptr) << tool;
    server::ToolContext context;
    context.working_dir_sink = [this] { return m_dir.string(); };
    context.progress_sink = [this](double, std::optional<double>, const std::string& message) {
      ++m_progress_count;
      m_last_progress = message;
    };
    return def->handler(arguments, context);
  }

  // Polls get_search_status (with its bounded wait) until the run is no longer running.
  json wait_for_end(const std::string& run_id, std::chrono::seconds limit) {
    const auto deadline = std::chrono::steady_clock::now() + limit;
    json status;
    do {
      status = call("get_search_status", json{{"run_id", run_id}, {"wait_s", 5}}).structured;
    } while (status.value("status", "") == "running" &&
             std::chrono::steady_clock::now() < deadline);
    return status;
  }

  ScriptedLlmServer m_llm;
  fs::path m_dir;
  std::unique_ptr<server::Registries> m_registries = std::make_unique<server::Registries>();
  int m_progress_count = 0;
  std::string m_last_progress;
};

TEST_F(AgentToolsTest, ProposePlanWithoutAnLlmReturnsTheMenuProfileAndPromptResource) {
  auto result = call("propose_plan", json{{"kernel", "kernel.py"}, {"problem", "problem.py"}});
  ASSERT_FALSE(result.is_error) << result.structured.dump();
  const json& out = result.structured;
  EXPECT_EQ(out.at("mode"), "prompt");
  EXPECT_FALSE(out.at("menu").empty());
  EXPECT_FALSE(out.at("bottleneck").get<std::string>().empty());
  EXPECT_TRUE(out.at("profile").contains("total_time"));
  const std::string uri = out.at("prompt");
  auto match = m_registries->resources.match(uri);
  ASSERT_TRUE(match.has_value());
  auto prompt = match->read(uri, match->variables);
  ASSERT_TRUE(prompt.ok());
  const std::string text = prompt.value().at(0).at("text");
  EXPECT_NE(text.find("def add_kernel"), std::string::npos);
  EXPECT_EQ(m_llm.request_count(), 0u);
}

// The menu's relevance rules see the problem: a tight RTOL rules out bf16, a launch GRID lets
// spmd_grid apply.
TEST_F(AgentToolsTest, ProposePlanMenuFollowsTheProblemsToleranceAndGrid) {
  const auto why_of = [](const json& out, const std::string& id) -> std::string {
    for (const auto& item : out.at("menu")) {
      if (item.at("id") == id) {
        return item.value("why", std::string("(no reason)"));
      }
    }
    return "(not shown)";
  };
  const json arguments = {{"kernel", "kernel.py"}, {"problem", "problem.py"}, {"menu_items", 100}};
  auto loose = call("propose_plan", arguments);
  ASSERT_FALSE(loose.is_error) << loose.structured.dump();
  EXPECT_EQ(why_of(loose.structured, "spmd_grid"), "does not apply as written");
  EXPECT_NE(why_of(loose.structured, "bf16_compute"), "does not apply as written");

  write("problem.py", std::string(testing::k_add_problem) + "\nRTOL = 1e-4\nGRID = (2,)\n");
  write("kernel.py", std::string(testing::k_add_slow_kernel) + "\n# tolerance changed\n");
  auto tight = call("propose_plan", arguments);
  ASSERT_FALSE(tight.is_error) << tight.structured.dump();
  EXPECT_EQ(why_of(tight.structured, "bf16_compute"), "does not apply as written");
  EXPECT_NE(why_of(tight.structured, "spmd_grid"), "does not apply as written");
}

TEST_F(AgentToolsTest, ProposePlanAsksTheConfiguredLlm) {
  m_llm.push_text("Plan: load each input once as one 128x512 tile instead of 64 slices.");
  m_llm.push_text("Plan: hoist the loads out of the loop.");
  auto result = call("propose_plan", json{{"kernel", "kernel.py"},
                                          {"problem", "problem.py"},
                                          {"count", 2},
                                          {"llm", {"openai:scripted-model"}}});
  ASSERT_FALSE(result.is_error) << result.structured.dump();
  ASSERT_EQ(result.structured.at("plans").size(), 2u);
  EXPECT_NE(result.structured.at("plans").at(0).at("plan").get<std::string>().find("128x512"),
            std::string::npos);
  ASSERT_EQ(m_llm.request_count(), 2u);
  EXPECT_NE(m_llm.requests().at(0).prompt.find("def add_kernel"), std::string::npos);
}

TEST_F(AgentToolsTest, SearchRunsInTheBackgroundAndItsBestCanBeRestored) {
  ScriptedResponse standing =
      ScriptedResponse::reply(std::string("Load each input as a single full tile.\n\n```python\n") +
                              testing::k_add_fast_kernel + "```\n");
  standing.repeat = true;
  m_llm.set_fallback(standing);

  const auto started_at = std::chrono::steady_clock::now();
  auto started = call("run_beam_search", json{{"kernel", "kernel.py"},
                                              {"problem", "problem.py"},
                                              {"llm", {"openai:scripted-model"}},
                                              {"beam", 1},
                                              {"plans", 1},
                                              {"impls", 1},
                                              {"iterations", 2}});
  ASSERT_FALSE(started.is_error) << started.structured.dump();
  const std::string run_id = started.structured.at("run_id");
  EXPECT_EQ(run_id.size(), 12u);
  EXPECT_LT(std::chrono::steady_clock::now() - started_at, std::chrono::seconds(20));

  const json status = wait_for_end(run_id, std::chrono::seconds(240));
  ASSERT_EQ(status.at("status"), "completed") << status.dump();
  EXPECT_GT(status.at("speedup").get<double>(), 1.5);
  EXPECT_GT(m_progress_count, 0);

  auto runs = call("list_runs", json::object());
  ASSERT_FALSE(runs.is_error);
  ASSERT_FALSE(runs.structured.at("runs").empty());
  EXPECT_EQ(runs.structured.at("runs").at(0).at("run_id"), run_id);
  // A line per run a person can read: its status, figures and kernel.
  EXPECT_NE(runs.text.find("run " + run_id + ": completed"), std::string::npos) << runs.text;
  EXPECT_NE(runs.text.find("kernel.py on "), std::string::npos) << runs.text;
  EXPECT_NE(runs.text.find(" us"), std::string::npos) << runs.text;

  auto resource = m_registries->resources.match("autocomp://runs/" + run_id);
  ASSERT_TRUE(resource.has_value());
  auto body = resource->read("autocomp://runs/" + run_id, resource->variables);
  ASSERT_TRUE(body.ok());
  EXPECT_GE(json::parse(body.value().at(0).at("text").get<std::string>()).at("candidates").size(),
            2u);

  auto reverted = call("revert_to_best", json{{"kernel", "kernel.py"}, {"run_id", run_id}});
  ASSERT_FALSE(reverted.is_error) << reverted.structured.dump();
  EXPECT_TRUE(reverted.structured.at("restored").get<bool>());
  EXPECT_EQ(read("kernel.py"), testing::k_add_fast_kernel);
}

TEST_F(AgentToolsTest, CancelStopsARunningSearchPromptly) {
  ScriptedResponse slow = ScriptedResponse::reply("thinking");
  slow.delay = std::chrono::seconds(60);
  slow.repeat = true;
  m_llm.set_fallback(slow);
  auto started = call("run_beam_search", json{{"kernel", "kernel.py"},
                                              {"problem", "problem.py"},
                                              {"llm", {"openai:scripted-model"}},
                                              {"iterations", 3}});
  ASSERT_FALSE(started.is_error) << started.structured.dump();
  const std::string run_id = started.structured.at("run_id");
  // Let it reach the LLM.
  for (int i = 0; i < 100 && m_llm.request_count() == 0; ++i) {
    std::this_thread::sleep_for(std::chrono::milliseconds(200));
  }
  const auto cancel_at = std::chrono::steady_clock::now();
  auto cancelled = call("cancel_search", json{{"run_id", run_id}});
  ASSERT_FALSE(cancelled.is_error) << cancelled.structured.dump();
  EXPECT_TRUE(cancelled.structured.at("cancelled").get<bool>());
  EXPECT_LT(std::chrono::steady_clock::now() - cancel_at, std::chrono::seconds(15));
  EXPECT_EQ(cancelled.structured.at("status"), "cancelled") << cancelled.structured.dump();
  EXPECT_FALSE(cancelled.structured.at("running_here").get<bool>());

  auto again = call("cancel_search", json{{"run_id", run_id}});
  EXPECT_FALSE(again.structured.at("cancelled").get<bool>());
  EXPECT_TRUE(call("get_search_status", json{{"run_id", "ffffffffffff"}}).is_error);
}

TEST_F(AgentToolsTest, SearchWithoutAnLlmRunsOnKnobAutotuningAlone) {
  auto refused = call("run_beam_search",
                      json{{"kernel", "kernel.py"}, {"problem", "problem.py"}, {"iterations", 1}});
  ASSERT_TRUE(refused.is_error) << "no model, no sampling and no knobs: nothing to search with";
  EXPECT_NE(refused.structured.at("error").get<std::string>().find("# autocomp: knob"),
            std::string::npos);

  std::string tunable = testing::k_add_slow_kernel;
  const std::string loop = "    for j in";
  tunable.insert(tunable.find(loop), "    # autocomp: knob UNUSED = [1, 2]\n    UNUSED = 1\n");
  write("kernel.py", tunable);
  auto started = call("run_beam_search",
                      json{{"kernel", "kernel.py"}, {"problem", "problem.py"}, {"iterations", 1}});
  ASSERT_FALSE(started.is_error) << started.structured.dump();
  EXPECT_NE(started.structured.at("note").get<std::string>().find("autotuning"), std::string::npos);
  const json status = wait_for_end(started.structured.at("run_id"), std::chrono::seconds(120));
  EXPECT_EQ(status.at("status"), "completed") << status.dump();
  EXPECT_EQ(m_llm.request_count(), 0u);
}

}  // namespace
}  // namespace autocomp::tools

namespace autocomp::tools {
namespace {

TEST_F(AgentToolsTest, ProposePlanUsesTheClientsModelThroughSampling) {
  const server::ToolDef* tool = m_registries->tools.find("propose_plan");
  ASSERT_NE(tool, nullptr);
  server::ToolContext context;
  context.working_dir_sink = [this] { return m_dir.string(); };
  context.client_supports_sampling = true;
  std::vector<json> asked;
  context.request_sink = [&asked](const std::string& method, const json& params,
                                  std::chrono::milliseconds,
                                  const core::CancelToken&) -> core::Result<json> {
    EXPECT_EQ(method, "sampling/createMessage");
    asked.push_back(params);
    return json{{"role", "assistant"},
                {"model", "client-model"},
                {"content", {{"type", "text"}, {"text", "Plan: load each input as one tile."}}}};
  };
  auto result = tool->handler(
      json{{"kernel", "kernel.py"}, {"problem", "problem.py"}, {"count", 2}}, context);
  ASSERT_FALSE(result.is_error) << result.structured.dump();
  EXPECT_EQ(result.structured.at("mode"), "llm");
  ASSERT_EQ(result.structured.at("plans").size(), 2u);
  EXPECT_EQ(result.structured.at("plans").at(0).at("provider"), "sampling");
  EXPECT_NE(result.structured.at("plans").at(0).at("plan").get<std::string>().find("one tile"),
            std::string::npos);
  ASSERT_EQ(asked.size(), 2u);
  EXPECT_NE(asked.at(0)
                .at("messages")
                .at(0)
                .at("content")
                .at("text")
                .get<std::string>()
                .find("def add_kernel"),
            std::string::npos);
  EXPECT_TRUE(asked.at(0).contains("systemPrompt"));
  EXPECT_EQ(m_llm.request_count(), 0u);
}

TEST_F(AgentToolsTest, AgentReflexionsAreMeasuredStoredAndShownToTheNextPlan) {
  auto slow = call("benchmark_kernel", json{{"kernel", "kernel.py"}, {"problem", "problem.py"}});
  ASSERT_FALSE(slow.is_error) << slow.structured.dump();
  EXPECT_FALSE(slow.structured.contains("previous_version")) << "first version of the file";

  write("kernel.py", testing::k_add_fast_kernel);
  auto fast = call("benchmark_kernel", json{{"kernel", "kernel.py"}, {"problem", "problem.py"}});
  ASSERT_FALSE(fast.is_error) << fast.structured.dump();
  const json& previous = fast.structured.at("previous_version");
  EXPECT_GT(previous.at("speedup").get<double>(), 1.0);
  EXPECT_NE(previous.at("change").get<std::string>().find("faster"), std::string::npos);

  auto recorded = call("record_reflexion", json{{"kernel", "kernel.py"},
                                                {"diagnosis_right", true},
                                                {"expected", "fewer, larger DMAs"},
                                                {"lessons", "one full tile per input wins"},
                                                {"avoid", "narrow 8-column slices"}});
  ASSERT_FALSE(recorded.is_error) << recorded.structured.dump();
  const json& record = recorded.structured.at("recorded");
  EXPECT_EQ(record.at("fix_worked"), true) << "filled in from the measurements";
  EXPECT_NE(record.at("actual").get<std::string>().find("faster"), std::string::npos);

  auto plan = call("propose_plan", json{{"kernel", "kernel.py"}, {"problem", "problem.py"}});
  ASSERT_FALSE(plan.is_error) << plan.structured.dump();
  ASSERT_EQ(plan.structured.at("reflexions").size(), 1u);
  EXPECT_NE(plan.structured.at("reflexions")
                .at(0)
                .get<std::string>()
                .find("avoid: narrow 8-column slices"),
            std::string::npos);
  const std::string uri = plan.structured.at("prompt");
  auto match = m_registries->resources.match(uri);
  ASSERT_TRUE(match.has_value());
  auto prompt = match->read(uri, match->variables);
  ASSERT_TRUE(prompt.ok());
  EXPECT_NE(prompt.value().at(0).at("text").get<std::string>().find("narrow 8-column slices"),
            std::string::npos);

  // The agent edits and verifies the next attempt before writing up the last one: naming the
  // benchmarked version attaches the reflexion (and its measured change) to it, not to the edit.
  const std::string measured = fast.structured.at("candidate");
  write("kernel.py", std::string(testing::k_add_slow_kernel) + "# next attempt\n");
  ASSERT_FALSE(
      call("verify_kernel", json{{"kernel", "kernel.py"}, {"problem", "problem.py"}}).is_error);
  auto named = call("record_reflexion", json{{"kernel", "kernel.py"},
                                             {"candidate", measured.substr(0, 12)},
                                             {"lessons", "full tiles again"}});
  ASSERT_FALSE(named.is_error) << named.structured.dump();
  EXPECT_EQ(named.structured.at("recorded").at("candidate"), measured);
  EXPECT_EQ(named.structured.at("recorded").at("fix_worked"), true);
  EXPECT_NE(named.structured.at("recorded").at("actual").get<std::string>().find("faster"),
            std::string::npos);
  auto unknown =
      call("record_reflexion",
           json{{"kernel", "kernel.py"}, {"candidate", "0123456789ab"}, {"lessons", "x"}});
  EXPECT_TRUE(unknown.is_error);
  EXPECT_NE(unknown.structured.at("error").get<std::string>().find("arguments.candidate"),
            std::string::npos);

  write("other.py", testing::k_add_slow_kernel);
  auto empty = call("record_reflexion", json{{"kernel", "other.py"}});
  EXPECT_TRUE(empty.is_error) << "nothing to record for a file never benchmarked";
  auto missing = call("record_reflexion", json{{"kernel", "absent.py"}, {"lessons", "x"}});
  EXPECT_TRUE(missing.is_error);
}

TEST_F(AgentToolsTest, LessonsFromOneSearchReachTheNextSearchesPlans) {
  const std::string lesson = "Full-tile loads beat 64 narrow slices on element-wise kernels.";
  ScriptedResponse summary = ScriptedResponse::reply("- " + lesson + "\n");
  summary.match = "Distil at most";
  summary.repeat = true;
  m_llm.push(summary);
  ScriptedResponse standing =
      ScriptedResponse::reply(std::string("Load each input as a single full tile.\n\n```python\n") +
                              testing::k_add_fast_kernel + "```\n");
  standing.repeat = true;
  m_llm.set_fallback(standing);
  const json search = {{"kernel", "kernel.py"},
                       {"problem", "problem.py"},
                       {"llm", {"openai:scripted-model"}},
                       {"beam", 2},
                       {"plans", 1},
                       {"impls", 1},
                       {"iterations", 1}};

  auto first = call("run_beam_search", search);
  ASSERT_FALSE(first.is_error) << first.structured.dump();
  ASSERT_EQ(wait_for_end(first.structured.at("run_id"), std::chrono::seconds(240)).at("status"),
            "completed");
  auto lessons = call("list_lessons", json::object());
  ASSERT_FALSE(lessons.is_error);
  ASSERT_EQ(lessons.structured.at("lessons").size(), 1u);
  EXPECT_EQ(lessons.structured.at("lessons").at(0).at("text"), lesson);
  EXPECT_EQ(lessons.structured.at("lessons").at(0).at("run"), first.structured.at("run_id"));
  const std::size_t asked_in_first_run = m_llm.request_count();
  for (std::size_t i = 0; i < asked_in_first_run; ++i) {
    EXPECT_EQ(m_llm.requests().at(i).prompt.find(lesson + "\n"), std::string::npos)
        << "no lesson existed when the first run planned";
  }

  auto second = call("run_beam_search", search);
  ASSERT_FALSE(second.is_error) << second.structured.dump();
  ASSERT_EQ(wait_for_end(second.structured.at("run_id"), std::chrono::seconds(240)).at("status"),
            "completed");
  int plans_with_lesson = 0;
  const auto requests = m_llm.requests();
  for (std::size_t i = asked_in_first_run; i < requests.size(); ++i) {
    const std::string& prompt = requests[i].prompt;
    if (prompt.find("Study the kernel and its measurements") != std::string::npos &&
        prompt.find(lesson) != std::string::npos) {
      ++plans_with_lesson;
    }
  }
  EXPECT_GT(plans_with_lesson, 0) << "the second run plans with the first run's lesson";

  auto cleared = call("clear_lessons", json{{"confirm", true}});
  ASSERT_FALSE(cleared.is_error);
  EXPECT_EQ(cleared.structured.at("removed"), 1);
}

}  // namespace
}  // namespace autocomp::tools

namespace autocomp::tools {
namespace {

constexpr const char* k_tunable_add_kernel = R"(import neuronxcc.nki as nki
import neuronxcc.nki.language as nl


@nki.jit
def add_kernel(a, b):
    out = nl.ndarray(a.shape, dtype=a.dtype, buffer=nl.shared_hbm)
    # autocomp: knob W = [8, 512]
    W = 8
    for j in nl.sequential_range(512 // W):
        x = nl.load(a[:, j * W:(j + 1) * W])
        y = nl.load(b[:, j * W:(j + 1) * W])
        nl.store(out[:, j * W:(j + 1) * W], value=nl.add(x, y))
    return out
)";

TEST_F(AgentToolsTest, AfterASearchRevertTheReflexionCreditsTheSearchsWinner) {
  ASSERT_FALSE(
      call("benchmark_kernel", json{{"kernel", "kernel.py"}, {"problem", "problem.py"}}).is_error);
  write("kernel.py", k_tunable_add_kernel);  // the agent's manual edit
  auto edit = call("benchmark_kernel", json{{"kernel", "kernel.py"}, {"problem", "problem.py"}});
  ASSERT_FALSE(edit.is_error) << edit.structured.dump();
  const std::string edit_key = edit.structured.at("candidate");

  auto started = call("run_beam_search",
                      json{{"kernel", "kernel.py"}, {"problem", "problem.py"}, {"iterations", 1}});
  ASSERT_FALSE(started.is_error) << started.structured.dump();
  const std::string run_id = started.structured.at("run_id");
  const json status = wait_for_end(run_id, std::chrono::seconds(120));
  ASSERT_EQ(status.at("status"), "completed") << status.dump();

  // The status carries a compact table of the candidates: knobs, latency, status.
  auto reported = call("get_search_status", json{{"run_id", run_id}});
  ASSERT_FALSE(reported.is_error);
  const json& table = reported.structured.at("candidates");
  ASSERT_GE(table.size(), 2u) << reported.structured.dump();
  EXPECT_EQ(reported.structured.at("candidates_total").get<std::size_t>(), table.size());
  bool knob_row = false;
  for (const auto& row : table) {
    EXPECT_TRUE(row.contains("it") && row.contains("status") && row.contains("plan")) << row;
    knob_row =
        knob_row || row.at("plan").get<std::string>().find("W 8 -> 512") != std::string::npos;
  }
  EXPECT_TRUE(knob_row) << table.dump();
  EXPECT_LE(table.at(0).at("us").get<double>(), table.at(1).at("us").get<double>())
      << "fastest first";
  EXPECT_NE(reported.text.find("candidates (" + std::to_string(table.size())), std::string::npos)
      << reported.text;
  ASSERT_EQ(reported.extra_content.size(), 1u);
  EXPECT_EQ(reported.extra_content.at(0).at("uri"), "autocomp://runs/" + run_id);

  auto reverted = call("revert_to_best", json{{"kernel", "kernel.py"}, {"run_id", run_id}});
  ASSERT_TRUE(reverted.structured.at("restored").get<bool>()) << reverted.structured.dump();
  const std::string winner = reverted.structured.at("candidate");
  ASSERT_NE(winner, edit_key);
  EXPECT_EQ(winner, status.at("best_candidate"));

  auto recorded = call("record_reflexion",
                       json{{"kernel", "kernel.py"}, {"lessons", "one wide tile beats 64 slices"}});
  ASSERT_FALSE(recorded.is_error) << recorded.structured.dump();
  const json& record = recorded.structured.at("recorded");
  EXPECT_EQ(record.at("candidate"), winner) << "credits the search's winner, not the edit";
  EXPECT_NE(record.at("actual").get<std::string>().find("faster"), std::string::npos) << record;
  EXPECT_EQ(record.at("fix_worked"), true);
  EXPECT_NE(recorded.structured.at("note").get<std::string>().find(run_id), std::string::npos);
  EXPECT_FALSE(recorded.structured.contains("recent")) << "the new record only";

  // A second reflexion answer is no larger than the first: no history is echoed.
  auto second = call("record_reflexion",
                     json{{"kernel", "kernel.py"}, {"lessons", "one wide tile beats 64 slices"}});
  ASSERT_FALSE(second.is_error);
  EXPECT_LE(second.structured.dump().size(), recorded.structured.dump().size() + 8);
}

}  // namespace
}  // namespace autocomp::tools
