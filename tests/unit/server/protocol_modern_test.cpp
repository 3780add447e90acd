// The 2026-07-28 (stateless) side of the protocol layer: discovery, per-request _meta, cache
// hints, input through retried requests (MRTR), capability errors, logging, subscriptions.
#include <gtest/gtest.h>

#include <condition_variable>
#include <mutex>

#include "server/protocol.hpp"

namespace autocomp::server {
namespace {

using namespace std::chrono_literals;

class Recorder : public Outbox {
 public:
  void send(const nlohmann::json& message) override {
    std::lock_guard lock(m_mutex);
    m_sent.push_back(message);
    m_changed.notify_all();
  }
  void finish(std::optional<nlohmann::json> response) override {
    std::lock_guard lock(m_mutex);
    m_finished = true;
    m_response = std::move(response);
    m_changed.notify_all();
  }
  std::optional<nlohmann::json> wait(std::chrono::milliseconds timeout = 5s) {
    std::unique_lock lock(m_mutex);
    EXPECT_TRUE(m_changed.wait_for(lock, timeout, [this] { return m_finished; }))
        << "no final message";
    return m_response;
  }
  std::vector<nlohmann::json> wait_sent(std::size_t count, std::chrono::milliseconds timeout = 5s) {
    std::unique_lock lock(m_mutex);
    m_changed.wait_for(lock, timeout, [&] { return m_sent.size() >= count; });
    return m_sent;
  }
  std::vector<nlohmann::json> sent() {
    std::lock_guard lock(m_mutex);
    return m_sent;
  }
  bool finished() {
    std::lock_guard lock(m_mutex);
    return m_finished;
  }

 private:
  std::mutex m_mutex;
  std::condition_variable m_changed;
  std::vector<nlohmann::json> m_sent;
  bool m_finished = false;
  std::optional<nlohmann::json> m_response;
};

nlohmann::json modern_meta(nlohmann::json capabilities = nlohmann::json::object()) {
  return {{k_meta_protocol_version, "2026-07-28"},
          {k_meta_client_capabilities, std::move(capabilities)},
          {k_meta_client_info, {{"name", "test"}, {"version", "1"}}}};
}

class ModernProtocolTest : public ::testing::Test {
 protected:
  void SetUp() override {
    add_tool("echo", [](const nlohmann::json& args, ToolContext&) {
      ToolResult result;
      result.structured = {{"echo", args.value("text", std::string())}};
      return result;
    });
    // Two inputs in one round, a third in the next.
    add_tool("interview", [](const nlohmann::json&, ToolContext& context) {
      auto name =
          context.request_input("name", "elicitation/create",
                                {{"message", "name?"}, {"requestedSchema", {{"type", "object"}}}});
      auto roots = context.request_input("roots", "roots/list", nlohmann::json::object());
      if (!name.ok() || !roots.ok()) {
        return tool_error("waiting");
      }
      auto colour = context.request_input(
          "colour", "elicitation/create",
          {{"message", "colour?"}, {"requestedSchema", {{"type", "object"}}}});
      if (!colour.ok()) {
        return tool_error("waiting");
      }
      ToolResult result;
      result.text = name.value()["content"].value("name", std::string()) + " likes " +
                    colour.value()["content"].value("colour", std::string());
      return result;
    });
    add_tool("needs_sampling", [this](const nlohmann::json&, ToolContext& context) {
      auto answer =
          context.request("sampling/createMessage", {{"messages", nlohmann::json::array()}});
      m_needs_sampling_ran = true;
      return answer.ok() ? ToolResult{{{"ok", true}}, "", false} : tool_error("no sampling");
    });
    add_tool("logs", [](const nlohmann::json&, ToolContext& context) {
      context.log(LogLevel::info, "t", "info message");
      context.log(LogLevel::error, "t", "error message");
      return ToolResult{{{"ok", true}}, "", false};
    });
    m_registries.resources.add(
        {"test://a", "a", "", "resource a", "text/plain",
         [](const std::string& uri, const auto&) -> core::Result<nlohmann::json> {
           return nlohmann::json::array({{{"uri", uri}, {"text", "A"}}});
         }});
    ServerOptions options;
    options.worker_threads = 2;
    options.instructions = "how to use the server";
    m_server = std::make_unique<Server>(m_registries, options);
    m_session = m_server->create_session(std::make_shared<Recorder>());
  }

  void TearDown() override {
    m_session->close();
    m_server->wait_idle(5s);
  }

  void add_tool(const std::string& name, ToolHandler handler) {
    ToolDef tool;
    tool.name = name;
    tool.description = "test tool " + name;
    tool.handler = std::move(handler);
    m_registries.tools.add(std::move(tool));
  }

  nlohmann::json call(const std::string& method, nlohmann::json params,
                      std::shared_ptr<Recorder> outbox = nullptr) {
    if (!outbox) {
      outbox = std::make_shared<Recorder>();
    }
    m_session->handle_raw(jsonrpc::serialize(jsonrpc::make_request(++m_id, method, params)),
                          outbox);
    return outbox->wait().value_or(nlohmann::json());
  }

  nlohmann::json call_modern(const std::string& method,
                             nlohmann::json params = nlohmann::json::object(),
                             nlohmann::json capabilities = nlohmann::json::object()) {
    if (!params.contains("_meta")) {
      params["_meta"] = modern_meta(std::move(capabilities));
    }
    return call(method, std::move(params));
  }

  Registries m_registries;
  std::unique_ptr<Server> m_server;
  std::shared_ptr<Session> m_session;
  int m_id = 0;
  std::atomic<bool> m_needs_sampling_ran{false};
};

TEST(ModernVersions, DiscoveryListsBothEras) {
  const auto& all = all_protocol_versions();
  ASSERT_FALSE(all.empty());
  EXPECT_EQ(all.front(), "2026-07-28");
  EXPECT_NE(std::find(all.begin(), all.end(), "2025-11-25"), all.end());
  EXPECT_TRUE(is_modern_protocol_version("2026-07-28"));
  EXPECT_FALSE(is_modern_protocol_version("2025-11-25"));
  EXPECT_TRUE(has_modern_meta({{"_meta", modern_meta()}}));
  EXPECT_FALSE(has_modern_meta({{"_meta", {{"progressToken", 1}}}}));
  EXPECT_EQ(modern_http_status(jsonrpc::k_method_not_found), 404);
  EXPECT_EQ(modern_http_status(jsonrpc::k_unsupported_protocol_version), 400);
  EXPECT_EQ(modern_http_status(jsonrpc::k_internal_error), 200);
}

TEST_F(ModernProtocolTest, DiscoverDescribesTheServerWithoutInitialize) {
  auto answer = call_modern("server/discover");
  ASSERT_TRUE(answer.contains("result")) << answer.dump();
  const auto& result = answer["result"];
  EXPECT_EQ(result["supportedVersions"][0], "2026-07-28");
  EXPECT_TRUE(result["capabilities"].contains("tools"));
  EXPECT_TRUE(result["capabilities"].contains("prompts"));
  EXPECT_EQ(result["instructions"], "how to use the server");
  EXPECT_EQ(result["_meta"][k_meta_server_info]["name"], "autocomp-mcp");
  EXPECT_EQ(result["resultType"], "complete");
  EXPECT_GE(result["ttlMs"].get<std::int64_t>(), 0);
  EXPECT_EQ(result["cacheScope"], "public");
  EXPECT_FALSE(m_session->initialized()) << "a modern request must not start a session";
}

TEST_F(ModernProtocolTest, ListsAndReadsCarryCacheHints) {
  for (const char* method :
       {"tools/list", "prompts/list", "resources/list", "resources/templates/list"}) {
    auto answer = call_modern(method);
    ASSERT_TRUE(answer.contains("result")) << method << ": " << answer.dump();
    EXPECT_EQ(answer["result"]["resultType"], "complete") << method;
    EXPECT_TRUE(answer["result"]["ttlMs"].is_number_integer()) << method;
    EXPECT_TRUE(answer["result"]["cacheScope"] == "public" ||
                answer["result"]["cacheScope"] == "private")
        << method;
  }
  auto read = call_modern("resources/read", {{"uri", "test://a"}});
  ASSERT_TRUE(read.contains("result")) << read.dump();
  EXPECT_EQ(read["result"]["contents"][0]["text"], "A");
  EXPECT_EQ(read["result"]["ttlMs"], 0);
  auto missing = call_modern("resources/read", {{"uri", "test://nothing"}});
  EXPECT_EQ(missing["error"]["code"], jsonrpc::k_invalid_params) << missing.dump();
  EXPECT_EQ(missing["error"]["data"]["uri"], "test://nothing");
}

TEST_F(ModernProtocolTest, LegacyRequestsStillNeedInitialize) {
  auto answer = call("tools/list", nlohmann::json::object());
  EXPECT_EQ(answer["error"]["code"], jsonrpc::k_invalid_request) << answer.dump();
}

TEST_F(ModernProtocolTest, RejectsBadMetaUnknownVersionsAndRemovedMethods) {
  auto no_capabilities = call("tools/list", {{"_meta", {{k_meta_protocol_version, "2026-07-28"}}}});
  EXPECT_EQ(no_capabilities["error"]["code"], jsonrpc::k_invalid_params) << no_capabilities.dump();
  auto bad_level =
      call_modern("tools/list", {{"_meta",
                                  {{k_meta_protocol_version, "2026-07-28"},
                                   {k_meta_client_capabilities, nlohmann::json::object()},
                                   {k_meta_log_level, "loud"}}}});
  EXPECT_EQ(bad_level["error"]["code"], jsonrpc::k_invalid_params);
  auto future = call("tools/list", {{"_meta",
                                     {{k_meta_protocol_version, "2099-01-01"},
                                      {k_meta_client_capabilities, nlohmann::json::object()}}}});
  EXPECT_EQ(future["error"]["code"], jsonrpc::k_unsupported_protocol_version) << future.dump();
  EXPECT_EQ(future["error"]["data"]["requested"], "2099-01-01");
  EXPECT_EQ(future["error"]["data"]["supported"][0], "2026-07-28");
  for (const char* method : {"initialize", "ping", "logging/setLevel", "resources/subscribe"}) {
    auto removed = call_modern(method);
    EXPECT_EQ(removed["error"]["code"], jsonrpc::k_method_not_found) << method;
  }
  EXPECT_FALSE(m_session->initialized());
}

TEST_F(ModernProtocolTest, InputsComeBackThroughRetriesWithSealedState) {
  const nlohmann::json capabilities = {{"elicitation", nlohmann::json::object()},
                                       {"roots", nlohmann::json::object()}};
  auto first = call_modern("tools/call", {{"name", "interview"}}, capabilities);
  ASSERT_TRUE(first.contains("result")) << first.dump();
  const auto& round1 = first["result"];
  EXPECT_EQ(round1["resultType"], "input_required");
  EXPECT_EQ(round1["inputRequests"]["name"]["method"], "elicitation/create");
  EXPECT_EQ(round1["inputRequests"]["roots"]["method"], "roots/list");
  EXPECT_FALSE(round1["inputRequests"].contains("colour")) << "asked only after the first round";
  ASSERT_TRUE(round1["requestState"].is_string());

  auto second = call_modern("tools/call",
                            {{"name", "interview"},
                             {"inputResponses",
                              {{"name", {{"action", "accept"}, {"content", {{"name", "Ada"}}}}},
                               {"roots", {{"roots", nlohmann::json::array()}}},
                               {"unrelated", {{"ignored", true}}}}},
                             {"requestState", round1["requestState"]}},
                            capabilities);
  ASSERT_TRUE(second.contains("result")) << second.dump();
  const auto& round2 = second["result"];
  EXPECT_EQ(round2["resultType"], "input_required");
  EXPECT_EQ(round2["inputRequests"].size(), 1u);
  EXPECT_TRUE(round2["inputRequests"].contains("colour"));

  // The third round sends only the new answer: the earlier ones travel in requestState.
  auto third = call_modern(
      "tools/call",
      {{"name", "interview"},
       {"inputResponses", {{"colour", {{"action", "accept"}, {"content", {{"colour", "red"}}}}}}},
       {"requestState", round2["requestState"]}},
      capabilities);
  ASSERT_TRUE(third.contains("result")) << third.dump();
  EXPECT_EQ(third["result"]["resultType"], "complete");
  EXPECT_EQ(third["result"]["content"][0]["text"], "Ada likes red");

  std::string tampered = round2["requestState"].get<std::string>();
  tampered[tampered.size() / 3] = tampered[tampered.size() / 3] == 'A' ? 'B' : 'A';
  auto refused =
      call_modern("tools/call", {{"name", "interview"}, {"requestState", tampered}}, capabilities);
  EXPECT_EQ(refused["error"]["code"], jsonrpc::k_invalid_params) << refused.dump();
  auto elsewhere = call_modern(
      "tools/call", {{"name", "echo"}, {"requestState", round2["requestState"]}}, capabilities);
  EXPECT_EQ(elsewhere["error"]["code"], jsonrpc::k_invalid_params)
      << "a state is bound to the request it was made for";
  auto malformed =
      call_modern("tools/call", {{"name", "interview"}, {"inputResponses", 5}}, capabilities);
  EXPECT_EQ(malformed["error"]["code"], jsonrpc::k_invalid_params);
}

TEST_F(ModernProtocolTest, UndeclaredCapabilityIsAnError) {
  auto answer = call_modern("tools/call", {{"name", "needs_sampling"}});
  ASSERT_TRUE(answer.contains("error")) << answer.dump();
  EXPECT_EQ(answer["error"]["code"], jsonrpc::k_missing_client_capability);
  EXPECT_TRUE(answer["error"]["data"]["requiredCapabilities"]["sampling"].is_object());
  // Declared: the request becomes an input request instead.
  auto declared = call_modern("tools/call", {{"name", "needs_sampling"}},
                              {{"sampling", nlohmann::json::object()}});
  ASSERT_TRUE(declared.contains("result")) << declared.dump();
  EXPECT_EQ(declared["result"]["resultType"], "input_required");
  EXPECT_EQ(declared["result"]["inputRequests"]["sampling-1"]["method"], "sampling/createMessage");
}

TEST_F(ModernProtocolTest, LogsOnlyAtTheRequestedLevel) {
  auto quiet = std::make_shared<Recorder>();
  auto answer = call("tools/call", {{"name", "logs"}, {"_meta", modern_meta()}}, quiet);
  EXPECT_EQ(answer["result"]["resultType"], "complete");
  EXPECT_TRUE(quiet->sent().empty()) << "no notifications/message without a log level";
  auto meta = modern_meta();
  meta[k_meta_log_level] = "warning";
  auto loud = std::make_shared<Recorder>();
  call("tools/call", {{"name", "logs"}, {"_meta", meta}}, loud);
  auto sent = loud->sent();
  ASSERT_EQ(sent.size(), 1u);
  EXPECT_EQ(sent[0]["params"]["level"], "error");
}

TEST_F(ModernProtocolTest, ListenAcknowledgesThenDeliversTaggedUpdates) {
  auto stream = std::make_shared<Recorder>();
  m_session->handle_raw(
      jsonrpc::serialize(jsonrpc::make_request(
          "listen-1", "subscriptions/listen",
          {{"_meta", modern_meta()},
           {"notifications",
            {{"toolsListChanged", true}, {"resourceSubscriptions", {"test://a"}}}}})),
      stream);
  auto first = stream->wait_sent(1);
  ASSERT_EQ(first.size(), 1u);
  EXPECT_EQ(first[0]["method"], "notifications/subscriptions/acknowledged");
  EXPECT_EQ(first[0]["params"]["_meta"][k_meta_subscription_id], "listen-1");
  EXPECT_EQ(first[0]["params"]["notifications"]["resourceSubscriptions"][0], "test://a");
  EXPECT_FALSE(first[0]["params"]["notifications"].contains("toolsListChanged"))
      << "the lists never change, so that kind is not acknowledged";
  m_registries.resources.notify_updated("test://other");
  m_registries.resources.notify_updated("test://a");
  auto all = stream->wait_sent(2);
  ASSERT_EQ(all.size(), 2u);
  EXPECT_EQ(all[1]["method"], "notifications/resources/updated");
  EXPECT_EQ(all[1]["params"]["uri"], "test://a");
  EXPECT_EQ(all[1]["params"]["_meta"][k_meta_subscription_id], "listen-1");
  EXPECT_FALSE(stream->finished());
  m_session->handle_raw(jsonrpc::serialize(jsonrpc::make_notification("notifications/cancelled",
                                                                      {{"requestId", "listen-1"}})),
                        nullptr);
  EXPECT_TRUE(stream->finished());
}

TEST_F(ModernProtocolTest, BothErasShareOneSession) {
  auto legacy = call("initialize", {{"protocolVersion", "2025-11-25"},
                                    {"capabilities", nlohmann::json::object()},
                                    {"clientInfo", {{"name", "t"}, {"version", "1"}}}});
  ASSERT_TRUE(legacy.contains("result"));
  auto legacy_call = call("tools/call", {{"name", "echo"}, {"arguments", {{"text", "x"}}}});
  EXPECT_FALSE(legacy_call["result"].contains("resultType")) << legacy_call.dump();
  auto modern_call = call_modern("tools/call", {{"name", "echo"}, {"arguments", {{"text", "y"}}}});
  EXPECT_EQ(modern_call["result"]["resultType"], "complete");
  EXPECT_EQ(modern_call["result"]["structuredContent"]["echo"], "y");
}

}  // namespace
}  // namespace autocomp::server
