#pragma once

#include <mutex>
#include <optional>
#include <string>

#include "core/cancel.hpp"

namespace autocomp::search::engine {

// Why and how a run stops. The first request wins. A budget reached by spend (calls, tokens, cost)
// stops new work but lets evaluations already paid for finish; cancellation and the wall-time
// budget also cancel work in flight through token().
class StopControl {
 public:
  // status: "budget_exhausted" or "cancelled"; reason: words for people.
  void stop(const std::string& status, const std::string& reason, bool cancel_in_flight) {
    std::lock_guard lock(m_mutex);
    if (m_status.empty()) {
      m_status = status;
      m_reason = reason;
    }
    if (cancel_in_flight) {
      m_token.cancel();
    }
    m_stopping = true;
  }
  // A caller's token: once it is cancelled, the next stopping() check stops the run as
  // "cancelled" and cancels work in flight.
  void link(const core::CancelToken& external) {
    std::lock_guard lock(m_mutex);
    m_external = external;
  }
  bool stopping() const {
    std::lock_guard lock(m_mutex);
    if (!m_stopping && m_external && m_external->cancelled()) {
      m_status = "cancelled";
      m_reason = "cancelled on request";
      m_token.cancel();
      m_stopping = true;
    }
    return m_stopping;
  }
  const core::CancelToken& token() const { return m_token; }
  std::string status() const {
    std::lock_guard lock(m_mutex);
    return m_status;
  }
  std::string reason() const {
    std::lock_guard lock(m_mutex);
    return m_reason;
  }

 private:
  mutable std::mutex m_mutex;
  mutable bool m_stopping = false;
  mutable std::string m_status;
  mutable std::string m_reason;
  core::CancelToken m_token;
  std::optional<core::CancelToken> m_external;
};

}  // namespace autocomp::search::engine
