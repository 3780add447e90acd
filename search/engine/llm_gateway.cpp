#include "search/engine/llm_gateway.hpp"

#include <spdlog/spdlog.h>

#include <sstream>

#include "core/hash.hpp"

namespace autocomp::search::engine {

LlmGateway::LlmGateway(std::vector<std::shared_ptr<llm::Provider>> providers,
                       std::shared_ptr<store::LlmCallLog> log, std::string run_id, Budgets budgets,
                       StopControl& stop)
    : m_providers(std::move(providers)),
      m_log(std::move(log)),
      m_run_id(std::move(run_id)),
      m_budgets(budgets),
      m_stop(stop) {
  if (m_log) {
    if (auto totals = m_log->llm_totals(m_run_id)) {
      m_spend = totals.value();
    } else {
      spdlog::warn("could not total the run's stored LLM calls: {}", totals.failure().describe());
    }
  }
}

int LlmGateway::concurrency() const {
  int total = 0;
  for (const auto& provider : m_providers) {
    total += std::max(1, provider->max_concurrency());
  }
  return std::max(1, total);
}

std::string LlmGateway::request_hash(const std::string& call_id,
                                     const llm::CompletionRequest& request) {
  // Fields are length-prefixed so that no two different requests serialize alike.
  std::ostringstream text;
  auto field = [&text](const std::string& value) { text << value.size() << ':' << value << ';'; };
  field("autocomp-llm-request/1");
  field(call_id);
  field(request.purpose);
  field(request.system);
  for (const auto& message : request.messages) {
    field(message.role);
    field(message.content);
  }
  field(std::to_string(request.max_tokens));
  field(std::to_string(request.temperature));
  return core::sha256_hex(text.str());
}

store::LlmTotals LlmGateway::spend() const {
  std::lock_guard lock(m_mutex);
  return m_spend;
}

void LlmGateway::check_spend_limits() {
  // Called with m_mutex held.
  if (m_budgets.max_tokens && m_spend.tokens() >= *m_budgets.max_tokens) {
    m_stop.stop("budget_exhausted",
                "token budget reached (" + std::to_string(*m_budgets.max_tokens) + " tokens)",
                false);
  }
  if (m_budgets.max_cost_usd && m_spend.cost_usd >= *m_budgets.max_cost_usd) {
    std::ostringstream reason;
    reason << "cost budget reached ($" << *m_budgets.max_cost_usd << ")";
    m_stop.stop("budget_exhausted", reason.str(), false);
  }
}

core::Result<llm::Completion> LlmGateway::complete(const llm::CompletionRequest& request,
                                                   const std::string& call_id, std::size_t slot) {
  if (m_providers.empty()) {
    return core::make_failure(core::FailureKind::unavailable, "llm", "no LLM provider configured");
  }
  auto& provider = m_providers[slot % m_providers.size()];
  const std::string spec = provider->spec();
  const std::string hash = request_hash(call_id, request);

  if (m_log) {
    auto found = m_log->find_llm_response(m_run_id, hash);
    if (!found) {
      spdlog::warn("LLM replay lookup failed: {}", found.failure().describe());
    } else if (const auto& stored = found.value()) {
      ++m_replayed;
      llm::Completion completion;
      completion.text = stored->response;
      completion.usage = stored->usage;
      completion.provider = stored->provider;
      completion.latency_ms = 0;
      return completion;
    }
  }

  {
    std::lock_guard lock(m_mutex);
    if (m_stop.stopping()) {
      return core::make_failure(m_stop.token().cancelled() ? core::FailureKind::cancelled
                                                           : core::FailureKind::budget_exhausted,
                                "llm", "the run is stopping: " + m_stop.reason());
    }
    check_spend_limits();
    if (m_budgets.max_llm_calls && m_spend.calls + m_issued >= *m_budgets.max_llm_calls) {
      m_stop.stop(
          "budget_exhausted",
          "LLM call budget reached (" + std::to_string(*m_budgets.max_llm_calls) + " calls)",
          false);
    }
    if (m_stop.stopping()) {
      return core::make_failure(core::FailureKind::budget_exhausted, "llm", m_stop.reason());
    }
    ++m_issued;
  }

  // Providers parse replies from other programs; whatever they throw is a failed call, never a
  // dead search thread.
  core::Result<llm::Completion> result = core::make_failure(core::FailureKind::internal, "llm", "");
  try {
    result = provider->complete(request, m_stop.token());
  } catch (const std::exception& error) {
    result = core::make_failure(core::FailureKind::internal, "llm",
                                provider->spec() + " failed: " + error.what());
  }

  std::lock_guard lock(m_mutex);
  --m_issued;
  if (!result) {
    return result;
  }
  m_spend.calls += 1;
  m_spend.input_tokens += result->usage.input_tokens;
  m_spend.output_tokens += result->usage.output_tokens;
  m_spend.cost_usd += result->usage.cost_usd;
  check_spend_limits();
  if (m_log) {
    store::LlmCall record;
    record.run_id = m_run_id;
    record.request_hash = hash;
    record.purpose = request.purpose;
    record.provider = result->provider.empty() ? spec : result->provider;
    record.origin = call_id;
    record.response = result->text;
    record.usage = result->usage;
    record.latency_ms = result->latency_ms;
    if (auto id = m_log->put_llm_call(record); !id) {
      spdlog::warn("could not store an LLM call: {}", id.failure().describe());
    }
  }
  return result;
}

}  // namespace autocomp::search::engine
