#pragma once

#include <condition_variable>
#include <cstddef>
#include <deque>
#include <functional>
#include <mutex>
#include <thread>
#include <vector>

namespace autocomp::search::engine {

// A fixed set of worker threads running queued tasks in submission order. The destructor runs
// the tasks still queued, then joins.
class TaskPool {
 public:
  explicit TaskPool(std::size_t threads);
  ~TaskPool();
  TaskPool(const TaskPool&) = delete;
  TaskPool& operator=(const TaskPool&) = delete;

  void submit(std::function<void()> task);
  std::size_t size() const { return m_threads.size(); }

 private:
  void work();

  std::mutex m_mutex;
  std::condition_variable m_ready;
  std::deque<std::function<void()>> m_tasks;
  bool m_closing = false;
  std::vector<std::thread> m_threads;
};

// Counts tasks started through it; wait() returns when all have finished. Tasks may start more
// tasks in the same group.
class TaskGroup {
 public:
  void run(TaskPool& pool, std::function<void()> task);
  void add() {
    std::lock_guard lock(m_mutex);
    ++m_pending;
  }
  void done() {
    std::lock_guard lock(m_mutex);
    if (--m_pending == 0) {
      m_idle.notify_all();
    }
  }
  void wait() {
    std::unique_lock lock(m_mutex);
    m_idle.wait(lock, [this] { return m_pending == 0; });
  }

 private:
  std::mutex m_mutex;
  std::condition_variable m_idle;
  std::size_t m_pending = 0;
};

}  // namespace autocomp::search::engine
