#pragma once

// Monotonic time as a seam: code that measures elapsed time or waits for a deadline reads a Clock,
// so that tests move time by hand instead of sleeping.

#include <atomic>
#include <chrono>
#include <memory>

namespace autocomp::core {

class Clock {
 public:
  using Duration = std::chrono::steady_clock::duration;
  using TimePoint = std::chrono::steady_clock::time_point;

  virtual ~Clock() = default;
  virtual TimePoint now() const = 0;

  // Seconds from `since` to now().
  double seconds_since(TimePoint since) const {
    return std::chrono::duration<double>(now() - since).count();
  }
};

// The process's steady clock (shared; never null).
std::shared_ptr<const Clock> steady_clock();

// A clock that stands still until advance() moves it; thread-safe. Starts at the steady clock's
// current time so that its time points mix with real ones in comparisons.
class ManualClock : public Clock {
 public:
  ManualClock();
  TimePoint now() const override;
  void advance(Duration by);

 private:
  std::atomic<Duration::rep> m_ticks;
};

}  // namespace autocomp::core
