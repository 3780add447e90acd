#include "server/tasks.hpp"

#include <gtest/gtest.h>

#include <atomic>
#include <condition_variable>
#include <thread>

namespace autocomp::server {
namespace {

using namespace std::chrono_literals;

// A job source with jobs whose end the test decides; start() can be held until released.
class ManualJobs : public JobSource {
 public:
  Started start(ToolContext& context, const TaskCall& call) override {
    std::unique_lock lock(m_mutex);
    m_changed.wait(lock, [&] { return m_release_start; });
    if (m_immediate) {
      return {"", call(context)};
    }
    return {"job-" + std::to_string(++m_started), nullptr};
  }
  JobStatus status(const std::string& job) override {
    std::lock_guard lock(m_mutex);
    JobStatus status;
    status.message = "job " + job;
    if (m_done) {
      status.state = TaskState::completed;
      status.result = {{"content", nlohmann::json::array({{{"type", "text"}, {"text", job}}})}};
    }
    return status;
  }
  void cancel(const std::string& job) override {
    std::lock_guard lock(m_mutex);
    m_cancelled.push_back(job);
  }
  std::chrono::milliseconds poll_interval() const override { return 7s; }

  void release_start() {
    std::lock_guard lock(m_mutex);
    m_release_start = true;
    m_changed.notify_all();
  }
  void finish() {
    std::lock_guard lock(m_mutex);
    m_done = true;
  }
  std::vector<std::string> cancelled() {
    std::lock_guard lock(m_mutex);
    return m_cancelled;
  }

  bool m_immediate = false;

 private:
  std::mutex m_mutex;
  std::condition_variable m_changed;
  bool m_release_start = false;
  bool m_done = false;
  int m_started = 0;
  std::vector<std::string> m_cancelled;
};

ToolDef tool_named(std::string name) {
  ToolDef tool;
  tool.name = std::move(name);
  tool.description = "test";
  tool.task_support = TaskSupport::optional;
  tool.handler = [](const nlohmann::json&, ToolContext&) { return ToolResult{}; };
  return tool;
}

nlohmann::json text_result(const std::string& text) {
  return {{"content", nlohmann::json::array({{{"type", "text"}, {"text", text}}})}};
}

std::string status_of(TaskStore& store, const std::string& id) {
  auto task = store.describe(id, TaskWire::extension, true);
  return task ? task->value("status", "") : "unknown";
}

std::string wait_for_end(TaskStore& store, const std::string& id) {
  auto status = store.wait_terminal(id, nullptr);
  return status ? std::string(to_string(status->state)) : "unknown";
}

TEST(TaskStore, PlainCallRunsOnThePoolAndItsResultIsInline) {
  ThreadPool pool(2, 8);
  TaskStore store(pool);
  auto created = store.create(
      tool_named("echo"), ToolContext{}, [](ToolContext&) { return text_result("done"); },
      std::nullopt, "owner");
  ASSERT_FALSE(created.error);
  EXPECT_EQ(wait_for_end(store, created.id), "completed");
  auto detailed = store.describe(created.id, TaskWire::extension, true);
  ASSERT_TRUE(detailed);
  EXPECT_EQ((*detailed)["result"]["content"][0]["text"], "done");
  EXPECT_EQ((*detailed)["resultType"], "complete");
  // The same task in the 2025-11-25 shape: no inline result, v1 field names.
  auto legacy = store.describe(created.id, TaskWire::legacy, false);
  EXPECT_FALSE(legacy->contains("result"));
  EXPECT_TRUE(legacy->contains("ttl"));
  EXPECT_FALSE(legacy->contains("ttlMs"));
  EXPECT_TRUE(pool.wait_idle(5s));
}

TEST(TaskStore, ToolErrorIsCompletedInTheExtensionAndFailedInTheLegacyWire) {
  ThreadPool pool(1, 8);
  TaskStore store(pool);
  auto created = store.create(
      tool_named("bad"), ToolContext{},
      [](ToolContext&) {
        auto result = text_result("no");
        result["isError"] = true;
        return result;
      },
      std::nullopt, "owner");
  EXPECT_EQ(wait_for_end(store, created.id), "completed");
  EXPECT_EQ(store.describe(created.id, TaskWire::legacy, false)->value("status", ""), "failed");
  EXPECT_TRUE(pool.wait_idle(5s));
}

TEST(TaskStore, ThrowingWorkFailsWithAnInlineError) {
  ThreadPool pool(1, 8);
  TaskStore store(pool);
  auto created = store.create(
      tool_named("boom"), ToolContext{},
      [](ToolContext&) -> nlohmann::json { throw std::runtime_error("kaput"); }, std::nullopt,
      "owner");
  EXPECT_EQ(wait_for_end(store, created.id), "failed");
  auto detailed = store.describe(created.id, TaskWire::extension, true);
  EXPECT_EQ((*detailed)["error"]["code"], -32603);
  EXPECT_NE((*detailed)["error"]["message"].get<std::string>().find("kaput"), std::string::npos);
  EXPECT_FALSE(detailed->contains("result"));
  EXPECT_TRUE(pool.wait_idle(5s));
}

TEST(TaskStore, CancelStopsTheCallAndIsFinal) {
  ThreadPool pool(1, 8);
  TaskStore store(pool);
  std::atomic<bool> saw_cancel{false};
  ToolContext context;
  auto created = store.create(
      tool_named("slow"), context,
      [&](ToolContext& call_context) {
        while (!call_context.cancel.cancelled()) {
          std::this_thread::sleep_for(1ms);
        }
        saw_cancel = true;
        return text_result("late");
      },
      std::nullopt, "owner");
  EXPECT_EQ(status_of(store, created.id), "working");
  EXPECT_EQ(store.cancel(created.id), TaskStore::CancelOutcome::cancelled);
  EXPECT_EQ(store.cancel(created.id), TaskStore::CancelOutcome::already_terminal);
  EXPECT_TRUE(pool.wait_idle(5s));
  EXPECT_TRUE(saw_cancel);
  EXPECT_EQ(status_of(store, created.id), "cancelled");  // the late result is dropped
  EXPECT_EQ(store.cancel("nope"), TaskStore::CancelOutcome::unknown);
}

TEST(TaskStore, JobSourceTaskFollowsItsJob) {
  ThreadPool pool(1, 8);
  TaskStore store(pool);
  auto jobs = std::make_shared<ManualJobs>();
  ToolDef tool = tool_named("search");
  tool.jobs = jobs;
  auto created = store.create(
      tool, ToolContext{}, [](ToolContext&) { return text_result("call"); }, std::nullopt, "o");
  EXPECT_EQ(store.describe(created.id, TaskWire::extension, false)->value("pollIntervalMs", 0),
            7000);
  jobs->release_start();
  EXPECT_TRUE(pool.wait_idle(5s));
  auto working = store.describe(created.id, TaskWire::extension, true);
  EXPECT_EQ(working->value("status", ""), "working");
  EXPECT_EQ(working->value("statusMessage", ""), "job job-1");
  jobs->finish();
  auto done = store.describe(created.id, TaskWire::extension, true);
  EXPECT_EQ(done->value("status", ""), "completed");
  EXPECT_EQ((*done)["result"]["content"][0]["text"], "job-1");
}

TEST(TaskStore, CancelBeforeTheJobStartedStopsTheJobOnceItHasAnId) {
  ThreadPool pool(1, 8);
  TaskStore store(pool);
  auto jobs = std::make_shared<ManualJobs>();
  ToolDef tool = tool_named("search");
  tool.jobs = jobs;
  auto created = store.create(
      tool, ToolContext{}, [](ToolContext&) { return nlohmann::json(); }, 1000, "o");
  EXPECT_EQ(store.cancel(created.id), TaskStore::CancelOutcome::cancelled);
  jobs->release_start();
  EXPECT_TRUE(pool.wait_idle(5s));
  EXPECT_EQ(jobs->cancelled(), std::vector<std::string>{"job-1"});
  EXPECT_EQ(status_of(store, created.id), "cancelled");
}

TEST(TaskStore, JobSourceCanEndTheCallAtOnce) {
  ThreadPool pool(1, 8);
  TaskStore store(pool);
  auto jobs = std::make_shared<ManualJobs>();
  jobs->m_immediate = true;
  jobs->release_start();
  ToolDef tool = tool_named("search");
  tool.jobs = jobs;
  auto created = store.create(
      tool, ToolContext{}, [](ToolContext&) { return text_result("bad arguments"); }, std::nullopt,
      "o");
  EXPECT_EQ(wait_for_end(store, created.id), "completed");
  EXPECT_EQ(
      (*store.describe(created.id, TaskWire::extension, true))["result"]["content"][0]["text"],
      "bad arguments");
}

TEST(TaskStore, TtlIsClampedAndEndedTasksExpire) {
  ThreadPool pool(1, 8);
  TaskOptions options;
  options.max_ttl = 50ms;
  TaskStore store(pool, options);
  auto created = store.create(
      tool_named("echo"), ToolContext{}, [](ToolContext&) { return text_result("x"); }, 3600 * 1000,
      "o");
  EXPECT_EQ(store.describe(created.id, TaskWire::legacy, false)->value("ttl", 0), 50);
  EXPECT_EQ(wait_for_end(store, created.id), "completed");
  std::this_thread::sleep_for(80ms);
  EXPECT_FALSE(store.describe(created.id, TaskWire::legacy, false));
  EXPECT_EQ(store.size(), 0u);
  EXPECT_TRUE(pool.wait_idle(5s));
}

TEST(TaskStore, FullStoreDropsTheOldestEndedTaskAndRefusesWhenAllWork) {
  ThreadPool pool(2, 8);
  TaskOptions options;
  options.max_tasks = 2;
  TaskStore store(pool, options);
  auto quick = [](ToolContext&) { return text_result("x"); };
  auto first = store.create(tool_named("a"), ToolContext{}, quick, std::nullopt, "o");
  wait_for_end(store, first.id);
  auto second = store.create(tool_named("b"), ToolContext{}, quick, std::nullopt, "o");
  wait_for_end(store, second.id);
  auto third = store.create(tool_named("c"), ToolContext{}, quick, std::nullopt, "o");
  ASSERT_FALSE(third.error);
  EXPECT_FALSE(store.describe(first.id, TaskWire::legacy, false));  // the oldest ended one went
  EXPECT_TRUE(store.describe(second.id, TaskWire::legacy, false));
  wait_for_end(store, third.id);

  auto block = [](ToolContext& context) {
    while (!context.cancel.cancelled()) {
      std::this_thread::sleep_for(1ms);
    }
    return text_result("x");
  };
  auto w1 = store.create(tool_named("w1"), ToolContext{}, block, std::nullopt, "o");
  auto w2 = store.create(tool_named("w2"), ToolContext{}, block, std::nullopt, "o");
  auto refused = store.create(tool_named("w3"), ToolContext{}, block, std::nullopt, "o");
  EXPECT_TRUE(refused.error);
  EXPECT_EQ(store.list("o"), (std::vector<std::string>{w1.id, w2.id}));
  EXPECT_TRUE(store.list("someone-else").empty());
  store.stop_all();
  EXPECT_TRUE(pool.wait_idle(5s));
}

TEST(TaskStore, IdsAreLongAndDistinct) {
  ThreadPool pool(1, 8);
  TaskStore store(pool);
  auto quick = [](ToolContext&) { return text_result("x"); };
  auto a = store.create(tool_named("a"), ToolContext{}, quick, std::nullopt, "o");
  auto b = store.create(tool_named("b"), ToolContext{}, quick, std::nullopt, "o");
  EXPECT_EQ(a.id.size(), 32u);
  EXPECT_NE(a.id, b.id);
  EXPECT_TRUE(pool.wait_idle(5s));
}

}  // namespace
}  // namespace autocomp::server
