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
  // The reply comes from another program: read only fields of the expected JSON types.
  auto text_of = [](const json& block) -> std::string {
    if (!block.is_object()) {
      return {};
    }
    auto type = block.find("type");
    auto text = block.find("text");
    if (type == block.end() || !type->is_string() || type->get<std::string>() != "text" ||
        text == block.end() || !text->is_string()) {
      return {};
    }
    return text->get<std::string>();
  };
  std::string text;
  if (content.is_object()) {
    text = text_of(content);
  } else if (content.is_array()) {
    for (const auto& block : content) {
      text += text_of(block);
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
    const auto now = std::chrono::steady_clock::now();
    const bool gave_up = m_options.max_consecutive_timeouts > 0 &&
                         m_consecutive_timeouts >= m_options.max_consecutive_timeouts;
    const bool probe = gave_up && now - m_last_probe >= m_options.retry_after;
    if (probe) {
      m_last_probe = now;
    }
    if (gave_up && !probe) {
      auto failure = core::make_failure(core::FailureKind::unavailable, "sampling",
                                        "the MCP client left the last " +
                                            std::to_string(m_consecutive_timeouts) +
                                            " sampling requests unanswered; asking again later");
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
      if (++m_consecutive_timeouts >= m_options.max_consecutive_timeouts) {
        m_last_probe = std::chrono::steady_clock::now();  // the next probe waits retry_after
      }
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
