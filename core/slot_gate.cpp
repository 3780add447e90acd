#include "core/slot_gate.hpp"

#include <algorithm>
#include <chrono>

namespace autocomp::core {

// Both counts are bounded so that their sum (and the busy counters below it) cannot overflow.
SlotGate::SlotGate(int slots, int reserved)
    : m_slots(std::clamp(slots, 1, k_max_count)),
      m_reserved(std::clamp(reserved, 0, k_max_count)) {}

bool SlotGate::can_take_locked(bool interactive) const {
  const int busy = m_busy_interactive + m_busy_background;
  if (interactive) {
    return busy < m_slots + m_reserved;
  }
  // Background work never uses the reserve and yields to waiting interactive callers.
  return m_waiting_interactive == 0 && busy < m_slots;
}

bool SlotGate::acquire(bool interactive, const CancelToken& cancel, const WaitFn& on_wait) {
  std::unique_lock lock(m_mutex);
  int& waiting = interactive ? m_waiting_interactive : m_waiting_background;
  bool told = false;
  ++waiting;
  while (!can_take_locked(interactive)) {
    if (cancel.cancelled()) {
      --waiting;
      m_changed.notify_all();
      return false;
    }
    if (!told && on_wait) {
      told = true;
      std::string holder = m_busy_background > 0
                               ? "a background search"
                               : (interactive ? "another interactive call" : "interactive calls");
      std::string message = "waiting for an evaluation slot held by " + holder;
      lock.unlock();
      on_wait(message);
      lock.lock();
      continue;
    }
    m_changed.wait_for(lock, std::chrono::milliseconds(50));
  }
  --waiting;
  ++(interactive ? m_busy_interactive : m_busy_background);
  return true;
}

void SlotGate::release(bool interactive) {
  {
    std::lock_guard lock(m_mutex);
    --(interactive ? m_busy_interactive : m_busy_background);
  }
  m_changed.notify_all();
}

int SlotGate::in_use(bool interactive) const {
  std::lock_guard lock(m_mutex);
  return interactive ? m_busy_interactive : m_busy_background;
}

int SlotGate::waiting(bool interactive) const {
  std::lock_guard lock(m_mutex);
  return interactive ? m_waiting_interactive : m_waiting_background;
}

}  // namespace autocomp::core
