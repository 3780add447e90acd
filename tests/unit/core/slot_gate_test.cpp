#include "core/slot_gate.hpp"

#include <gtest/gtest.h>

#include <atomic>
#include <chrono>
#include <string>
#include <thread>
#include <vector>

namespace autocomp::core {
namespace {

using namespace std::chrono_literals;

// Waits (bounded) until `condition` holds; the gate's state changes on other threads.
template <typename Condition>
bool eventually(Condition condition) {
  for (int i = 0; i < 2000 && !condition(); ++i) {
    std::this_thread::sleep_for(5ms);
  }
  return condition();
}

TEST(SlotGate, InteractiveCallsUseTheReservedSlot) {
  SlotGate gate(1, 1);
  ASSERT_TRUE(gate.acquire(false, {}));
  std::vector<std::string> waits;
  // The background slot is taken; an interactive call still gets the reserve at once.
  ASSERT_TRUE(gate.acquire(true, {}, [&](const std::string& m) { waits.push_back(m); }));
  EXPECT_TRUE(waits.empty());
  EXPECT_EQ(gate.in_use(true), 1);

  // A second background caller never takes the reserve.
  gate.release(true);
  CancelToken cancel;
  std::atomic<bool> got{false};
  std::thread background([&] { got = gate.acquire(false, cancel); });
  ASSERT_TRUE(eventually([&] { return gate.waiting(false) == 1; }));
  EXPECT_FALSE(got.load());
  cancel.cancel();
  background.join();
  EXPECT_FALSE(got.load());
  EXPECT_EQ(gate.in_use(false), 1);
}

TEST(SlotGate, WaitingInteractiveCallsGoFirstAndSayWhatTheyWaitFor) {
  SlotGate gate(1, 0);
  ASSERT_TRUE(gate.acquire(false, {}));  // a search holds the only slot
  std::vector<std::string> order;
  std::mutex order_mutex;
  std::string message;
  std::thread background([&] {
    ASSERT_TRUE(gate.acquire(false, {}));
    std::lock_guard lock(order_mutex);
    order.push_back("background");
    gate.release(false);
  });
  ASSERT_TRUE(eventually([&] { return gate.waiting(false) == 1; }));
  std::thread interactive([&] {
    ASSERT_TRUE(gate.acquire(true, {}, [&](const std::string& m) { message = m; }));
    {
      std::lock_guard lock(order_mutex);
      order.push_back("interactive");
    }
    gate.release(true);
  });
  ASSERT_TRUE(eventually([&] { return gate.waiting(true) == 1; }));
  gate.release(false);
  background.join();
  interactive.join();
  ASSERT_EQ(order.size(), 2u);
  EXPECT_EQ(order[0], "interactive");
  EXPECT_EQ(message, "waiting for an evaluation slot held by a background search");
}

TEST(SlotGate, CancelWhileWaitingTakesNothing) {
  SlotGate gate(1, 0);
  ASSERT_TRUE(gate.acquire(true, {}));
  CancelToken cancel;
  std::thread canceller([&] {
    eventually([&] { return gate.waiting(true) == 1; });
    cancel.cancel();
  });
  EXPECT_FALSE(gate.acquire(true, cancel));
  canceller.join();
  EXPECT_EQ(gate.in_use(true), 1);
  EXPECT_EQ(gate.waiting(true), 0);
}

TEST(SlotGate, HugeCountsDoNotOverflow) {
  // slots + reserved once overflowed to a negative total, and every caller waited forever.
  SlotGate gate(2147483647, 2147483647);
  CancelToken cancel;
  EXPECT_TRUE(gate.acquire(true, cancel));
  EXPECT_TRUE(gate.acquire(false, cancel));
  EXPECT_EQ(gate.in_use(true), 1);
  EXPECT_EQ(gate.in_use(false), 1);
}

}  // namespace
}  // namespace autocomp::core
