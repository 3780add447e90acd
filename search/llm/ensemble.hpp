#pragma once

#include <atomic>
#include <cstddef>
#include <memory>
#include <string>
#include <vector>

#include "search/llm/provider.hpp"

namespace autocomp::search::llm {

// Several providers behind one Provider (repeatable --llm). Calls are spread round-robin so every
// model gets work whatever the number of plans or implementations. When the chosen member fails
// with transport_error, unavailable or timeout (after its own retries), the call moves on to the
// next member, each member being tried at most once per call; other failures (invalid_argument,
// cancelled, ...) are returned as they are. The answering member is named in Completion.provider.
class Ensemble : public Provider {
 public:
  // `members` must be non-empty (programmer error otherwise).
  explicit Ensemble(std::vector<std::shared_ptr<Provider>> members);

  std::string spec() const override;     // member specs joined by ","
  int max_concurrency() const override;  // sum of the members' limits
  core::Result<Completion> complete(const CompletionRequest& request,
                                    const core::CancelToken& cancel) override;

  std::size_t size() const { return m_members.size(); }
  const std::shared_ptr<Provider>& member(std::size_t index) const { return m_members.at(index); }

 private:
  std::vector<std::shared_ptr<Provider>> m_members;
  std::atomic<std::size_t> m_next{0};
};

// Builds each spec with make_provider() and wraps them in an Ensemble (a single spec still gives
// an Ensemble of one). The first failing spec's failure is returned.
core::Result<std::shared_ptr<Ensemble>> make_ensemble(const std::vector<std::string>& specs,
                                                      const ProviderOptions& options);

}  // namespace autocomp::search::llm
