// The real binary over Streamable HTTP, 2026-07-28 requests: no session, routing headers that
// must agree with the body, HTTP statuses paired with the new error codes, event streams for
// progress, input through retried calls, and a legacy session served next to them.

#include <gtest/gtest.h>
#include <httplib.h>

#include <chrono>
#include <thread>

#include "integration/server_test_support.hpp"

namespace autocomp::test {
namespace {

nlohmann::json modern_meta(nlohmann::json capabilities = nlohmann::json::object()) {
  return {{"io.modelcontextprotocol/protocolVersion", "2026-07-28"},
          {"io.modelcontextprotocol/clientCapabilities", std::move(capabilities)},
          {"io.modelcontextprotocol/clientInfo", {{"name", "http-modern-test"}, {"version", "1"}}}};
}

std::string body_of(int id, const std::string& method, nlohmann::json params) {
  return nlohmann::json{{"jsonrpc", "2.0"}, {"id", id}, {"method", method}, {"params", params}}
      .dump();
}

httplib::Headers headers_for(const std::string& method, const std::string& name = {},
                             const std::string& version = "2026-07-28") {
  httplib::Headers headers = {{"Accept", "application/json, text/event-stream"},
                              {"MCP-Protocol-Version", version},
                              {"Mcp-Method", method}};
  if (!name.empty()) {
    headers.emplace("Mcp-Name", name);
  }
  return headers;
}

std::vector<nlohmann::json> sse_events(const std::string& body) {
  std::vector<nlohmann::json> events;
  std::size_t start = 0;
  while ((start = body.find("data: ", start)) != std::string::npos) {
    const auto end = body.find('\n', start);
    auto data = nlohmann::json::parse(body.substr(start + 6, end - start - 6), nullptr, false);
    if (!data.is_discarded()) {
      events.push_back(data);
    }
    start = end;
  }
  return events;
}

class ServerHttpModern : public ::testing::Test {
 protected:
  void SetUp() override {
    m_server = std::make_unique<HttpChild>(std::vector<std::string>{"--conformance-fixtures"});
    ASSERT_GT(m_server->port(), 0) << "server did not write its port file";
    m_client = std::make_unique<httplib::Client>("127.0.0.1", m_server->port());
    m_client->set_read_timeout(10, 0);
  }

  // POSTs and returns {status, JSON body} (body null when not JSON).
  std::pair<int, nlohmann::json> post(const httplib::Headers& headers, const std::string& body) {
    auto response = m_client->Post("/mcp", headers, body, "application/json");
    EXPECT_TRUE(response);
    if (!response) {
      return {0, nullptr};
    }
    EXPECT_TRUE(response->get_header_value("Mcp-Session-Id").empty())
        << "a modern request must not start a session";
    return {response->status, nlohmann::json::parse(response->body, nullptr, false)};
  }

  std::unique_ptr<HttpChild> m_server;
  std::unique_ptr<httplib::Client> m_client;
};

TEST_F(ServerHttpModern, DiscoverAndListWithoutSession) {
  auto [status, body] = post(headers_for("server/discover"),
                             body_of(1, "server/discover", {{"_meta", modern_meta()}}));
  EXPECT_EQ(status, 200);
  ASSERT_TRUE(body.contains("result")) << body.dump();
  EXPECT_EQ(body["result"]["supportedVersions"][0], "2026-07-28");
  EXPECT_FALSE(body["result"]["instructions"].get<std::string>().empty());
  auto [list_status, list] =
      post(headers_for("tools/list"), body_of(2, "tools/list", {{"_meta", modern_meta()}}));
  EXPECT_EQ(list_status, 200);
  EXPECT_FALSE(list["result"]["tools"].empty());
  EXPECT_EQ(list["result"]["cacheScope"], "public");
}

TEST_F(ServerHttpModern, HeadersMustAgreeWithTheBody) {
  const std::string discover = body_of(11, "server/discover", {{"_meta", modern_meta()}});
  auto [method_status, method] = post(headers_for("tools/list"), discover);
  EXPECT_EQ(method_status, 400);
  EXPECT_EQ(method["error"]["code"], -32020);
  EXPECT_EQ(method["id"], 11) << "errors keep the request id";
  auto [version_status, version] = post(headers_for("server/discover", "", "2025-11-25"), discover);
  EXPECT_EQ(version_status, 400) << version.dump();

  auto call = [](const std::string& name) {
    return body_of(
        12, "tools/call",
        {{"name", name}, {"arguments", nlohmann::json::object()}, {"_meta", modern_meta()}});
  };
  auto [name_status, name] =
      post(headers_for("tools/call", "test_logging_tool"), call("test_simple_text"));
  EXPECT_EQ(name_status, 400);
  EXPECT_EQ(name["error"]["code"], -32020);
  // Base64 form of the name ("test_simple_text"), with whitespace around it.
  auto [encoded_status, encoded] =
      post(headers_for("tools/call", "  =?base64?dGVzdF9zaW1wbGVfdGV4dA==?=  "),
           call("test_simple_text"));
  EXPECT_EQ(encoded_status, 200) << encoded.dump();
  auto [bad_status, bad] =
      post(headers_for("tools/call", "=?base64?dGVzd!F9zaW1wbGV?="), call("test_simple_text"));
  EXPECT_EQ(bad_status, 400);
}

TEST_F(ServerHttpModern, StatusesPairWithErrorCodes) {
  auto [meta_status, meta] =
      post(headers_for("server/discover"), body_of(21, "server/discover", {}));
  EXPECT_EQ(meta_status, 400);
  EXPECT_EQ(meta["error"]["code"], -32602);
  nlohmann::json future = modern_meta();
  future["io.modelcontextprotocol/protocolVersion"] = "2099-01-01";
  auto [version_status, version] = post(headers_for("server/discover", "", "2099-01-01"),
                                        body_of(22, "server/discover", {{"_meta", future}}));
  EXPECT_EQ(version_status, 400);
  EXPECT_EQ(version["error"]["code"], -32022);
  EXPECT_EQ(version["error"]["data"]["requested"], "2099-01-01");
  for (const char* removed : {"initialize", "ping", "logging/setLevel", "no/such/method"}) {
    auto [status, body] =
        post(headers_for(removed), body_of(23, removed, {{"_meta", modern_meta()}}));
    EXPECT_EQ(status, 404) << removed;
    EXPECT_EQ(body["error"]["code"], -32601) << removed;
  }
  auto [capability_status, capability] = post(
      headers_for("tools/call", "test_missing_capability"),
      body_of(24, "tools/call", {{"name", "test_missing_capability"}, {"_meta", modern_meta()}}));
  EXPECT_EQ(capability_status, 400);
  EXPECT_EQ(capability["error"]["code"], -32021);
  EXPECT_TRUE(capability["error"]["data"]["requiredCapabilities"].contains("sampling"));
}

TEST_F(ServerHttpModern, ProgressStreamsAndInputsComeBackWithTheRetry) {
  nlohmann::json meta = modern_meta();
  meta["progressToken"] = "p";
  auto response = m_client->Post(
      "/mcp", headers_for("tools/call", "test_tool_with_progress"),
      body_of(31, "tools/call", {{"name", "test_tool_with_progress"}, {"_meta", meta}}),
      "application/json");
  ASSERT_TRUE(response);
  EXPECT_NE(response->get_header_value("Content-Type").find("text/event-stream"),
            std::string::npos);
  auto events = sse_events(response->body);
  ASSERT_EQ(events.size(), 4u) << response->body;
  EXPECT_EQ(events[0]["method"], "notifications/progress");
  EXPECT_EQ(events[3]["result"]["resultType"], "complete");

  const nlohmann::json capabilities = {{"elicitation", nlohmann::json::object()}};
  const std::string tool = "test_input_required_result_elicitation";
  auto [first_status, first] =
      post(headers_for("tools/call", tool),
           body_of(32, "tools/call", {{"name", tool}, {"_meta", modern_meta(capabilities)}}));
  EXPECT_EQ(first_status, 200);
  ASSERT_EQ(first["result"]["resultType"], "input_required") << first.dump();
  EXPECT_EQ(first["result"]["inputRequests"]["user_name"]["method"], "elicitation/create");
  auto [second_status, second] =
      post(headers_for("tools/call", tool),
           body_of(33, "tools/call",
                   {{"name", tool},
                    {"inputResponses",
                     {{"user_name", {{"action", "accept"}, {"content", {{"name", "Ada"}}}}}}},
                    {"requestState", first["result"]["requestState"]},
                    {"_meta", modern_meta(capabilities)}}));
  EXPECT_EQ(second_status, 200);
  EXPECT_EQ(second["result"]["resultType"], "complete");
  EXPECT_EQ(second["result"]["content"][0]["text"], "Hello, Ada!");
}

TEST_F(ServerHttpModern, LegacySessionsWorkAlongside) {
  const std::string initialize =
      nlohmann::json{{"jsonrpc", "2.0"},
                     {"id", 1},
                     {"method", "initialize"},
                     {"params",
                      {{"protocolVersion", "2025-11-25"},
                       {"capabilities", nlohmann::json::object()},
                       {"clientInfo", {{"name", "legacy"}, {"version", "1"}}}}}}
          .dump();
  auto response = m_client->Post("/mcp", {{"Accept", "application/json, text/event-stream"}},
                                 initialize, "application/json");
  ASSERT_TRUE(response);
  EXPECT_EQ(response->status, 200);
  const std::string session = response->get_header_value("Mcp-Session-Id");
  ASSERT_FALSE(session.empty());
  auto ping =
      m_client->Post("/mcp", {{"Mcp-Session-Id", session}, {"MCP-Protocol-Version", "2025-11-25"}},
                     body_of(2, "ping", nlohmann::json::object()), "application/json");
  EXPECT_EQ(ping->status, 200);
  // A probe without _meta and without a session keeps the legacy answer (so that clients fall
  // back to initialize).
  auto probe =
      m_client->Post("/mcp", {{"Accept", "application/json"}},
                     body_of(3, "server/discover", nlohmann::json::object()), "application/json");
  EXPECT_EQ(nlohmann::json::parse(probe->body)["error"]["code"], -32601);
}

TEST_F(ServerHttpModern, TasksExtensionServedStatelessly) {
  const nlohmann::json with_tasks = {
      {"extensions", {{"io.modelcontextprotocol/tasks", nlohmann::json::object()}}}};
  auto [discover_status, discover] = post(
      headers_for("server/discover"), body_of(1, "server/discover", {{"_meta", modern_meta()}}));
  ASSERT_EQ(discover_status, 200);
  const auto& capabilities = discover["result"]["capabilities"];
  EXPECT_TRUE(capabilities["extensions"].contains("io.modelcontextprotocol/tasks"));
  EXPECT_FALSE(capabilities.contains("tasks")) << "2026-07-28 has no v1 tasks slot";

  auto [call_status, call] = post(headers_for("tools/call", "slow_compute"),
                                  body_of(2, "tools/call",
                                          {{"name", "slow_compute"},
                                           {"arguments", {{"seconds", 0}, {"label", "stateless"}}},
                                           {"_meta", modern_meta(with_tasks)}}));
  ASSERT_EQ(call_status, 200) << call.dump();
  ASSERT_EQ(call["result"]["resultType"], "task") << call.dump();
  const std::string id = call["result"]["taskId"].get<std::string>();
  EXPECT_EQ(id.size(), 32U) << "a 128-bit id";

  auto get = [&](int request_id, const nlohmann::json& declared) {
    return post(
        headers_for("tasks/get", id),
        body_of(request_id, "tasks/get", {{"taskId", id}, {"_meta", modern_meta(declared)}}));
  };
  // Another request (a new connection, no session) reads the task by its id alone.
  nlohmann::json task;
  for (int attempt = 0; attempt < 100; ++attempt) {
    auto [status, body] = get(3, with_tasks);
    ASSERT_EQ(status, 200) << body.dump();
    task = body["result"];
    if (task["status"] != "working") {
      break;
    }
    std::this_thread::sleep_for(std::chrono::milliseconds(100));
  }
  EXPECT_EQ(task["status"], "completed") << task.dump();
  EXPECT_EQ(task["result"]["content"][0]["text"].get<std::string>().rfind("computed stateless", 0),
            0U)
      << task.dump();

  auto [gated_status, gated] = get(4, nlohmann::json::object());
  EXPECT_EQ(gated_status, 400);
  EXPECT_EQ(gated["error"]["code"], -32021) << "tasks/get without the extension declared";

  auto [cancel_status, cancel] =
      post(headers_for("tasks/cancel", id),
           body_of(5, "tasks/cancel", {{"taskId", id}, {"_meta", modern_meta(with_tasks)}}));
  EXPECT_EQ(cancel_status, 200);
  EXPECT_EQ(cancel["result"], nlohmann::json({{"resultType", "complete"}}));

  auto [result_status, result] =
      post(headers_for("tasks/result", id),
           body_of(6, "tasks/result", {{"taskId", id}, {"_meta", modern_meta(with_tasks)}}));
  EXPECT_EQ(result_status, 404);
  EXPECT_EQ(result["error"]["code"], -32601) << "no tasks/result in the extension";

  // A legacy session does not see a task that belongs to no session.
  const std::string initialize =
      nlohmann::json{{"jsonrpc", "2.0"},
                     {"id", 7},
                     {"method", "initialize"},
                     {"params",
                      {{"protocolVersion", "2025-11-25"},
                       {"capabilities", with_tasks},
                       {"clientInfo", {{"name", "legacy"}, {"version", "1"}}}}}}
          .dump();
  auto opened = m_client->Post("/mcp", {{"Accept", "application/json, text/event-stream"}},
                               initialize, "application/json");
  ASSERT_TRUE(opened);
  const std::string session = opened->get_header_value("Mcp-Session-Id");
  ASSERT_FALSE(session.empty());
  auto other =
      m_client->Post("/mcp", {{"Mcp-Session-Id", session}, {"MCP-Protocol-Version", "2025-11-25"}},
                     body_of(8, "tasks/get", {{"taskId", id}}), "application/json");
  ASSERT_TRUE(other);
  EXPECT_EQ(nlohmann::json::parse(other->body)["error"]["code"], -32602) << other->body;
}

// A 2026-07-28 call of a task tool that needs input first: input_required rounds (no task yet),
// then the round with the answer creates the task, whose result uses the answer.
TEST_F(ServerHttpModern, TaskInputsAreGatheredBeforeTheTask) {
  const nlohmann::json capabilities = {
      {"elicitation", nlohmann::json::object()},
      {"extensions", {{"io.modelcontextprotocol/tasks", nlohmann::json::object()}}}};
  const std::string tool = "test_tool_with_task";
  auto [first_status, first] =
      post(headers_for("tools/call", tool), body_of(1, "tools/call",
                                                    {{"name", tool},
                                                     {"arguments", nlohmann::json::object()},
                                                     {"_meta", modern_meta(capabilities)}}));
  EXPECT_EQ(first_status, 200);
  ASSERT_EQ(first["result"]["resultType"], "input_required") << first.dump();
  EXPECT_FALSE(first["result"].contains("taskId"));
  EXPECT_EQ(first["result"]["inputRequests"]["user_name"]["method"], "elicitation/create");

  auto [second_status, second] =
      post(headers_for("tools/call", tool),
           body_of(2, "tools/call",
                   {{"name", tool},
                    {"arguments", nlohmann::json::object()},
                    {"inputResponses",
                     {{"user_name", {{"action", "accept"}, {"content", {{"name", "Alice"}}}}}}},
                    {"requestState", first["result"]["requestState"]},
                    {"_meta", modern_meta(capabilities)}}));
  EXPECT_EQ(second_status, 200);
  ASSERT_EQ(second["result"]["resultType"], "task") << second.dump();
  EXPECT_FALSE(second["result"].contains("requestState"));
  EXPECT_FALSE(second["result"].contains("inputRequests"));
  const std::string id = second["result"]["taskId"].get<std::string>();
  nlohmann::json task;
  for (int attempt = 0; attempt < 100; ++attempt) {
    task = post(headers_for("tasks/get", id),
                body_of(3, "tasks/get", {{"taskId", id}, {"_meta", modern_meta(capabilities)}}))
               .second["result"];
    if (task["status"] != "working") {
      break;
    }
    std::this_thread::sleep_for(std::chrono::milliseconds(100));
  }
  EXPECT_EQ(task["status"], "completed") << task.dump();
  EXPECT_EQ(task["result"]["content"][0]["text"], "Task finished for Alice") << task.dump();
}

}  // namespace
}  // namespace autocomp::test
