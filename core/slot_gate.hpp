#pragma once

#include <condition_variable>
#include <functional>
#include <mutex>
#include <string>

#include "core/cancel.hpp"

namespace autocomp::core {

// Evaluation slots shared by two kinds of callers: interactive ones (a tool call someone waits
// for) and background ones (a search's batches). Background callers hold at most `slots` at a
// time; interactive callers may also use `reserved` extra slots, so that they need not wait for a
// background evaluation to end. Whenever a slot frees, waiting interactive callers go first.
// Thread-safe.
class SlotGate {
 public:
  SlotGate(int slots, int reserved);

  // Called once, when a caller has to wait, with what it waits for, e.g. "waiting for an
  // evaluation slot held by a background search".
  using WaitFn = std::function<void(const std::string&)>;

  // Takes a slot, waiting while none is free for this kind of caller. Returns false (and takes
  // nothing) when `cancel` fires first.
  bool acquire(bool interactive, const CancelToken& cancel, const WaitFn& on_wait = {});
  void release(bool interactive);

  int in_use(bool interactive) const;
  int waiting(bool interactive) const;

 private:
  static constexpr int k_max_count = 1 << 20;
  bool can_take_locked(bool interactive) const;

  mutable std::mutex m_mutex;
  std::condition_variable m_changed;
  int m_slots;
  int m_reserved;
  int m_busy_interactive = 0;
  int m_busy_background = 0;
  int m_waiting_interactive = 0;
  int m_waiting_background = 0;
};

}  // namespace autocomp::core
