#pragma once

#include <atomic>
#include <chrono>
#include <memory>

namespace autocomp::core {

// A cancellation flag shared between whoever may cancel (a notifications/cancelled, cancel_search,
// a budget) and the work that polls it. Copies share the same flag; a default-constructed token
// is never cancelled unless cancel() is called on it or a copy.
class CancelToken {
 public:
  CancelToken() : m_flag(std::make_shared<std::atomic<bool>>(false)) {}

  void cancel() const { m_flag->store(true, std::memory_order_release); }
  bool cancelled() const { return m_flag->load(std::memory_order_acquire); }

 private:
  std::shared_ptr<std::atomic<bool>> m_flag;
};

}  // namespace autocomp::core
