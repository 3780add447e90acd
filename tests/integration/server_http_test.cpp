// The real binary over Streamable HTTP on 127.0.0.1: sessions, status codes, Origin/Host checks,
// bearer token, SSE for calls that stream, bad input.

#include <gtest/gtest.h>
#include <httplib.h>
#include <stdlib.h>

#include <filesystem>
#include <fstream>

#include "integration/server_test_support.hpp"

namespace autocomp::test {
namespace {

const std::string k_initialize =
    nlohmann::json{{"jsonrpc", "2.0"},
                   {"id", 1},
                   {"method", "initialize"},
                   {"params",
                    {{"protocolVersion", "2025-11-25"},
                     {"capabilities", nlohmann::json::object()},
                     {"clientInfo", {{"name", "http-test"}, {"version", "1"}}}}}}
        .dump();

httplib::Headers json_headers(const std::string& session = {}) {
  httplib::Headers headers = {{"Accept", "application/json, text/event-stream"},
                              {"MCP-Protocol-Version", "2025-11-25"}};
  if (!session.empty()) {
    headers.emplace("Mcp-Session-Id", session);
  }
  return headers;
}

std::string rpc(const nlohmann::json& id, const std::string& method,
                nlohmann::json params = nlohmann::json::object()) {
  return nlohmann::json{{"jsonrpc", "2.0"}, {"id", id}, {"method", method}, {"params", params}}
      .dump();
}

class ServerHttp : public ::testing::Test {
 protected:
  void SetUp() override {
    m_server = std::make_unique<HttpChild>(std::vector<std::string>{"--conformance-fixtures"});
    ASSERT_GT(m_server->port(), 0) << "server did not write its port file";
    m_client = std::make_unique<httplib::Client>("127.0.0.1", m_server->port());
    m_client->set_read_timeout(10, 0);
    m_client->set_tcp_nodelay(true);
  }

  std::string start_session() {
    auto response = m_client->Post("/mcp", json_headers(), k_initialize, "application/json");
    EXPECT_TRUE(response);
    if (!response) {
      return {};
    }
    EXPECT_EQ(response->status, 200);
    const std::string session = response->get_header_value("Mcp-Session-Id");
    EXPECT_FALSE(session.empty());
    auto initialized = m_client->Post("/mcp", json_headers(session),
                                      R"({"jsonrpc":"2.0","method":"notifications/initialized"})",
                                      "application/json");
    EXPECT_EQ(initialized->status, 202);
    EXPECT_TRUE(initialized->body.empty());
    return session;
  }

  std::unique_ptr<HttpChild> m_server;
  std::unique_ptr<httplib::Client> m_client;
};

TEST_F(ServerHttp, SessionLifecycle) {
  const std::string session = start_session();
  for (char c : session) {
    EXPECT_TRUE(c >= 0x21 && c <= 0x7E);
  }
  auto tools =
      m_client->Post("/mcp", json_headers(session), rpc(2, "tools/list"), "application/json");
  ASSERT_TRUE(tools);
  EXPECT_EQ(tools->status, 200);
  EXPECT_NE(tools->get_header_value("Content-Type").find("application/json"), std::string::npos);
  auto body = nlohmann::json::parse(tools->body);
  EXPECT_FALSE(body["result"]["tools"].empty());

  auto missing = m_client->Post("/mcp", json_headers(), rpc(3, "tools/list"), "application/json");
  EXPECT_EQ(missing->status, 400);
  auto unknown = m_client->Post("/mcp", json_headers("not-a-session"), rpc(4, "tools/list"),
                                "application/json");
  EXPECT_EQ(unknown->status, 404);

  auto ended = m_client->Delete("/mcp", json_headers(session));
  ASSERT_TRUE(ended);
  EXPECT_TRUE(ended->status == 200 || ended->status == 204);
  auto after = m_client->Post("/mcp", json_headers(session), rpc(5, "ping"), "application/json");
  EXPECT_EQ(after->status, 404);
  EXPECT_EQ(m_client->Delete("/mcp", json_headers(session))->status, 404);
}

TEST_F(ServerHttp, ClientResponsesAndNotificationsGet202) {
  const std::string session = start_session();
  auto response =
      m_client->Post("/mcp", json_headers(session),
                     R"({"jsonrpc":"2.0","id":"unknown","result":{}})", "application/json");
  EXPECT_EQ(response->status, 202);
}

TEST_F(ServerHttp, ProtocolVersionHeaderIsChecked) {
  const std::string session = start_session();
  auto headers = json_headers(session);
  headers.erase("MCP-Protocol-Version");
  EXPECT_EQ(m_client->Post("/mcp", headers, rpc(2, "ping"), "application/json")->status, 200);
  headers.emplace("MCP-Protocol-Version", "1999-01-01");
  EXPECT_EQ(m_client->Post("/mcp", headers, rpc(3, "ping"), "application/json")->status, 400);
}

TEST_F(ServerHttp, ForeignOriginAndHostAreForbidden) {
  const std::string session = start_session();
  auto headers = json_headers(session);
  headers.emplace("Origin", "http://evil.example");
  EXPECT_EQ(m_client->Post("/mcp", headers, rpc(2, "ping"), "application/json")->status, 403);
  auto local = json_headers(session);
  local.emplace("Origin", "http://localhost:3000");
  EXPECT_EQ(m_client->Post("/mcp", local, rpc(3, "ping"), "application/json")->status, 200);
  auto rebinding = json_headers(session);
  rebinding.emplace("Host", "evil.example");
  EXPECT_EQ(m_client->Post("/mcp", rebinding, rpc(4, "ping"), "application/json")->status, 403);
}

TEST_F(ServerHttp, ProgressCallsStreamServerSentEvents) {
  const std::string session = start_session();
  auto response = m_client->Post(
      "/mcp", json_headers(session),
      rpc(7, "tools/call",
          {{"name", "test_tool_with_progress"}, {"_meta", {{"progressToken", "p"}}}}),
      "application/json");
  ASSERT_TRUE(response);
  EXPECT_EQ(response->status, 200);
  EXPECT_NE(response->get_header_value("Content-Type").find("text/event-stream"),
            std::string::npos);
  std::vector<nlohmann::json> events;
  std::size_t start = 0;
  while ((start = response->body.find("data: ", start)) != std::string::npos) {
    const auto end = response->body.find('\n', start);
    auto data =
        nlohmann::json::parse(response->body.substr(start + 6, end - start - 6), nullptr, false);
    if (!data.is_discarded()) {
      events.push_back(data);
    }
    start = end;
  }
  ASSERT_EQ(events.size(), 4u) << response->body;
  EXPECT_EQ(events[0]["method"], "notifications/progress");
  EXPECT_EQ(events[2]["params"]["progress"], 100);
  EXPECT_EQ(events[3]["id"], 7);
  EXPECT_TRUE(events[3].contains("result"));
}

TEST_F(ServerHttp, BadInputGetsErrorsAndServingContinues) {
  const std::string session = start_session();
  auto malformed = m_client->Post("/mcp", json_headers(session), "{oops", "application/json");
  EXPECT_EQ(malformed->status, 400);
  EXPECT_EQ(nlohmann::json::parse(malformed->body)["error"]["code"], -32700);
  auto batch =
      m_client->Post("/mcp", json_headers(session), "[" + rpc(2, "ping") + "]", "application/json");
  EXPECT_EQ(batch->status, 400);
  EXPECT_EQ(nlohmann::json::parse(batch->body)["error"]["code"], -32600);
  auto utf8 = m_client->Post("/mcp", json_headers(session),
                             std::string("{\"jsonrpc\":\"2.0\",\"id\":3,\"method\":\"\xc3\x28\"}"),
                             "application/json");
  EXPECT_EQ(nlohmann::json::parse(utf8->body)["error"]["code"], -32700);
  auto unknown = m_client->Post("/mcp", json_headers(session), rpc(4, "nope"), "application/json");
  EXPECT_EQ(nlohmann::json::parse(unknown->body)["error"]["code"], -32601);
  auto huge = m_client->Post("/mcp", json_headers(session),
                             rpc(5, "ping", {{"pad", std::string(5 * 1024 * 1024, 'x')}}),
                             "application/json");
  ASSERT_TRUE(huge);
  EXPECT_GE(huge->status, 400);
  auto get = m_client->Get("/mcp", {{"Mcp-Session-Id", session}, {"Accept", "application/json"}});
  EXPECT_EQ(get->status, 405);
  auto pong = m_client->Post("/mcp", json_headers(session), rpc(6, "ping"), "application/json");
  EXPECT_EQ(pong->status, 200);
  EXPECT_EQ(nlohmann::json::parse(pong->body)["id"], 6);
}

// The token comes from a file or the environment; a client must send it.
void expect_token_required(HttpChild& server, const std::string& token) {
  ASSERT_GT(server.port(), 0);
  httplib::Client client("127.0.0.1", server.port());
  EXPECT_EQ(client.Post("/mcp", json_headers(), k_initialize, "application/json")->status, 401);
  auto wrong = json_headers();
  wrong.emplace("Authorization", "Bearer nope");
  EXPECT_EQ(client.Post("/mcp", wrong, k_initialize, "application/json")->status, 401);
  auto right = json_headers();
  right.emplace("Authorization", "Bearer " + token);
  EXPECT_EQ(client.Post("/mcp", right, k_initialize, "application/json")->status, 200);
}

TEST(ServerHttpAuth, BearerTokenFromAFileIsRequired) {
  const std::string path = temp_path("autocomp-token");
  std::ofstream(path) << "s3cret\n";
  HttpChild server({"--auth-token-file", path});
  expect_token_required(server, "s3cret");
  std::filesystem::remove(path);
}

TEST(ServerHttpAuth, BearerTokenFromTheEnvironmentIsRequired) {
  ::setenv("AUTOCOMP_AUTH_TOKEN", "from-env", 1);
  HttpChild server;
  ::unsetenv("AUTOCOMP_AUTH_TOKEN");
  expect_token_required(server, "from-env");
}

TEST(ServerHttpAuth, TokenOnTheCommandLineIsRefused) {
  // Any local process can read a command line (ps, /proc/PID/cmdline).
  auto result = run_binary({"--http", "127.0.0.1:0", "--auth-token", "s3cret"});
  EXPECT_EQ(result.exit_code, 2);
}

TEST(ServerHttpAuth, RefusesNonLoopbackBindWithoutToken) {
  auto result = run_binary({"--http", "0.0.0.0:0"});
  EXPECT_EQ(result.exit_code, 2);
}

}  // namespace
}  // namespace autocomp::test
