// The real binary over stdio: lifecycle, every kind of bad input, concurrency, cancellation,
// clean exit, and the `call` subcommand's exit codes.

#include <gtest/gtest.h>

#include "integration/server_test_support.hpp"

namespace autocomp::test {
namespace {

int error_code(const nlohmann::json& response) {
  return response.contains("error") ? response["error"]["code"].get<int>() : 0;
}

void expect_still_serving(Child& server, int id) {
  auto pong = server.request(id, "ping");
  ASSERT_TRUE(pong.contains("result")) << "server stopped answering: " << pong.dump();
  EXPECT_EQ(pong["id"], id);
}

TEST(ServerStdio, LifecycleAndVersionNegotiation) {
  Child server({"--conformance-fixtures"});
  auto discover =
      server.request("server-discover-probe-1", "server/discover", nlohmann::json::object());
  EXPECT_EQ(error_code(discover), -32601);
  EXPECT_EQ(error_code(server.request(1, "tools/list")), -32600);
  expect_still_serving(server, 2);
  auto init = server.request(3, "initialize",
                             {{"protocolVersion", "2025-03-26"},
                              {"capabilities", nlohmann::json::object()},
                              {"clientInfo", {{"name", "t"}, {"version", "1"}}}});
  ASSERT_TRUE(init.contains("result")) << init.dump();
  EXPECT_EQ(init["result"]["protocolVersion"], "2025-03-26");
  EXPECT_FALSE(init["result"]["instructions"].get<std::string>().empty());
  EXPECT_LT(init["result"]["instructions"].get<std::string>().size(), 2048u);
  server.send(nlohmann::json{{"jsonrpc", "2.0"}, {"method", "notifications/initialized"}});
  auto tools = server.request(4, "tools/list");
  ASSERT_TRUE(tools.contains("result"));
  bool found = false;
  for (const auto& tool : tools["result"]["tools"]) {
    EXPECT_FALSE(tool["description"].get<std::string>().empty()) << tool["name"];
    found = found || tool["name"] == "test_simple_text";
  }
  EXPECT_TRUE(found);
  server.close_stdin();
  EXPECT_EQ(server.wait_exit(), 0);
  EXPECT_TRUE(server.stray_lines().empty());
}

// A dual-era client (Claude Code with MCP_PROTOCOL_NEGOTIATION=auto) probes with a modern
// server/discover; the answer takes it to the stateless wire. A legacy client in the same process
// still gets its session.
TEST(ServerStdio, ModernRequestsAreServedStatelesslyNextToASession) {
  Child server({"--conformance-fixtures"});
  const nlohmann::json meta = {
      {"io.modelcontextprotocol/protocolVersion", "2026-07-28"},
      {"io.modelcontextprotocol/clientCapabilities", {{"elicitation", nlohmann::json::object()}}},
      {"io.modelcontextprotocol/clientInfo", {{"name", "t"}, {"version", "1"}}}};
  auto discover = server.request("server-discover-probe-1", "server/discover", {{"_meta", meta}});
  ASSERT_TRUE(discover.contains("result")) << discover.dump();
  EXPECT_EQ(discover["result"]["supportedVersions"][0], "2026-07-28");
  EXPECT_FALSE(discover["result"]["instructions"].get<std::string>().empty());

  server.send(nlohmann::json{
      {"jsonrpc", "2.0"},
      {"id", "listen"},
      {"method", "subscriptions/listen"},
      {"params", {{"_meta", meta}, {"notifications", {{"toolsListChanged", true}}}}}});
  nlohmann::json progress_meta = meta;
  progress_meta["progressToken"] = 9;
  auto call = server.request(2, "tools/call",
                             {{"name", "test_tool_with_progress"}, {"_meta", progress_meta}});
  ASSERT_TRUE(call.contains("result")) << call.dump();
  EXPECT_EQ(call["result"]["resultType"], "complete");
  bool acknowledged = false;
  int progress = 0;
  for (const auto& message : server.other_messages()) {
    acknowledged =
        acknowledged || message.value("method", "") == "notifications/subscriptions/acknowledged";
    progress += message.value("method", "") == "notifications/progress" ? 1 : 0;
  }
  EXPECT_TRUE(acknowledged);
  EXPECT_EQ(progress, 3);
  auto input = server.request(
      3, "tools/call", {{"name", "test_input_required_result_elicitation"}, {"_meta", meta}});
  EXPECT_EQ(input["result"]["resultType"], "input_required") << input.dump();

  EXPECT_EQ(error_code(server.request(4, "tools/list")), -32600) << "no session was started";
  server.initialize();
  auto tools = server.request(5, "tools/list");
  ASSERT_TRUE(tools.contains("result"));
  EXPECT_FALSE(tools["result"].contains("resultType"));
  server.send(nlohmann::json{{"jsonrpc", "2.0"},
                             {"method", "notifications/cancelled"},
                             {"params", {{"requestId", "listen"}}}});
  expect_still_serving(server, 6);
  server.close_stdin();
  EXPECT_EQ(server.wait_exit(), 0);
  EXPECT_TRUE(server.stray_lines().empty());
}

TEST(ServerStdio, UnsupportedVersionIsAnsweredWithOurs) {
  Child server({});
  auto init = server.request(1, "initialize",
                             {{"protocolVersion", "1999-01-01"},
                              {"capabilities", nlohmann::json::object()},
                              {"clientInfo", {{"name", "t"}, {"version", "1"}}}});
  EXPECT_EQ(init["result"]["protocolVersion"], "2025-11-25");
}

TEST(ServerStdio, EveryBadInputGetsItsErrorAndTheServerKeepsServing) {
  Child server({"--conformance-fixtures", "--max-message-bytes", "4096"});
  server.initialize();

  server.send(std::string("{\"jsonrpc\":\"2.0\",\"id\":1,"));  // malformed JSON
  auto parse_error = server.read_response();
  ASSERT_TRUE(parse_error);
  EXPECT_EQ(error_code(*parse_error), -32700);
  EXPECT_TRUE((*parse_error)["id"].is_null());
  expect_still_serving(server, 100);

  server.send(std::string(R"({"jsonrpc":"1.0","id":2,"method":"ping"})"));
  auto bad_version = server.read_response();
  EXPECT_EQ(error_code(*bad_version), -32600);
  EXPECT_EQ((*bad_version)["id"], 2);
  expect_still_serving(server, 101);

  server.send(std::string(R"({"jsonrpc":"2.0","id":null,"method":"ping"})"));
  EXPECT_EQ(error_code(*server.read_response()), -32600);
  server.send(std::string(R"({"jsonrpc":"2.0","result":{}})"));  // neither request nor response
  EXPECT_EQ(error_code(*server.read_response()), -32600);
  expect_still_serving(server, 102);

  EXPECT_EQ(error_code(server.request(3, "no/such/method")), -32601);
  EXPECT_EQ(error_code(server.request(4, "resources/read", {{"uri", 12}})), -32602);
  EXPECT_EQ(error_code(server.request(5, "tools/call", {{"name", "no_such_tool"}})), -32602);
  expect_still_serving(server, 103);

  server.send(std::string(R"({"jsonrpc":"2.0","id":6,"method":"ping","params":)") + "\"" +
              std::string(8000, 'x') + "\"}");  // over the 4096-byte limit
  auto oversize = server.read_response();
  ASSERT_TRUE(oversize);
  EXPECT_EQ(error_code(*oversize), -32600);
  EXPECT_NE((*oversize)["error"]["message"].get<std::string>().find("limit"), std::string::npos);
  expect_still_serving(server, 104);

  server.send(std::string("{\"jsonrpc\":\"2.0\",\"id\":7,\"method\":\"p\xff\xfeng\"}"));
  EXPECT_EQ(error_code(*server.read_response()), -32700);
  expect_still_serving(server, 105);

  server.send(std::string(R"([{"jsonrpc":"2.0","id":8,"method":"ping"}])"));
  EXPECT_EQ(error_code(*server.read_response()), -32600);
  expect_still_serving(server, 106);

  // Wrong argument types are a tool error naming the field, not a protocol error.
  auto bad_args =
      server.request(9, "tools/call", {{"name", "test_sampling"}, {"arguments", {{"prompt", 5}}}});
  ASSERT_TRUE(bad_args.contains("result"));
  EXPECT_EQ(bad_args["result"]["isError"], true);
  EXPECT_NE(bad_args["result"]["content"][0]["text"].get<std::string>().find("prompt"),
            std::string::npos);
  expect_still_serving(server, 107);
}

TEST(ServerStdio, ProgressNotificationsPrecedeTheResult) {
  Child server({"--conformance-fixtures"});
  server.initialize();
  auto result = server.request(1, "tools/call",
                               {{"name", "test_tool_with_progress"},
                                {"arguments", nlohmann::json::object()},
                                {"_meta", {{"progressToken", "tok-1"}}}});
  ASSERT_TRUE(result.contains("result"));
  std::vector<double> progress;
  for (const auto& message : server.other_messages()) {
    if (message["method"] == "notifications/progress") {
      EXPECT_EQ(message["params"]["progressToken"], "tok-1");
      progress.push_back(message["params"]["progress"].get<double>());
    }
  }
  EXPECT_EQ(progress, (std::vector<double>{0, 50, 100}));
}

TEST(ServerStdio, SlowCallDoesNotBlockPingAndCancellationSuppressesTheResponse) {
  Child server({"--conformance-fixtures"});
  server.initialize();
  // test_reconnection waits ~1.6 s; over stdio its stream close is a no-op.
  server.send(nlohmann::json{{"jsonrpc", "2.0"},
                             {"id", "slow"},
                             {"method", "tools/call"},
                             {"params", {{"name", "test_reconnection"}}}});
  const auto started = std::chrono::steady_clock::now();
  auto pong = server.request(2, "ping");
  EXPECT_EQ(pong["id"], 2);
  EXPECT_LT(std::chrono::steady_clock::now() - started, 1s);
  server.send(nlohmann::json{{"jsonrpc", "2.0"},
                             {"method", "notifications/cancelled"},
                             {"params", {{"requestId", "slow"}, {"reason", "test"}}}});
  // The next response is the ping's, not the cancelled call's.
  std::this_thread::sleep_for(300ms);
  auto next = server.request(3, "ping");
  EXPECT_EQ(next["id"], 3);
  server.close_stdin();
  EXPECT_EQ(server.wait_exit(), 0);
}

TEST(ServerStdio, SamplingRoundTripThroughTheClient) {
  Child server({"--conformance-fixtures"});
  server.request(0, "initialize",
                 {{"protocolVersion", "2025-11-25"},
                  {"capabilities", {{"sampling", nlohmann::json::object()}}},
                  {"clientInfo", {{"name", "t"}, {"version", "1"}}}});
  server.send(
      nlohmann::json{{"jsonrpc", "2.0"},
                     {"id", 1},
                     {"method", "tools/call"},
                     {"params", {{"name", "test_sampling"}, {"arguments", {{"prompt", "2+2?"}}}}}});
  auto request_line = server.read_line();
  ASSERT_TRUE(request_line);
  auto request = nlohmann::json::parse(*request_line);
  ASSERT_EQ(request["method"], "sampling/createMessage");
  EXPECT_EQ(request["params"]["messages"][0]["content"]["text"], "2+2?");
  server.send(nlohmann::json{{"jsonrpc", "2.0"},
                             {"id", request["id"]},
                             {"result",
                              {{"role", "assistant"},
                               {"content", {{"type", "text"}, {"text", "4"}}},
                               {"model", "fake"}}}});
  auto result = server.read_response();
  ASSERT_TRUE(result);
  EXPECT_EQ((*result)["result"]["content"][0]["text"], "LLM response: 4");
}

TEST(ServerStdio, ExitsCleanlyOnEofEvenWithACallRunning) {
  Child server({"--conformance-fixtures"});
  server.initialize();
  server.send(nlohmann::json{{"jsonrpc", "2.0"},
                             {"id", 1},
                             {"method", "tools/call"},
                             {"params", {{"name", "test_reconnection"}}}});
  server.close_stdin();
  EXPECT_EQ(server.wait_exit(8s), 0);
}

TEST(ServerCall, ExitCodes) {
  auto ok = run_binary({"call", "test_simple_text", "--conformance-fixtures"});
  EXPECT_EQ(ok.exit_code, 0);
  auto printed = nlohmann::json::parse(ok.out, nullptr, false);
  ASSERT_FALSE(printed.is_discarded()) << ok.out;
  EXPECT_EQ(printed["content"][0]["text"], "This is a simple text response for testing.");

  EXPECT_EQ(run_binary({"call", "test_error_handling", "--conformance-fixtures"}).exit_code, 1);
  EXPECT_EQ(run_binary({"call", "no_such_tool"}).exit_code, 2);
  EXPECT_EQ(run_binary({"call", "test_sampling", "--args", "{not json", "--conformance-fixtures"})
                .exit_code,
            2);
  EXPECT_EQ(run_binary({"--no-such-flag"}).exit_code, 2);
  EXPECT_EQ(run_binary({"--version"}).exit_code, 0);
  EXPECT_EQ(run_binary({"--help"}).exit_code, 0);
}

}  // namespace
}  // namespace autocomp::test
