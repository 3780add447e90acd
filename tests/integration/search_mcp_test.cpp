// The search tools over the real binary's transports (stdio and Streamable HTTP on 127.0.0.1):
// run_beam_search, get_search_status with progress notifications, list_runs, cancel_search (with
// no evaluation process left behind), the run resource, revert_to_best and propose_plan, against
// the simulator, a temporary store and a scripted OpenAI-compatible LLM server on loopback.

#include <gtest/gtest.h>
#include <httplib.h>

#include <algorithm>
#include <chrono>
#include <cstdlib>
#include <filesystem>
#include <fstream>
#include <map>
#include <memory>
#include <optional>
#include <ostream>
#include <regex>
#include <set>
#include <sstream>
#include <string>
#include <thread>
#include <vector>

#include "core/hash.hpp"
#include "integration/server_test_support.hpp"
#include "support/add_workload.hpp"
#include "support/scripted_llm_server.hpp"

namespace autocomp::test {
namespace {

namespace fs = std::filesystem;
using autocomp::testing::ScriptedLlmServer;
using autocomp::testing::ScriptedResponse;
using nlohmann::json;

// The add problem with an inputs() that blocks for a long time: an evaluation of it stays
// running until it is killed.
constexpr const char* k_blocking_problem = R"(import time
import numpy as np

def inputs(seed):
    time.sleep(600)
    rng = np.random.default_rng(seed)
    return {"a": rng.standard_normal((128, 512), dtype=np.float32),
            "b": rng.standard_normal((128, 512), dtype=np.float32)}

def reference(a, b):
    return a + b

SEEDS = [0, 1]
)";

std::string read_file(const fs::path& path) {
  std::ifstream in(path, std::ios::binary);
  std::ostringstream text;
  text << in.rdbuf();
  return text.str();
}

void write_file(const fs::path& path, const std::string& text) {
  std::ofstream(path, std::ios::binary | std::ios::trunc) << text;
}

// ---- processes under /proc ------------------------------------------------------------------

struct ProcessInfo {
  pid_t pid = 0;
  pid_t parent = 0;
  char state = '?';
  std::string command;  // the command line with NULs turned into spaces
};

std::optional<ProcessInfo> process_info(pid_t pid) {
  const fs::path dir = fs::path("/proc") / std::to_string(pid);
  std::ifstream stat(dir / "stat");
  std::string line;
  if (!std::getline(stat, line)) {
    return std::nullopt;
  }
  // "pid (comm) state ppid ...": comm may hold spaces and parentheses, so parse after the last ')'.
  const auto close = line.rfind(')');
  if (close == std::string::npos) {
    return std::nullopt;
  }
  std::istringstream rest(line.substr(close + 1));
  ProcessInfo info;
  info.pid = pid;
  long parent = 0;
  rest >> info.state >> parent;
  info.parent = static_cast<pid_t>(parent);
  info.command = read_file(dir / "cmdline");
  std::replace(info.command.begin(), info.command.end(), '\0', ' ');
  return info;
}

// Every living (not zombie) descendant of `root`.
std::vector<ProcessInfo> descendants(pid_t root) {
  std::map<pid_t, std::vector<ProcessInfo>> children;
  std::error_code ec;
  for (const auto& entry : fs::directory_iterator("/proc", ec)) {
    const std::string name = entry.path().filename().string();
    if (name.empty() || !std::all_of(name.begin(), name.end(), ::isdigit)) {
      continue;
    }
    if (auto info = process_info(static_cast<pid_t>(std::stol(name)))) {
      children[info->parent].push_back(*info);
    }
  }
  std::vector<ProcessInfo> out;
  std::vector<pid_t> pending{root};
  while (!pending.empty()) {
    const pid_t pid = pending.back();
    pending.pop_back();
    for (const auto& child : children[pid]) {
      pending.push_back(child.pid);
      if (child.state != 'Z') {
        out.push_back(child);
      }
    }
  }
  return out;
}

bool runs_harness(const ProcessInfo& process) {
  return process.command.find("autocomp_harness") != std::string::npos ||
         process.command.find("python") != std::string::npos;
}

bool is_evaluation(const ProcessInfo& process) {
  return process.command.find("autocomp_harness") != std::string::npos &&
         process.command.find("--problem") != std::string::npos;
}

bool still_alive(const ProcessInfo& process) {
  auto now = process_info(process.pid);
  return now && now->state != 'Z' && now->command == process.command;
}

// ---- an MCP client over either transport ----------------------------------------------------

enum class Transport { stdio, http };

std::string transport_name(Transport transport) {
  return transport == Transport::stdio ? "stdio" : "http";
}

void PrintTo(Transport transport, std::ostream* out) {
  *out << transport_name(transport);
}

struct Reply {
  json response;                    // the JSON-RPC response; null when none came in time
  std::vector<json> notifications;  // messages the server sent before it
  json result() const { return response.is_object() ? response.value("result", json()) : json(); }
  // The structured result of a tools/call.
  json structured() const {
    const json out = result();
    return out.is_object() ? out.value("structuredContent", json()) : json();
  }
  bool tool_error() const {
    const json out = result();
    return !out.is_object() || out.value("isError", false);
  }
};

class McpClient {
 public:
  virtual ~McpClient() = default;
  virtual pid_t server_pid() const = 0;
  virtual Reply rpc(const std::string& method, json params, std::chrono::milliseconds timeout) = 0;

  Reply call_tool(const std::string& name, json arguments,
                  std::chrono::milliseconds timeout = std::chrono::seconds(60),
                  std::optional<std::string> progress_token = std::nullopt) {
    json params = {{"name", name}, {"arguments", std::move(arguments)}};
    if (progress_token) {
      params["_meta"] = {{"progressToken", *progress_token}};
    }
    return rpc("tools/call", std::move(params), timeout);
  }

 protected:
  long next_id() { return ++m_last_id; }

 private:
  long m_last_id = 0;
};

json initialize_params(bool sampling) {
  json capabilities = json::object();
  if (sampling) {
    capabilities["sampling"] = json::object();
  }
  return {{"protocolVersion", "2025-11-25"},
          {"capabilities", capabilities},
          {"clientInfo", {{"name", "search-mcp-test"}, {"version", "1"}}}};
}

class StdioClient : public McpClient {
 public:
  explicit StdioClient(std::vector<std::string> args) : m_child(std::move(args)) {}

  bool handshake() {
    auto init = rpc("initialize", initialize_params(false), std::chrono::seconds(10));
    if (!init.response.contains("result")) {
      return false;
    }
    return m_child.send(json{{"jsonrpc", "2.0"}, {"method", "notifications/initialized"}});
  }

  pid_t server_pid() const override { return m_child.pid(); }

  Reply rpc(const std::string& method, json params, std::chrono::milliseconds timeout) override {
    const long id = next_id();
    Reply reply;
    m_child.send(json{{"jsonrpc", "2.0"}, {"id", id}, {"method", method}, {"params", params}});
    const auto deadline = std::chrono::steady_clock::now() + timeout;
    while (std::chrono::steady_clock::now() < deadline) {
      auto message = m_child.read_response(std::chrono::duration_cast<std::chrono::milliseconds>(
          deadline - std::chrono::steady_clock::now()));
      auto& others = m_child.other_messages();
      reply.notifications.insert(reply.notifications.end(), others.begin(), others.end());
      others.clear();
      if (!message) {
        break;
      }
      if (message->value("id", json()) == json(id)) {
        reply.response = *message;
        break;
      }
    }
    return reply;
  }

  Child& child() { return m_child; }

 private:
  Child m_child;
};

// The JSON-RPC messages in a text/event-stream body.
std::vector<json> sse_messages(const std::string& body) {
  std::vector<json> out;
  std::istringstream lines(body);
  std::string line;
  std::string data;
  auto flush = [&] {
    if (!data.empty()) {
      auto message = json::parse(data, nullptr, false);
      if (!message.is_discarded()) {
        out.push_back(std::move(message));
      }
      data.clear();
    }
  };
  while (std::getline(lines, line)) {
    if (!line.empty() && line.back() == '\r') {
      line.pop_back();
    }
    if (line.empty()) {
      flush();
    } else if (line.rfind("data:", 0) == 0) {
      std::string part = line.substr(5);
      if (!part.empty() && part.front() == ' ') {
        part.erase(0, 1);
      }
      data += (data.empty() ? "" : "\n") + part;
    }
  }
  flush();
  return out;
}

class HttpClient : public McpClient {
 public:
  explicit HttpClient(std::vector<std::string> args)
      : m_server(std::move(args)), m_pid(m_server.child().pid()) {}

  bool handshake() {
    if (m_server.port() <= 0) {
      return false;
    }
    m_client = std::make_unique<httplib::Client>("127.0.0.1", m_server.port());
    m_client->set_connection_timeout(5, 0);
    auto init = rpc("initialize", initialize_params(false), std::chrono::seconds(10));
    if (!init.response.contains("result") || m_session.empty()) {
      return false;
    }
    auto initialized = m_client->Post("/mcp", headers(),
                                      R"({"jsonrpc":"2.0","method":"notifications/initialized"})",
                                      "application/json");
    return initialized && initialized->status == 202;
  }

  pid_t server_pid() const override { return m_pid; }

  Reply rpc(const std::string& method, json params, std::chrono::milliseconds timeout) override {
    Reply reply;
    if (!m_client) {
      return reply;
    }
    const long id = next_id();
    const auto seconds = std::chrono::duration_cast<std::chrono::seconds>(timeout).count();
    m_client->set_read_timeout(static_cast<time_t>(std::max<long>(1, seconds)), 0);
    const std::string body =
        json{{"jsonrpc", "2.0"}, {"id", id}, {"method", method}, {"params", params}}.dump();
    auto response = m_client->Post("/mcp", headers(), body, "application/json");
    if (!response) {
      return reply;
    }
    if (method == "initialize") {
      m_session = response->get_header_value("Mcp-Session-Id");
    }
    std::vector<json> messages;
    if (response->get_header_value("Content-Type").find("text/event-stream") != std::string::npos) {
      messages = sse_messages(response->body);
    } else {
      auto message = json::parse(response->body, nullptr, false);
      if (!message.is_discarded()) {
        messages.push_back(std::move(message));
      }
    }
    for (auto& message : messages) {
      if ((message.contains("result") || message.contains("error")) &&
          message.value("id", json()) == json(id)) {
        reply.response = std::move(message);
      } else {
        reply.notifications.push_back(std::move(message));
      }
    }
    return reply;
  }

 private:
  httplib::Headers headers() const {
    httplib::Headers out = {{"Accept", "application/json, text/event-stream"},
                            {"MCP-Protocol-Version", "2025-11-25"}};
    if (!m_session.empty()) {
      out.emplace("Mcp-Session-Id", m_session);
    }
    return out;
  }

  HttpChild m_server;
  pid_t m_pid;
  std::unique_ptr<httplib::Client> m_client;
  std::string m_session;
};

// ---- fixture ----------------------------------------------------------------------------------

std::string fenced_answer(const std::string& code) {
  return "Load each input as a single full tile.\n\n```python\n" + code + "```\n";
}

class SearchMcpBase {
 protected:
  void prepare(const std::string& label) {
    m_dir = temp_path("search_mcp_test_" + label);
    fs::create_directories(m_dir);
    write_file(m_dir / "problem.py", testing::k_add_problem);
    write_file(m_dir / "blocking_problem.py", k_blocking_problem);
    write_file(m_dir / "kernel.py", testing::k_add_slow_kernel);
    ::setenv("AUTOCOMP_PYTHON", AUTOCOMP_PYTHON, 1);
    ::setenv("OPENAI_BASE_URL", m_llm.openai_base_url().c_str(), 1);
    ::setenv("OPENAI_API_KEY", "test-key-not-secret", 1);
  }

  void cleanup() {
    m_client.reset();  // kills the server
    for (const auto& process : m_seen_harness) {
      if (still_alive(process)) {
        ::kill(process.pid, SIGKILL);
      }
    }
    m_llm.stop();
    std::error_code ec;
    fs::remove_all(m_dir, ec);
  }

  std::vector<std::string> server_args(bool with_llm) const {
    std::vector<std::string> args = {
        "--db", (m_dir / "store.db").string(), "--backend", "sim", "--log-level", "warn"};
    if (with_llm) {
      args.insert(args.end(), {"--llm", "openai:scripted-model"});
    }
    return args;
  }

  bool start(Transport transport, bool with_llm) {
    if (transport == Transport::stdio) {
      auto client = std::make_unique<StdioClient>(server_args(with_llm));
      const bool ok = client->handshake();
      m_client = std::move(client);
      return ok;
    }
    auto client = std::make_unique<HttpClient>(server_args(with_llm));
    const bool ok = client->handshake();
    m_client = std::move(client);
    return ok;
  }

  std::string path(const std::string& name) const { return (m_dir / name).string(); }

  // Follows a run with get_search_status(wait_s) until it leaves `running`, within `limit`.
  // The params of the progress notifications of each call are appended to `progress`, one list
  // per call.
  json follow(const std::string& run_id, std::chrono::seconds limit, const std::string& token,
              std::vector<std::vector<json>>& progress) {
    const auto deadline = std::chrono::steady_clock::now() + limit;
    json status;
    do {
      auto reply = m_client->call_tool("get_search_status", {{"run_id", run_id}, {"wait_s", 5}},
                                       std::chrono::seconds(30), token);
      EXPECT_FALSE(reply.tool_error()) << reply.response.dump();
      status = reply.structured();
      progress.emplace_back();
      for (const auto& message : reply.notifications) {
        if (message.value("method", "") == "notifications/progress" && message.contains("params")) {
          progress.back().push_back(message.at("params"));
        }
      }
      if (status.is_null()) {
        break;
      }
    } while (status.value("status", "") == "running" &&
             std::chrono::steady_clock::now() < deadline);
    return status;
  }

  ScriptedLlmServer m_llm;
  fs::path m_dir;
  std::unique_ptr<McpClient> m_client;
  std::vector<ProcessInfo> m_seen_harness;
};

class SearchMcp : public SearchMcpBase, public ::testing::TestWithParam<Transport> {
 protected:
  void SetUp() override {
    prepare(transport_name(GetParam()));
    ASSERT_TRUE(start(GetParam(), true)) << "no MCP handshake over " << transport_name(GetParam());
  }
  void TearDown() override { cleanup(); }
};

TEST_P(SearchMcp, RunStartsAtOnceReportsProgressAndFinishesWithACorrectBest) {
  ScriptedResponse answer = ScriptedResponse::reply(fenced_answer(testing::k_add_fast_kernel));
  answer.delay = std::chrono::milliseconds(1500);
  answer.repeat = true;
  m_llm.set_fallback(answer);

  auto started = m_client->call_tool("run_beam_search", {{"kernel", path("kernel.py")},
                                                         {"problem", path("problem.py")},
                                                         {"beam", 1},
                                                         {"plans", 1},
                                                         {"impls", 1},
                                                         {"iterations", 1},
                                                         {"seed", 7}});
  ASSERT_FALSE(started.tool_error()) << started.response.dump();
  const json& start = started.structured();
  ASSERT_TRUE(start.is_object()) << started.response.dump();
  const std::string run_id = start.at("run_id");
  EXPECT_FALSE(run_id.empty());
  const std::string first_status = start.at("status");
  EXPECT_TRUE(first_status == "running" || first_status == "queued") << start.dump();
  EXPECT_TRUE(start.at("running_here").get<bool>()) << start.dump();

  auto listed = m_client->call_tool("list_runs", json::object());
  ASSERT_FALSE(listed.tool_error()) << listed.response.dump();
  const json runs = listed.structured().at("runs");
  const auto entry = std::find_if(runs.begin(), runs.end(),
                                  [&](const json& run) { return run.at("run_id") == run_id; });
  ASSERT_NE(entry, runs.end()) << runs.dump();
  EXPECT_EQ(entry->at("kernel"), path("kernel.py"));

  std::vector<std::vector<json>> progress;
  const json status = follow(run_id, std::chrono::seconds(120), "follow-" + run_id, progress);
  ASSERT_EQ(status.value("status", ""), "completed") << status.dump();
  EXPECT_FALSE(status.at("running_here").get<bool>());
  EXPECT_EQ(status.at("details"), "autocomp://runs/" + run_id);

  // The live snapshot carries the counters the notifications print; the best is the run's.
  ASSERT_TRUE(status.contains("live")) << status.dump();
  const json& live = status.at("live");
  EXPECT_EQ(live.at("iteration"), 1);
  EXPECT_EQ(live.at("iterations"), 1);
  EXPECT_GE(live.at("evaluated").get<long>(), 1);
  EXPECT_FALSE(live.contains("best_latency_us")) << "one best figure: the run's, at the top level";
  EXPECT_FALSE(live.contains("speedup"));
  EXPECT_GE(live.at("llm_calls").get<long>(), 2) << "one plan and one implementation";
  const double best_us = status.at("best_latency_us");
  const double baseline_us = status.at("baseline_latency_us");
  EXPECT_LT(best_us, baseline_us);
  EXPECT_NEAR(status.at("speedup").get<double>(), baseline_us / best_us, 1e-6);

  // Every progress notification answers the call's token and counts up within its call; the
  // last one that reports numbers reports the final iteration, evaluations, best and speedup.
  const std::regex numbers(
      R"(iteration (\d+)/(\d+) .*?(\d+) evaluated .*?best ([0-9.]+) us \(([0-9.]+)x\))");
  std::size_t notifications = 0;
  std::string last_message;
  for (const auto& call : progress) {
    double previous = -1;
    for (const auto& params : call) {
      ++notifications;
      EXPECT_EQ(params.at("progressToken"), "follow-" + run_id);
      const double value = params.at("progress");
      EXPECT_GT(value, previous) << "progress increases within one call";
      previous = value;
      const std::string message = params.value("message", "");
      if (std::regex_search(message, numbers)) {
        last_message = message;
      }
    }
  }
  ASSERT_GT(notifications, 0u) << "no notifications/progress while waiting";
  std::smatch match;
  ASSERT_TRUE(std::regex_search(last_message, match, numbers))
      << "no progress message with iteration, evaluated, best latency and speedup: "
      << json(progress).dump();
  EXPECT_EQ(std::stoi(match[1].str()), 1) << last_message;
  EXPECT_EQ(std::stoi(match[2].str()), 1) << last_message;
  EXPECT_EQ(std::stol(match[3].str()), live.at("evaluated").get<long>()) << last_message;
  EXPECT_NEAR(std::stod(match[4].str()), best_us, 0.01) << last_message;
  EXPECT_NEAR(std::stod(match[5].str()), baseline_us / best_us, 0.01) << last_message;

  // The winner is the faster kernel the LLM wrote, and it is correct.
  const std::string best_key = status.at("best_candidate");
  EXPECT_EQ(best_key, core::source_key(testing::k_add_fast_kernel));
  auto resource = m_client->rpc("resources/read", {{"uri", "autocomp://runs/" + run_id}},
                                std::chrono::seconds(20));
  ASSERT_TRUE(resource.response.contains("result")) << resource.response.dump();
  const json contents = resource.result().at("contents");
  ASSERT_EQ(contents.size(), 1u);
  EXPECT_EQ(contents.at(0).at("uri"), "autocomp://runs/" + run_id);
  const json body = json::parse(contents.at(0).at("text").get<std::string>());
  EXPECT_EQ(body.at("run_id"), run_id);
  EXPECT_EQ(body.at("status"), "completed");
  const json& candidates = body.at("candidates");
  const auto winner = std::find_if(candidates.begin(), candidates.end(),
                                   [&](const json& c) { return c.at("candidate") == best_key; });
  ASSERT_NE(winner, candidates.end()) << body.dump();
  EXPECT_TRUE(winner->at("correct").get<bool>());
  EXPECT_EQ(winner->at("iteration"), 1);
  EXPECT_EQ(winner->at("parent"), core::source_key(testing::k_add_slow_kernel));
  ASSERT_FALSE(body.at("beams").empty());
  EXPECT_EQ(body.at("beams").back().at("candidates"), json::array({best_key}));

  write_file(m_dir / "best.py", "placeholder\n");
  auto restored =
      m_client->call_tool("revert_to_best", {{"kernel", path("best.py")}, {"run_id", run_id}},
                          std::chrono::seconds(20));
  ASSERT_FALSE(restored.tool_error()) << restored.response.dump();
  EXPECT_EQ(read_file(m_dir / "best.py"), testing::k_add_fast_kernel);
  auto verified = m_client->call_tool(
      "verify_kernel", {{"kernel", path("best.py")}, {"problem", path("problem.py")}});
  ASSERT_FALSE(verified.tool_error()) << verified.response.dump();
  EXPECT_TRUE(verified.structured().at("correct").get<bool>()) << verified.response.dump();
}

TEST_P(SearchMcp, CancelStopsTheRunAndLeavesNoEvaluationRunning) {
  ScriptedResponse answer = ScriptedResponse::reply(fenced_answer(testing::k_add_fast_kernel));
  answer.repeat = true;
  m_llm.set_fallback(answer);

  const pid_t server = m_client->server_pid();
  ASSERT_GT(server, 0);
  auto started = m_client->call_tool("run_beam_search", {{"kernel", path("kernel.py")},
                                                         {"problem", path("blocking_problem.py")},
                                                         {"beam", 1},
                                                         {"plans", 1},
                                                         {"impls", 1},
                                                         {"iterations", 2}});
  ASSERT_FALSE(started.tool_error()) << started.response.dump();
  const std::string run_id = started.structured().at("run_id");
  const std::string first_status = started.structured().at("status");
  EXPECT_TRUE(first_status == "running" || first_status == "queued") << started.response.dump();

  // The input kernel's evaluation blocks in inputs(): wait until its process is there.
  std::vector<ProcessInfo> evaluations;
  const auto appear_by = std::chrono::steady_clock::now() + std::chrono::seconds(30);
  while (std::chrono::steady_clock::now() < appear_by) {
    for (const auto& process : descendants(server)) {
      if (runs_harness(process)) {
        m_seen_harness.push_back(process);
      }
      if (is_evaluation(process)) {
        evaluations.push_back(process);
      }
    }
    if (!evaluations.empty()) {
      break;
    }
    std::this_thread::sleep_for(std::chrono::milliseconds(50));
  }
  ASSERT_FALSE(evaluations.empty()) << "no evaluation process appeared under the server";

  auto cancelled =
      m_client->call_tool("cancel_search", {{"run_id", run_id}}, std::chrono::seconds(40));
  ASSERT_FALSE(cancelled.tool_error()) << cancelled.response.dump();
  EXPECT_TRUE(cancelled.structured().at("cancelled").get<bool>()) << cancelled.response.dump();

  json status;
  const auto cancelled_by = std::chrono::steady_clock::now() + std::chrono::seconds(15);
  do {
    auto reply = m_client->call_tool("get_search_status", {{"run_id", run_id}, {"wait_s", 1}},
                                     std::chrono::seconds(20));
    status = reply.structured();
  } while (status.value("status", "") != "cancelled" &&
           std::chrono::steady_clock::now() < cancelled_by);
  EXPECT_EQ(status.value("status", ""), "cancelled") << status.dump();
  EXPECT_FALSE(status.value("running_here", true)) << status.dump();

  std::vector<ProcessInfo> left;
  const auto gone_by = std::chrono::steady_clock::now() + std::chrono::seconds(15);
  do {
    left.clear();
    for (const auto& process : descendants(server)) {
      if (runs_harness(process)) {
        left.push_back(process);
        m_seen_harness.push_back(process);
      }
    }
    for (const auto& process : m_seen_harness) {
      if (still_alive(process) && std::none_of(left.begin(), left.end(), [&](const ProcessInfo& p) {
            return p.pid == process.pid;
          })) {
        left.push_back(process);
      }
    }
    if (left.empty()) {
      break;
    }
    std::this_thread::sleep_for(std::chrono::milliseconds(100));
  } while (std::chrono::steady_clock::now() < gone_by);
  for (const auto& process : left) {
    ADD_FAILURE() << "still running after cancel: pid " << process.pid << ": " << process.command;
  }
  EXPECT_TRUE(left.empty());

  // Nothing was asked of the LLM (the run never got past the input kernel), and the server
  // keeps serving.
  EXPECT_EQ(m_llm.request_count(), 0u);
  auto pong = m_client->rpc("ping", json::object(), std::chrono::seconds(10));
  EXPECT_TRUE(pong.response.contains("result")) << pong.response.dump();
}

TEST_P(SearchMcp, SeveralSearchesRunAtOnceWhileTheServerKeepsAnswering) {
  ScriptedResponse answer = ScriptedResponse::reply(fenced_answer(testing::k_add_fast_kernel));
  answer.delay = std::chrono::milliseconds(1000);
  answer.repeat = true;
  m_llm.set_fallback(answer);

  std::vector<std::string> run_ids;
  for (int i = 0; i < 3; ++i) {
    auto started = m_client->call_tool("run_beam_search", {{"kernel", path("kernel.py")},
                                                           {"problem", path("problem.py")},
                                                           {"beam", 1},
                                                           {"plans", 2},
                                                           {"impls", 1},
                                                           {"iterations", 1},
                                                           {"seed", 100 + i}});
    ASSERT_FALSE(started.tool_error()) << started.response.dump();
    run_ids.push_back(started.structured().at("run_id"));
  }
  EXPECT_NE(run_ids[0], run_ids[1]);
  EXPECT_NE(run_ids[1], run_ids[2]);

  // While the three run, the server answers every request (bounded waits: a starved server
  // would leave these without a response).
  int answered_while_running = 0;
  for (int i = 0; i < 10; ++i) {
    auto pong = m_client->rpc("ping", json::object(), std::chrono::seconds(5));
    ASSERT_TRUE(pong.response.contains("result")) << "ping " << i << ": " << pong.response.dump();
    auto listed = m_client->rpc("tools/list", json::object(), std::chrono::seconds(5));
    ASSERT_TRUE(listed.response.contains("result")) << listed.response.dump();
    int running = 0;
    for (const auto& id : run_ids) {
      auto status =
          m_client->call_tool("get_search_status", {{"run_id", id}}, std::chrono::seconds(5));
      ASSERT_FALSE(status.tool_error()) << status.response.dump();
      running += status.structured().value("status", "") == "running" ? 1 : 0;
    }
    if (running == 3) {
      ++answered_while_running;
    }
  }
  EXPECT_GT(answered_while_running, 0) << "the three searches were never running together";

  for (const auto& id : run_ids) {
    std::vector<std::vector<json>> progress;
    const json status = follow(id, std::chrono::seconds(180), "several-" + id, progress);
    EXPECT_EQ(status.value("status", ""), "completed") << status.dump();
  }
}

std::string transport_test_name(const ::testing::TestParamInfo<Transport>& param) {
  return transport_name(param.param);
}

INSTANTIATE_TEST_SUITE_P(Transports, SearchMcp,
                         ::testing::Values(Transport::stdio, Transport::http), transport_test_name);

// ---- stdio only -----------------------------------------------------------------------------

class SearchMcpStdio : public SearchMcpBase, public ::testing::Test {
 protected:
  void SetUp() override { prepare("stdio_agent"); }
  void TearDown() override { cleanup(); }
};

// What a client's model reads before any work: every tool, within 12,000 characters.
TEST_F(SearchMcpStdio, ToolsListFitsItsBudgetAndRecentRunsAreAListedResource) {
  ASSERT_TRUE(start(Transport::stdio, false));
  auto listed = m_client->rpc("tools/list", json::object(), std::chrono::seconds(10));
  const json tools = listed.result().value("tools", json::array());
  ASSERT_EQ(tools.size(), 12u) << listed.response.dump();
  EXPECT_LE(listed.result().dump().size(), 12000u);
  for (const auto& tool : tools) {
    EXPECT_TRUE(tool.contains("outputSchema")) << tool.at("name");
    EXPECT_EQ(tool.at("annotations").size(), 4u) << tool.at("name");
  }
  auto resources = m_client->rpc("resources/list", json::object(), std::chrono::seconds(10));
  const json list = resources.result().value("resources", json::array());
  ASSERT_FALSE(list.empty()) << resources.response.dump();
  EXPECT_EQ(list.at(0).at("uri"), "autocomp://runs");
  auto read =
      m_client->rpc("resources/read", {{"uri", "autocomp://runs"}}, std::chrono::seconds(10));
  EXPECT_TRUE(read.result().contains("contents")) << read.response.dump();
}

TEST_F(SearchMcpStdio, RevertToBestRestoresTheFasterVersionAfterARegressingEdit) {
  ASSERT_TRUE(start(Transport::stdio, false));
  write_file(m_dir / "kernel.py", testing::k_add_fast_kernel);
  auto good = m_client->call_tool("benchmark_kernel",
                                  {{"kernel", path("kernel.py")}, {"problem", path("problem.py")}});
  ASSERT_FALSE(good.tool_error()) << good.response.dump();
  const double good_us = good.structured().at("latency_us").at("median");

  write_file(m_dir / "kernel.py", testing::k_add_slow_kernel);
  auto worse = m_client->call_tool(
      "benchmark_kernel", {{"kernel", path("kernel.py")}, {"problem", path("problem.py")}});
  ASSERT_FALSE(worse.tool_error()) << worse.response.dump();
  const double worse_us = worse.structured().at("latency_us").at("median");
  ASSERT_GT(worse_us, good_us) << "the edit must be a regression for this test to mean anything";
  EXPECT_EQ(worse.structured().at("best_known").at("candidate"),
            core::source_key(testing::k_add_fast_kernel));

  auto reverted = m_client->call_tool("revert_to_best", {{"kernel", path("kernel.py")}});
  ASSERT_FALSE(reverted.tool_error()) << reverted.response.dump();
  const json& out = reverted.structured();
  EXPECT_TRUE(out.at("restored").get<bool>()) << out.dump();
  EXPECT_EQ(out.at("candidate"), core::source_key(testing::k_add_fast_kernel));
  // benchmark_kernel answers with 4 significant digits.
  EXPECT_NEAR(out.at("median_us").get<double>(), good_us, good_us * 1e-3);
  EXPECT_EQ(read_file(m_dir / "kernel.py"), testing::k_add_fast_kernel);
  ASSERT_TRUE(out.contains("backup")) << out.dump();
  const fs::path backup = out.at("backup").get<std::string>();
  EXPECT_EQ(backup.parent_path(), m_dir);
  ASSERT_TRUE(fs::exists(backup));
  EXPECT_EQ(read_file(backup), testing::k_add_slow_kernel);

  auto again = m_client->call_tool("revert_to_best", {{"kernel", path("kernel.py")}});
  ASSERT_FALSE(again.tool_error()) << again.response.dump();
  EXPECT_FALSE(again.structured().at("restored").get<bool>()) << "already the best";
}

TEST_F(SearchMcpStdio, LessonsAndReflexionsFeedLaterPlans) {
  ASSERT_TRUE(start(Transport::stdio, true));
  const std::string lesson = "One full-tile load per input beats 64 narrow slices.";
  ScriptedResponse summary = ScriptedResponse::reply("- " + lesson + "\n");
  summary.match = "Distil at most";
  summary.repeat = true;
  m_llm.push(summary);
  ScriptedResponse reflection = ScriptedResponse::reply(
      "diagnosis_right: yes\nfix_worked: yes\nexpected: fewer DMAs\nactual: fewer DMAs\n"
      "lessons: DMA count dominates\navoid: slicing the free dimension\n"
      "try_next: overlap the two loads\n");
  reflection.match = "Reflect on this attempt";
  reflection.repeat = true;
  m_llm.push(reflection);
  ScriptedResponse answer = ScriptedResponse::reply(fenced_answer(testing::k_add_fast_kernel));
  answer.repeat = true;
  m_llm.set_fallback(answer);
  const json search = {{"kernel", path("kernel.py")},
                       {"problem", path("problem.py")},
                       {"beam", 1},
                       {"plans", 1},
                       {"impls", 1},
                       {"iterations", 2}};
  auto is_plan = [](const std::string& prompt) {
    return prompt.find("Study the kernel and its measurements") != std::string::npos;
  };

  auto first = m_client->call_tool("run_beam_search", search);
  ASSERT_FALSE(first.tool_error()) << first.response.dump();
  std::vector<std::vector<json>> progress;
  const std::string first_id = first.structured().at("run_id");
  ASSERT_EQ(follow(first_id, std::chrono::seconds(180), "learn-1", progress).value("status", ""),
            "completed");
  std::vector<std::string> plans;
  for (const auto& request : m_llm.requests()) {
    if (is_plan(request.prompt)) {
      plans.push_back(request.prompt);
    }
  }
  ASSERT_EQ(plans.size(), 2u) << "one plan per iteration";
  EXPECT_EQ(plans[0].find("avoid: slicing the free dimension"), std::string::npos);
  EXPECT_NE(plans[1].find("avoid: slicing the free dimension"), std::string::npos)
      << "iteration 1's reflexion reaches iteration 2's plan";
  EXPECT_NE(plans[1].find(lesson), std::string::npos) << "and so does its lesson";

  auto lessons = m_client->call_tool("list_lessons", json::object());
  ASSERT_FALSE(lessons.tool_error()) << lessons.response.dump();
  ASSERT_EQ(lessons.structured().at("lessons").size(), 1u) << lessons.response.dump();
  EXPECT_EQ(lessons.structured().at("lessons").at(0).at("run"), first_id);

  const std::size_t asked_before = m_llm.request_count();
  auto second = m_client->call_tool("run_beam_search", search);
  ASSERT_FALSE(second.tool_error()) << second.response.dump();
  ASSERT_EQ(follow(second.structured().at("run_id"), std::chrono::seconds(180), "learn-2", progress)
                .value("status", ""),
            "completed");
  const auto requests = m_llm.requests();
  ASSERT_GT(requests.size(), asked_before);
  bool first_plan_seen = false;
  for (std::size_t i = asked_before; i < requests.size() && !first_plan_seen; ++i) {
    if (is_plan(requests[i].prompt)) {
      first_plan_seen = true;
      EXPECT_NE(requests[i].prompt.find(lesson), std::string::npos)
          << "a later run plans with the earlier run's lesson from its first iteration";
      EXPECT_EQ(requests[i].prompt.find("avoid: slicing the free dimension"), std::string::npos)
          << "reflexions belong to their run";
    }
  }
  EXPECT_TRUE(first_plan_seen);
}

TEST_F(SearchMcpStdio, ProposePlanWithAProviderReturnsItsPlans) {
  ASSERT_TRUE(start(Transport::stdio, true));
  m_llm.push_text("Plan: load each input once as one 128x512 tile instead of 64 slices.");
  m_llm.push_text("Plan: hoist the loads out of the loop.");
  auto reply = m_client->call_tool(
      "propose_plan",
      {{"kernel", path("kernel.py")}, {"problem", path("problem.py")}, {"count", 2}});
  ASSERT_FALSE(reply.tool_error()) << reply.response.dump();
  const json& out = reply.structured();
  EXPECT_EQ(out.at("mode"), "llm");
  ASSERT_EQ(out.at("plans").size(), 2u) << out.dump();
  std::set<std::string> plans;
  for (const auto& plan : out.at("plans")) {
    plans.insert(plan.at("plan").get<std::string>());
    EXPECT_EQ(plan.at("provider"), "openai:scripted-model");
  }
  EXPECT_TRUE(std::any_of(plans.begin(), plans.end(), [](const std::string& p) {
    return p.find("128x512 tile") != std::string::npos;
  })) << out.dump();
  EXPECT_TRUE(std::any_of(plans.begin(), plans.end(), [](const std::string& p) {
    return p.find("hoist the loads") != std::string::npos;
  })) << out.dump();
  ASSERT_EQ(m_llm.request_count(), 2u);
  for (const auto& request : m_llm.requests()) {
    EXPECT_NE(request.prompt.find("def add_kernel"), std::string::npos);
  }
}

TEST_F(SearchMcpStdio, ProposePlanWithoutAProviderReturnsAReadablePromptResource) {
  ASSERT_TRUE(start(Transport::stdio, false));
  auto reply = m_client->call_tool(
      "propose_plan", {{"kernel", path("kernel.py")}, {"problem", path("problem.py")}});
  ASSERT_FALSE(reply.tool_error()) << reply.response.dump();
  const json& out = reply.structured();
  EXPECT_EQ(out.at("mode"), "prompt");
  EXPECT_FALSE(out.contains("plans"));
  const std::string uri = out.at("prompt");
  EXPECT_EQ(uri.rfind("autocomp://plan-prompts/", 0), 0u) << uri;

  auto resource = m_client->rpc("resources/read", {{"uri", uri}}, std::chrono::seconds(10));
  ASSERT_TRUE(resource.response.contains("result")) << resource.response.dump();
  const json contents = resource.result().at("contents");
  ASSERT_EQ(contents.size(), 1u);
  EXPECT_EQ(contents.at(0).at("uri"), uri);
  const std::string text = contents.at(0).at("text");
  EXPECT_NE(text.find("def add_kernel"), std::string::npos) << text.substr(0, 400);
  EXPECT_NE(text.find("nl.sequential_range(64)"), std::string::npos) << "the kernel as it is";
  EXPECT_EQ(m_llm.request_count(), 0u);

  auto missing =
      m_client->rpc("resources/read", {{"uri", "autocomp://plan-prompts/0000000000000000"}},
                    std::chrono::seconds(10));
  EXPECT_TRUE(missing.response.contains("error")) << missing.response.dump();
}

}  // namespace
}  // namespace autocomp::test
