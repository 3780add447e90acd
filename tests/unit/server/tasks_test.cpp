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

// --- Input through tasks/update (extension tasks) ---------------------------------------------

const nlohmann::json k_elicitation_capability = {{"elicitation", nlohmann::json::object()}};

nlohmann::json accept(nlohmann::json content) {
  return {{"action", "accept"}, {"content", std::move(content)}};
}

// Polls until the task has `state` (or 5 s pass); returns the extension tasks/get answer.
nlohmann::json wait_for_state(TaskStore& store, const std::string& id, const std::string& state) {
  nlohmann::json last;
  for (int i = 0; i < 500; ++i) {
    auto task = store.describe(id, TaskWire::extension, true);
    if (!task) {
      return nlohmann::json();
    }
    last = *task;
    if (last.value("status", "") == state) {
      break;
    }
    std::this_thread::sleep_for(10ms);
  }
  return last;
}

// A call that asks for each of `keys` (all in one run) and reports the answers it found.
TaskCall asking(std::vector<std::string> keys, std::shared_ptr<std::atomic<int>> runs) {
  return [keys = std::move(keys), runs](ToolContext& context) {
    ++*runs;
    std::string text;
    bool complete = true;
    for (const auto& key : keys) {
      auto answer = context.request_input(
          key, "elicitation/create", {{"message", "value of " + key}, {"requestedSchema", {}}});
      if (answer.ok()) {
        text += key + "=" + answer.value()["content"].value("v", "?") + ";";
      } else {
        complete = false;
      }
    }
    return text_result(complete ? text : "incomplete");
  };
}

ToolContext with_capabilities(nlohmann::json capabilities) {
  ToolContext context;
  context.client_capabilities = std::move(capabilities);
  return context;
}

TEST(TaskStoreInput, TaskWaitsForItsInputAndRunsAgainWithTheAnswer) {
  ThreadPool pool(1, 8);
  TaskStore store(pool);
  auto runs = std::make_shared<std::atomic<int>>(0);
  auto created =
      store.create(tool_named("ask"), with_capabilities(k_elicitation_capability),
                   asking({"confirm"}, runs), std::nullopt, "", nlohmann::json::object());
  ASSERT_FALSE(created.error);
  const auto parked = wait_for_state(store, created.id, "input_required");
  ASSERT_EQ(parked.value("status", ""), "input_required") << parked.dump();
  EXPECT_EQ(parked["inputRequests"]["confirm"]["method"], "elicitation/create");
  EXPECT_EQ(parked["inputRequests"]["confirm"]["params"]["message"], "value of confirm");
  EXPECT_FALSE(parked.contains("result")) << "the run's stand-in result is dropped";
  // The legacy shape of the same task names the state too, without the requests.
  EXPECT_EQ(store.describe(created.id, TaskWire::legacy, false)->value("status", ""),
            "input_required");

  // An answer that is not an object is refused and taken for nothing; unknown keys are ignored.
  auto bad = store.update(created.id, {{"confirm", "yes"}});
  EXPECT_EQ(bad.outcome, TaskStore::UpdateOutcome::bad_answer);
  EXPECT_EQ(bad.key, "confirm");
  EXPECT_EQ(store.update(created.id, {{"other", accept({{"v", "x"}})}}).outcome,
            TaskStore::UpdateOutcome::accepted);
  EXPECT_EQ(status_of(store, created.id), "input_required");
  EXPECT_EQ(runs->load(), 1);

  EXPECT_EQ(store.update(created.id, {{"confirm", accept({{"v", "yes"}})}}).outcome,
            TaskStore::UpdateOutcome::accepted);
  EXPECT_EQ(wait_for_end(store, created.id), "completed");
  auto done = store.describe(created.id, TaskWire::extension, true);
  EXPECT_EQ((*done)["result"]["content"][0]["text"], "confirm=yes;");
  EXPECT_FALSE(done->contains("inputRequests"));
  EXPECT_EQ(runs->load(), 2);
  // A late answer is acknowledged and changes nothing.
  EXPECT_EQ(store.update(created.id, {{"confirm", accept({{"v", "no"}})}}).outcome,
            TaskStore::UpdateOutcome::accepted);
  EXPECT_EQ(store.update("unknown-task", nlohmann::json::object()).outcome,
            TaskStore::UpdateOutcome::unknown);
  EXPECT_TRUE(pool.wait_idle(5s));
  EXPECT_EQ(runs->load(), 2);
}

TEST(TaskStoreInput, PartialAnswersKeepTheOthersPending) {
  ThreadPool pool(1, 8);
  TaskStore store(pool);
  auto runs = std::make_shared<std::atomic<int>>(0);
  auto created =
      store.create(tool_named("ask"), with_capabilities(k_elicitation_capability),
                   asking({"first", "second"}, runs), std::nullopt, "", nlohmann::json::object());
  auto parked = wait_for_state(store, created.id, "input_required");
  ASSERT_EQ(parked["inputRequests"].size(), 2u) << parked.dump();

  store.update(created.id, {{"second", accept({{"v", "2"}})}});
  auto partly = store.describe(created.id, TaskWire::extension, true);
  EXPECT_EQ(partly->value("status", ""), "input_required");
  EXPECT_TRUE((*partly)["inputRequests"].contains("first"));
  EXPECT_FALSE((*partly)["inputRequests"].contains("second"));
  EXPECT_TRUE(pool.wait_idle(5s));
  EXPECT_EQ(runs->load(), 1) << "no run before every pending request is answered";

  store.update(created.id, {{"first", accept({{"v", "1"}})}});
  EXPECT_EQ(wait_for_end(store, created.id), "completed");
  EXPECT_EQ(
      (*store.describe(created.id, TaskWire::extension, true))["result"]["content"][0]["text"],
      "first=1;second=2;");
  EXPECT_TRUE(pool.wait_idle(5s));
}

TEST(TaskStoreInput, AnswersGivenAtCreationNeedNoWait) {
  ThreadPool pool(1, 8);
  TaskStore store(pool);
  auto runs = std::make_shared<std::atomic<int>>(0);
  auto created = store.create(tool_named("ask"), with_capabilities(k_elicitation_capability),
                              asking({"name"}, runs), std::nullopt, "",
                              nlohmann::json{{"name", accept({{"v", "Alice"}})}});
  EXPECT_EQ(wait_for_end(store, created.id), "completed");
  EXPECT_EQ(
      (*store.describe(created.id, TaskWire::extension, true))["result"]["content"][0]["text"],
      "name=Alice;");
  EXPECT_EQ(runs->load(), 1);
  EXPECT_TRUE(pool.wait_idle(5s));
}

TEST(TaskStoreInput, InputTheClientCannotGiveFailsTheTask) {
  ThreadPool pool(1, 8);
  TaskStore store(pool);
  auto runs = std::make_shared<std::atomic<int>>(0);
  auto created =
      store.create(tool_named("ask"), with_capabilities(nlohmann::json::object()),
                   asking({"confirm"}, runs), std::nullopt, "", nlohmann::json::object());
  EXPECT_EQ(wait_for_end(store, created.id), "failed");
  auto failed = store.describe(created.id, TaskWire::extension, true);
  EXPECT_EQ((*failed)["error"]["code"], -32021);
  EXPECT_TRUE((*failed)["error"]["data"]["requiredCapabilities"].contains("elicitation"));
  EXPECT_TRUE(pool.wait_idle(5s));
}

TEST(TaskStoreInput, CancelWhileWaitingIsFinal) {
  ThreadPool pool(1, 8);
  TaskStore store(pool);
  auto runs = std::make_shared<std::atomic<int>>(0);
  auto created =
      store.create(tool_named("ask"), with_capabilities(k_elicitation_capability),
                   asking({"confirm"}, runs), std::nullopt, "", nlohmann::json::object());
  wait_for_state(store, created.id, "input_required");
  EXPECT_EQ(store.cancel(created.id), TaskStore::CancelOutcome::cancelled);
  store.update(created.id, {{"confirm", accept({{"v", "late"}})}});
  EXPECT_TRUE(pool.wait_idle(5s));
  EXPECT_EQ(status_of(store, created.id), "cancelled");
  EXPECT_EQ(runs->load(), 1);
}

TEST(TaskStoreInput, TaskLeftWaitingExpiresAfterItsTtl) {
  ThreadPool pool(1, 8);
  TaskOptions options;
  options.max_ttl = 50ms;
  TaskStore store(pool, options);
  auto runs = std::make_shared<std::atomic<int>>(0);
  auto created =
      store.create(tool_named("ask"), with_capabilities(k_elicitation_capability),
                   asking({"confirm"}, runs), std::nullopt, "", nlohmann::json::object());
  wait_for_state(store, created.id, "input_required");
  std::this_thread::sleep_for(80ms);
  EXPECT_FALSE(store.describe(created.id, TaskWire::extension, false));
  EXPECT_TRUE(pool.wait_idle(5s));
}

TEST(TaskStoreInput, LegacyTasksKeepTheirOwnInputSinks) {
  ThreadPool pool(1, 8);
  TaskStore store(pool);
  ToolContext context = with_capabilities(k_elicitation_capability);
  context.input_sink = [](const std::string& key, const std::string&, const nlohmann::json&) {
    return core::Result<nlohmann::json>(accept({{"v", "from-" + key}}));
  };
  auto runs = std::make_shared<std::atomic<int>>(0);
  auto created =
      store.create(tool_named("ask"), context, asking({"k"}, runs), std::nullopt, "owner");
  EXPECT_EQ(wait_for_end(store, created.id), "completed");
  EXPECT_EQ(
      (*store.describe(created.id, TaskWire::extension, true))["result"]["content"][0]["text"],
      "k=from-k;");
  EXPECT_TRUE(pool.wait_idle(5s));
}

}  // namespace
}  // namespace autocomp::server
