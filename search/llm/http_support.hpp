#pragma once

#include <chrono>
#include <condition_variable>
#include <cstdint>
#include <mutex>
#include <optional>
#include <string>
#include <string_view>

#include "core/cancel.hpp"
#include "core/clock.hpp"
#include "core/result.hpp"

namespace autocomp::search::llm {

// A provider base URL split for cpp-httplib: "https://api.openai.com/v1" ->
// {https, api.openai.com, 443, "/v1"}. The prefix has no trailing slash.
struct Endpoint {
  std::string scheme;  // "http" or "https"
  std::string host;
  int port = 0;
  std::string path_prefix;

  std::string origin() const;  // "scheme://host:port"
  bool loopback() const;       // localhost, 127.0.0.0/8 or ::1
};
core::Result<Endpoint> parse_endpoint(std::string_view url);

// Seconds to wait from a Retry-After header value: delta-seconds ("7") or an HTTP date
// ("Wed, 21 Oct 2015 07:28:00 GMT", compared with `now`). nullopt when unparseable; a date in the
// past gives 0.
std::optional<double> parse_retry_after(std::string_view value,
                                        std::chrono::system_clock::time_point now);

// Exponential backoff with jitter: the n-th retry (0-based) waits a uniformly random time in
// [d/2, d] where d = min(initial * 2^n, max). `random01` is a draw in [0, 1).
double backoff_seconds(int retry, double initial_s, double max_s, double random01);

// Whether an HTTP status is worth retrying: 408, 409, 425, 429 and every 5xx.
bool retryable_status(int status);

// Sleeps for `seconds` on `clock`, waking every few milliseconds to check `cancel` (a clock that
// does not run in real time takes the whole sleep at once). Returns false when cancelled before
// the time was up.
bool sleep_unless_cancelled(double seconds, const core::CancelToken& cancel,
                            const core::Clock& clock = *core::steady_clock());

// A counting semaphore whose acquire() gives up when `cancel` fires. Used as each provider's
// concurrency limit.
class CancellableSemaphore {
 public:
  explicit CancellableSemaphore(int count) : m_count(count) {}
  bool acquire(const core::CancelToken& cancel);  // false: cancelled while waiting
  void release();

 private:
  std::mutex m_mutex;
  std::condition_variable m_available;
  int m_count;
};

// Replaces every occurrence of `secret` (when non-empty) in `text` with "[redacted]".
std::string redact(std::string text, const std::string& secret);

}  // namespace autocomp::search::llm
