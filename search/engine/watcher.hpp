#pragma once

#include <chrono>
#include <condition_variable>
#include <functional>
#include <mutex>
#include <thread>

namespace autocomp::search::engine {

// Runs `check` every 20 ms on its own thread from construction to destruction (a search's
// budget watch: cancellation and the wall-time budget reach work in flight between its steps).
class Watcher {
 public:
  explicit Watcher(std::function<void()> check)
      : m_check(std::move(check)), m_thread([this] { watch(); }) {}
  ~Watcher() {
    {
      std::lock_guard lock(m_mutex);
      m_done = true;
    }
    m_wake.notify_all();
    m_thread.join();
  }

 private:
  void watch() {
    std::unique_lock lock(m_mutex);
    while (!m_done) {
      m_check();
      m_wake.wait_for(lock, std::chrono::milliseconds(20));
    }
  }

  std::function<void()> m_check;
  std::mutex m_mutex;
  std::condition_variable m_wake;
  bool m_done = false;
  std::thread m_thread;
};

}  // namespace autocomp::search::engine
