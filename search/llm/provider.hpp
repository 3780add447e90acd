#pragma once

#include <map>
#include <memory>
#include <string>
#include <vector>

#include "core/cancel.hpp"
#include "core/result.hpp"

namespace autocomp::search::llm {

struct Message {
  std::string role;  // "user" or "assistant"
  std::string content;
};

struct CompletionRequest {
  std::string system;
  std::vector<Message> messages;
  int max_tokens = 8192;
  double temperature = 0.7;
  std::string purpose;  // plan | implement | repair | summarize | reflect (for logs and cost tables)
};

struct Usage {
  long input_tokens = 0;
  long output_tokens = 0;
  double cost_usd = 0;  // estimated from the price table; 0 when the model has no price
};

struct Completion {
  std::string text;
  Usage usage;
  std::string provider;  // the spec that answered, e.g. "openai:gpt-4o"
  double latency_ms = 0;
  int attempts = 1;  // 1 + retries
};

// A chat model. complete() is thread-safe, honours its own concurrency limit (callers may call it
// from many threads; excess calls wait), retries transient errors itself, and returns failures as
// values: transport_error (network, 5xx after retries), invalid_argument (4xx other than 429),
// unavailable (no key / not configured), cancelled, timeout. Keys never appear in messages.
class Provider {
 public:
  virtual ~Provider() = default;
  virtual std::string spec() const = 0;  // "openai:MODEL", "anthropic:MODEL", "sampling", ...
  virtual int max_concurrency() const = 0;
  virtual core::Result<Completion> complete(const CompletionRequest& request,
                                            const core::CancelToken& cancel) = 0;
};

struct ProviderOptions {
  int max_concurrency = 4;
  int max_retries = 4;
  double timeout_s = 300;
  // Overrides of the built-in price table: model -> {input USD per Mtok, output USD per Mtok}.
  std::map<std::string, std::pair<double, double>> prices;
};

// "openai:MODEL" (OPENAI_BASE_URL, OPENAI_API_KEY) or "anthropic:MODEL" (ANTHROPIC_BASE_URL,
// ANTHROPIC_API_KEY). Fails with invalid_argument for an unknown scheme, unavailable for a
// missing key where the endpoint needs one.
core::Result<std::shared_ptr<Provider>> make_provider(const std::string& spec,
                                                      const ProviderOptions& options);

}  // namespace autocomp::search::llm
