#include "search/llm/ensemble.hpp"

#include <stdexcept>
#include <utility>

namespace autocomp::search::llm {

Ensemble::Ensemble(std::vector<std::shared_ptr<Provider>> members) : m_members(std::move(members)) {
  if (m_members.empty()) {
    throw std::invalid_argument("Ensemble needs at least one provider");
  }
  for (const auto& member : m_members) {
    if (!member) {
      throw std::invalid_argument("Ensemble member is null");
    }
  }
}

std::string Ensemble::spec() const {
  std::string joined;
  for (const auto& member : m_members) {
    if (!joined.empty()) {
      joined += ',';
    }
    joined += member->spec();
  }
  return joined;
}

int Ensemble::max_concurrency() const {
  int total = 0;
  for (const auto& member : m_members) {
    total += member->max_concurrency();
  }
  return total;
}

core::Result<Completion> Ensemble::complete(const CompletionRequest& request,
                                            const core::CancelToken& cancel) {
  const std::size_t start = m_next.fetch_add(1, std::memory_order_relaxed) % m_members.size();
  std::optional<core::Failure> first_failure;
  for (std::size_t offset = 0; offset < m_members.size(); ++offset) {
    if (cancel.cancelled()) {
      return core::make_failure(core::FailureKind::cancelled, "llm", "cancelled");
    }
    auto& member = m_members[(start + offset) % m_members.size()];
    auto result = member->complete(request, cancel);
    if (result.ok()) {
      return result;
    }
    const auto kind = result.failure().kind;
    const bool try_next = kind == core::FailureKind::transport_error ||
                          kind == core::FailureKind::unavailable ||
                          kind == core::FailureKind::timeout;
    if (!first_failure) {
      first_failure = result.failure();
    }
    if (!try_next) {
      return result;
    }
  }
  auto failure = *first_failure;
  if (m_members.size() > 1) {
    failure.message += " (every provider of the ensemble failed)";
  }
  return failure;
}

core::Result<std::shared_ptr<Ensemble>> make_ensemble(const std::vector<std::string>& specs,
                                                      const ProviderOptions& options) {
  if (specs.empty()) {
    return core::make_failure(
        core::FailureKind::unavailable, "llm",
        "no LLM configured: pass --llm openai:MODEL or --llm anthropic:MODEL");
  }
  std::vector<std::shared_ptr<Provider>> members;
  for (const auto& spec : specs) {
    auto provider = make_provider(spec, options);
    if (!provider.ok()) {
      return provider.failure();
    }
    members.push_back(std::move(provider).value());
  }
  return std::make_shared<Ensemble>(std::move(members));
}

}  // namespace autocomp::search::llm
