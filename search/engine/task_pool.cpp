#include "search/engine/task_pool.hpp"

#include <spdlog/spdlog.h>

namespace autocomp::search::engine {

TaskPool::TaskPool(std::size_t threads) {
  if (threads == 0) {
    threads = 1;
  }
  m_threads.reserve(threads);
  for (std::size_t i = 0; i < threads; ++i) {
    m_threads.emplace_back([this] { work(); });
  }
}

TaskPool::~TaskPool() {
  {
    std::lock_guard lock(m_mutex);
    m_closing = true;
  }
  m_ready.notify_all();
  for (auto& thread : m_threads) {
    thread.join();
  }
}

void TaskPool::submit(std::function<void()> task) {
  {
    std::lock_guard lock(m_mutex);
    m_tasks.push_back(std::move(task));
  }
  m_ready.notify_one();
}

void TaskPool::work() {
  for (;;) {
    std::function<void()> task;
    {
      std::unique_lock lock(m_mutex);
      m_ready.wait(lock, [this] { return m_closing || !m_tasks.empty(); });
      if (m_tasks.empty()) {
        return;
      }
      task = std::move(m_tasks.front());
      m_tasks.pop_front();
    }
    try {
      task();
    } catch (const std::exception& error) {
      // Last resort: tasks report failures as values; a throw must not end the process.
      spdlog::error("a search task failed: {}", error.what());
    }
  }
}

void TaskGroup::run(TaskPool& pool, std::function<void()> task) {
  add();
  pool.submit([this, task = std::move(task)] {
    struct Done {
      TaskGroup* group;
      ~Done() { group->done(); }
    } finish{this};
    task();
  });
}

}  // namespace autocomp::search::engine
