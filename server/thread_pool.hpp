#pragma once

#include <chrono>
#include <condition_variable>
#include <cstddef>
#include <deque>
#include <functional>
#include <mutex>
#include <thread>
#include <vector>

namespace autocomp::server {

// A fixed set of worker threads running submitted jobs in FIFO order. Jobs must not throw (an
// escaping exception is caught and dropped). The destructor finishes queued jobs and joins.
class ThreadPool {
 public:
  ThreadPool(std::size_t threads, std::size_t max_queued);
  ~ThreadPool();
  ThreadPool(const ThreadPool&) = delete;
  ThreadPool& operator=(const ThreadPool&) = delete;

  // False (job not queued) when `max_queued` jobs are already waiting or the pool is stopping.
  bool submit(std::function<void()> job);
  // Waits until no job is queued or running, up to `timeout`; true when idle.
  bool wait_idle(std::chrono::milliseconds timeout);
  std::size_t threads() const { return m_workers.size(); }

 private:
  void run();

  std::mutex m_mutex;
  std::condition_variable m_work;
  std::condition_variable m_idle;
  std::deque<std::function<void()>> m_queue;
  std::size_t m_running = 0;
  std::size_t m_max_queued;
  bool m_stopping = false;
  std::vector<std::thread> m_workers;
};

}  // namespace autocomp::server
