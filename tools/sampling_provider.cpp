#include "tools/sampling_provider.hpp"

#include <chrono>

namespace autocomp::tools {

using nlohmann::json;

namespace {

class SamplingProvider : public search::llm::Provider {
 public:
  explicit SamplingProvider(server::ToolContext context) : m_context(std::move(context)) {}

  std::string spec() const override { return "sampling"; }
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
    const auto started = std::chrono::steady_clock::now();
    auto reply = m_context.create_message(params);
    if (!reply.ok()) {
      return reply.failure();
    }
    const json& content = reply.value().contains("content") ? reply.value().at("content") : json();
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
    completion.provider = "sampling:" + reply.value().value("model", std::string("client"));
    completion.latency_ms =
        std::chrono::duration<double, std::milli>(std::chrono::steady_clock::now() - started)
            .count();
    return completion;
  }

 private:
  server::ToolContext m_context;
};

}  // namespace

std::shared_ptr<search::llm::Provider> make_sampling_provider(const server::ToolContext& context) {
  return std::make_shared<SamplingProvider>(context);
}

}  // namespace autocomp::tools
