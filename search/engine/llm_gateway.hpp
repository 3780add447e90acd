#pragma once

#include <atomic>
#include <memory>
#include <mutex>
#include <string>
#include <vector>

#include "core/result.hpp"
#include "search/engine/search_config.hpp"
#include "search/engine/stop_control.hpp"
#include "search/llm/provider.hpp"
#include "search/store/llm_call_log.hpp"

namespace autocomp::search::engine {

// The engine's single way to the LLM providers. It spreads calls over the ensemble by slot
// (slot % number of providers, so every model works), replays answers the run already stored,
// enforces the spend budgets, and records every answered call as soon as it returns.
// Thread-safe; concurrency is bounded by the providers themselves.
class LlmGateway {
 public:
  LlmGateway(std::vector<std::shared_ptr<llm::Provider>> providers,
             std::shared_ptr<store::LlmCallLog> log, std::string run_id, Budgets budgets,
             StopControl& stop);

  bool has_providers() const { return !m_providers.empty(); }
  // Total worker threads worth keeping busy: the sum of the providers' limits.
  int concurrency() const;

  // call_id names the call within the run ("i2/m0/p3/k1/r0/llm/implement"); with the full
  // request it forms the request hash under which the answer is stored.
  // Fails with budget_exhausted or cancelled once the run is stopping (replays still succeed).
  core::Result<llm::Completion> complete(const llm::CompletionRequest& request,
                                         const std::string& call_id, std::size_t slot);

  store::LlmTotals spend() const;  // stored calls of earlier processes of this run included
  long replayed() const { return m_replayed.load(); }

  // Covers the call id and the whole request, not the provider: a resumed run replays an answer
  // whichever model of the ensemble gave it.
  static std::string request_hash(const std::string& call_id,
                                  const llm::CompletionRequest& request);

 private:
  void check_spend_limits();

  std::vector<std::shared_ptr<llm::Provider>> m_providers;
  std::shared_ptr<store::LlmCallLog> m_log;
  std::string m_run_id;
  Budgets m_budgets;
  StopControl& m_stop;

  mutable std::mutex m_mutex;
  store::LlmTotals m_spend;
  long m_issued = 0;  // calls sent to providers by this process, answered or not
  std::atomic<long> m_replayed{0};
};

}  // namespace autocomp::search::engine
