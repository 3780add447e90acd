#pragma once

#include <cstddef>
#include <functional>
#include <mutex>
#include <string>
#include <vector>

#include "search/llm/provider.hpp"

namespace autocomp::search::llm {

// A test double for Provider: answers from a scripted list (in order) or from a callback, and
// records every request it was given. Thread-safe. When the script is exhausted and there is no
// callback, complete() fails with `unavailable` ("fake provider script exhausted").
// Token usage is estimated as one token per four characters so that budgets can be exercised.
class FakeProvider : public Provider {
 public:
  using Responder = std::function<core::Result<Completion>(const CompletionRequest&)>;

  explicit FakeProvider(std::string spec = "fake", int max_concurrency = 4);

  // Appends a reply; replies are consumed in order before the callback is consulted.
  void push_text(std::string text);
  void push_failure(core::Failure failure);
  // Called for every request once the scripted list is empty.
  void set_responder(Responder responder);
  // Cost per call reported in usage (default 0, cost_known true).
  void set_cost_per_call(double usd);

  std::vector<CompletionRequest> requests() const;
  std::size_t call_count() const;
  std::size_t pending() const;  // scripted replies not yet consumed

  std::string spec() const override { return m_spec; }
  int max_concurrency() const override { return m_max_concurrency; }
  core::Result<Completion> complete(const CompletionRequest& request,
                                    const core::CancelToken& cancel) override;

 private:
  std::string m_spec;
  int m_max_concurrency;
  mutable std::mutex m_mutex;
  std::vector<core::Result<Completion>> m_script;
  std::size_t m_next = 0;
  Responder m_responder;
  double m_cost_per_call = 0;
  std::vector<CompletionRequest> m_requests;
};

}  // namespace autocomp::search::llm
