// Protocol tasks over the real binary (stdio and Streamable HTTP on 127.0.0.1), with the
// conformance fixtures: the 2025-11-25 task augmentation of tools/call (tasks/get, tasks/result,
// tasks/list, tasks/cancel) and the io.modelcontextprotocol/tasks extension (server-directed
// tasks, results inline in tasks/get, tasks/update, acks).

#include <gtest/gtest.h>
#include <httplib.h>
#include <unistd.h>

#include <filesystem>
#include <fstream>
#include <functional>
#include <map>
#include <sstream>

#include "integration/server_test_support.hpp"
#include "support/add_workload.hpp"

namespace autocomp::test {
namespace {

using json = nlohmann::json;

const json k_extension_capabilities = {
    {"extensions", {{"io.modelcontextprotocol/tasks", json::object()}}}};
// The tasks extension and form elicitation (for the tasks that ask for input).
const json k_extension_and_elicitation = {
    {"extensions", {{"io.modelcontextprotocol/tasks", json::object()}}},
    {"elicitation", json::object()}};

// One request/response exchange, whatever the transport.
using Exchange = std::function<json(const std::string& method, const json& params)>;

// Polls tasks/get until the task ends (or 20 s pass); returns the last answer.
json wait_until_terminal(const Exchange& exchange, const std::string& id) {
  json last;
  const auto deadline = std::chrono::steady_clock::now() + 20s;
  while (std::chrono::steady_clock::now() < deadline) {
    last = exchange("tasks/get", {{"taskId", id}});
    const std::string status = last["result"].value("status", "");
    if (status == "completed" || status == "failed" || status == "cancelled") {
      break;
    }
    std::this_thread::sleep_for(50ms);
  }
  return last;
}

// The 2025-11-25 wire, checked the same way over every transport.
void check_legacy_lifecycle(const Exchange& exchange) {
  const json created = exchange("tools/call", {{"name", "slow_compute"},
                                               {"arguments", {{"seconds", 0.3}, {"label", "x"}}},
                                               {"task", {{"ttl", 60000}}}});
  ASSERT_TRUE(created.contains("result")) << created.dump();
  const json& task = created["result"]["task"];
  ASSERT_TRUE(task.is_object()) << created.dump();
  const std::string id = task.at("taskId");
  EXPECT_EQ(id.size(), 32u);
  EXPECT_EQ(task.at("status"), "working");
  EXPECT_EQ(task.at("ttl"), 60000);
  EXPECT_GT(task.at("pollInterval").get<long>(), 0);
  EXPECT_TRUE(task.at("createdAt").is_string());
  EXPECT_FALSE(created["result"].contains("content")) << "a task answer carries no tool result";

  const json got = exchange("tasks/get", {{"taskId", id}});
  EXPECT_EQ(got["result"]["taskId"], id) << got.dump();

  // tasks/result waits for the end and returns what the plain call would have returned.
  const json result = exchange("tasks/result", {{"taskId", id}});
  ASSERT_TRUE(result.contains("result")) << result.dump();
  EXPECT_EQ(result["result"]["content"][0]["text"].get<std::string>().rfind("computed x", 0), 0u)
      << result.dump();
  EXPECT_EQ(result["result"]["_meta"]["io.modelcontextprotocol/related-task"]["taskId"], id);
  EXPECT_EQ(exchange("tasks/get", {{"taskId", id}})["result"]["status"], "completed");

  const json listed = exchange("tasks/list", json::object());
  bool found = false;
  for (const auto& entry : listed["result"]["tasks"]) {
    found = found || entry["taskId"] == id;
  }
  EXPECT_TRUE(found) << listed.dump();

  // A finished task cannot be cancelled; an unknown one is invalid params.
  EXPECT_EQ(exchange("tasks/cancel", {{"taskId", id}})["error"]["code"], -32602);
  EXPECT_EQ(
      exchange("tasks/get", {{"taskId", "0123456789abcdef0123456789abcdef"}})["error"]["code"],
      -32602);
}

void check_legacy_cancel_and_refusals(const Exchange& exchange) {
  const json created = exchange(
      "tools/call",
      {{"name", "slow_compute"}, {"arguments", {{"seconds", 60}}}, {"task", json::object()}});
  const std::string id = created["result"]["task"].value("taskId", "");
  ASSERT_FALSE(id.empty()) << created.dump();
  const json cancelled = exchange("tasks/cancel", {{"taskId", id}});
  EXPECT_EQ(cancelled["result"]["status"], "cancelled") << cancelled.dump();
  EXPECT_EQ(exchange("tasks/get", {{"taskId", id}})["result"]["status"], "cancelled");

  // A tool that is never a task refuses the augmentation; one that is always a task refuses a
  // plain call.
  EXPECT_EQ(exchange("tools/call", {{"name", "greet"},
                                    {"arguments", {{"name", "a"}}},
                                    {"task", json::object()}})["error"]["code"],
            -32601);
  EXPECT_EQ(exchange("tools/call",
                     {{"name", "failing_job"}, {"arguments", json::object()}})["error"]["code"],
            -32601);
  EXPECT_EQ(exchange("tasks/update",
                     {{"taskId", id}, {"inputResponses", json::object()}})["error"]["code"],
            -32601);

  // In 2025-11-25 a tool error ends the task failed; tasks/result still returns the tool result.
  const json failing =
      exchange("tools/call",
               {{"name", "failing_job"}, {"arguments", json::object()}, {"task", json::object()}});
  const std::string failing_id = failing["result"]["task"].value("taskId", "");
  ASSERT_FALSE(failing_id.empty()) << failing.dump();
  const json failing_result = exchange("tasks/result", {{"taskId", failing_id}});
  EXPECT_TRUE(failing_result["result"].value("isError", false)) << failing_result.dump();
  EXPECT_EQ(exchange("tasks/get", {{"taskId", failing_id}})["result"]["status"], "failed");
}

void check_extension(const Exchange& exchange) {
  // The server decides: a task-capable tool becomes a task without any hint.
  const json created =
      exchange("tools/call", {{"name", "slow_compute"}, {"arguments", {{"seconds", 0.2}}}});
  const json& task = created["result"];
  ASSERT_EQ(task.value("resultType", ""), "task") << created.dump();
  EXPECT_FALSE(task.contains("task"));
  EXPECT_FALSE(task.contains("ttl"));
  EXPECT_FALSE(task.contains("pollInterval"));
  EXPECT_GT(task.at("ttlMs").get<long long>(), 0);
  EXPECT_GT(task.at("pollIntervalMs").get<long long>(), 0);
  const std::string id = task.at("taskId");
  const json done = wait_until_terminal(exchange, id);
  EXPECT_EQ(done["result"]["status"], "completed") << done.dump();
  EXPECT_EQ(done["result"]["resultType"], "complete");
  EXPECT_FALSE(done["result"]["result"]["content"].empty()) << done.dump();
  EXPECT_FALSE(done["result"]["result"].contains("_meta"));

  EXPECT_EQ(exchange("tasks/result", {{"taskId", id}})["error"]["code"], -32601);
  EXPECT_EQ(exchange("tasks/list", json::object())["error"]["code"], -32601);
  // Cancel is an ack, also for a task that has ended.
  EXPECT_EQ(exchange("tasks/cancel", {{"taskId", id}})["result"],
            json({{"resultType", "complete"}}));
  EXPECT_EQ(exchange("tasks/update",
                     {{"taskId", id}, {"inputResponses", json::object()}})["result"]["resultType"],
            "complete");

  // A legacy hint does not turn a plain tool into a task.
  const json greet =
      exchange("tools/call",
               {{"name", "greet"}, {"arguments", {{"name", "legacy"}}}, {"task", {{"ttl", 1000}}}});
  EXPECT_EQ(greet["result"]["content"][0]["text"], "Hello, legacy!") << greet.dump();

  // Tool errors complete with isError; protocol errors fail with an inline error.
  const std::string failing_id =
      exchange("tools/call", {{"name", "failing_job"}, {"arguments", json::object()}})["result"]
          .value("taskId", "");
  const json failing = wait_until_terminal(exchange, failing_id);
  EXPECT_EQ(failing["result"]["status"], "completed") << failing.dump();
  EXPECT_TRUE(failing["result"]["result"].value("isError", false));
  const std::string broken_id = exchange("tools/call", {{"name", "protocol_error_job"},
                                                        {"arguments", json::object()}})["result"]
                                    .value("taskId", "");
  const json broken = wait_until_terminal(exchange, broken_id);
  EXPECT_EQ(broken["result"]["status"], "failed") << broken.dump();
  EXPECT_TRUE(broken["result"]["error"]["code"].is_number());
  EXPECT_FALSE(broken["result"].contains("result"));

  // Cancelling a running task: ack, then cancelled.
  const std::string long_id =
      exchange("tools/call", {{"name", "slow_compute"}, {"arguments", {{"seconds", 60}}}})["result"]
          .value("taskId", "");
  ASSERT_FALSE(long_id.empty());
  EXPECT_EQ(exchange("tasks/cancel", {{"taskId", long_id}})["result"]["resultType"], "complete");
  EXPECT_EQ(wait_until_terminal(exchange, long_id)["result"]["status"], "cancelled");
}

// Polls tasks/get until the task has `status` or ends (or 20 s pass); returns the last answer.
json wait_for_status(const Exchange& exchange, const std::string& id, const std::string& status) {
  json last;
  const auto deadline = std::chrono::steady_clock::now() + 20s;
  while (std::chrono::steady_clock::now() < deadline) {
    last = exchange("tasks/get", {{"taskId", id}});
    const std::string now = last["result"].value("status", "");
    if (now == status || now == "completed" || now == "failed" || now == "cancelled") {
      break;
    }
    std::this_thread::sleep_for(50ms);
  }
  return last;
}

json accepted(json content) {
  return {{"action", "accept"}, {"content", std::move(content)}};
}

// Extension tasks that need the client's input: input_required with the requests on tasks/get,
// answers through tasks/update (one at a time if the client likes), then the task finishes.
void check_extension_input(const Exchange& exchange) {
  const json created = exchange(
      "tools/call", {{"name", "confirm_delete"}, {"arguments", {{"filename", "notes.txt"}}}});
  const std::string id = created["result"].value("taskId", "");
  ASSERT_FALSE(id.empty()) << created.dump();
  const json parked = wait_for_status(exchange, id, "input_required");
  ASSERT_EQ(parked["result"]["status"], "input_required") << parked.dump();
  const json& request = parked["result"]["inputRequests"]["confirm"];
  EXPECT_EQ(request["method"], "elicitation/create") << parked.dump();
  EXPECT_NE(request["params"]["message"].get<std::string>().find("notes.txt"), std::string::npos);
  EXPECT_FALSE(parked["result"].contains("requestState"));

  EXPECT_EQ(exchange("tasks/update",
                     {{"taskId", id}, {"inputResponses", {{"confirm", "yes"}}}})["error"]["code"],
            -32602)
      << "an answer must be the result object of the request";
  const json ack =
      exchange("tasks/update",
               {{"taskId", id}, {"inputResponses", {{"confirm", accepted({{"confirm", true}})}}}});
  EXPECT_EQ(ack["result"], json({{"resultType", "complete"}})) << ack.dump();
  const json done = wait_until_terminal(exchange, id);
  EXPECT_EQ(done["result"]["status"], "completed") << done.dump();
  EXPECT_NE(done["result"]["result"]["content"][0]["text"].get<std::string>().find(
                "Deletion of notes.txt confirmed"),
            std::string::npos)
      << done.dump();

  const std::string multi =
      exchange("tools/call", {{"name", "multi_input"}, {"arguments", json::object()}})["result"]
          .value("taskId", "");
  ASSERT_FALSE(multi.empty());
  const json both = wait_for_status(exchange, multi, "input_required");
  ASSERT_EQ(both["result"]["inputRequests"].size(), 2u) << both.dump();
  exchange("tasks/update",
           {{"taskId", multi}, {"inputResponses", {{"name", accepted({{"name", "Ada"}})}}}});
  const json one_left = exchange("tasks/get", {{"taskId", multi}});
  EXPECT_EQ(one_left["result"]["status"], "input_required") << one_left.dump();
  EXPECT_FALSE(one_left["result"]["inputRequests"].contains("name"));
  EXPECT_TRUE(one_left["result"]["inputRequests"].contains("confirm"));
  exchange("tasks/update",
           {{"taskId", multi}, {"inputResponses", {{"confirm", accepted({{"confirm", false}})}}}});
  const json finished = wait_until_terminal(exchange, multi);
  EXPECT_EQ(finished["result"]["result"]["content"][0]["text"], "Name Ada, confirmed false")
      << finished.dump();

  // A task left waiting can be cancelled.
  const std::string waiting = exchange("tools/call", {{"name", "confirm_delete"},
                                                      {"arguments", {{"filename", "x"}}}})["result"]
                                  .value("taskId", "");
  wait_for_status(exchange, waiting, "input_required");
  EXPECT_EQ(exchange("tasks/cancel", {{"taskId", waiting}})["result"]["resultType"], "complete");
  EXPECT_EQ(exchange("tasks/get", {{"taskId", waiting}})["result"]["status"], "cancelled");
}

class StdioTasks : public ::testing::Test {
 protected:
  Exchange start(const json& capabilities) {
    m_child = std::make_unique<Child>(std::vector<std::string>{"--conformance-fixtures"});
    m_initialized = m_child->request(0, "initialize",
                                     {{"protocolVersion", "2025-11-25"},
                                      {"capabilities", capabilities},
                                      {"clientInfo", {{"name", "tasks-test"}, {"version", "1"}}}});
    m_child->send(json{{"jsonrpc", "2.0"}, {"method", "notifications/initialized"}});
    return [this](const std::string& method, const json& params) {
      return m_child->request(++m_next_id, method, params);
    };
  }
  std::unique_ptr<Child> m_child;
  json m_initialized;
  int m_next_id = 0;
};

TEST_F(StdioTasks, CapabilitiesAndToolExecution) {
  auto exchange = start(json::object());
  const json& capabilities = m_initialized["result"]["capabilities"];
  EXPECT_TRUE(capabilities["tasks"]["requests"]["tools"].contains("call")) << m_initialized.dump();
  EXPECT_TRUE(capabilities["tasks"].contains("cancel"));
  EXPECT_FALSE(capabilities.contains("extensions"));
  const json tools = exchange("tools/list", json::object());
  std::map<std::string, std::string> support;
  for (const auto& tool : tools["result"]["tools"]) {
    support[tool["name"]] = tool.contains("execution") ? tool["execution"]["taskSupport"] : "";
  }
  EXPECT_EQ(support["slow_compute"], "optional");
  EXPECT_EQ(support["failing_job"], "required");
  EXPECT_EQ(support["test_tool_with_task"], "required");
  EXPECT_EQ(support["greet"], "");
  EXPECT_EQ(support["test_simple_text"], "");

  const json with_extension = Child(std::vector<std::string>{"--conformance-fixtures"})
                                  .request(0, "initialize",
                                           {{"protocolVersion", "2025-11-25"},
                                            {"capabilities", k_extension_capabilities},
                                            {"clientInfo", {{"name", "t"}, {"version", "1"}}}});
  EXPECT_TRUE(with_extension["result"]["capabilities"]["extensions"].contains(
      "io.modelcontextprotocol/tasks"))
      << with_extension.dump();
}

TEST_F(StdioTasks, LegacyLifecycle) {
  check_legacy_lifecycle(start(json::object()));
}

TEST_F(StdioTasks, LegacyCancelAndRefusals) {
  check_legacy_cancel_and_refusals(start(json::object()));
}

TEST_F(StdioTasks, Extension) {
  check_extension(start(k_extension_capabilities));
}

TEST_F(StdioTasks, ExtensionTasksTakeInputByUpdate) {
  check_extension_input(start(k_extension_and_elicitation));
}

TEST_F(StdioTasks, RequiredTaskToolRunsAsTask) {
  auto exchange = start(json::object());
  const json created = exchange("tools/call", {{"name", "test_tool_with_task"},
                                               {"arguments", {{"user_name", "Alice"}}},
                                               {"task", json::object()}});
  const std::string id = created["result"]["task"].value("taskId", "");
  ASSERT_FALSE(id.empty()) << created.dump();
  const json result = exchange("tasks/result", {{"taskId", id}});
  EXPECT_NE(result["result"]["content"][0]["text"].get<std::string>().find("Alice"),
            std::string::npos)
      << result.dump();
}

class HttpTasks : public ::testing::Test {
 protected:
  Exchange start(const json& capabilities) {
    m_server = std::make_unique<HttpChild>(std::vector<std::string>{"--conformance-fixtures"});
    EXPECT_GT(m_server->port(), 0);
    m_client = std::make_unique<httplib::Client>("127.0.0.1", m_server->port());
    m_client->set_read_timeout(30, 0);
    return new_session(capabilities);
  }

  Exchange new_session(const json& capabilities) {
    m_session.clear();
    auto response =
        m_client->Post("/mcp", headers(),
                       json{{"jsonrpc", "2.0"},
                            {"id", 0},
                            {"method", "initialize"},
                            {"params",
                             {{"protocolVersion", "2025-11-25"},
                              {"capabilities", capabilities},
                              {"clientInfo", {{"name", "tasks-test"}, {"version", "1"}}}}}}
                           .dump(),
                       "application/json");
    EXPECT_TRUE(response && response->status == 200);
    m_session = response ? response->get_header_value("Mcp-Session-Id") : "";
    m_client->Post("/mcp", headers(), R"({"jsonrpc":"2.0","method":"notifications/initialized"})",
                   "application/json");
    return [this](const std::string& method, const json& params) { return post(method, params); };
  }

  httplib::Headers headers() const {
    httplib::Headers out = {{"Accept", "application/json, text/event-stream"},
                            {"MCP-Protocol-Version", "2025-11-25"}};
    if (!m_session.empty()) {
      out.emplace("Mcp-Session-Id", m_session);
    }
    return out;
  }

  // The JSON-RPC response of one POST (plain JSON or the last `data:` line of an SSE stream).
  json post(const std::string& method, const json& params) {
    const json message = {
        {"jsonrpc", "2.0"}, {"id", ++m_next_id}, {"method", method}, {"params", params}};
    auto response = m_client->Post("/mcp", headers(), message.dump(), "application/json");
    if (!response) {
      return json();
    }
    if (response->get_header_value("Content-Type").find("text/event-stream") == std::string::npos) {
      return json::parse(response->body, nullptr, false);
    }
    json last;
    std::istringstream lines(response->body);
    for (std::string line; std::getline(lines, line);) {
      if (line.rfind("data:", 0) == 0) {
        auto data = json::parse(line.substr(5), nullptr, false);
        if (data.is_object() && (data.contains("result") || data.contains("error"))) {
          last = std::move(data);
        }
      }
    }
    return last;
  }

  std::unique_ptr<HttpChild> m_server;
  std::unique_ptr<httplib::Client> m_client;
  std::string m_session;
  int m_next_id = 0;
};

TEST_F(HttpTasks, LegacyLifecycle) {
  check_legacy_lifecycle(start(json::object()));
}

TEST_F(HttpTasks, LegacyCancelAndRefusals) {
  check_legacy_cancel_and_refusals(start(json::object()));
}

TEST_F(HttpTasks, Extension) {
  check_extension(start(k_extension_capabilities));
}

TEST_F(HttpTasks, ExtensionTasksTakeInputByUpdate) {
  check_extension_input(start(k_extension_and_elicitation));
}

// Task ids are global to the process but unguessable; another session can read a task only by
// its id, and tasks/list shows a session its own tasks only.
TEST_F(HttpTasks, ListShowsOnlyTheSessionsTasks) {
  auto exchange = start(json::object());
  const std::string id = exchange("tools/call", {{"name", "slow_compute"},
                                                 {"arguments", {{"seconds", 0}}},
                                                 {"task", json::object()}})["result"]["task"]
                             .value("taskId", "");
  ASSERT_FALSE(id.empty());
  EXPECT_EQ(exchange("tasks/list", json::object())["result"]["tasks"].size(), 1u);
  const std::string first_session = m_session;
  new_session(json::object());
  EXPECT_NE(m_session, first_session);
  EXPECT_TRUE(exchange("tasks/list", json::object())["result"]["tasks"].empty());
}

// The add kernel with one declared knob (the slice width), so a search needs no model.
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

// run_beam_search as a task: the task and the search job are one piece of work, seen through the
// task methods and through the search tools.
class SearchTask : public ::testing::Test {
 protected:
  void SetUp() override {
    ::setenv("AUTOCOMP_SMALL", "1", 1);
    ::unsetenv("OPENAI_API_KEY");
    ::unsetenv("ANTHROPIC_API_KEY");
    m_dir = std::filesystem::temp_directory_path() /
            ("search_task_" + std::to_string(::getpid()) + "_" +
             ::testing::UnitTest::GetInstance()->current_test_info()->name());
    std::filesystem::create_directories(m_dir);
    std::ofstream(m_dir / "kernel.py") << k_tunable_add_kernel;
    std::ofstream(m_dir / "problem.py") << testing::k_add_problem;
    m_server = std::make_unique<Child>(std::vector<std::string>{
        "--db", (m_dir / "store.db").string(), "--backend", "sim", "--log-level", "warn"});
    m_server->initialize();
  }
  void TearDown() override {
    m_server.reset();
    std::error_code ignored;
    std::filesystem::remove_all(m_dir, ignored);
  }
  json exchange(const std::string& method, const json& params, std::chrono::seconds wait = 30s) {
    m_server->send(
        json{{"jsonrpc", "2.0"}, {"id", ++m_id}, {"method", method}, {"params", params}});
    return m_server->read_response(wait).value_or(json());
  }
  json search_arguments(int iterations) const {
    return {{"kernel", (m_dir / "kernel.py").string()},
            {"problem", (m_dir / "problem.py").string()},
            {"beam", 1},
            {"iterations", iterations}};
  }

  std::filesystem::path m_dir;
  std::unique_ptr<Child> m_server;
  int m_id = 0;
};

TEST_F(SearchTask, TheTaskIsTheSearchJob) {
  const json created = exchange(
      "tools/call",
      {{"name", "run_beam_search"}, {"arguments", search_arguments(1)}, {"task", json::object()}});
  const std::string id = created["result"]["task"].value("taskId", "");
  ASSERT_FALSE(id.empty()) << created.dump();
  EXPECT_EQ(created["result"]["task"]["pollInterval"], 5000);

  const json result = exchange("tasks/result", {{"taskId", id}}, 300s);
  ASSERT_TRUE(result.contains("result")) << result.dump();
  const json& run = result["result"]["structuredContent"];
  ASSERT_TRUE(run.contains("run_id")) << result.dump();
  EXPECT_EQ(run["status"], "completed") << run.dump();
  const json task = exchange("tasks/get", {{"taskId", id}});
  EXPECT_EQ(task["result"]["status"], "completed");
  EXPECT_NE(task["result"].value("statusMessage", "").find(run["run_id"].get<std::string>()),
            std::string::npos)
      << task.dump();

  // The same run through the search tools.
  const json status = exchange(
      "tools/call", {{"name", "get_search_status"}, {"arguments", {{"run_id", run["run_id"]}}}});
  EXPECT_EQ(status["result"]["structuredContent"]["status"], "completed") << status.dump();
  EXPECT_EQ(status["result"]["structuredContent"]["best_candidate"], run["best_candidate"]);
}

TEST_F(SearchTask, CancellingTheTaskStopsTheSearch) {
  const json created = exchange(
      "tools/call",
      {{"name", "run_beam_search"}, {"arguments", search_arguments(50)}, {"task", json::object()}});
  const std::string id = created["result"]["task"].value("taskId", "");
  ASSERT_FALSE(id.empty()) << created.dump();
  // Wait until the search job exists (its run id is in the status line).
  std::string message;
  for (int i = 0; i < 200 && message.find("run ") == std::string::npos; ++i) {
    message = exchange("tasks/get", {{"taskId", id}})["result"].value("statusMessage", "");
    std::this_thread::sleep_for(50ms);
  }
  ASSERT_NE(message.find("run "), std::string::npos) << message;
  const std::string run_id = message.substr(4, message.find(':') - 4);
  EXPECT_EQ(exchange("tasks/cancel", {{"taskId", id}})["result"]["status"], "cancelled");

  json status;
  for (int i = 0; i < 100; ++i) {
    status = exchange("tools/call", {{"name", "get_search_status"},
                                     {"arguments", {{"run_id", run_id}, {"wait_s", 1}}}});
    if (!status["result"]["structuredContent"].value("running_here", true)) {
      break;
    }
  }
  EXPECT_FALSE(status["result"]["structuredContent"].value("running_here", true)) << status.dump();
  EXPECT_EQ(status["result"]["structuredContent"]["status"], "cancelled") << status.dump();
}

}  // namespace
}  // namespace autocomp::test
