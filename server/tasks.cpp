#include "server/tasks.hpp"

#include <spdlog/spdlog.h>

#include <algorithm>
#include <array>
#include <atomic>
#include <cstdio>
#include <ctime>
#include <exception>
#include <random>
#include <set>
#include <stdexcept>

#include "server/jsonrpc.hpp"
#include "server/protocol.hpp"
#include "server/protocol_detail.hpp"
#include "server/schema.hpp"

namespace autocomp::server {

namespace {

using Clock = std::chrono::system_clock;

std::string iso_time(Clock::time_point when) {
  const auto since = when.time_since_epoch();
  const std::time_t seconds = std::chrono::duration_cast<std::chrono::seconds>(since).count();
  const auto millis = std::chrono::duration_cast<std::chrono::milliseconds>(since).count() % 1000;
  std::tm utc{};
  gmtime_r(&seconds, &utc);
  std::array<char, 40> text{};
  std::strftime(text.data(), text.size(), "%Y-%m-%dT%H:%M:%S", &utc);
  std::array<char, 8> fraction{};
  std::snprintf(fraction.data(), fraction.size(), ".%03dZ", static_cast<int>(millis));
  return std::string(text.data()) + fraction.data();
}

nlohmann::json internal_error(const std::string& message) {
  return {{"code", jsonrpc::k_internal_error}, {"message", message}};
}

bool is_error_result(const nlohmann::json& result) {
  return result.is_object() && result.value("isError", false);
}

}  // namespace

std::string_view to_string(TaskSupport support) {
  switch (support) {
    case TaskSupport::optional:
      return "optional";
    case TaskSupport::required:
      return "required";
    case TaskSupport::forbidden:
      break;
  }
  return "forbidden";
}

std::string_view to_string(TaskState state) {
  switch (state) {
    case TaskState::working:
      return "working";
    case TaskState::input_required:
      return "input_required";
    case TaskState::completed:
      return "completed";
    case TaskState::failed:
      return "failed";
    case TaskState::cancelled:
      return "cancelled";
  }
  return "working";
}

bool is_terminal(TaskState state) {
  return state == TaskState::completed || state == TaskState::failed ||
         state == TaskState::cancelled;
}

struct TaskStore::Task {
  std::string id;
  std::string owner;
  std::string tool;
  std::uint64_t sequence = 0;
  Clock::time_point created;
  Clock::time_point updated;
  long long ttl_ms = 0;
  std::chrono::milliseconds poll{1000};
  JobStatus status;
  core::CancelToken cancel;
  std::shared_ptr<JobSource> source;
  std::string job;  // the source's job id, once started
  // The work, kept for runs after input arrives; released when the task ends.
  TaskCall call;
  ToolContext context;
  // Extension tasks only (else null): input by key through tasks/update.
  struct Inputs {
    nlohmann::json capabilities = nlohmann::json::object();  // the client's
    nlohmann::json answers = nlohmann::json::object();
    nlohmann::json pending = nlohmann::json::object();  // key -> {method, params}
    nlohmann::json missing_capabilities = nlohmann::json::object();
    std::size_t requests = 0;  // request() calls of the current run (their keys)
  };
  std::unique_ptr<Inputs> inputs;
};

TaskStore::TaskStore(ThreadPool& pool, TaskOptions options)
    : m_pool(pool), m_options(std::move(options)) {}

TaskStore::~TaskStore() {
  stop_all();
}

void TaskStore::stop_all() {
  std::vector<std::shared_ptr<Task>> working;
  {
    std::lock_guard lock(m_mutex);
    for (auto& [id, task] : m_tasks) {
      if (!is_terminal(task->status.state)) {
        working.push_back(task);
      }
    }
  }
  for (auto& task : working) {
    task->cancel.cancel();
  }
}

std::string TaskStore::new_id() {
  static thread_local std::mt19937_64 generator(std::random_device{}());
  std::array<char, 33> text{};
  std::snprintf(text.data(), text.size(), "%016llx%016llx",
                static_cast<unsigned long long>(generator()),
                static_cast<unsigned long long>(generator()));
  return text.data();
}

std::size_t TaskStore::size() const {
  std::lock_guard lock(m_mutex);
  return m_tasks.size();
}

void TaskStore::purge(bool make_room) {
  const auto now = Clock::now();
  for (auto it = m_tasks.begin(); it != m_tasks.end();) {
    const auto& task = *it->second;
    // A task waiting for input runs nothing, so it expires like an ended one.
    if ((is_terminal(task.status.state) || task.status.state == TaskState::input_required) &&
        now > task.created + std::chrono::milliseconds(task.ttl_ms)) {
      it = m_tasks.erase(it);
    } else {
      ++it;
    }
  }
  while (make_room && m_tasks.size() >= m_options.max_tasks) {
    auto oldest = m_tasks.end();
    for (auto it = m_tasks.begin(); it != m_tasks.end(); ++it) {
      if (is_terminal(it->second->status.state) &&
          (oldest == m_tasks.end() || it->second->sequence < oldest->second->sequence)) {
        oldest = it;
      }
    }
    if (oldest == m_tasks.end()) {
      break;
    }
    m_tasks.erase(oldest);
  }
}

void TaskStore::finish(Task& task, JobStatus status) {
  if (is_terminal(task.status.state)) {
    return;  // cancelled meanwhile: the late result is dropped
  }
  task.status = std::move(status);
  task.updated = Clock::now();
  // The work (and the session its call holds) is not needed any more.
  task.call = nullptr;
  task.context = ToolContext{};
  m_changed.notify_all();
}

void TaskStore::refresh(Task& task) {
  if (is_terminal(task.status.state) || !task.source || task.job.empty()) {
    return;
  }
  JobStatus status = task.source->status(task.job);
  if (is_terminal(status.state)) {
    finish(task, std::move(status));
  } else if (status.state != task.status.state || status.message != task.status.message) {
    task.status = std::move(status);
    task.updated = Clock::now();
  }
}

TaskStore::Created TaskStore::create(const ToolDef& tool, ToolContext context, TaskCall call,
                                     std::optional<long long> ttl_ms, const std::string& owner,
                                     std::optional<nlohmann::json> answers) {
  auto task = std::make_shared<Task>();
  task->owner = owner;
  task->tool = tool.name;
  task->created = task->updated = Clock::now();
  const long long max_ttl = m_options.max_ttl.count();
  task->ttl_ms = std::clamp<long long>(ttl_ms.value_or(m_options.default_ttl.count()), 1, max_ttl);
  task->source = tool.jobs;
  task->poll = tool.jobs ? tool.jobs->poll_interval() : m_options.poll_interval;
  task->cancel = context.cancel;
  task->status.message = tool.name + " is running";
  if (answers) {
    task->inputs = std::make_unique<Task::Inputs>();
    task->inputs->capabilities = context.client_capabilities.is_object()
                                     ? context.client_capabilities
                                     : nlohmann::json::object();
    task->inputs->answers = answers->is_object() ? std::move(*answers) : nlohmann::json::object();
    std::weak_ptr<Task> weak = task;
    context.input_sink = [this, weak](const std::string& key, const std::string& method,
                                      const nlohmann::json& params) {
      return task_input(weak, key, method, params);
    };
    // Code written for sessions asks with request(): the same wait, under a key per request.
    context.request_sink = [this, weak](const std::string& method, const nlohmann::json& params,
                                        std::chrono::milliseconds, const core::CancelToken&) {
      std::string key;
      if (auto locked = weak.lock()) {
        std::lock_guard lock(m_mutex);
        if (locked->inputs) {
          key =
              method.substr(0, method.find('/')) + "-" + std::to_string(++locked->inputs->requests);
        }
      }
      return task_input(weak, key, method, params);
    };
  }
  task->call = std::move(call);
  task->context = std::move(context);
  std::lock_guard lock(m_mutex);
  purge(true);
  if (m_tasks.size() >= m_options.max_tasks) {
    return {"", std::to_string(m_options.max_tasks) +
                    " tasks are running in this server; wait for one to end or cancel one"};
  }
  task->id = new_id();
  task->sequence = ++m_sequence;
  m_tasks[task->id] = task;
  submit_run(task);
  return {task->id, std::nullopt};
}

void TaskStore::submit_run(const std::shared_ptr<Task>& task) {
  // The run holds its own copy of the work: a cancel releases the task's copy meanwhile.
  auto job = [this, task, call = task->call, context = task->context]() mutable {
    run(task, call, context);
  };
  if (!m_pool.submit(std::move(job))) {
    JobStatus busy;
    busy.state = TaskState::failed;
    busy.error = internal_error("Server busy: too many calls are waiting; retry later");
    finish(*task, std::move(busy));
  }
}

core::Result<nlohmann::json> TaskStore::task_input(const std::weak_ptr<Task>& weak,
                                                   const std::string& key,
                                                   const std::string& method,
                                                   const nlohmann::json& params) {
  auto task = weak.lock();
  std::lock_guard lock(m_mutex);
  if (!task || !task->inputs || key.empty()) {
    return core::make_failure(core::FailureKind::unavailable, "client-request",
                              "the task has ended, so " + method + " cannot reach the client");
  }
  auto& inputs = *task->inputs;
  if (auto it = inputs.answers.find(key); it != inputs.answers.end() && it->is_object()) {
    return *it;
  }
  if (const char* capability = detail::capability_for(method);
      capability != nullptr && !inputs.capabilities.contains(capability)) {
    inputs.missing_capabilities[capability] = nlohmann::json::object();
    return core::make_failure(core::FailureKind::unavailable, "client-request",
                              std::string("the client did not declare the ") + capability +
                                  " capability, which " + method + " needs");
  }
  inputs.pending[key] = {{"method", method}, {"params", params}};
  return core::make_failure(
      core::FailureKind::unavailable, "client-request",
      "waiting for the client's answer to " + method + " (it comes with tasks/update)");
}

void TaskStore::run(const std::shared_ptr<Task>& task, const TaskCall& call, ToolContext& context) {
  {
    std::lock_guard lock(m_mutex);
    if (task->inputs) {
      // Each run asks afresh; what it asks and finds unanswered is what the task waits for.
      task->inputs->pending = nlohmann::json::object();
      task->inputs->missing_capabilities = nlohmann::json::object();
      task->inputs->requests = 0;
    }
  }
  JobStatus status;
  status.state = TaskState::completed;
  try {
    if (task->source) {
      auto started = task->source->start(context, call);
      if (!started.job.empty()) {
        bool stop = false;
        {
          std::lock_guard lock(m_mutex);
          task->job = started.job;
          task->status.message = task->tool + " job " + started.job;
          stop = task->status.state == TaskState::cancelled;
          refresh(*task);
          m_changed.notify_all();
        }
        if (stop) {
          task->source->cancel(started.job);
        }
        return;
      }
      status.result = std::move(started.result);
    } else {
      status.result = call(context);
    }
  } catch (const std::exception& error) {
    spdlog::error("task {} ({}) failed: {}", task->id, task->tool, error.what());
    status.state = TaskState::failed;
    status.error = internal_error(std::string("Internal error: ") + error.what());
    status.result = nullptr;
  }
  std::lock_guard lock(m_mutex);
  if (is_terminal(task->status.state)) {
    return;  // cancelled meanwhile: the late result is dropped
  }
  if (task->inputs && status.state == TaskState::completed) {
    auto& inputs = *task->inputs;
    if (!inputs.missing_capabilities.empty()) {
      std::string names;
      for (const auto& [name, value] : inputs.missing_capabilities.items()) {
        names += (names.empty() ? "" : ", ") + name;
      }
      status.state = TaskState::failed;
      status.result = nullptr;
      status.error = {{"code", k_missing_client_capability},
                      {"message", "Missing required client capability: " + names +
                                      " (declare it in the client capabilities)"},
                      {"data", {{"requiredCapabilities", inputs.missing_capabilities}}}};
    } else if (!inputs.pending.empty()) {
      // The call's result stands in for answers it does not have yet: dropped.
      std::string keys;
      for (const auto& [key, value] : inputs.pending.items()) {
        keys += (keys.empty() ? "" : ", ") + key;
      }
      task->status.state = TaskState::input_required;
      task->status.message =
          task->tool + " waits for the client's input: " + keys + " (answer with tasks/update)";
      task->updated = Clock::now();
      m_changed.notify_all();
      return;
    }
  }
  if (status.state == TaskState::completed) {
    status.message = is_error_result(status.result) ? task->tool + " reported an error"
                                                    : task->tool + " finished";
  }
  finish(*task, std::move(status));
}

TaskStore::Update TaskStore::update(const std::string& id, const nlohmann::json& responses) {
  auto task = find(id);
  if (!task) {
    return {UpdateOutcome::unknown, {}};
  }
  std::lock_guard lock(m_mutex);
  if (!task->inputs || task->status.state != TaskState::input_required || !responses.is_object()) {
    return {};  // nothing is awaited: an ack, as for an answer that arrives late
  }
  auto& inputs = *task->inputs;
  for (const auto& [key, value] : responses.items()) {
    if (inputs.pending.contains(key) && !value.is_object()) {
      return {UpdateOutcome::bad_answer, key};
    }
  }
  bool taken = false;
  for (const auto& [key, value] : responses.items()) {
    if (inputs.pending.contains(key)) {
      inputs.answers[key] = value;
      inputs.pending.erase(key);
      taken = true;
    }
  }
  if (!taken) {
    return {};
  }
  task->updated = Clock::now();
  if (inputs.pending.empty()) {
    task->status.state = TaskState::working;
    task->status.message = task->tool + " is running";
    submit_run(task);
  }
  m_changed.notify_all();
  return {};
}

std::shared_ptr<TaskStore::Task> TaskStore::find(const std::string& id) {
  std::shared_ptr<Task> task;
  {
    std::lock_guard lock(m_mutex);
    purge();
    auto it = m_tasks.find(id);
    if (it == m_tasks.end()) {
      return nullptr;
    }
    task = it->second;
    refresh(*task);
  }
  return task;
}

nlohmann::json TaskStore::task_json(const Task& task, TaskWire wire) const {
  nlohmann::json out = {{"taskId", task.id},
                        {"createdAt", iso_time(task.created)},
                        {"lastUpdatedAt", iso_time(task.updated)}};
  std::string_view status = to_string(task.status.state);
  if (wire == TaskWire::legacy) {
    // 2025-11-25: a call that ended in a tool error is a failed task.
    if (task.status.state == TaskState::completed && is_error_result(task.status.result)) {
      status = "failed";
    }
    out["ttl"] = task.ttl_ms;
    out["pollInterval"] = task.poll.count();
  } else {
    out["ttlMs"] = task.ttl_ms;
    out["pollIntervalMs"] = task.poll.count();
  }
  out["status"] = std::string(status);
  if (!task.status.message.empty()) {
    out["statusMessage"] = task.status.message;
  }
  return out;
}

std::optional<nlohmann::json> TaskStore::describe(const std::string& id, TaskWire wire,
                                                  bool detailed) {
  auto task = find(id);
  if (!task) {
    return std::nullopt;
  }
  std::lock_guard lock(m_mutex);
  nlohmann::json out = task_json(*task, wire);
  if (wire == TaskWire::extension) {
    out["resultType"] = "complete";
    if (task->status.state == TaskState::input_required && task->inputs) {
      out["inputRequests"] = task->inputs->pending;
    }
    if (detailed && task->status.state == TaskState::completed) {
      out["result"] = task->status.result;
    } else if (detailed && task->status.state == TaskState::failed) {
      out["error"] = task->status.error;
    }
  }
  return out;
}

nlohmann::json TaskStore::create_result(const std::string& id, TaskWire wire) {
  auto task = find(id);
  if (!task) {
    throw std::logic_error("create_result: no task " + id);
  }
  std::lock_guard lock(m_mutex);
  nlohmann::json task_object = task_json(*task, wire);
  const std::string immediate =
      task->tool + " runs as task " + id + "; its result arrives when the task ends";
  if (wire == TaskWire::extension) {
    task_object["resultType"] = "task";
    return task_object;
  }
  return {{"task", std::move(task_object)},
          {"_meta", {{"io.modelcontextprotocol/model-immediate-response", immediate}}}};
}

std::optional<TaskState> TaskStore::state(const std::string& id) {
  auto task = find(id);
  if (!task) {
    return std::nullopt;
  }
  std::lock_guard lock(m_mutex);
  return task->status.state;
}

TaskStore::CancelOutcome TaskStore::cancel(const std::string& id) {
  auto task = find(id);
  if (!task) {
    return CancelOutcome::unknown;
  }
  std::string job;
  {
    std::lock_guard lock(m_mutex);
    if (is_terminal(task->status.state)) {
      return CancelOutcome::already_terminal;
    }
    JobStatus cancelled;
    cancelled.state = TaskState::cancelled;
    cancelled.message = "cancelled by the client";
    finish(*task, std::move(cancelled));
    job = task->job;
  }
  task->cancel.cancel();
  if (task->source && !job.empty()) {
    task->source->cancel(job);
  }
  return CancelOutcome::cancelled;
}

std::optional<JobStatus> TaskStore::wait_terminal(const std::string& id,
                                                  const std::function<bool()>& give_up) {
  auto task = find(id);
  if (!task) {
    return std::nullopt;
  }
  std::unique_lock lock(m_mutex);
  for (;;) {
    refresh(*task);
    if (is_terminal(task->status.state)) {
      return task->status;
    }
    lock.unlock();
    const bool stop = give_up && give_up();
    lock.lock();
    if (stop) {
      return std::nullopt;
    }
    m_changed.wait_for(lock, std::chrono::milliseconds(200));
  }
}

std::optional<std::string> TaskStore::owner(const std::string& id) {
  std::lock_guard lock(m_mutex);
  purge();
  auto it = m_tasks.find(id);
  if (it == m_tasks.end()) {
    return std::nullopt;
  }
  return it->second->owner;
}

std::vector<std::string> TaskStore::list(const std::string& owner) {
  std::lock_guard lock(m_mutex);
  purge();
  std::vector<std::shared_ptr<Task>> mine;
  for (auto& [id, task] : m_tasks) {
    if (task->owner == owner) {
      refresh(*task);
      mine.push_back(task);
    }
  }
  std::sort(mine.begin(), mine.end(),
            [](const auto& a, const auto& b) { return a->sequence < b->sequence; });
  std::vector<std::string> ids;
  for (const auto& task : mine) {
    ids.push_back(task->id);
  }
  return ids;
}

// ---------------------------------------------------------------------------------------------
// The protocol side: Session hooks called from server/protocol.cpp.

namespace {

bool declares_tasks_extension(const nlohmann::json& capabilities) {
  if (!capabilities.is_object()) {
    return false;
  }
  auto extensions = capabilities.find("extensions");
  return extensions != capabilities.end() && extensions->is_object() &&
         extensions->contains(std::string(k_tasks_extension));
}

const nlohmann::json& request_meta(const nlohmann::json& params) {
  static const nlohmann::json k_none = nlohmann::json::object();
  if (!params.is_object()) {
    return k_none;
  }
  auto meta = params.find("_meta");
  return meta != params.end() && meta->is_object() ? *meta : k_none;
}

// A 2026-07-28 request carries its protocol version and capabilities in _meta.
bool is_stateless_request(const nlohmann::json& params) {
  return request_meta(params).contains("io.modelcontextprotocol/protocolVersion");
}

bool request_declares_tasks_extension(const nlohmann::json& params) {
  const auto& meta = request_meta(params);
  auto capabilities = meta.find("io.modelcontextprotocol/clientCapabilities");
  return capabilities != meta.end() && declares_tasks_extension(*capabilities);
}

nlohmann::json missing_extension_data() {
  return {{"requiredCapabilities",
           {{"extensions", {{std::string(k_tasks_extension), nlohmann::json::object()}}}}}};
}

// Messages of a task's work after its tools/call was answered: they travel on the session's
// standalone stream (stdio: stdout; HTTP: the GET stream), so progress with the call's token,
// logs and server→client requests still reach the client.
class TaskOutbox : public Outbox {
 public:
  explicit TaskOutbox(std::weak_ptr<Session> session) : m_session(std::move(session)) {}
  void send(const nlohmann::json& message) override {
    if (auto session = m_session.lock()) {
      session->send_standalone(message);
    }
  }
  void finish(std::optional<nlohmann::json> /*response*/) override {}

 private:
  std::weak_ptr<Session> m_session;
};

}  // namespace

void add_task_capabilities(nlohmann::json& capabilities,
                           const nlohmann::json& client_capabilities) {
  capabilities["tasks"] = {{"list", nlohmann::json::object()},
                           {"cancel", nlohmann::json::object()},
                           {"requests", {{"tools", {{"call", nlohmann::json::object()}}}}}};
  if (declares_tasks_extension(client_capabilities)) {
    capabilities["extensions"][std::string(k_tasks_extension)] = nlohmann::json::object();
  }
}

void add_task_execution(nlohmann::json& entry, const ToolDef& tool) {
  if (tool.task_support != TaskSupport::forbidden) {
    entry["execution"] = {{"taskSupport", std::string(to_string(tool.task_support))}};
  }
}

std::string Session::task_owner() {
  std::lock_guard lock(m_mutex);
  if (m_task_owner.empty()) {
    static std::atomic<std::uint64_t> next{0};
    m_task_owner = "session-" + std::to_string(++next);
  }
  return m_task_owner;
}

bool Session::start_task(const ToolDef& tool, const jsonrpc::Request& request,
                         const std::shared_ptr<Outbox>& outbox,
                         const std::shared_ptr<ModernCall>& modern) {
  const auto& params = request.params;
  bool extension = request_declares_tasks_extension(params);
  {
    std::lock_guard lock(m_mutex);
    extension = extension || declares_tasks_extension(m_client_capabilities);
  }
  const auto task_param = params.find("task");
  const bool asked = task_param != params.end() && task_param->is_object();
  auto refuse = [&](int code, const std::string& message, nlohmann::json data = nullptr) {
    outbox->finish(jsonrpc::make_error(request.id, code, message, std::move(data)));
    return true;
  };
  if (tool.task_support == TaskSupport::forbidden) {
    // With the extension the server decides, and a `task` hint from an older client is ignored.
    if (asked && !extension) {
      return refuse(jsonrpc::k_method_not_found,
                    "Method not found: tool '" + tool.name +
                        "' cannot run as a task (execution.taskSupport is forbidden); call it "
                        "without \"task\"");
    }
    return false;
  }
  if (!asked && !extension) {
    if (tool.task_support == TaskSupport::optional) {
      return false;
    }
    if (is_stateless_request(params)) {
      return refuse(k_missing_client_capability,
                    "Missing required client capability: tool '" + tool.name +
                        "' runs only as a task; declare the " + std::string(k_tasks_extension) +
                        " extension in clientCapabilities",
                    missing_extension_data());
    }
    return refuse(jsonrpc::k_method_not_found,
                  "Method not found: tool '" + tool.name +
                      "' runs only as a task (execution.taskSupport is required); send tools/call "
                      "with \"task\": {} in its params");
  }
  std::optional<long long> ttl;
  if (asked) {
    for (const char* key : {"ttl", "ttlMs"}) {
      if (auto it = task_param->find(key); it != task_param->end() && it->is_number()) {
        ttl = std::max<long long>(1, static_cast<long long>(it->get<double>()));
      }
    }
  }
  // Extension tasks take their input through tasks/update, starting with the answers the
  // request brought.
  std::optional<nlohmann::json> answers;
  if (extension) {
    answers = nlohmann::json::object();
  }
  if (extension && modern) {
    if (tool.task_inputs) {
      // 2026-07-28: what the task needs first is gathered with input_required rounds; only the
      // round that brings every answer creates the task.
      nlohmann::json args = params.value("arguments", nlohmann::json::object());
      if (args.is_null()) {
        args = nlohmann::json::object();
      }
      if (!validate_schema(tool.input_schema, args)) {  // bad arguments: the task says so
        core::CancelToken unused;
        ToolContext asking = make_context(request, outbox, unused, modern);
        nlohmann::json outcome;
        try {
          tool.task_inputs(args, asking);
          outcome = detail::modern_outcome(m_server, *modern, nlohmann::json::object());
        } catch (const detail::RpcError& error) {
          return refuse(error.code, error.message, error.data);
        } catch (const std::exception& error) {
          spdlog::error("tool {}: asking for its task's inputs failed: {}", tool.name,
                        error.what());
          return refuse(jsonrpc::k_internal_error, std::string("Internal error: ") + error.what());
        }
        if (outcome.value("resultType", std::string()) == "input_required") {
          outbox->finish(jsonrpc::make_result(request.id, std::move(outcome)));
          return true;
        }
      }
    }
    std::lock_guard lock(modern->mutex);
    answers = modern->answers;
  }
  auto self = shared_from_this();
  auto task_outbox = std::make_shared<TaskOutbox>(weak_from_this());
  core::CancelToken cancel;
  // A 2026-07-28 request's context: its _meta's capabilities and log level (its input sinks are
  // replaced by the task's).
  ToolContext context = make_context(request, task_outbox, cancel, modern);
  const ToolDef* tool_ptr = &tool;
  // The context the store hands the call is this one with its input sinks (extension tasks).
  TaskCall call = [self, tool_ptr, request](ToolContext& call_context) {
    return self->run_tool_in(*tool_ptr, request, call_context, nullptr);
  };
  // A stateless (2026-07-28) request belongs to no session: its task is owned by nobody and is
  // read by whoever holds its unguessable id; a session's task stays with its session.
  const std::string owner = is_stateless_request(params) ? std::string() : task_owner();
  auto created = m_server.tasks().create(tool, std::move(context), std::move(call), ttl, owner,
                                         std::move(answers));
  if (created.error) {
    return refuse(jsonrpc::k_internal_error, "Server busy: " + *created.error);
  }
  spdlog::info("tools/call {} runs as task {} ({} wire)", tool.name, created.id,
               extension ? "extension" : "2025-11-25");
  outbox->finish(jsonrpc::make_result(
      request.id, m_server.tasks().create_result(
                      created.id, extension ? TaskWire::extension : TaskWire::legacy)));
  return true;
}

void Session::handle_task_request(const jsonrpc::Request& request,
                                  const std::shared_ptr<Outbox>& outbox) {
  const std::string& method = request.method;
  const auto& params = request.params;
  auto reply = [&](nlohmann::json result) {
    outbox->finish(jsonrpc::make_result(request.id, std::move(result)));
  };
  auto refuse = [&](int code, const std::string& message, nlohmann::json data = nullptr) {
    outbox->finish(jsonrpc::make_error(request.id, code, message, std::move(data)));
  };
  static const std::set<std::string> k_methods = {"tasks/get", "tasks/result", "tasks/list",
                                                  "tasks/cancel", "tasks/update"};
  if (k_methods.count(method) == 0) {
    refuse(jsonrpc::k_method_not_found, "Method not found: " + method);
    return;
  }
  bool extension = request_declares_tasks_extension(params);
  {
    std::lock_guard lock(m_mutex);
    extension = extension || declares_tasks_extension(m_client_capabilities);
  }
  if (!extension && is_stateless_request(params)) {
    refuse(k_missing_client_capability,
           "Missing required client capability: " + method + " needs the " +
               std::string(k_tasks_extension) + " extension in clientCapabilities",
           missing_extension_data());
    return;
  }
  const TaskWire wire = extension ? TaskWire::extension : TaskWire::legacy;
  auto& tasks = m_server.tasks();
  if (wire == TaskWire::extension && (method == "tasks/result" || method == "tasks/list")) {
    refuse(jsonrpc::k_method_not_found,
           "Method not found: " + method +
               " is not part of the tasks extension (tasks/get returns the result inline)");
    return;
  }
  if (wire == TaskWire::legacy && method == "tasks/update") {
    refuse(jsonrpc::k_method_not_found, "Method not found: tasks/update belongs to the " +
                                            std::string(k_tasks_extension) +
                                            " extension; declare it in the client capabilities");
    return;
  }
  if (method == "tasks/list") {
    const auto ids = tasks.list(task_owner());
    std::size_t start = 0;
    if (auto cursor = params.find("cursor"); cursor != params.end() && !cursor->is_null()) {
      auto offset = cursor->is_string() ? decode_cursor(cursor->get<std::string>()) : std::nullopt;
      if (!offset || *offset > ids.size()) {
        refuse(jsonrpc::k_invalid_params, "Invalid params: unknown cursor");
        return;
      }
      start = *offset;
    }
    const std::size_t end =
        std::min(ids.size(), start + std::max<std::size_t>(m_server.options().page_size, 1));
    nlohmann::json list = nlohmann::json::array();
    for (std::size_t i = start; i < end; ++i) {
      if (auto task = tasks.describe(ids[i], TaskWire::legacy, false)) {
        list.push_back(std::move(*task));
      }
    }
    nlohmann::json result = {{"tasks", std::move(list)}};
    if (end < ids.size()) {
      result["nextCursor"] = encode_cursor(end);
    }
    reply(std::move(result));
    return;
  }
  auto id_it = params.find("taskId");
  if (id_it == params.end() || !id_it->is_string()) {
    refuse(jsonrpc::k_invalid_params, "Invalid params: \"taskId\" must be a string");
    return;
  }
  const std::string id = id_it->get<std::string>();
  const std::string unknown = "Invalid params: no task " + id + " (unknown, or expired)";
  // Another session's task, or a session's task asked about statelessly (or the reverse), is
  // answered as unknown: a task is visible only where it was created.
  const std::string requester = is_stateless_request(params) ? std::string() : task_owner();
  if (auto task_owner_key = tasks.owner(id); task_owner_key && *task_owner_key != requester) {
    refuse(jsonrpc::k_invalid_params, unknown);
    return;
  }
  if (method == "tasks/get") {
    auto task = tasks.describe(id, wire, wire == TaskWire::extension);
    if (!task) {
      refuse(jsonrpc::k_invalid_params, unknown);
    } else {
      reply(std::move(*task));
    }
    return;
  }
  if (method == "tasks/cancel") {
    const auto outcome = tasks.cancel(id);
    if (outcome == TaskStore::CancelOutcome::unknown) {
      refuse(jsonrpc::k_invalid_params, unknown);
    } else if (wire == TaskWire::extension) {
      reply({{"resultType", "complete"}});  // an ack; the status is read with tasks/get
    } else if (outcome == TaskStore::CancelOutcome::already_terminal) {
      refuse(jsonrpc::k_invalid_params, "Invalid params: task " + id + " has already ended (" +
                                            tasks.describe(id, wire, false)
                                                .value_or(nlohmann::json::object())
                                                .value("status", std::string("?")) +
                                            ")");
    } else {
      reply(tasks.describe(id, wire, false).value_or(nlohmann::json::object()));
    }
    return;
  }
  if (method == "tasks/update") {
    if (auto responses = params.find("inputResponses");
        responses == params.end() || !responses->is_object()) {
      refuse(jsonrpc::k_invalid_params, "Invalid params: \"inputResponses\" must be an object");
      return;
    }
    const auto update = tasks.update(id, params.at("inputResponses"));
    if (update.outcome == TaskStore::UpdateOutcome::unknown) {
      refuse(jsonrpc::k_invalid_params, unknown);
    } else if (update.outcome == TaskStore::UpdateOutcome::bad_answer) {
      refuse(jsonrpc::k_invalid_params, "Invalid params: inputResponses[\"" + update.key +
                                            "\"] must be an object (the result of the request "
                                            "it answers)");
    } else {
      reply({{"resultType", "complete"}});  // an ack; the task's state is read with tasks/get
    }
    return;
  }
  // tasks/result (2025-11-25): waits for the end on a worker, not on the reading thread.
  if (!tasks.state(id)) {
    refuse(jsonrpc::k_invalid_params, unknown);
    return;
  }
  std::weak_ptr<Session> weak = weak_from_this();
  auto wait = [&tasks, weak, id, request, outbox]() {
    auto status = tasks.wait_terminal(id, [weak] {
      auto session = weak.lock();
      return !session || session->closed();
    });
    if (!status) {
      outbox->finish(std::nullopt);
      return;
    }
    if (status->state == TaskState::completed) {
      nlohmann::json result =
          status->result.is_object() ? status->result : nlohmann::json::object();
      result["_meta"]["io.modelcontextprotocol/related-task"] = {{"taskId", id}};
      outbox->finish(jsonrpc::make_result(request.id, std::move(result)));
    } else if (status->state == TaskState::failed) {
      const auto& error = status->error;
      outbox->finish(jsonrpc::make_error(request.id, error.value("code", jsonrpc::k_internal_error),
                                         error.value("message", std::string("the task failed")),
                                         error.value("data", nlohmann::json())));
    } else {
      outbox->finish(jsonrpc::make_error(request.id, jsonrpc::k_invalid_request,
                                         "Task " + id + " was cancelled; it has no result",
                                         {{"taskId", id}, {"status", "cancelled"}}));
    }
  };
  if (!m_server.pool().submit(std::move(wait))) {
    refuse(jsonrpc::k_internal_error, "Server busy: too many calls are waiting; retry later");
  }
}

}  // namespace autocomp::server
