// The real binary over Streamable HTTP under attack: DNS-rebinding Host/Origin forms, outbound
// endpoints in tool arguments, chunked and oversize bodies, held connections and event streams,
// session limits and expiry, the bearer scheme in any case.

#include <gtest/gtest.h>
#include <httplib.h>

#include <filesystem>
#include <fstream>

#include "integration/server_test_support.hpp"

namespace autocomp::test {
namespace {

nlohmann::json rpc(const nlohmann::json& id, const std::string& method,
                   nlohmann::json params = nlohmann::json::object()) {
  return {{"jsonrpc", "2.0"}, {"id", id}, {"method", method}, {"params", std::move(params)}};
}

const std::string k_initialize =
    rpc(1, "initialize",
        {{"protocolVersion", "2025-11-25"},
         {"capabilities", nlohmann::json::object()},
         {"clientInfo", {{"name", "security-test"}, {"version", "1"}}}})
        .dump();

class HttpSecurity : public ::testing::Test {
 protected:
  void start(std::vector<std::string> extra = {}) {
    extra.push_back("--conformance-fixtures");
    m_server = std::make_unique<HttpChild>(extra);
    ASSERT_GT(m_server->port(), 0);
    m_client = std::make_unique<httplib::Client>("127.0.0.1", m_server->port());
    m_client->set_read_timeout(20, 0);
  }
  httplib::Headers headers(const std::string& session = {}) {
    httplib::Headers out = {{"Accept", "application/json, text/event-stream"}};
    if (!session.empty()) {
      out.emplace("Mcp-Session-Id", session);
    }
    return out;
  }
  std::string start_session() {
    auto response = m_client->Post("/mcp", headers(), k_initialize, "application/json");
    if (!response || response->status != 200) {
      return {};
    }
    return response->get_header_value("Mcp-Session-Id");
  }
  int ping_status(const std::string& session = {}) {
    auto response =
        m_client->Post("/mcp", headers(session), rpc(7, "ping").dump(), "application/json");
    return response ? response->status : 0;
  }
  std::string host() const { return "127.0.0.1:" + std::to_string(m_server->port()); }

  std::unique_ptr<HttpChild> m_server;
  std::unique_ptr<httplib::Client> m_client;
};

TEST_F(HttpSecurity, RebindingHostAndOriginFormsAreForbidden) {
  start();
  const std::string port = std::to_string(m_server->port());
  for (const std::string& bad_host : std::vector<std::string>{
           "127.0.0.1.attacker.example:" + port, "127.evil:" + port, "127.0.0.1@evil.com:" + port,
           "evil.example:" + port, "127.0.0.1:1", std::string("localhost.example:") + port}) {
    auto request = headers();
    request.emplace("Host", bad_host);
    auto response = m_client->Post("/mcp", request, k_initialize, "application/json");
    ASSERT_TRUE(response) << bad_host;
    EXPECT_EQ(response->status, 403) << bad_host;
    EXPECT_TRUE(response->get_header_value("Mcp-Session-Id").empty());
  }
  for (const std::string& bad_origin :
       std::vector<std::string>{"https://127.0.0.1@evil.com", "http://127.0.0.1.attacker.example",
                                "http://127.evil", "null", "http://evil.example:" + port}) {
    auto request = headers();
    request.emplace("Origin", bad_origin);
    auto response = m_client->Post("/mcp", request, k_initialize, "application/json");
    ASSERT_TRUE(response) << bad_origin;
    EXPECT_EQ(response->status, 403) << bad_origin;
  }
  // Empty values, sent raw (the client library drops empty headers).
  for (const std::string& header :
       std::vector<std::string>{"Host: \r\n", "Host: " + host() + "\r\nOrigin: \r\n"}) {
    RawConnection raw(m_server->port());
    ASSERT_TRUE(raw.ok());
    const std::string request =
        "POST /mcp HTTP/1.1\r\n" + header +
        "Content-Type: application/json\r\nContent-Length: " + std::to_string(k_initialize.size()) +
        "\r\n\r\n" + k_initialize;
    ASSERT_TRUE(raw.send(request));
    const int status = status_of(raw.read_all(5s));
    EXPECT_TRUE(status == 403 || status == 400) << header << " -> " << status;
  }
  for (const std::string& good_host : std::vector<std::string>{
           host(), "localhost:" + port, "LOCALHOST:" + port, "127.0.0.2:" + port}) {
    auto request = headers();
    request.emplace("Host", good_host);
    request.emplace("Origin", "http://localhost:6274");
    auto response = m_client->Post("/mcp", request, k_initialize, "application/json");
    ASSERT_TRUE(response);
    EXPECT_EQ(response->status, 200) << good_host;
  }
}

TEST_F(HttpSecurity, ModelUrlsInArgumentsNeedTheOptIn) {
  start();
  const std::string session = start_session();
  ASSERT_FALSE(session.empty());
  const std::string call = rpc(2, "tools/call",
                               {{"name", "run_beam_search"},
                                {"arguments",
                                 {{"kernel", "/nonexistent/k.py"},
                                  {"problem", "/nonexistent/p.py"},
                                  {"llm", {"openai:m@http://127.0.0.1:9/v1"}}}}})
                               .dump();
  httplib::Headers json_only = {{"Accept", "application/json"}, {"Mcp-Session-Id", session}};
  auto response = m_client->Post("/mcp", json_only, call, "application/json");
  ASSERT_TRUE(response);
  ASSERT_EQ(response->status, 200);
  auto body = nlohmann::json::parse(response->body);
  EXPECT_EQ(body["result"]["isError"], true) << body.dump();
  const std::string text = body["result"]["content"][0]["text"];
  EXPECT_NE(text.find("--allow-remote-endpoints"), std::string::npos) << text;

  const std::string backend = rpc(3, "tools/call",
                                  {{"name", "verify_kernel"},
                                   {"arguments",
                                    {{"kernel", "/nonexistent/k.py"},
                                     {"problem", "/nonexistent/p.py"},
                                     {"backend", "ssh://evil.example?device=neuron"}}}})
                                  .dump();
  auto refused = m_client->Post("/mcp", json_only, backend, "application/json");
  ASSERT_TRUE(refused);
  auto refused_body = nlohmann::json::parse(refused->body);
  EXPECT_NE(refused_body["result"]["content"][0]["text"].get<std::string>().find(
                "--allow-remote-endpoints"),
            std::string::npos)
      << refused_body.dump();
}

TEST_F(HttpSecurity, ModelUrlsPassTheGateWithTheOptIn) {
  start({"--allow-remote-endpoints"});
  const std::string session = start_session();
  ASSERT_FALSE(session.empty());
  const std::string call = rpc(2, "tools/call",
                               {{"name", "run_beam_search"},
                                {"arguments",
                                 {{"kernel", "/nonexistent/k.py"},
                                  {"problem", "/nonexistent/p.py"},
                                  {"llm", {"openai:m@http://127.0.0.1:9/v1"}}}}})
                               .dump();
  auto response = m_client->Post("/mcp", headers(session), call, "application/json");
  ASSERT_TRUE(response);
  const std::string text = response->body;
  EXPECT_EQ(text.find("--allow-remote-endpoints"), std::string::npos) << text;
}

TEST_F(HttpSecurity, ChunkedAndOversizeBodiesGet413AndServingContinues) {
  start({"--max-message-bytes", "65536"});
  {
    RawConnection raw(m_server->port());
    ASSERT_TRUE(raw.ok());
    ASSERT_TRUE(
        raw.send("POST /mcp HTTP/1.1\r\nHost: " + host() +
                 "\r\nContent-Type: application/json\r\nTransfer-Encoding: chunked\r\n\r\n"));
    const std::string chunk(16384, ' ');
    char size[16];
    std::snprintf(size, sizeof(size), "%zx\r\n", chunk.size());
    // Up to 64 MiB; the server answers once the limit is passed and stops reading.
    for (int i = 0; i < 4096 && !raw.readable(); ++i) {
      if (!raw.send(std::string(size) + chunk + "\r\n")) {
        break;
      }
    }
    const std::string answer = raw.read_until("\r\n\r\n", 5s);
    EXPECT_EQ(status_of(answer), 413) << answer.substr(0, 200);
  }
  {
    RawConnection raw(m_server->port());
    ASSERT_TRUE(raw.ok());
    ASSERT_TRUE(
        raw.send("POST /mcp HTTP/1.1\r\nHost: " + host() +
                 "\r\nContent-Type: application/json\r\nContent-Length: 1073741824\r\n\r\n"));
    const std::string answer = raw.read_all(5s);
    EXPECT_EQ(status_of(answer), 413) << answer.substr(0, 200);
    EXPECT_NE(answer.find("Payload Too Large"), std::string::npos);
  }
  for (const std::string path : {"PUT /mcp", "POST /other", "PATCH /x"}) {
    RawConnection raw(m_server->port());
    ASSERT_TRUE(raw.ok());
    ASSERT_TRUE(raw.send(path + " HTTP/1.1\r\nHost: " + host() +
                         "\r\nTransfer-Encoding: chunked\r\n\r\n4000\r\n" +
                         std::string(16384, 'x') + "\r\n"));
    const int status = status_of(raw.read_all(3s));
    EXPECT_TRUE(status == 404 || status == 405) << path << " -> " << status;
  }
  // A chunked body within the limit is served.
  {
    RawConnection raw(m_server->port());
    ASSERT_TRUE(raw.ok());
    const std::string body = rpc(5, "ping").dump();
    char size[16];
    std::snprintf(size, sizeof(size), "%zx\r\n", body.size());
    ASSERT_TRUE(raw.send("POST /mcp HTTP/1.1\r\nHost: " + host() +
                         "\r\nContent-Type: application/json\r\nTransfer-Encoding: chunked\r\n"
                         "Connection: close\r\n\r\n" +
                         size + body + "\r\n0\r\n\r\n"));
    const std::string answer = raw.read_all(5s);
    EXPECT_EQ(status_of(answer), 200) << answer;
  }
  EXPECT_EQ(ping_status(), 200);
}

TEST_F(HttpSecurity, HeldStreamsAndIdleConnectionsLeaveRoomForPingAndNewSessions) {
  start({"--max-connections", "200"});
  // 64 sessions, each with its GET event stream held open: more than the old 64 workers.
  std::vector<std::unique_ptr<RawConnection>> held;
  for (int i = 0; i < 64; ++i) {
    const std::string session = start_session();
    ASSERT_FALSE(session.empty()) << i;
    auto stream = std::make_unique<RawConnection>(m_server->port());
    ASSERT_TRUE(stream->ok());
    ASSERT_TRUE(stream->send("GET /mcp HTTP/1.1\r\nHost: " + host() +
                             "\r\nAccept: text/event-stream\r\nMcp-Session-Id: " + session +
                             "\r\n\r\n"));
    EXPECT_EQ(status_of(stream->read_until("\r\n\r\n", 5s)), 200) << i;
    held.push_back(std::move(stream));
  }
  // Slow requests (headers never finished) and idle connections.
  for (int i = 0; i < 40; ++i) {
    auto slow = std::make_unique<RawConnection>(m_server->port());
    ASSERT_TRUE(slow->ok());
    ASSERT_TRUE(
        slow->send(i % 2 == 0 ? "POST /mcp HTTP/1.1\r\nHost: " + host() + "\r\n" : std::string()));
    held.push_back(std::move(slow));
  }
  EXPECT_EQ(ping_status(), 200);
  EXPECT_FALSE(start_session().empty());
  // Beyond the connection limit a connection is answered 503 at once, not left waiting.
  std::vector<std::unique_ptr<RawConnection>> flood;
  for (int i = 0; i < 120; ++i) {
    flood.push_back(std::make_unique<RawConnection>(m_server->port()));
  }
  RawConnection over(m_server->port());
  ASSERT_TRUE(over.ok());
  ASSERT_TRUE(over.send("POST /mcp HTTP/1.1\r\nHost: " + host() +
                        "\r\nContent-Type: application/json\r\nContent-Length: 2\r\n\r\n{}"));
  const int over_status = status_of(over.read_until("\r\n\r\n", 10s));
  EXPECT_TRUE(over_status == 503 || over_status == 400) << over_status;
  flood.clear();
  held.clear();
  // Once they are gone the server serves as before.
  bool served = false;
  for (int i = 0; i < 50 && !served; ++i) {
    served = ping_status() == 200;
    if (!served) {
      std::this_thread::sleep_for(100ms);
    }
  }
  EXPECT_TRUE(served);
}

TEST_F(HttpSecurity, SessionFloodDropsIdleSessionsNotBusyOnes) {
  start({"--max-sessions", "8"});
  const std::string busy = start_session();
  ASSERT_FALSE(busy.empty());
  RawConnection stream(m_server->port());
  ASSERT_TRUE(stream.send("GET /mcp HTTP/1.1\r\nHost: " + host() +
                          "\r\nAccept: text/event-stream\r\nMcp-Session-Id: " + busy + "\r\n\r\n"));
  ASSERT_EQ(status_of(stream.read_until("\r\n\r\n", 5s)), 200);
  std::string first_idle;
  for (int i = 0; i < 40; ++i) {
    const std::string session = start_session();
    ASSERT_FALSE(session.empty()) << i;
    if (i == 0) {
      first_idle = session;
    }
  }
  EXPECT_EQ(ping_status(busy), 200);        // the session with an open stream survived
  EXPECT_EQ(ping_status(first_idle), 404);  // an idle one made room
}

TEST_F(HttpSecurity, SessionFloodNeverEndsWorkingSessions) {
  // A working client's session is idle between its calls; a flood of initialize calls must not
  // end it. Abandoned handshakes make room for each other; once every session is a working one,
  // new sessions are refused with a message saying what to do.
  start({"--max-sessions", "4"});
  const std::string working = start_session();
  ASSERT_FALSE(working.empty());
  ASSERT_EQ(ping_status(working), 200);
  std::vector<std::string> flood;
  for (int i = 0; i < 200; ++i) {
    const std::string session = start_session();
    ASSERT_FALSE(session.empty()) << i;
    flood.push_back(session);
  }
  EXPECT_EQ(ping_status(working), 200);
  EXPECT_EQ(ping_status(flood.front()), 404);  // an abandoned handshake made room
  // The newest three are still there; using them makes every session a working one.
  for (std::size_t i = flood.size() - 3; i < flood.size(); ++i) {
    EXPECT_EQ(ping_status(flood[i]), 200) << i;
  }
  auto refused = m_client->Post("/mcp", headers(), k_initialize, "application/json");
  ASSERT_TRUE(refused);
  EXPECT_EQ(refused->status, 503);
  EXPECT_FALSE(refused->get_header_value("Retry-After").empty());
  const std::string message = nlohmann::json::parse(refused->body)["error"]["message"];
  EXPECT_NE(message.find("--max-sessions"), std::string::npos) << message;
  EXPECT_NE(message.find("DELETE"), std::string::npos) << message;
  EXPECT_EQ(ping_status(working), 200);
  // Ending one session makes room again.
  auto ended = m_client->Delete("/mcp", headers(flood.back()));
  ASSERT_TRUE(ended);
  EXPECT_FALSE(start_session().empty());
}

TEST_F(HttpSecurity, HugeSlotCountIsAClearErrorAndTheServerKeepsAnswering) {
  // slots=2147483647 once overflowed a slot count: the call never answered and held a worker.
  start();
  const std::string session = start_session();
  ASSERT_FALSE(session.empty());
  const std::string seeds = std::string(AUTOCOMP_SOURCE_DIR) + "/seeds/rmsnorm/";
  for (int i = 0; i < 10; ++i) {
    auto call = rpc(10 + i, "tools/call",
                    {{"name", "verify_kernel"},
                     {"arguments",
                      {{"kernel", seeds + "tunable.py"},
                       {"problem", seeds + "problem.py"},
                       {"backend", "local?device=fake&slots=2147483647"}}}});
    auto response = m_client->Post("/mcp", headers(session), call.dump(), "application/json");
    ASSERT_TRUE(response) << i;
    ASSERT_EQ(response->status, 200) << i;
    const std::string body = response->body;
    EXPECT_NE(body.find("slots must be at most 1024"), std::string::npos) << body;
  }
  EXPECT_EQ(ping_status(session), 200);
}

TEST_F(HttpSecurity, IdleSessionsExpire) {
  start({"--session-idle-timeout", "1"});
  const auto started = std::chrono::steady_clock::now();
  const std::string session = start_session();
  ASSERT_FALSE(session.empty());
  const int first = ping_status(session);
  // On a machine too busy to ping within the second, the session may already have idled out.
  if (std::chrono::steady_clock::now() - started < 900ms) {
    EXPECT_EQ(first, 200);
  }
  std::this_thread::sleep_for(2500ms);
  EXPECT_EQ(ping_status(session), 404);
}

TEST_F(HttpSecurity, BearerSchemeInAnyCase) {
  const std::string token_file = temp_path("autocomp-token");
  std::ofstream(token_file) << "s3cret\n";
  start({"--auth-token-file", token_file});
  std::filesystem::remove(token_file);  // read once at start
  for (const char* scheme : {"Bearer", "bearer", "BEARER"}) {
    auto request = headers();
    request.emplace("Authorization", std::string(scheme) + " s3cret");
    auto response = m_client->Post("/mcp", request, k_initialize, "application/json");
    ASSERT_TRUE(response);
    EXPECT_EQ(response->status, 200) << scheme;
  }
  auto request = headers();
  request.emplace("Authorization", "Basic s3cret");
  EXPECT_EQ(m_client->Post("/mcp", request, k_initialize, "application/json")->status, 401);
}

}  // namespace
}  // namespace autocomp::test
