#include "server/protocol.hpp"

#include <gtest/gtest.h>

#include <atomic>
#include <condition_variable>
#include <thread>

namespace autocomp::server {
namespace {

using namespace std::chrono_literals;

// Records what the session sends for one request (or on the standalone stream).
class RecordingOutbox : public Outbox {
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
  // The final message (nullopt: finished without response, or timed out → test failure).
  std::optional<nlohmann::json> wait(std::chrono::milliseconds timeout = 5s) {
    std::unique_lock lock(m_mutex);
    EXPECT_TRUE(m_changed.wait_for(lock, timeout, [this] { return m_finished; }))
        << "no final message";
    return m_response;
  }
  bool finished() {
    std::lock_guard lock(m_mutex);
    return m_finished;
  }
  std::vector<nlohmann::json> sent() {
    std::lock_guard lock(m_mutex);
    return m_sent;
  }
  nlohmann::json wait_sent(std::size_t count, std::chrono::milliseconds timeout = 5s) {
    std::unique_lock lock(m_mutex);
    EXPECT_TRUE(m_changed.wait_for(lock, timeout, [&] { return m_sent.size() >= count; }));
    return m_sent.size() >= count ? m_sent[count - 1] : nlohmann::json();
  }

 private:
  std::mutex m_mutex;
  std::condition_variable m_changed;
  std::vector<nlohmann::json> m_sent;
  bool m_finished = false;
  std::optional<nlohmann::json> m_response;
};

class ProtocolTest : public ::testing::Test {
 protected:
  void SetUp() override {
    add_tool("echo",
             [](const nlohmann::json& args, ToolContext&) {
               ToolResult result;
               result.structured = {{"echo", args.value("text", std::string())}};
               return result;
             },
             {{"type", "object"},
              {"properties", {{"text", {{"type", "string"}}}, {"count", {{"type", "integer"}}}}},
              {"additionalProperties", false}});
    add_tool("throws", [](const nlohmann::json&, ToolContext&) -> ToolResult {
      throw std::runtime_error("boom");
    });
    add_tool("progress", [](const nlohmann::json&, ToolContext& context) {
      context.progress(1, 3, "one");
      context.progress(1, 3, "repeated value is dropped");
      context.progress(2, 3, "two");
      return ToolResult{{{"ok", true}}, "", false};
    });
    add_tool("slow", [this](const nlohmann::json&, ToolContext& context) {
      m_slow_started = true;
      for (int i = 0; i < 500 && !context.cancel.cancelled(); ++i) {
        std::this_thread::sleep_for(10ms);
      }
      m_slow_saw_cancel = context.cancel.cancelled();
      return ToolResult{{{"cancelled", context.cancel.cancelled()}}, "", false};
    });
    add_tool("ask", [](const nlohmann::json&, ToolContext& context) {
      auto answer = context.request("roots/list", nlohmann::json::object(), 5s);
      if (!answer.ok()) {
        return tool_error(answer.failure().message);
      }
      return ToolResult{answer.value(), "", false};
    });
    add_tool("logs", [](const nlohmann::json&, ToolContext& context) {
      context.log(LogLevel::debug, "t", "debug message");
      context.log(LogLevel::warning, "t", "warning message");
      return ToolResult{{{"ok", true}}, "", false};
    });
    ToolDef typed;
    typed.name = "typed";
    typed.description = "declares an output schema";
    typed.output_schema = {{"type", "object"}, {"required", {"value"}}};
    typed.handler = [](const nlohmann::json&, ToolContext&) {
      return ToolResult{{{"other", 1}}, "", false};
    };
    m_registries.tools.add(typed);
    m_registries.resources.add(
        {"test://a", "a", "", "resource a", "text/plain",
         [](const std::string& uri, const auto&) -> core::Result<nlohmann::json> {
           return nlohmann::json::array({{{"uri", uri}, {"text", "A"}}});
         }});
    ResourceTemplateDef item;
    item.uri_template = "test://items/{id}";
    item.read = [](const std::string& uri,
                   const std::map<std::string, std::string>& vars) -> core::Result<nlohmann::json> {
      return nlohmann::json::array({{{"uri", uri}, {"text", "item " + vars.at("id")}}});
    };
    item.complete = [](const std::string&, const std::string& prefix, const auto&) {
      return std::vector<std::string>{prefix + "1", prefix + "2"};
    };
    m_registries.resources.add_template(item);
    m_registries.prompts.add(
        {"greet",
         "",
         "says hello",
         {{"name", "who", true}},
         [](const std::map<std::string, std::string>& args) -> core::Result<nlohmann::json> {
           return nlohmann::json{
               {"messages",
                {{{"role", "user"},
                  {"content", {{"type", "text"}, {"text", "hi " + args.at("name")}}}}}}};
         },
         nullptr});
    ServerOptions options;
    options.page_size = 3;
    options.worker_threads = 4;
    m_server = std::make_unique<Server>(m_registries, options);
    m_standalone = std::make_shared<RecordingOutbox>();
    m_session = m_server->create_session(m_standalone);
  }

  void TearDown() override {
    m_session->close();
    m_server->wait_idle(5s);
  }

  void add_tool(const std::string& name, ToolHandler handler,
                nlohmann::json schema = {{"type", "object"}}) {
    ToolDef tool;
    tool.name = name;
    tool.description = "test tool " + name;
    tool.input_schema = std::move(schema);
    tool.handler = std::move(handler);
    m_registries.tools.add(std::move(tool));
  }

  nlohmann::json call(const nlohmann::json& id, const std::string& method,
                      nlohmann::json params = nullptr) {
    auto outbox = std::make_shared<RecordingOutbox>();
    m_session->handle_raw(jsonrpc::serialize(jsonrpc::make_request(id, method, std::move(params))),
                          outbox);
    return outbox->wait().value_or(nlohmann::json());
  }

  void initialize(const nlohmann::json& capabilities = nlohmann::json::object()) {
    auto result = call(0, "initialize",
                       {{"protocolVersion", "2025-11-25"},
                        {"capabilities", capabilities},
                        {"clientInfo", {{"name", "test"}, {"version", "1"}}}});
    ASSERT_TRUE(result.contains("result")) << result.dump();
  }

  Registries m_registries;
  std::unique_ptr<Server> m_server;
  std::shared_ptr<RecordingOutbox> m_standalone;
  std::shared_ptr<Session> m_session;
  std::atomic<bool> m_slow_started{false};
  std::atomic<bool> m_slow_saw_cancel{false};
};

TEST(VersionNegotiation, EchoesSupportedVersionsElseAnswersLatest) {
  EXPECT_EQ(negotiate_protocol_version("2025-03-26"), "2025-03-26");
  EXPECT_EQ(negotiate_protocol_version("2025-06-18"), "2025-06-18");
  EXPECT_EQ(negotiate_protocol_version("2025-11-25"), "2025-11-25");
  EXPECT_EQ(negotiate_protocol_version("2024-11-05"), "2025-11-25");
  EXPECT_EQ(negotiate_protocol_version("2099-01-01"), "2025-11-25");
  EXPECT_EQ(negotiate_protocol_version(42), "2025-11-25");
}

TEST(Cursor, RoundTripsAndRejectsForeignText) {
  EXPECT_EQ(decode_cursor(encode_cursor(17)), 17u);
  EXPECT_FALSE(decode_cursor("garbage"));
  EXPECT_FALSE(decode_cursor("page:-1"));
  EXPECT_FALSE(decode_cursor("page:"));
}

TEST_F(ProtocolTest, InitializeEchoesVersionAndDeclaresCapabilities) {
  auto result = call(1, "initialize",
                     {{"protocolVersion", "2025-06-18"},
                      {"capabilities", nlohmann::json::object()},
                      {"clientInfo", {{"name", "t"}, {"version", "1"}}}});
  ASSERT_TRUE(result.contains("result")) << result.dump();
  EXPECT_EQ(result["result"]["protocolVersion"], "2025-06-18");
  for (const char* capability : {"tools", "resources", "prompts", "logging", "completions"}) {
    EXPECT_TRUE(result["result"]["capabilities"].contains(capability)) << capability;
  }
  EXPECT_EQ(result["result"]["serverInfo"]["name"], "autocomp-mcp");
  auto again = call(2, "initialize", {{"protocolVersion", "2025-06-18"}});
  EXPECT_EQ(again["error"]["code"], jsonrpc::k_invalid_request);
}

TEST_F(ProtocolTest, InitializeWithWrongParamTypesIsInvalidParams) {
  EXPECT_EQ(call(1, "initialize", {{"protocolVersion", 5}})["error"]["code"],
            jsonrpc::k_invalid_params);
  EXPECT_EQ(call(2, "initialize",
                 {{"protocolVersion", "2025-11-25"}, {"capabilities", "x"}})["error"]["code"],
            jsonrpc::k_invalid_params);
}

TEST_F(ProtocolTest, BeforeInitializeOnlyPingIsServed) {
  EXPECT_TRUE(call(1, "ping")["result"].empty());
  EXPECT_EQ(call(2, "tools/list")["error"]["code"], jsonrpc::k_invalid_request);
  EXPECT_EQ(call(3, "tools/call", {{"name", "echo"}})["error"]["code"], jsonrpc::k_invalid_request);
  EXPECT_EQ(call("probe", "server/discover")["error"]["code"], jsonrpc::k_method_not_found);
}

TEST_F(ProtocolTest, UnknownMethodIsMethodNotFound) {
  initialize();
  EXPECT_EQ(call(1, "tools/frobnicate")["error"]["code"], jsonrpc::k_method_not_found);
}

TEST_F(ProtocolTest, ToolsListPaginatesWithOpaqueCursors) {
  initialize();
  std::vector<std::string> names;
  nlohmann::json params = nlohmann::json::object();
  for (int page = 0; page < 10; ++page) {
    auto result = call(page + 1, "tools/list", params)["result"];
    EXPECT_LE(result["tools"].size(), 3u);
    for (const auto& tool : result["tools"]) {
      names.push_back(tool["name"]);
      EXPECT_FALSE(tool["description"].get<std::string>().empty());
      EXPECT_TRUE(tool["inputSchema"].is_object());
    }
    if (!result.contains("nextCursor")) {
      break;
    }
    params = {{"cursor", result["nextCursor"]}};
  }
  EXPECT_EQ(names.size(), m_registries.tools.size());
  EXPECT_EQ(names.front(), "echo");
  EXPECT_EQ(call(50, "tools/list", {{"cursor", "bogus"}})["error"]["code"],
            jsonrpc::k_invalid_params);
}

TEST_F(ProtocolTest, ToolResultsCarryStructuredContentAndTextMirror) {
  initialize();
  auto result =
      call(1, "tools/call", {{"name", "echo"}, {"arguments", {{"text", "hi"}}}})["result"];
  EXPECT_EQ(result["structuredContent"]["echo"], "hi");
  ASSERT_EQ(result["content"].size(), 1u);
  EXPECT_EQ(result["content"][0]["type"], "text");
  EXPECT_EQ(nlohmann::json::parse(result["content"][0]["text"].get<std::string>())["echo"], "hi");
  EXPECT_FALSE(result.contains("isError"));
}

TEST_F(ProtocolTest, UnknownToolIsInvalidParams) {
  initialize();
  auto response = call(1, "tools/call", {{"name", "nope"}});
  EXPECT_EQ(response["error"]["code"], jsonrpc::k_invalid_params);
  EXPECT_EQ(call(2, "tools/call", {{"name", 5}})["error"]["code"], jsonrpc::k_invalid_params);
}

TEST_F(ProtocolTest, InvalidArgumentsGiveAnErrorResultNamingTheField) {
  initialize();
  auto result =
      call(1, "tools/call", {{"name", "echo"}, {"arguments", {{"count", "three"}}}})["result"];
  EXPECT_EQ(result["isError"], true);
  EXPECT_NE(result["content"][0]["text"].get<std::string>().find("arguments.count"),
            std::string::npos);
  auto extra = call(2, "tools/call", {{"name", "echo"}, {"arguments", {{"bogus", 1}}}})["result"];
  EXPECT_EQ(extra["isError"], true);
  EXPECT_NE(extra["content"][0]["text"].get<std::string>().find("bogus"), std::string::npos);
}

TEST_F(ProtocolTest, HandlerExceptionsBecomeErrorResults) {
  initialize();
  auto result = call(1, "tools/call", {{"name", "throws"}})["result"];
  EXPECT_EQ(result["isError"], true);
  EXPECT_NE(result["content"][0]["text"].get<std::string>().find("boom"), std::string::npos);
}

TEST_F(ProtocolTest, OutputViolatingTheDeclaredSchemaIsReportedAsError) {
  initialize();
  auto result = call(1, "tools/call", {{"name", "typed"}})["result"];
  EXPECT_EQ(result["isError"], true);
}

TEST_F(ProtocolTest, ProgressIsSentOnlyWithATokenAndOnlyWhenIncreasing) {
  initialize();
  auto outbox = std::make_shared<RecordingOutbox>();
  m_session->handle(
      jsonrpc::Request{
          1, "tools/call", {{"name", "progress"}, {"_meta", {{"progressToken", "tok"}}}}},
      outbox);
  ASSERT_TRUE(outbox->wait());
  auto sent = outbox->sent();
  ASSERT_EQ(sent.size(), 2u);
  EXPECT_EQ(sent[0]["method"], "notifications/progress");
  EXPECT_EQ(sent[0]["params"]["progressToken"], "tok");
  EXPECT_EQ(sent[0]["params"]["progress"], 1);
  EXPECT_EQ(sent[0]["params"]["total"], 3);
  EXPECT_EQ(sent[1]["params"]["progress"], 2);

  auto quiet = std::make_shared<RecordingOutbox>();
  m_session->handle(jsonrpc::Request{2, "tools/call", {{"name", "progress"}}}, quiet);
  ASSERT_TRUE(quiet->wait());
  EXPECT_TRUE(quiet->sent().empty());
}

TEST_F(ProtocolTest, CancelledCallStopsAndSendsNoResponse) {
  initialize();
  auto outbox = std::make_shared<RecordingOutbox>();
  m_session->handle(jsonrpc::Request{"slow-1", "tools/call", {{"name", "slow"}}}, outbox);
  for (int i = 0; i < 200 && !m_slow_started; ++i) {
    std::this_thread::sleep_for(5ms);
  }
  ASSERT_TRUE(m_slow_started);
  m_session->handle_raw(
      R"({"jsonrpc":"2.0","method":"notifications/cancelled","params":{"requestId":"slow-1"}})",
      nullptr);
  EXPECT_FALSE(outbox->wait(3s).has_value());
  EXPECT_TRUE(outbox->finished());
  EXPECT_TRUE(m_slow_saw_cancel);
}

TEST_F(ProtocolTest, SlowCallDoesNotBlockPingOrOtherCalls) {
  initialize();
  auto slow = std::make_shared<RecordingOutbox>();
  m_session->handle(jsonrpc::Request{100, "tools/call", {{"name", "slow"}}}, slow);
  const auto started = std::chrono::steady_clock::now();
  EXPECT_TRUE(call(101, "ping")["result"].empty());
  EXPECT_EQ(call(102, "tools/call",
                 {{"name", "echo"},
                  {"arguments", {{"text", "x"}}}})["result"]["structuredContent"]["echo"],
            "x");
  EXPECT_LT(std::chrono::steady_clock::now() - started, 2s);
  EXPECT_FALSE(slow->finished());
  m_session->handle_raw(
      R"({"jsonrpc":"2.0","method":"notifications/cancelled","params":{"requestId":100}})",
      nullptr);
  slow->wait();
}

TEST_F(ProtocolTest, DuplicateIdOfARunningCallIsRejected) {
  initialize();
  auto slow = std::make_shared<RecordingOutbox>();
  m_session->handle(jsonrpc::Request{7, "tools/call", {{"name", "slow"}}}, slow);
  EXPECT_EQ(call(7, "tools/call", {{"name", "echo"}})["error"]["code"], jsonrpc::k_invalid_request);
  m_session->handle_raw(
      R"({"jsonrpc":"2.0","method":"notifications/cancelled","params":{"requestId":7}})", nullptr);
  slow->wait();
}

TEST_F(ProtocolTest, ServerToClientRequestWaitsForTheClientsResponse) {
  initialize({{"roots", nlohmann::json::object()}});
  auto outbox = std::make_shared<RecordingOutbox>();
  m_session->handle(jsonrpc::Request{1, "tools/call", {{"name", "ask"}}}, outbox);
  auto request = outbox->wait_sent(1);
  ASSERT_EQ(request["method"], "roots/list");
  m_session->handle_raw(jsonrpc::serialize(jsonrpc::make_result(
                            request["id"], {{"roots", {{{"uri", "file:///work"}}}}})),
                        nullptr);
  auto response = outbox->wait();
  ASSERT_TRUE(response);
  EXPECT_EQ((*response)["result"]["structuredContent"]["roots"][0]["uri"], "file:///work");
}

TEST_F(ProtocolTest, ClientErrorAnswerBecomesAFailure) {
  initialize();
  auto outbox = std::make_shared<RecordingOutbox>();
  m_session->handle(jsonrpc::Request{1, "tools/call", {{"name", "ask"}}}, outbox);
  auto request = outbox->wait_sent(1);
  m_session->handle_raw(
      jsonrpc::serialize(jsonrpc::make_error(request["id"], -32601, "no roots here")), nullptr);
  auto response = outbox->wait();
  ASSERT_TRUE(response);
  EXPECT_EQ((*response)["result"]["isError"], true);
  EXPECT_NE((*response)["result"]["content"][0]["text"].get<std::string>().find("no roots here"),
            std::string::npos);
}

TEST_F(ProtocolTest, LogLevelFiltersNotifications) {
  initialize();
  auto outbox = std::make_shared<RecordingOutbox>();
  m_session->handle(jsonrpc::Request{1, "tools/call", {{"name", "logs"}}}, outbox);
  outbox->wait();
  ASSERT_EQ(outbox->sent().size(), 1u);  // default threshold: info
  EXPECT_EQ(outbox->sent()[0]["params"]["level"], "warning");

  EXPECT_TRUE(call(2, "logging/setLevel", {{"level", "debug"}})["result"].empty());
  auto verbose = std::make_shared<RecordingOutbox>();
  m_session->handle(jsonrpc::Request{3, "tools/call", {{"name", "logs"}}}, verbose);
  verbose->wait();
  EXPECT_EQ(verbose->sent().size(), 2u);
  EXPECT_EQ(call(4, "logging/setLevel", {{"level", "loud"}})["error"]["code"],
            jsonrpc::k_invalid_params);
}

TEST_F(ProtocolTest, ResourcesReadTemplatesAndNotFound) {
  initialize();
  EXPECT_EQ(call(1, "resources/list")["result"]["resources"][0]["uri"], "test://a");
  EXPECT_EQ(call(2, "resources/templates/list")["result"]["resourceTemplates"][0]["uriTemplate"],
            "test://items/{id}");
  EXPECT_EQ(
      call(3, "resources/read", {{"uri", "test://items/42"}})["result"]["contents"][0]["text"],
      "item 42");
  EXPECT_EQ(call(4, "resources/read", {{"uri", "test://missing"}})["error"]["code"],
            jsonrpc::k_resource_not_found);
  EXPECT_EQ(call(5, "resources/read", {{"uri", 3}})["error"]["code"], jsonrpc::k_invalid_params);
}

TEST_F(ProtocolTest, SubscribedResourceUpdatesReachTheStandaloneStream) {
  initialize();
  EXPECT_TRUE(call(1, "resources/subscribe", {{"uri", "test://a"}})["result"].empty());
  m_registries.resources.notify_updated("test://a");
  m_registries.resources.notify_updated("test://other");
  ASSERT_EQ(m_standalone->sent().size(), 1u);
  EXPECT_EQ(m_standalone->sent()[0]["method"], "notifications/resources/updated");
  EXPECT_TRUE(call(2, "resources/unsubscribe", {{"uri", "test://a"}})["result"].empty());
  m_registries.resources.notify_updated("test://a");
  EXPECT_EQ(m_standalone->sent().size(), 1u);
}

TEST_F(ProtocolTest, PromptsRequireTheirArguments) {
  initialize();
  EXPECT_EQ(call(1, "prompts/list")["result"]["prompts"][0]["arguments"][0]["name"], "name");
  EXPECT_EQ(call(2, "prompts/get",
                 {{"name", "greet"},
                  {"arguments", {{"name", "Ann"}}}})["result"]["messages"][0]["content"]["text"],
            "hi Ann");
  EXPECT_EQ(call(3, "prompts/get", {{"name", "greet"}})["error"]["code"],
            jsonrpc::k_invalid_params);
  EXPECT_EQ(call(4, "prompts/get", {{"name", "nope"}})["error"]["code"], jsonrpc::k_invalid_params);
}

TEST_F(ProtocolTest, CompletionUsesTheCompleter) {
  initialize();
  auto result = call(1, "completion/complete",
                     {{"ref", {{"type", "ref/resource"}, {"uri", "test://items/{id}"}}},
                      {"argument", {{"name", "id"}, {"value", "4"}}}})["result"];
  EXPECT_EQ(result["completion"]["values"], nlohmann::json({"41", "42"}));
  auto none = call(2, "completion/complete",
                   {{"ref", {{"type", "ref/prompt"}, {"name", "greet"}}},
                    {"argument", {{"name", "name"}, {"value", "A"}}}})["result"];
  EXPECT_TRUE(none["completion"]["values"].empty());
  EXPECT_EQ(call(3, "completion/complete", {{"ref", 1}})["error"]["code"],
            jsonrpc::k_invalid_params);
}

TEST_F(ProtocolTest, ClosingTheSessionCancelsRunningCalls) {
  initialize();
  auto slow = std::make_shared<RecordingOutbox>();
  m_session->handle(jsonrpc::Request{1, "tools/call", {{"name", "slow"}}}, slow);
  for (int i = 0; i < 200 && !m_slow_started; ++i) {
    std::this_thread::sleep_for(5ms);
  }
  m_session->close();
  EXPECT_FALSE(slow->wait(3s).has_value());
  EXPECT_TRUE(m_slow_saw_cancel);
}

TEST_F(ProtocolTest, InitializeWithANonObjectClientInfoLeavesTheSessionUninitialized) {
  for (const nlohmann::json& info :
       {nlohmann::json("x"), nlohmann::json(5), nlohmann::json::array({1})}) {
    auto response = call(1, "initialize",
                         {{"protocolVersion", "2025-11-25"},
                          {"capabilities", nlohmann::json::object()},
                          {"clientInfo", info}});
    EXPECT_EQ(response["error"]["code"], jsonrpc::k_invalid_params) << response.dump();
    EXPECT_FALSE(m_session->initialized());
  }
  initialize();
  EXPECT_TRUE(m_session->initialized());
}

TEST_F(ProtocolTest, IntegersOutOfRangeAndNulCharactersAreInvalidArguments) {
  initialize();
  for (const char* args : {R"({"count": 1e30})", R"({"count": -1e30})", R"({"count": 3000000000})",
                           R"({"count": 18446744073709551615})"}) {
    auto result = call(1, "tools/call",
                       {{"name", "echo"}, {"arguments", nlohmann::json::parse(args)}})["result"];
    EXPECT_EQ(result["isError"], true) << args;
    EXPECT_NE(result["content"][0]["text"].get<std::string>().find("out of range"),
              std::string::npos)
        << result.dump();
  }
  auto fine = call(2, "tools/call", {{"name", "echo"}, {"arguments", {{"count", 2147483647}}}});
  EXPECT_FALSE(fine["result"].value("isError", false)) << fine.dump();
  auto nul = call(3, "tools/call",
                  {{"name", "echo"}, {"arguments", {{"text", std::string("k.py\0.txt", 10)}}}});
  EXPECT_EQ(nul["result"]["isError"], true);
  EXPECT_NE(nul["result"]["content"][0]["text"].get<std::string>().find("NUL"), std::string::npos)
      << nul.dump();
}

TEST(OutboundEndpoints, ModelBaseUrlsAndRemoteBackendsAreNamed) {
  const std::vector<std::string> trusted = {"ssh://me@trn1?device=neuron", "openai:m@http://x/v1"};
  EXPECT_FALSE(outbound_endpoint_in({{"llm", {"openai:gpt-4o", "anthropic:claude"}}}, trusted));
  EXPECT_FALSE(outbound_endpoint_in({{"backend", "sim"}}, trusted));
  EXPECT_FALSE(outbound_endpoint_in({{"backend", "local?device=fake, sim"}}, trusted));
  EXPECT_FALSE(outbound_endpoint_in({{"backend", "ssh://me@trn1?device=neuron"}}, trusted));
  EXPECT_FALSE(outbound_endpoint_in({{"llm", {"openai:m@http://x/v1"}}}, trusted));
  EXPECT_TRUE(outbound_endpoint_in({{"llm", {"openai:qwen@http://evil.example/v1"}}}, trusted));
  EXPECT_TRUE(outbound_endpoint_in({{"llm", "openai:q@https://evil.example"}}, trusted));
  EXPECT_TRUE(outbound_endpoint_in({{"backend", "ssh://evil.example"}}, trusted));
  EXPECT_TRUE(outbound_endpoint_in({{"backend", "sim,ssh://evil.example"}}, trusted));
  EXPECT_TRUE(outbound_endpoint_in({{"backend", "hosts:/tmp/hosts"}}, trusted));
}

TEST(OutboundEndpoints, HttpSessionsRefuseThemUnlessAllowedAndStdioKeepsThem) {
  for (const bool allow : {false, true}) {
    for (const auto transport : {SessionTransport::stdio, SessionTransport::http}) {
      Registries registries;
      std::atomic<int> ran{0};
      ToolDef tool;
      tool.name = "search";
      tool.description = "takes an llm";
      tool.input_schema = {{"type", "object"}};
      tool.handler = [&ran](const nlohmann::json&, ToolContext& context) {
        ++ran;
        return ToolResult{{{"allowed", context.remote_endpoints_allowed}}, "", false};
      };
      registries.tools.add(tool);
      ServerOptions options;
      options.allow_remote_endpoints = allow;
      Server server(registries, options);
      auto session = server.create_session(std::make_shared<RecordingOutbox>(), transport);
      auto ask = [&](const nlohmann::json& id, const std::string& method, nlohmann::json params) {
        auto outbox = std::make_shared<RecordingOutbox>();
        session->handle_raw(jsonrpc::serialize(jsonrpc::make_request(id, method, params)), outbox);
        return outbox->wait().value_or(nlohmann::json());
      };
      ask(0, "initialize", {{"protocolVersion", "2025-11-25"}});
      auto result = ask(1, "tools/call",
                        {{"name", "search"},
                         {"arguments", {{"llm", {"openai:m@http://evil.example/v1"}}}}})["result"];
      const bool refused = transport == SessionTransport::http && !allow;
      EXPECT_EQ(result.value("isError", false), refused) << result.dump();
      EXPECT_EQ(ran.load(), refused ? 0 : 1);
      if (refused) {
        EXPECT_NE(result["content"][0]["text"].get<std::string>().find("--allow-remote-endpoints"),
                  std::string::npos);
      }
      auto plain =
          ask(2, "tools/call", {{"name", "search"}, {"arguments", {{"llm", {"openai:m"}}}}});
      EXPECT_EQ(plain["result"]["structuredContent"]["allowed"], !refused) << plain.dump();
      session->close();
      server.wait_idle(std::chrono::seconds(5));
    }
  }
}

}  // namespace
}  // namespace autocomp::server
