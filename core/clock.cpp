#include "core/clock.hpp"

namespace autocomp::core {

namespace {

class SteadyClock : public Clock {
 public:
  TimePoint now() const override { return std::chrono::steady_clock::now(); }
};

}  // namespace

std::shared_ptr<const Clock> steady_clock() {
  static const std::shared_ptr<const Clock> clock = std::make_shared<SteadyClock>();
  return clock;
}

ManualClock::ManualClock() : m_ticks(std::chrono::steady_clock::now().time_since_epoch().count()) {}

Clock::TimePoint ManualClock::now() const {
  return TimePoint(Duration(m_ticks.load()));
}

void ManualClock::advance(Duration by) {
  m_ticks.fetch_add(by.count());
}

}  // namespace autocomp::core
