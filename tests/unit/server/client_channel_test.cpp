// The session-bound client channel: server→client requests that outlive the tool call that took
// the channel, sent on the session's standalone stream.

#include <gtest/gtest.h>

#include <atomic>
#include <condition_variable>
#include <future>
#include <optional>
#include <thread>

#include "core/clock.hpp"
#include "server/protocol.hpp"

namespace autocomp::server {
namespace {

using namespace std::chrono_literals;

// Records what the session sends on one stream; `connected` says whether the stream reaches the
// client (an HTTP standalone stream without an open GET stream does not).
class StreamRecorder : public Outbox {
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
  bool connected() const override { return m_connected.load(); }
  void set_connected(bool connected) { m_connected = connected; }

  std::optional<nlohmann::json> wait_response(std::chrono::milliseconds timeout = 5s) {
    std::unique_lock lock(m_mutex);
    EXPECT_TRUE(m_changed.wait_for(lock, timeout, [this] { return m_finished; }))
        << "no final message";
    return m_response;
  }
  // The count-th message sent (1-based), or null when it did not come in time.
  nlohmann::json wait_sent(std::size_t count, std::chrono::milliseconds timeout = 5s) {
    std::unique_lock lock(m_mutex);
    m_changed.wait_for(lock, timeout, [&] { return m_sent.size() >= count; });
    return m_sent.size() >= count ? m_sent[count - 1] : nlohmann::json();
  }
  std::vector<nlohmann::json> sent() {
    std::lock_guard lock(m_mutex);
    return m_sent;
  }

 private:
  std::mutex m_mutex;
  std::condition_variable m_changed;
  std::vector<nlohmann::json> m_sent;
  bool m_finished = false;
  std::optional<nlohmann::json> m_response;
  std::atomic<bool> m_connected{true};
};

const nlohmann::json k_sampling_params = {
    {"messages", {{{"role", "user"}, {"content", {{"type", "text"}, {"text", "plan please"}}}}}},
    {"maxTokens", 100}};

class ClientChannelTest : public ::testing::Test {
 protected:
  void SetUp() override {
    ToolDef keep;
    keep.name = "keep_channel";
    keep.description = "keeps the session channel of the call for later use";
    keep.handler = [this](const nlohmann::json&, ToolContext& context) {
      std::lock_guard lock(m_channel_mutex);
      m_channel = context.session_channel();
      return ToolResult{{{"kept", true}}, "", false};
    };
    m_registries.tools.add(std::move(keep));
    m_server = std::make_unique<Server>(m_registries, ServerOptions{});
    m_standalone = std::make_shared<StreamRecorder>();
    m_session = m_server->create_session(m_standalone);
  }

  void TearDown() override {
    if (m_session) {
      m_session->close();
    }
    m_server->wait_idle(5s);
  }

  void initialize(const nlohmann::json& capabilities) {
    auto outbox = std::make_shared<StreamRecorder>();
    m_session->handle(jsonrpc::Request{0,
                                       "initialize",
                                       {{"protocolVersion", "2025-11-25"},
                                        {"capabilities", capabilities},
                                        {"clientInfo", {{"name", "test"}, {"version", "1"}}}}},
                      outbox);
    auto response = outbox->wait_response();
    ASSERT_TRUE(response && response->contains("result"));
  }

  // Runs keep_channel to completion and returns the channel it kept, with the call's own stream.
  ClientChannel take_channel(std::shared_ptr<StreamRecorder>* call_stream = nullptr) {
    auto outbox = std::make_shared<StreamRecorder>();
    m_session->handle(jsonrpc::Request{1, "tools/call", {{"name", "keep_channel"}}}, outbox);
    auto response = outbox->wait_response();
    EXPECT_TRUE(response && (*response)["result"]["structuredContent"]["kept"] == true);
    if (call_stream != nullptr) {
      *call_stream = outbox;
    }
    std::lock_guard lock(m_channel_mutex);
    return m_channel;
  }

  void answer(const nlohmann::json& message) {
    m_session->handle_raw(jsonrpc::serialize(message), nullptr);
  }

  Registries m_registries;
  std::unique_ptr<Server> m_server;
  std::shared_ptr<StreamRecorder> m_standalone;
  std::shared_ptr<Session> m_session;
  std::mutex m_channel_mutex;
  ClientChannel m_channel;
};

TEST_F(ClientChannelTest, RequestAfterTheCallReachesTheStandaloneStreamAndGetsItsAnswer) {
  initialize({{"sampling", nlohmann::json::object()}});
  std::shared_ptr<StreamRecorder> call_stream;
  ClientChannel channel = take_channel(&call_stream);
  EXPECT_TRUE(channel.supports_sampling());

  core::CancelToken never;
  auto pending = std::async(std::launch::async,
                            [&] { return channel.create_message(k_sampling_params, 5s, never); });
  auto request = m_standalone->wait_sent(1);
  ASSERT_EQ(request.value("method", ""), "sampling/createMessage") << request.dump();
  EXPECT_EQ(request["params"]["messages"][0]["content"]["text"], "plan please");
  answer(jsonrpc::make_result(request["id"], {{"role", "assistant"},
                                              {"content", {{"type", "text"}, {"text", "a plan"}}},
                                              {"model", "m"}}));
  auto reply = pending.get();
  ASSERT_TRUE(reply.ok()) << reply.failure().describe();
  EXPECT_EQ(reply.value()["content"]["text"], "a plan");
  // Nothing went to the finished call's stream.
  EXPECT_EQ(call_stream->sent().size(), 0u);
}

TEST_F(ClientChannelTest, ConcurrentRequestsAreMatchedToTheirOwnAnswers) {
  initialize({{"sampling", nlohmann::json::object()}});
  ClientChannel channel = take_channel();
  core::CancelToken never;
  auto first = std::async(std::launch::async, [&] {
    return channel.request("test/one", {{"n", 1}}, 5s, never);
  });
  auto second = std::async(std::launch::async, [&] {
    return channel.request("test/two", {{"n", 2}}, 5s, never);
  });
  m_standalone->wait_sent(2);
  auto sent = m_standalone->sent();
  ASSERT_EQ(sent.size(), 2u);
  // Answered in reverse order; each caller gets the answer to its own request.
  for (auto it = sent.rbegin(); it != sent.rend(); ++it) {
    answer(jsonrpc::make_result((*it)["id"], {{"echo", (*it)["method"]}}));
  }
  auto one = first.get();
  auto two = second.get();
  ASSERT_TRUE(one.ok() && two.ok());
  EXPECT_EQ(one.value()["echo"], "test/one");
  EXPECT_EQ(two.value()["echo"], "test/two");
}

TEST_F(ClientChannelTest, ClosedSessionFailsPromptlyWithUnavailable) {
  initialize({{"sampling", nlohmann::json::object()}});
  ClientChannel channel = take_channel();
  m_session->close();
  const auto started = std::chrono::steady_clock::now();
  auto reply = channel.create_message(k_sampling_params, 30s, core::CancelToken());
  EXPECT_LT(std::chrono::steady_clock::now() - started, 1s);
  ASSERT_FALSE(reply.ok());
  EXPECT_EQ(reply.failure().kind, core::FailureKind::unavailable);
  EXPECT_NE(reply.failure().message.find("ended"), std::string::npos) << reply.failure().message;
  EXPECT_TRUE(m_standalone->sent().empty());
}

TEST_F(ClientChannelTest, ChannelDoesNotKeepAFinishedSessionAlive) {
  initialize({{"sampling", nlohmann::json::object()}});
  ClientChannel channel = take_channel();
  std::weak_ptr<Session> watch = m_session;
  m_session->close();
  m_server->wait_idle(5s);
  m_session.reset();
  // The worker that ran the call drops its reference just after the pool turns idle.
  for (int i = 0; i < 200 && !watch.expired(); ++i) {
    std::this_thread::sleep_for(5ms);
  }
  EXPECT_TRUE(watch.expired());
  auto reply = channel.request("test/any", nlohmann::json::object(), 30s, core::CancelToken());
  ASSERT_FALSE(reply.ok());
  EXPECT_EQ(reply.failure().kind, core::FailureKind::unavailable);
}

TEST_F(ClientChannelTest, SessionClosingWhileWaitingFailsWithUnavailable) {
  initialize({{"sampling", nlohmann::json::object()}});
  ClientChannel channel = take_channel();
  auto pending = std::async(std::launch::async, [&] {
    return channel.create_message(k_sampling_params, 30s, core::CancelToken());
  });
  ASSERT_FALSE(m_standalone->wait_sent(1).is_null());
  const auto closed_at = std::chrono::steady_clock::now();
  m_session->close();
  auto reply = pending.get();
  EXPECT_LT(std::chrono::steady_clock::now() - closed_at, 2s);
  ASSERT_FALSE(reply.ok());
  EXPECT_EQ(reply.failure().kind, core::FailureKind::unavailable);
}

TEST_F(ClientChannelTest, NoOpenStreamFailsPromptlyWithAnActionableMessage) {
  initialize({{"sampling", nlohmann::json::object()}});
  ClientChannel channel = take_channel();
  m_standalone->set_connected(false);
  const auto started = std::chrono::steady_clock::now();
  auto reply = channel.create_message(k_sampling_params, 30s, core::CancelToken());
  EXPECT_LT(std::chrono::steady_clock::now() - started, 1s);
  ASSERT_FALSE(reply.ok());
  EXPECT_EQ(reply.failure().kind, core::FailureKind::unavailable);
  EXPECT_NE(reply.failure().message.find("GET"), std::string::npos) << reply.failure().message;
  EXPECT_TRUE(m_standalone->sent().empty());

  // Once the stream is back, requests flow again.
  m_standalone->set_connected(true);
  auto pending = std::async(std::launch::async, [&] {
    return channel.request("test/again", nlohmann::json::object(), 5s, core::CancelToken());
  });
  auto request = m_standalone->wait_sent(1);
  ASSERT_EQ(request.value("method", ""), "test/again");
  answer(jsonrpc::make_result(request["id"], {{"ok", true}}));
  EXPECT_TRUE(pending.get().ok());
}

TEST_F(ClientChannelTest, UnansweredRequestTimesOutAndIsCancelledOnTheWire) {
  // The server's timeouts run on its clock: on a ManualClock an hour passes without real waiting,
  // so the test neither waits nor depends on how fast the machine is.
  auto clock = std::make_shared<core::ManualClock>();
  ServerOptions options;
  options.clock = clock;
  m_session->close();
  m_server->wait_idle(5s);
  m_server = std::make_unique<Server>(m_registries, options);
  m_standalone = std::make_shared<StreamRecorder>();
  m_session = m_server->create_session(m_standalone);
  initialize({{"sampling", nlohmann::json::object()}});
  ClientChannel channel = take_channel();
  const auto started = clock->now();
  auto reply =
      channel.create_message(k_sampling_params, std::chrono::hours(1), core::CancelToken());
  EXPECT_GE(clock->now() - started, std::chrono::hours(1));
  EXPECT_LT(clock->now() - started, std::chrono::hours(1) + 1s);
  ASSERT_FALSE(reply.ok());
  EXPECT_EQ(reply.failure().kind, core::FailureKind::timeout);
  auto sent = m_standalone->sent();
  ASSERT_EQ(sent.size(), 2u);
  EXPECT_EQ(sent[1]["method"], "notifications/cancelled");
  EXPECT_EQ(sent[1]["params"]["requestId"], sent[0]["id"]);
  // A late answer is ignored.
  answer(jsonrpc::make_result(sent[0]["id"], {{"late", true}}));
}

TEST_F(ClientChannelTest, CancelTokenEndsTheWaitPromptly) {
  initialize({{"sampling", nlohmann::json::object()}});
  ClientChannel channel = take_channel();
  core::CancelToken cancel;
  auto pending = std::async(std::launch::async,
                            [&] { return channel.create_message(k_sampling_params, 30s, cancel); });
  ASSERT_FALSE(m_standalone->wait_sent(1).is_null());
  const auto cancelled_at = std::chrono::steady_clock::now();
  cancel.cancel();
  auto reply = pending.get();
  EXPECT_LT(std::chrono::steady_clock::now() - cancelled_at, 1s);
  ASSERT_FALSE(reply.ok());
  EXPECT_EQ(reply.failure().kind, core::FailureKind::cancelled);
  EXPECT_EQ(m_standalone->wait_sent(2)["method"], "notifications/cancelled");

  // A token already set sends nothing.
  auto again = channel.create_message(k_sampling_params, 30s, cancel);
  ASSERT_FALSE(again.ok());
  EXPECT_EQ(again.failure().kind, core::FailureKind::cancelled);
  EXPECT_EQ(m_standalone->sent().size(), 2u);
}

TEST_F(ClientChannelTest, ErrorAnswerIsATransportError) {
  initialize({{"sampling", nlohmann::json::object()}});
  ClientChannel channel = take_channel();
  auto pending = std::async(std::launch::async, [&] {
    return channel.create_message(k_sampling_params, 5s, core::CancelToken());
  });
  auto request = m_standalone->wait_sent(1);
  ASSERT_FALSE(request.is_null());
  answer(jsonrpc::make_error(request["id"], -1, "User rejected sampling request"));
  auto reply = pending.get();
  ASSERT_FALSE(reply.ok());
  EXPECT_EQ(reply.failure().kind, core::FailureKind::transport_error);
  EXPECT_NE(reply.failure().message.find("User rejected"), std::string::npos);
}

TEST_F(ClientChannelTest, SamplingNeedsTheClientsCapability) {
  initialize(nlohmann::json::object());
  ClientChannel channel = take_channel();
  EXPECT_FALSE(channel.supports_sampling());
  auto reply = channel.create_message(k_sampling_params, 5s, core::CancelToken());
  ASSERT_FALSE(reply.ok());
  EXPECT_EQ(reply.failure().kind, core::FailureKind::unavailable);
  EXPECT_TRUE(m_standalone->sent().empty());
}

TEST(ClientChannel, WithoutASessionEveryRequestIsUnavailable) {
  ClientChannel channel;
  auto reply = channel.request("roots/list", nlohmann::json::object(), 1s, core::CancelToken());
  ASSERT_FALSE(reply.ok());
  EXPECT_EQ(reply.failure().kind, core::FailureKind::unavailable);
  ToolContext context;  // a call outside any session (the `call` subcommand)
  EXPECT_EQ(context.session_channel()
                .request("roots/list", nlohmann::json::object(), 1s, core::CancelToken())
                .failure()
                .kind,
            core::FailureKind::unavailable);
}

}  // namespace
}  // namespace autocomp::server
