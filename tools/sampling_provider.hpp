#pragma once

#include <chrono>
#include <condition_variable>
#include <memory>
#include <mutex>
#include <string>
#include <string_view>

#include "search/llm/provider.hpp"
#include "server/tool.hpp"

namespace autocomp::tools {

// The spec under which the MCP client's own model appears in stored runs (their llm_specs).
inline constexpr std::string_view k_client_model_spec = "sampling";

// The connected MCP client's own model as an LLM provider, through sampling/createMessage. Valid
// only while the tool call whose context it wraps is running (the client channel belongs to that
// call). Failures: unavailable when the client did not declare sampling or refused,
// invalid_argument for a reply without text.
std::shared_ptr<search::llm::Provider> make_sampling_provider(const server::ToolContext& context);

// What a session-bound sampling provider has done so far, for status reports.
struct SamplingStats {
  long requests = 0;  // calls of complete() that reached the channel
  long answered = 0;
  long failed = 0;
  std::string last_failure;  // the latest failure in words; empty when none
};

struct SessionSamplingOptions {
  int max_concurrency = 2;                                      // requests in flight at once
  std::chrono::milliseconds timeout = std::chrono::minutes(5);  // wait for one answer
  // After this many unanswered requests in a row (timeouts), further calls fail at once with
  // unavailable instead of waiting again (but see retry_after).
  int max_consecutive_timeouts = 3;
  // After giving up, one probe request is let through this often, so a client that comes back
  // (or an HTTP GET stream that reconnects) is used again.
  std::chrono::milliseconds retry_after = std::chrono::minutes(1);
};

// The MCP client's own model for work that outlives the tool call that started it (a background
// search): sampling/createMessage over the session's channel (server::ClientChannel), usable for
// as long as the session lives. Thread-safe; at most options.max_concurrency requests are in
// flight, further calls wait (honouring their cancel token). Failures as values: unavailable (no
// sampling capability, session ended, no open stream to the client, client stopped answering),
// transport_error (the client refused: a JSON-RPC error answer), timeout, cancelled,
// invalid_argument (a reply without text).
class SessionSamplingProvider : public search::llm::Provider {
 public:
  SessionSamplingProvider(server::ClientChannel channel, SessionSamplingOptions options);

  std::string spec() const override { return std::string(k_client_model_spec); }
  int max_concurrency() const override { return m_options.max_concurrency; }
  core::Result<search::llm::Completion> complete(const search::llm::CompletionRequest& request,
                                                 const core::CancelToken& cancel) override;

  SamplingStats stats() const;

 private:
  void record_failure(const core::Failure& failure);

  server::ClientChannel m_channel;
  SessionSamplingOptions m_options;
  mutable std::mutex m_mutex;
  std::condition_variable m_slot_free;
  int m_in_flight = 0;
  int m_consecutive_timeouts = 0;
  std::chrono::steady_clock::time_point m_last_probe{};
  SamplingStats m_stats;
};

std::shared_ptr<SessionSamplingProvider> make_session_sampling_provider(
    server::ClientChannel channel, SessionSamplingOptions options = {});

}  // namespace autocomp::tools
