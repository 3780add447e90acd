#pragma once

// Protocol tasks: a tools/call that returns at once with a task id, and is followed with
// tasks/get, tasks/cancel and (2025-11-25) tasks/result and tasks/list, or (the 2026-07-28
// io.modelcontextprotocol/tasks extension, SEP-2663) tasks/get with the result inline and
// tasks/update. Two wires, one store:
//   legacy    2025-11-25 task augmentation: the client puts `task: {ttl?}` in tools/call params;
//             CreateTaskResult {task: {...}}; `ttl`/`pollInterval`; tool errors end `failed`.
//   extension SEP-2663: the client declares the extension (session capabilities or the
//             request's _meta); the server decides, a flat CreateTaskResult with
//             resultType "task"; `ttlMs`/`pollIntervalMs`; tool errors end `completed` with
//             result.isError, `failed` is for protocol errors.
// A task's work is either the call itself (run on the server's worker pool) or, for a tool with
// a JobSource, the tool's own job (a search run): the task then only points at the job, so the
// job tools and the task methods are two views of the same work.
// Input (extension wire): a task's call asks the client for input with request_input; while any
// input is unanswered the call's result is dropped and the task is `input_required`, its
// tasks/get naming the requests (inputRequests, by key). tasks/update delivers answers; once
// every pending request is answered the call runs again and finds its answers by key (the same
// re-run contract as a 2026-07-28 call retried with inputResponses). On the legacy wire a call's
// input requests go to the client as server→client requests instead.

#include <chrono>
#include <condition_variable>
#include <cstddef>
#include <functional>
#include <map>
#include <memory>
#include <mutex>
#include <nlohmann/json.hpp>
#include <optional>
#include <string>
#include <string_view>
#include <vector>

#include "core/cancel.hpp"
#include "server/thread_pool.hpp"
#include "server/tool.hpp"

namespace autocomp::server {

inline constexpr std::string_view k_tasks_extension = "io.modelcontextprotocol/tasks";
// JSON-RPC code of SEP-2575 "missing required client capability".
inline constexpr int k_missing_client_capability = -32021;

enum class TaskState { working, input_required, completed, failed, cancelled };
std::string_view to_string(TaskState state);
bool is_terminal(TaskState state);

enum class TaskWire { legacy, extension };

// What a job says about itself.
struct JobStatus {
  TaskState state = TaskState::working;
  std::string message;    // short status line for people (may be empty)
  nlohmann::json result;  // completed: the CallToolResult (isError set for a tool error)
  nlohmann::json error;   // failed: a JSON-RPC error object {code, message, data?}
};

// Runs a plain tool call (validation and the transport's argument checks included) and returns
// its CallToolResult.
using TaskCall = std::function<nlohmann::json(ToolContext&)>;

// Work that has its own jobs, implemented outside server/ (the search runs of tools/): starting
// the tool's work returns a job id, and the job reports its status and can be told to stop.
// Thread-safe.
class JobSource {
 public:
  virtual ~JobSource() = default;
  struct Started {
    std::string job;        // the job's id; empty when the call ended at once
    nlohmann::json result;  // the call's CallToolResult when `job` is empty (e.g. bad arguments)
  };
  // Starts the job, typically by running the tool's own call (`call`) and reading the job id
  // from its result.
  virtual Started start(ToolContext& context, const TaskCall& call) = 0;
  // The job's status; an unknown job is `failed`.
  virtual JobStatus status(const std::string& job) = 0;
  virtual void cancel(const std::string& job) = 0;
  // How often a client should poll this kind of job.
  virtual std::chrono::milliseconds poll_interval() const { return std::chrono::seconds(5); }
};

struct TaskOptions {
  std::chrono::milliseconds default_ttl = std::chrono::hours(24);
  std::chrono::milliseconds max_ttl = std::chrono::hours(24);
  std::chrono::milliseconds poll_interval = std::chrono::seconds(1);  // calls run as tasks
  std::size_t max_tasks = 1000;  // stored at once; terminal ones are dropped oldest first
};

// All tasks of one server process, for every session and both wires. Thread-safe. Task ids are
// random 128-bit hex strings (unguessable: over stateless HTTP the id is the only key).
class TaskStore {
 public:
  TaskStore(ThreadPool& pool, TaskOptions options = {});
  ~TaskStore();  // tells working tasks to stop
  TaskStore(const TaskStore&) = delete;
  TaskStore& operator=(const TaskStore&) = delete;

  struct Created {
    std::string id;
    std::optional<std::string> error;  // the server cannot take more tasks now
  };
  // Creates a task owned by `owner` (a session key; "" for stateless requests) and starts its
  // work on the worker pool: `tool.jobs` when set (given `call`), else `call`. The task exists
  // (tasks/get resolves) when this returns. `context.cancel` becomes the task's cancel switch.
  // `answers` set (an object, possibly empty): the task takes its input through tasks/update
  // (extension wire; see above), starting with these answers by key (gathered before the task
  // was created); the context's request_input and request() then wait on the task. nullopt: the
  // context's own sinks serve them.
  Created create(const ToolDef& tool, ToolContext context, TaskCall call,
                 std::optional<long long> ttl_ms, const std::string& owner,
                 std::optional<nlohmann::json> answers = std::nullopt);
  // Tells every working task to stop (server shutdown).
  void stop_all();

  // The task as JSON in the wire's shape; nullopt when unknown or expired. `detailed` (extension
  // tasks/get) inlines the result or error of a terminal task.
  std::optional<nlohmann::json> describe(const std::string& id, TaskWire wire, bool detailed);
  // The CreateTaskResult for a task just created.
  nlohmann::json create_result(const std::string& id, TaskWire wire);
  std::optional<TaskState> state(const std::string& id);
  // The key of the task's owner ("" for a task of a stateless request); nullopt when unknown.
  std::optional<std::string> owner(const std::string& id);

  enum class CancelOutcome { unknown, already_terminal, cancelled };
  CancelOutcome cancel(const std::string& id);

  // tasks/update: `responses` (an object) answers input requests by key. Answers to pending
  // requests are taken (an answer must be an object: bad_answer names the key otherwise, and
  // nothing is taken); other keys, and updates of a task that waits for nothing, are ignored.
  // When no request remains pending the call runs again.
  enum class UpdateOutcome { unknown, bad_answer, accepted };
  struct Update {
    UpdateOutcome outcome = UpdateOutcome::accepted;
    std::string key;  // bad_answer: the offending key
  };
  Update update(const std::string& id, const nlohmann::json& responses);

  // Waits until the task is terminal (or `give_up` says so, checked every 200 ms); returns its
  // final status, nullopt when unknown or given up.
  std::optional<JobStatus> wait_terminal(const std::string& id,
                                         const std::function<bool()>& give_up);

  // Ids of `owner`'s tasks, oldest first.
  std::vector<std::string> list(const std::string& owner);
  std::size_t size() const;

 private:
  struct Task;
  std::shared_ptr<Task> find(const std::string& id);  // refreshed from its job; purges expired
  // One run of the task's work on a worker: ends the task, or parks it input_required.
  void run(const std::shared_ptr<Task>& task, const TaskCall& call, ToolContext& context);
  // Queues a run of the task's work; a full pool fails the task. m_mutex held.
  void submit_run(const std::shared_ptr<Task>& task);
  // request_input of an extension task's call: the answer, or the request recorded as pending.
  core::Result<nlohmann::json> task_input(const std::weak_ptr<Task>& weak, const std::string& key,
                                          const std::string& method, const nlohmann::json& params);
  void refresh(Task& task);                   // m_mutex held
  void finish(Task& task, JobStatus status);  // m_mutex held
  // Drops ended tasks, and tasks left waiting for input, past their ttl and, with `make_room`,
  // the oldest ended ones until one more fits. m_mutex held.
  void purge(bool make_room = false);
  nlohmann::json task_json(const Task& task, TaskWire wire) const;  // m_mutex held
  std::string new_id();

  ThreadPool& m_pool;
  TaskOptions m_options;
  mutable std::mutex m_mutex;
  std::condition_variable m_changed;
  std::map<std::string, std::shared_ptr<Task>> m_tasks;
  std::uint64_t m_sequence = 0;
};

}  // namespace autocomp::server
