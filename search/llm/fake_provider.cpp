#include "search/llm/fake_provider.hpp"

#include <utility>

namespace autocomp::search::llm {

namespace {

long estimate_tokens(const std::string& text) {
  return static_cast<long>(text.size() / 4 + 1);
}

long estimate_request_tokens(const CompletionRequest& request) {
  long tokens = estimate_tokens(request.system);
  for (const auto& message : request.messages) {
    tokens += estimate_tokens(message.content);
  }
  return tokens;
}

}  // namespace

FakeProvider::FakeProvider(std::string spec, int max_concurrency)
    : m_spec(std::move(spec)), m_max_concurrency(max_concurrency) {}

void FakeProvider::push_text(std::string text) {
  Completion completion;
  completion.text = std::move(text);
  std::lock_guard lock(m_mutex);
  m_script.emplace_back(std::move(completion));
}

void FakeProvider::push_failure(core::Failure failure) {
  std::lock_guard lock(m_mutex);
  m_script.emplace_back(std::move(failure));
}

void FakeProvider::set_responder(Responder responder) {
  std::lock_guard lock(m_mutex);
  m_responder = std::move(responder);
}

void FakeProvider::set_cost_per_call(double usd) {
  std::lock_guard lock(m_mutex);
  m_cost_per_call = usd;
}

std::vector<CompletionRequest> FakeProvider::requests() const {
  std::lock_guard lock(m_mutex);
  return m_requests;
}

std::size_t FakeProvider::call_count() const {
  std::lock_guard lock(m_mutex);
  return m_requests.size();
}

std::size_t FakeProvider::pending() const {
  std::lock_guard lock(m_mutex);
  return m_script.size() - m_next;
}

core::Result<Completion> FakeProvider::complete(const CompletionRequest& request,
                                                const core::CancelToken& cancel) {
  if (cancel.cancelled()) {
    return core::make_failure(core::FailureKind::cancelled, "llm", "cancelled before the call");
  }
  std::optional<core::Result<Completion>> scripted;
  Responder responder;
  double cost = 0;
  {
    std::lock_guard lock(m_mutex);
    m_requests.push_back(request);
    if (m_next < m_script.size()) {
      scripted.emplace(m_script[m_next++]);
    } else {
      responder = m_responder;
    }
    cost = m_cost_per_call;
  }
  core::Result<Completion> result =
      scripted    ? std::move(*scripted)
      : responder ? responder(request)
                  : core::Result<Completion>(core::make_failure(
                        core::FailureKind::unavailable, "llm", "fake provider script exhausted"));
  if (!result.ok()) {
    return result;
  }
  Completion completion = std::move(result).value();
  if (completion.provider.empty()) {
    completion.provider = m_spec;
  }
  if (completion.usage.input_tokens == 0 && completion.usage.output_tokens == 0) {
    completion.usage.input_tokens = estimate_request_tokens(request);
    completion.usage.output_tokens = estimate_tokens(completion.text);
  }
  if (completion.usage.cost_usd == 0) {
    completion.usage.cost_usd = cost;
  }
  completion.usage.cost_known = true;
  return completion;
}

}  // namespace autocomp::search::llm
