#pragma once

#include <map>
#include <memory>
#include <string>
#include <vector>

#include "core/cancel.hpp"
#include "core/clock.hpp"
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
  std::string
      purpose;  // plan | implement | repair | summarize | reflect (for logs and cost tables)
};

struct Usage {
  long input_tokens = 0;
  long output_tokens = 0;
  double cost_usd = 0;      // estimated from the price table; 0 when the model has no price
  bool cost_known = false;  // false when the model is missing from the price table
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
  // Backoff between retries: initial delay doubling per attempt up to the maximum, with jitter.
  double backoff_initial_s = 1.0;
  double backoff_max_s = 30.0;
  // A server's Retry-After is honoured up to this many seconds.
  double retry_after_cap_s = 60.0;
  // Overrides the base URL taken from OPENAI_BASE_URL / ANTHROPIC_BASE_URL when non-empty.
  std::string base_url;
  // The clock of the backoff waits and the latency figures; null: the steady clock.
  std::shared_ptr<const core::Clock> clock;
};

// "openai:gpt-4o" -> {"openai", "gpt-4o"}; the model part may itself hold colons ("llama3:8b").
struct ModelSpec {
  std::string scheme;
  std::string model;
};
core::Result<ModelSpec> parse_model_spec(const std::string& spec);

// The provider schemes make_provider() knows, in table order.
std::vector<std::string> provider_schemes();

// "openai:MODEL" (OPENAI_BASE_URL, OPENAI_API_KEY) or "anthropic:MODEL" (ANTHROPIC_BASE_URL,
// ANTHROPIC_API_KEY). "SCHEME:MODEL@URL" names the base URL in the spec itself (it wins over
// options.base_url and the environment), e.g. "openai:qwen@http://localhost:8000/v1". Fails with
// invalid_argument for an unknown scheme, unavailable for a missing key where the endpoint needs
// one.
core::Result<std::shared_ptr<Provider>> make_provider(const std::string& spec,
                                                      const ProviderOptions& options);

}  // namespace autocomp::search::llm
