#pragma once

// Monotonic time as a seam: code that measures elapsed time, sleeps, or waits for a deadline
// reads a Clock, so that tests move time by hand instead of sleeping.

#include <atomic>
#include <chrono>
#include <cstddef>
#include <memory>
#include <mutex>
#include <vector>

namespace autocomp::core {

class Clock {
 public:
  using Duration = std::chrono::steady_clock::duration;
  using TimePoint = std::chrono::steady_clock::time_point;

  virtual ~Clock() = default;
  virtual TimePoint now() const = 0;

  // Returns once now() >= `until`. The steady clock blocks the calling thread; a ManualClock
  // moves its time there at once.
  virtual void sleep_until(TimePoint until) const = 0;
  void sleep_for(Duration duration) const { sleep_until(now() + duration); }

  // Whether waiting on this clock takes real time. False for a clock that moves only when told:
  // waiters for outside events then check without blocking and sleep on the clock instead.
  virtual bool real_time() const { return true; }

  // Waits up to `duration` of this clock's time for an outside event (output on a pipe, a
  // condition variable). `check(real_timeout)` looks for the event, blocking at most
  // `real_timeout` in real time, and says whether it happened. The steady clock calls
  // check(duration) once; a clock that does not run in real time calls check(0) and, when
  // nothing happened, sleeps `duration` on itself, so that a deadline nobody meets is reached
  // without real waiting.
  template <typename Check>
  bool wait_for(Duration duration, Check&& check) const {
    if (real_time()) {
      return check(duration);
    }
    if (check(Duration::zero())) {
      return true;
    }
    sleep_for(duration);
    return false;
  }

  // Seconds from `since` to now().
  double seconds_since(TimePoint since) const {
    return std::chrono::duration<double>(now() - since).count();
  }
};

// The process's steady clock (shared; never null).
std::shared_ptr<const Clock> steady_clock();

// `clock` when set, else the steady clock: for optional clock parameters.
std::shared_ptr<const Clock> clock_or_steady(std::shared_ptr<const Clock> clock);

// A clock that stands still until advance() or a sleep moves it; thread-safe. A sleep does not
// block: it moves the time to its end at once and is recorded (sleeps()), so code that backs
// off, polls or waits for a deadline runs at full speed and its waits can be checked. Starts at
// the steady clock's current time so that its time points mix with real ones in comparisons.
class ManualClock : public Clock {
 public:
  ManualClock();
  TimePoint now() const override;
  void sleep_until(TimePoint until) const override;
  bool real_time() const override { return false; }
  void advance(Duration by);

  // The sleeps made on this clock, in order (each the time it moved the clock by, zero for a
  // sleep whose end had already passed).
  std::vector<Duration> sleeps() const;
  std::size_t sleep_count() const;

 private:
  mutable std::atomic<Duration::rep> m_ticks;
  mutable std::mutex m_mutex;
  mutable std::vector<Duration> m_sleeps;
};

}  // namespace autocomp::core
