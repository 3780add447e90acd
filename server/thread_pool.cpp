#include "server/thread_pool.hpp"

#include <spdlog/spdlog.h>

#include <exception>

namespace autocomp::server {

ThreadPool::ThreadPool(std::size_t threads, std::size_t max_queued) : m_max_queued(max_queued) {
  if (threads == 0) {
    threads = 1;
  }
  m_workers.reserve(threads);
  for (std::size_t i = 0; i < threads; ++i) {
    m_workers.emplace_back([this] { run(); });
  }
}

ThreadPool::~ThreadPool() {
  {
    std::lock_guard lock(m_mutex);
    m_stopping = true;
  }
  m_work.notify_all();
  for (auto& worker : m_workers) {
    worker.join();
  }
}

bool ThreadPool::submit(std::function<void()> job) {
  {
    std::lock_guard lock(m_mutex);
    if (m_stopping || m_queue.size() >= m_max_queued) {
      return false;
    }
    m_queue.push_back(std::move(job));
  }
  m_work.notify_one();
  return true;
}

bool ThreadPool::wait_idle(std::chrono::milliseconds timeout) {
  std::unique_lock lock(m_mutex);
  return m_idle.wait_for(lock, timeout, [this] { return m_queue.empty() && m_running == 0; });
}

void ThreadPool::run() {
  for (;;) {
    std::function<void()> job;
    {
      std::unique_lock lock(m_mutex);
      m_work.wait(lock, [this] { return m_stopping || !m_queue.empty(); });
      if (m_queue.empty()) {
        return;  // stopping and drained
      }
      job = std::move(m_queue.front());
      m_queue.pop_front();
      ++m_running;
    }
    try {
      job();
    } catch (const std::exception& error) {
      spdlog::error("worker job failed: {}", error.what());
    } catch (...) {
      spdlog::error("worker job failed with an unknown exception");
    }
    {
      std::lock_guard lock(m_mutex);
      --m_running;
      if (m_queue.empty() && m_running == 0) {
        m_idle.notify_all();
      }
    }
  }
}

}  // namespace autocomp::server
