#pragma once

// The registration API that product tools, resources and prompts use. Handlers receive plain
// nlohmann::json arguments that already passed the tool's input schema, and return values; the
// protocol layer (server/protocol.*) turns them into MCP results. Nothing here knows about stdio or
// HTTP.

#include <chrono>
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
#include "core/result.hpp"

namespace autocomp::server {

// Syslog severities of MCP logging, lowest first.
enum class LogLevel { debug, info, notice, warning, error, critical, alert, emergency };
std::string_view to_string(LogLevel level);
std::optional<LogLevel> log_level_from_string(std::string_view name);

// Server→client requests of one MCP session that belong to no tool call, for work that outlives
// the call that started it (a background search). Copyable and thread-safe. It holds the session
// weakly: once the session has ended every request fails with unavailable. Requests travel on the
// session's standalone stream (stdio: stdout; Streamable HTTP: the GET event stream, which the
// client must keep open) and their answers are matched like those of a tool call's requests.
class ClientChannel {
 public:
  using Sink = std::function<core::Result<nlohmann::json>(const std::string&, const nlohmann::json&,
                                                          std::chrono::milliseconds,
                                                          const core::CancelToken&)>;

  ClientChannel() = default;  // no client: every request fails with unavailable
  ClientChannel(Sink sink, nlohmann::json client_capabilities);

  // The client's declared capabilities (the `capabilities` object of initialize).
  const nlohmann::json& client_capabilities() const { return m_capabilities; }
  bool supports_sampling() const { return m_capabilities.contains("sampling"); }

  // Sends `method` and waits for the answer: the `result` object, or a Failure (unavailable when
  // there is no session or no open stream to the client, or the session ended meanwhile;
  // cancelled when `cancel` is set; timeout after `timeout`; transport_error for a JSON-RPC error
  // answer). Never waits beyond `timeout`.
  core::Result<nlohmann::json> request(const std::string& method, const nlohmann::json& params,
                                       std::chrono::milliseconds timeout,
                                       const core::CancelToken& cancel) const;
  // sampling/createMessage through request(); unavailable when the client did not declare
  // sampling.
  core::Result<nlohmann::json> create_message(const nlohmann::json& params,
                                              std::chrono::milliseconds timeout,
                                              const core::CancelToken& cancel) const;

 private:
  Sink m_sink;
  nlohmann::json m_capabilities = nlohmann::json::object();
};

// Given to a handler for one call. Copyable; every member is safe to use from the handler's thread
// (and from threads it starts) until the handler returns. The *_sink members are wired by the
// protocol layer; tests may set them directly to observe a handler.
struct ToolContext {
  // Set when notifications/cancelled arrives for this request, or at shutdown. Handlers poll it
  // (and pass it on to backends/providers) and return promptly once set; the response of a
  // cancelled request is never sent, so the returned value does not matter.
  core::CancelToken cancel;

  // The client's working folder, for resolving relative paths in arguments: the first file://
  // root when the client declared roots (asked once per session with roots/list, briefly), else
  // the server's current directory. Call it only when a relative path needs resolving.
  std::string working_dir() const;

  // The client's declared capabilities (the `capabilities` object of initialize; {} if unknown).
  nlohmann::json client_capabilities = nlohmann::json::object();
  bool client_supports_sampling = false;
  bool client_supports_elicitation = false;
  // False over HTTP unless the server was started with --allow-remote-endpoints: arguments that
  // name outbound endpoints (model base URLs, ssh hosts) are then refused before the handler
  // runs; a handler that contacts endpoints from elsewhere must check this too.
  bool remote_endpoints_allowed = true;

  // notifications/progress for this request. A no-op when the caller sent no progressToken.
  // `done` must increase with every call (the protocol requires it); calls that do not increase
  // it are dropped.
  void progress(double done, std::optional<double> total, const std::string& message = {}) const;

  // notifications/message, sent only when `level` is at or above the level the client chose with
  // logging/setLevel (nothing is sent before the client chose one). `data` is any JSON value.
  void log(LogLevel level, const std::string& logger, const nlohmann::json& data) const;

  // Sends a request to the client (e.g. "sampling/createMessage", "elicitation/create",
  // "roots/list") and waits for its response: the `result` object, or a Failure
  // (transport_error for a JSON-RPC error answer or a lost connection, cancelled when `cancel`
  // is set, timeout after `timeout`, unavailable when no client channel exists).
  core::Result<nlohmann::json> request(
      const std::string& method, const nlohmann::json& params,
      std::chrono::milliseconds timeout = std::chrono::minutes(5)) const;

  // sampling/createMessage through request(); unavailable when the client did not declare
  // sampling.
  core::Result<nlohmann::json> create_message(const nlohmann::json& params) const;
  // elicitation/create through request(); unavailable when the client did not declare
  // elicitation.
  core::Result<nlohmann::json> elicit(const nlohmann::json& params) const;
  // One input from the client named `key` (an elicitation, a sampling message, the roots list).
  // A 2025-11-25 session sends `method` as a request and waits (request()). A 2026-07-28 client
  // answers by retrying the call (an input_required result naming every input still missing);
  // the handler runs again and finds its answers here. A task of the tasks extension waits in
  // input_required until tasks/update brings the answers, then runs the handler again the same
  // way. Failure unavailable: not answered yet (the handler may ask for more inputs, then should
  // return; its result is replaced).
  core::Result<nlohmann::json> request_input(const std::string& key, const std::string& method,
                                             const nlohmann::json& params) const;

  // A channel to this call's client that stays usable after the handler returns, for as long as
  // the session lives (see ClientChannel). Unconnected when the call runs outside a session.
  ClientChannel session_channel() const;

  // HTTP only: ends the current SSE connection of this request (after telling the client to
  // reconnect after `retry`); later messages are delivered when the client resumes with
  // Last-Event-ID. A no-op elsewhere. Used by the conformance fixture test_reconnection.
  void close_sse_stream(std::chrono::milliseconds retry) const;

  // Wiring (set by the protocol layer or by tests).
  std::function<std::string()> working_dir_sink;
  std::function<void(std::chrono::milliseconds)> close_stream_sink;
  std::function<void(double, std::optional<double>, const std::string&)> progress_sink;
  std::function<void(LogLevel, const std::string&, const nlohmann::json&)> log_sink;
  std::function<core::Result<nlohmann::json>(const std::string&, const nlohmann::json&,
                                             std::chrono::milliseconds, const core::CancelToken&)>
      request_sink;
  // 2026-07-28 calls: answers request_input (nullptr: request() is used).
  std::function<core::Result<nlohmann::json>(const std::string&, const std::string&,
                                             const nlohmann::json&)>
      input_sink;
  ClientChannel::Sink session_request_sink;  // requests on the session's standalone stream

  // For `progress` monotonicity; shared between copies of one context.
  std::shared_ptr<std::pair<std::mutex, std::optional<double>>> progress_state =
      std::make_shared<std::pair<std::mutex, std::optional<double>>>();
};

// What a tool handler returns. The protocol layer produces
//   content: [ {type: text, text: `text` or structured.dump()} (when either is set) ] +
//   extra_content structuredContent: `structured` (when it is a JSON object) isError: is_error
// so a plain data tool sets only `structured`; a fixture returning an image sets only
// `extra_content`.
struct ToolResult {
  nlohmann::json structured;  // null, or an object (conforming to the tool's output schema)
  std::string text;           // human-readable text; empty → the JSON of `structured`
  bool is_error = false;
  nlohmann::json extra_content = nlohmann::json::array();  // more MCP content blocks
};

// An isError result whose text a person can act on; structuredContent {"error": message}.
ToolResult tool_error(std::string message);
// An isError result from a Failure: structuredContent {"error": message, "kind": ..., "stage":
// ..., "line": ...}.
ToolResult tool_failure(const core::Failure& failure);

using ToolHandler = std::function<ToolResult(const nlohmann::json& args, ToolContext& context)>;

// Whether a client may run a call of the tool as a protocol task (tools/list
// `execution.taskSupport`; server/tasks.hpp).
enum class TaskSupport { forbidden, optional, required };
std::string_view to_string(TaskSupport support);
class JobSource;  // server/tasks.hpp

struct ToolDef {
  std::string name;         // [A-Za-z0-9_.-]{1,128}, unique; snake_case preferred
  std::string title;        // short human title (may be empty)
  std::string description;  // required, non-empty: the model reads it to decide when to call
  nlohmann::json input_schema = {{"type", "object"}};  // JSON Schema object (see schema.hpp)
  nlohmann::json output_schema;                        // null = none
  nlohmann::json annotations;  // null, or {readOnlyHint, destructiveHint, idempotentHint, ...}
  ToolHandler handler;
  nlohmann::json meta;  // null, or the tool's `_meta` in tools/list
  // optional/required: a client that asks for a task (or negotiated the tasks extension) gets
  // one; the call then runs as the task, or, with `jobs`, the tool's own job is the task.
  TaskSupport task_support = TaskSupport::forbidden;
  std::shared_ptr<JobSource> jobs;
  // Optional, for a tool that may run as a task: asks (context.request_input, nothing else) for
  // the input its task needs before it starts. A 2026-07-28 request with the tasks extension
  // gathers it with input_required rounds and creates the task only on the round that has every
  // answer; the handler finds the answers under the same keys. Elsewhere it is not called, and
  // the handler asks while it runs.
  std::function<void(const nlohmann::json& args, ToolContext& context)> task_inputs;
};

// Completion of one argument (prompt argument or URI-template variable): given the argument name,
// what the user typed so far, and the already-resolved other arguments, return candidate values
// (the protocol layer caps them at 100).
using Completer =
    std::function<std::vector<std::string>(const std::string& argument, const std::string& prefix,
                                           const std::map<std::string, std::string>& context)>;

// Tools in registration order (tools/list order is stable).
class ToolRegistry {
 public:
  // Throws std::invalid_argument for a programmer error: empty/invalid/duplicate name, empty
  // description, missing handler, input schema that is not an object schema.
  void add(ToolDef tool);
  const ToolDef* find(std::string_view name) const;
  const std::vector<ToolDef>& all() const { return m_tools; }
  std::size_t size() const { return m_tools.size(); }

 private:
  std::vector<ToolDef> m_tools;
};

// A resource's contents for resources/read: each item {uri, mimeType?, text} or {uri, mimeType?,
// blob (base64)}. Failures: invalid_argument → JSON-RPC -32602, unavailable → -32002 (not found),
// anything else → -32603.
using ResourceReader = std::function<core::Result<nlohmann::json>(
    const std::string& uri, const std::map<std::string, std::string>& variables)>;

struct ResourceDef {
  std::string uri;
  std::string name;
  std::string title;
  std::string description;
  std::string mime_type;
  ResourceReader read;  // called with the resource's own uri and no variables
};

// An RFC 6570 level-1 template such as "autocomp://evaluations/{id}": each {var} matches one or
// more characters other than '/'.
struct ResourceTemplateDef {
  std::string uri_template;
  std::string name;
  std::string title;
  std::string description;
  std::string mime_type;
  ResourceReader read;  // called with the concrete uri and the template's variables
  Completer complete;   // optional: completion of template variables
};

// Thread-safe: resources may be added while serving (e.g. a new run becomes readable).
class ResourceRegistry {
 public:
  void add(ResourceDef resource);  // throws std::invalid_argument on empty/duplicate uri
  void add_template(ResourceTemplateDef resource_template);
  std::vector<ResourceDef> resources() const;
  std::vector<ResourceTemplateDef> templates() const;

  // Finds the resource or the first matching template; variables filled for a template.
  struct Match {
    ResourceReader read;
    std::map<std::string, std::string> variables;
  };
  std::optional<Match> match(const std::string& uri) const;

  // Tells clients subscribed to `uri` (resources/subscribe) that it changed:
  // notifications/resources/updated. Safe from any thread; no-op without subscribers.
  void notify_updated(const std::string& uri) const;

  // Wiring used by the protocol layer.
  void set_update_listener(std::function<void(const std::string&)> listener);

 private:
  mutable std::mutex m_mutex;
  std::vector<ResourceDef> m_resources;
  std::vector<ResourceTemplateDef> m_templates;
  std::function<void(const std::string&)> m_update_listener;
};

// Template matching helper (exposed for tests): variables of `uri` under `uri_template`.
std::optional<std::map<std::string, std::string>> match_uri_template(std::string_view uri_template,
                                                                     std::string_view uri);

struct PromptArgument {
  std::string name;
  std::string description;
  bool required = false;
};

// prompts/get: returns {"description"?: ..., "messages": [{role, content}, ...]}. Missing required
// arguments are rejected (-32602) before `get` is called. Failures: invalid_argument → -32602,
// other → -32603.
using PromptGetter = std::function<core::Result<nlohmann::json>(
    const std::map<std::string, std::string>& arguments)>;

struct PromptDef {
  std::string name;
  std::string title;
  std::string description;
  std::vector<PromptArgument> arguments;
  PromptGetter get;
  Completer complete;  // optional: completion of argument values
  // Optional: used instead of `get` when set; the context carries request_input (2026-07-28
  // clients answer by retrying prompts/get) and nothing else.
  std::function<core::Result<nlohmann::json>(const std::map<std::string, std::string>&,
                                             ToolContext&)>
      get_with_context = nullptr;
};

class PromptRegistry {
 public:
  void add(PromptDef prompt);  // throws std::invalid_argument on empty/duplicate name or no getter
  const PromptDef* find(std::string_view name) const;
  const std::vector<PromptDef>& all() const { return m_prompts; }

 private:
  std::vector<PromptDef> m_prompts;
};

// Everything a server exposes. Fill it before serving starts (resources may also be added later).
struct Registries {
  ToolRegistry tools;
  ResourceRegistry resources;
  PromptRegistry prompts;
};

}  // namespace autocomp::server
