#include "core/clock.hpp"

#include <algorithm>
#include <thread>

namespace autocomp::core {

namespace {

class SteadyClock : public Clock {
 public:
  TimePoint now() const override { return std::chrono::steady_clock::now(); }
  void sleep_until(TimePoint until) const override { std::this_thread::sleep_until(until); }
};

}  // namespace

std::shared_ptr<const Clock> steady_clock() {
  static const std::shared_ptr<const Clock> clock = std::make_shared<SteadyClock>();
  return clock;
}

std::shared_ptr<const Clock> clock_or_steady(std::shared_ptr<const Clock> clock) {
  return clock ? std::move(clock) : steady_clock();
}

ManualClock::ManualClock() : m_ticks(std::chrono::steady_clock::now().time_since_epoch().count()) {}

Clock::TimePoint ManualClock::now() const {
  return TimePoint(Duration(m_ticks.load()));
}

void ManualClock::sleep_until(TimePoint until) const {
  const auto target = until.time_since_epoch().count();
  auto current = m_ticks.load();
  // Only forward: another thread may have moved the clock past `until` already.
  while (current < target && !m_ticks.compare_exchange_weak(current, target)) {
  }
  std::lock_guard lock(m_mutex);
  m_sleeps.push_back(Duration(std::max<Duration::rep>(0, target - current)));
}

void ManualClock::advance(Duration by) {
  m_ticks.fetch_add(by.count());
}

std::vector<Clock::Duration> ManualClock::sleeps() const {
  std::lock_guard lock(m_mutex);
  return m_sleeps;
}

std::size_t ManualClock::sleep_count() const {
  std::lock_guard lock(m_mutex);
  return m_sleeps.size();
}

}  // namespace autocomp::core
