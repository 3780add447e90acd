#include "tools/sampling_provider.hpp"

#include <algorithm>
#include <utility>

namespace autocomp::tools {

using nlohmann::json;

namespace {

json sampling_params(const search::llm::CompletionRequest& request) {
  json messages = json::array();
  for (const auto& message : request.messages) {
    messages.push_back(
        {{"role", message.role}, {"content", {{"type", "text"}, {"text", message.content}}}});
  }
  json params = {{"messages", std::move(messages)},
                 {"maxTokens", request.max_tokens},
                 {"temperature", request.temperature}};
  if (!request.system.empty()) {
    params["systemPrompt"] = request.system;
  }
  return params;
}

core::Result<search::llm::Completion> completion_from_reply(
    const json& reply, std::chrono::steady_clock::time_point started) {
  const json& content =
      reply.is_object() && reply.contains("content") ? reply.at("content") : json();
  std::string text;
  if (content.is_object() && content.value("type", "") == "text") {
    text = content.value("text", "");
  } else if (content.is_array()) {
    for (const auto& block : content) {
      if (block.is_object() && block.value("type", "") == "text") {
        text += block.value("text", "");
      }
    }
  }
  if (text.empty()) {
    return core::make_failure(core::FailureKind::invalid_argument, "sampling",
                              "the client's sampling reply held no text");
  }
  search::llm::Completion completion;
  completion.text = std::move(text);
  std::string model = "client";
  if (reply.contains("model") && reply.at("model").is_string()) {
    model = reply.at("model").get<std::string>();
  }
  completion.provider = std::string(k_client_model_spec) + ":" + model;
  completion.latency_ms =
      std::chrono::duration<double, std::milli>(std::chrono::steady_clock::now() - started).count();
  return completion;
}

class CallSamplingProvider : public search::llm::Provider {
 public:
  explicit CallSamplingProvider(server::ToolContext context) : m_context(std::move(context)) {}

  std::string spec() const override { return std::string(k_client_model_spec); }
  int max_concurrency() const override { return 1; }

  core::Result<search::llm::Completion> complete(const search::llm::CompletionRequest& request,
                                                 const core::CancelToken& cancel) override {
    if (!m_context.client_supports_sampling) {
      return core::make_failure(core::FailureKind::unavailable, "sampling",
                                "the client did not declare the sampling capability");
    }
    if (cancel.cancelled()) {
      return core::make_failure(core::FailureKind::cancelled, "sampling", "cancelled");
    }
    const auto started = std::chrono::steady_clock::now();
    auto reply = m_context.create_message(sampling_params(request));
    if (!reply.ok()) {
      return reply.failure();
    }
    return completion_from_reply(reply.value(), started);
  }

 private:
  server::ToolContext m_context;
};

}  // namespace

std::shared_ptr<search::llm::Provider> make_sampling_provider(const server::ToolContext& context) {
  return std::make_shared<CallSamplingProvider>(context);
}

SessionSamplingProvider::SessionSamplingProvider(server::ClientChannel channel,
                                                 SessionSamplingOptions options)
    : m_channel(std::move(channel)), m_options(options) {
  m_options.max_concurrency = std::max(1, m_options.max_concurrency);
}

SamplingStats SessionSamplingProvider::stats() const {
  std::lock_guard lock(m_mutex);
  return m_stats;
}

void SessionSamplingProvider::record_failure(const core::Failure& failure) {
  std::lock_guard lock(m_mutex);
  ++m_stats.failed;
  m_stats.last_failure = failure.describe();
}

core::Result<search::llm::Completion> SessionSamplingProvider::complete(
    const search::llm::CompletionRequest& request, const core::CancelToken& cancel) {
  if (!m_channel.supports_sampling()) {
    return core::make_failure(core::FailureKind::unavailable, "sampling",
                              "the MCP client did not declare the sampling capability");
  }
  {
    std::unique_lock lock(m_mutex);
    while (m_in_flight >= m_options.max_concurrency && !cancel.cancelled()) {
      // Short slices so that a cancelled caller leaves promptly.
      m_slot_free.wait_for(lock, std::chrono::milliseconds(100));
    }
    if (cancel.cancelled()) {
      return core::make_failure(core::FailureKind::cancelled, "sampling", "cancelled");
    }
    if (m_options.max_consecutive_timeouts > 0 &&
        m_consecutive_timeouts >= m_options.max_consecutive_timeouts) {
      auto failure = core::make_failure(core::FailureKind::unavailable, "sampling",
                                        "the MCP client left the last " +
                                            std::to_string(m_consecutive_timeouts) +
                                            " sampling requests unanswered, so no more are sent");
      ++m_stats.failed;
      m_stats.last_failure = failure.describe();
      return failure;
    }
    ++m_in_flight;
    ++m_stats.requests;
  }
  const auto started = std::chrono::steady_clock::now();
  auto reply = m_channel.create_message(sampling_params(request), m_options.timeout, cancel);
  {
    std::lock_guard lock(m_mutex);
    --m_in_flight;
    if (reply.ok()) {
      m_consecutive_timeouts = 0;
    } else if (reply.failure().kind == core::FailureKind::timeout) {
      ++m_consecutive_timeouts;
    }
  }
  m_slot_free.notify_one();
  if (!reply.ok()) {
    if (reply.failure().kind != core::FailureKind::cancelled) {
      record_failure(reply.failure());
    }
    return reply.failure();
  }
  auto completion = completion_from_reply(reply.value(), started);
  if (!completion.ok()) {
    record_failure(completion.failure());
    return completion;
  }
  {
    std::lock_guard lock(m_mutex);
    ++m_stats.answered;
  }
  return completion;
}

std::shared_ptr<SessionSamplingProvider> make_session_sampling_provider(
    server::ClientChannel channel, SessionSamplingOptions options) {
  return std::make_shared<SessionSamplingProvider>(std::move(channel), options);
}

}  // namespace autocomp::tools
