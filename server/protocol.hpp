#pragma once

// The MCP protocol layer, dual-era. Legacy (2025-11-25, also serving 2025-06-18 and 2025-03-26
// clients): an initialize handshake selects session semantics (lifecycle, progress, cancellation,
// logging, subscriptions, server→client requests). Modern (2026-07-28): a request whose
// params._meta carries io.modelcontextprotocol/protocolVersion is served statelessly: it names its
// own version, client capabilities and log level; server/discover describes the server; input the
// server needs from the client comes back through a retry of the call (input_required results,
// MRTR) instead of server→client requests; subscriptions/listen streams change notifications.
// Transports (stdio, HTTP) feed it messages and deliver what it sends.

#include <atomic>
#include <chrono>
#include <condition_variable>
#include <cstddef>
#include <map>
#include <memory>
#include <mutex>
#include <nlohmann/json.hpp>
#include <optional>
#include <set>
#include <string>
#include <string_view>
#include <vector>

#include "core/clock.hpp"
#include "server/jsonrpc.hpp"
#include "server/tasks.hpp"
#include "server/thread_pool.hpp"
#include "server/tool.hpp"

namespace autocomp::server {

inline constexpr std::string_view k_latest_protocol_version = "2025-11-25";
// Versions we accept in initialize and in the MCP-Protocol-Version header, newest first.
const std::vector<std::string>& supported_protocol_versions();
bool is_supported_protocol_version(std::string_view version);
// The version to answer an initialize with: the requested one when supported, else our latest.
std::string negotiate_protocol_version(const nlohmann::json& requested);

// The stateless revision (no initialize; every request carries its own _meta).
inline constexpr std::string_view k_modern_protocol_version = "2026-07-28";
const std::vector<std::string>& modern_protocol_versions();
bool is_modern_protocol_version(std::string_view version);
// Every version served, newest first (server/discover `supportedVersions`).
const std::vector<std::string>& all_protocol_versions();
// Keys of a modern request's params._meta.
inline constexpr const char* k_meta_protocol_version = "io.modelcontextprotocol/protocolVersion";
inline constexpr const char* k_meta_client_capabilities =
    "io.modelcontextprotocol/clientCapabilities";
inline constexpr const char* k_meta_client_info = "io.modelcontextprotocol/clientInfo";
inline constexpr const char* k_meta_log_level = "io.modelcontextprotocol/logLevel";
inline constexpr const char* k_meta_server_info = "io.modelcontextprotocol/serverInfo";
inline constexpr const char* k_meta_subscription_id = "io.modelcontextprotocol/subscriptionId";
// Whether a request is modern: its params._meta names a protocol version.
bool has_modern_meta(const nlohmann::json& params);
// The HTTP status that goes with a modern JSON-RPC error code (404 for -32601, 400 for the
// request-shape codes, 200 otherwise).
int modern_http_status(int code);
// The methods a modern request may name (others: -32601, HTTP 404).
bool is_modern_method(std::string_view method);
// A modern request refused before dispatch.
struct ModernRejection {
  int code;
  std::string message;
  nlohmann::json data = nullptr;
};
// Method and _meta checks of a modern request: -32601 for a method 2026-07-28 does not have (or
// this server does not serve), -32602 for missing or malformed _meta fields.
std::optional<ModernRejection> check_modern_shape(const jsonrpc::Request& request);
// The version check: -32022 with data {supported, requested} for a version not served statelessly.
std::optional<ModernRejection> check_modern_version(const jsonrpc::Request& request);

struct ServerOptions {
  std::string name = "autocomp-mcp";
  std::string title = "autocomp-mcp (NKI kernel optimization for AWS Trainium)";
  std::string version = "0.0.0";
  std::string instructions;            // initialize result `instructions` (empty: omitted)
  std::size_t page_size = 50;          // items per tools/prompts/resources list page
  std::size_t worker_threads = 8;      // concurrent tool calls
  std::size_t max_queued_calls = 256;  // waiting tool calls beyond the workers
  jsonrpc::Limits limits;
  std::chrono::milliseconds roots_timeout{2000};  // roots/list answer wait (working_dir)
  // Over HTTP, tool arguments naming outbound endpoints (a model spec with a base URL, an ssh://
  // or hosts: backend) are refused unless this is set (--allow-remote-endpoints); the server's
  // own configured specs (trusted_endpoints: its --backend and --llm) are always accepted.
  bool allow_remote_endpoints = false;
  std::vector<std::string> trusted_endpoints;
  // The clock of the server's timeouts (server→client request answers, HTTP session idle
  // expiry); null: the steady clock. Tests pass a core::ManualClock so that they cost no real time.
  std::shared_ptr<const core::Clock> clock;
};

// Which transport a session serves.
enum class SessionTransport { stdio, http };

// Why `arguments` may not be used by a call over a transport that does not allow outbound
// endpoints: the first argument that names one (an "llm" entry with a base URL or a URL scheme,
// a "backend" piece other than sim/local), unless it equals one of `trusted`. nullopt: none.
std::optional<std::string> outbound_endpoint_in(const nlohmann::json& arguments,
                                                const std::vector<std::string>& trusted);

// Where the messages of one inbound request go (its response stream), or a session's messages
// that belong to no request (the standalone stream). Implementations are thread-safe.
class Outbox {
 public:
  virtual ~Outbox() = default;
  // A notification or server→client request related to the request.
  virtual void send(const nlohmann::json& message) = 0;
  // The final message: the response, or nothing for a cancelled request. Called once.
  virtual void finish(std::optional<nlohmann::json> response) = 0;
  // HTTP SSE only: end the current connection, the client resumes with Last-Event-ID.
  virtual void close_connection(std::chrono::milliseconds /*retry*/) {}
  // Whether a message sent now can reach the client: false for an HTTP standalone stream while
  // no GET stream is open, and for a closed stdout.
  virtual bool connected() const { return true; }
};

class Server;
struct MethodRow;

// One client connection's protocol state: a stdio process, or one HTTP Mcp-Session-Id.
class Session : public std::enable_shared_from_this<Session> {
 public:
  Session(Server& server, std::shared_ptr<Outbox> standalone,
          SessionTransport transport = SessionTransport::stdio);
  ~Session();
  Session(const Session&) = delete;
  Session& operator=(const Session&) = delete;

  // Parses and handles one raw message (framing checks included); requests are answered through
  // `outbox->finish`, possibly later from a worker thread. `outbox` may be null for messages that
  // need no answer; an invalid message is answered through it.
  void handle_raw(std::string_view raw, const std::shared_ptr<Outbox>& outbox);
  void handle(jsonrpc::Message message, const std::shared_ptr<Outbox>& outbox);
  // Serves one request statelessly (2026-07-28), whatever the session's state: validates its
  // _meta, dispatches, answers through `outbox`. A request carrying modern _meta that reaches
  // handle() comes here too.
  void handle_modern(jsonrpc::Request request, const std::shared_ptr<Outbox>& outbox);

  bool initialized() const { return m_initialized.load(); }
  std::string protocol_version() const;
  // Cancels running calls and fails waiting client requests; the session answers nothing more.
  void close();
  bool closed() const { return m_closed.load(); }
  // Replaces the stream for messages that belong to no request (HTTP GET stream).
  void set_standalone(std::shared_ptr<Outbox> standalone);
  // Sends on the standalone stream (dropped when there is none).
  void send_standalone(const nlohmann::json& message);
  // notifications/resources/updated when subscribed to `uri`.
  void resource_updated(const std::string& uri);
  // A server→client request that belongs to no client request, sent on the standalone stream
  // (stdio: stdout; HTTP: the GET stream) and answered like the requests of a tool call. Fails at
  // once with unavailable when the session is closed or no stream to the client is open; also
  // unavailable when the session closes before the answer, cancelled when `cancel` is set,
  // timeout after `timeout`, transport_error for an error answer.
  core::Result<nlohmann::json> session_request(const std::string& method,
                                               const nlohmann::json& params,
                                               std::chrono::milliseconds timeout,
                                               const core::CancelToken& cancel);
  std::size_t running_calls() const;

 private:
  struct InFlight {
    core::CancelToken cancel;
    bool cancelled = false;
  };
  struct PendingRequest {
    std::mutex mutex;
    std::condition_variable done;
    std::optional<jsonrpc::Response> response;
    bool failed = false;
  };

 public:
  // One modern request's own state: what its _meta declared, and the inputs exchanged with the
  // client (answers from inputResponses and the verified requestState; inputs still missing).
  struct ModernCall {
    std::string version;
    nlohmann::json capabilities = nlohmann::json::object();
    std::optional<LogLevel> log_level;
    std::string bound_to;  // "method name": what its requestState may be reused for
    std::mutex mutex;
    nlohmann::json answers = nlohmann::json::object();
    nlohmann::json pending = nlohmann::json::object();
    nlohmann::json missing_capabilities = nlohmann::json::object();
    std::size_t requests = 0;  // request() calls so far (their keys)
  };

  // The method table (server/methods.cpp): one row per method, both generations.
  static const std::vector<MethodRow>& method_table();

 private:
  // 2025-11-25 (server/session.cpp).
  void handle_request(jsonrpc::Request request, const std::shared_ptr<Outbox>& outbox);
  void handle_notification(const jsonrpc::Notification& notification);
  void handle_response(const jsonrpc::Response& response);
  // 2026-07-28 (server/stateless.cpp): a row's answer with the modern result fields.
  nlohmann::json dispatch_modern(const MethodRow& row, const jsonrpc::Request& request,
                                 const std::shared_ptr<ModernCall>& call);  // throws RpcError
  nlohmann::json discover() const;                                          // server/discover
  void start_tool_call(jsonrpc::Request request, const std::shared_ptr<Outbox>& outbox,
                       std::shared_ptr<ModernCall> modern = nullptr);
  nlohmann::json run_tool(const ToolDef& tool, const jsonrpc::Request& request,
                          const std::shared_ptr<Outbox>& outbox, const core::CancelToken& cancel,
                          const std::shared_ptr<ModernCall>& modern);
  // run_tool with a context made already (a task's, whose input sinks the task store set).
  nlohmann::json run_tool_in(const ToolDef& tool, const jsonrpc::Request& request,
                             ToolContext& context, const std::shared_ptr<ModernCall>& modern);
  ToolContext make_context(const jsonrpc::Request& request, const std::shared_ptr<Outbox>& outbox,
                           const core::CancelToken& cancel,
                           const std::shared_ptr<ModernCall>& modern = nullptr);
  void listen(const jsonrpc::Request& request, const std::shared_ptr<Outbox>& outbox);
  core::Result<nlohmann::json> client_request(const std::string& method,
                                              const nlohmann::json& params,
                                              const std::shared_ptr<Outbox>& outbox,
                                              std::chrono::milliseconds timeout,
                                              const core::CancelToken& cancel);
  std::string working_dir(const std::shared_ptr<Outbox>& outbox);
  bool log_enabled(LogLevel level) const;
  // Protocol tasks (defined in server/tasks.cpp): true when the call was answered here (a task
  // was created, the request was refused, or, for a 2026-07-28 request (`modern`), the inputs
  // the task needs first are asked for with an input_required result); false: run it as a plain
  // call.
  bool start_task(const ToolDef& tool, const jsonrpc::Request& request,
                  const std::shared_ptr<Outbox>& outbox,
                  const std::shared_ptr<ModernCall>& modern = nullptr);
  void handle_task_request(const jsonrpc::Request& request, const std::shared_ptr<Outbox>& outbox);
  std::string task_owner();

  nlohmann::json initialize(const nlohmann::json& params);
  nlohmann::json list_tools(const nlohmann::json& params) const;
  nlohmann::json list_resources(const nlohmann::json& params) const;
  nlohmann::json list_resource_templates(const nlohmann::json& params) const;
  nlohmann::json read_resource(const nlohmann::json& params) const;
  nlohmann::json list_prompts(const nlohmann::json& params) const;
  nlohmann::json get_prompt(const nlohmann::json& params,
                            const std::shared_ptr<ModernCall>& modern = nullptr) const;
  nlohmann::json complete(const nlohmann::json& params) const;
  nlohmann::json set_log_level(const nlohmann::json& params);
  nlohmann::json subscribe(const nlohmann::json& params, bool on);

  Server& m_server;
  SessionTransport m_transport;
  std::atomic<bool> m_initialized{false};
  std::atomic<bool> m_closed{false};
  mutable std::mutex m_mutex;  // guards everything below
  std::string m_protocol_version{k_latest_protocol_version};
  nlohmann::json m_client_capabilities = nlohmann::json::object();
  nlohmann::json m_client_info = nlohmann::json::object();
  std::optional<LogLevel> m_log_level;
  std::set<std::string> m_subscriptions;
  std::map<std::string, InFlight> m_in_flight;                       // by serialized request id
  std::map<std::string, std::shared_ptr<Outbox>> m_listens;          // open subscriptions/listen
  std::map<std::string, std::shared_ptr<PendingRequest>> m_pending;  // by serialized id
  std::uint64_t m_next_request_id = 1;
  std::shared_ptr<Outbox> m_standalone;
  std::optional<std::string> m_roots_dir;  // cached answer of roots/list
  std::string m_task_owner;                // this session's key in the task store
};

// The shared part: options, registries, worker pool, sessions (for broadcasts).
class Server {
 public:
  Server(Registries& registries, ServerOptions options);
  ~Server();
  Server(const Server&) = delete;
  Server& operator=(const Server&) = delete;

  std::shared_ptr<Session> create_session(std::shared_ptr<Outbox> standalone,
                                          SessionTransport transport = SessionTransport::stdio);
  const ServerOptions& options() const { return m_options; }
  const core::Clock& clock() const { return *m_clock; }
  Registries& registries() { return m_registries; }
  ThreadPool& pool() { return m_pool; }
  TaskStore& tasks() { return *m_tasks; }

  // Waits until no tool call runs, up to `timeout`; true when idle.
  bool wait_idle(std::chrono::milliseconds timeout) { return m_pool.wait_idle(timeout); }
  // Closes every session (running calls see their cancel token set).
  void close_all_sessions();

  // The capabilities object of initialize (legacy) and server/discover (modern).
  nlohmann::json capabilities(bool modern) const;
  // requestState of an input_required result: `payload` with an integrity tag (HMAC-SHA256 under
  // a key made at start); open_state gives the payload back, nullopt when it was altered or made
  // by another server process.
  std::string seal_state(const nlohmann::json& payload) const;
  std::optional<nlohmann::json> open_state(const std::string& state) const;
  // A subscriptions/listen stream: gets notifications/resources/updated for `uris` until it is
  // no longer connected or removed.
  void add_listener(const std::string& id, std::weak_ptr<Outbox> outbox, std::set<std::string> uris,
                    nlohmann::json subscription_id);
  void remove_listener(const std::string& id);

  // One tool call outside any session (the `call` subcommand): validation included. Returns the
  // MCP CallToolResult; nullopt when the tool does not exist.
  std::optional<nlohmann::json> call_tool(const std::string& name, const nlohmann::json& arguments,
                                          ToolContext& context);

 private:
  friend class Session;
  void broadcast_resource_updated(const std::string& uri);

  struct Listener {
    std::weak_ptr<Outbox> outbox;
    std::set<std::string> uris;
    nlohmann::json subscription_id;
  };

  Registries& m_registries;
  ServerOptions m_options;
  std::shared_ptr<const core::Clock> m_clock;  // never null
  std::string m_state_key;                     // random, for seal_state
  std::mutex m_sessions_mutex;
  std::vector<std::weak_ptr<Session>> m_sessions;
  std::map<std::string, Listener> m_listeners;  // guarded by m_sessions_mutex
  std::unique_ptr<TaskStore> m_tasks;           // destroyed after the pool whose jobs use it
  ThreadPool m_pool;
};

// The task capabilities of an initialize result: 2025-11-25 `tasks` and, when the client declared
// it, the io.modelcontextprotocol/tasks extension (server/tasks.cpp).
void add_task_capabilities(nlohmann::json& capabilities, const nlohmann::json& client_capabilities);
// A tools/list entry's `execution.taskSupport`, for tools that may run as tasks.
void add_task_execution(nlohmann::json& entry, const ToolDef& tool);

// The CallToolResult for a handler's value (content with text mirror, structuredContent, isError).
nlohmann::json to_call_tool_result(const ToolResult& result);
// Runs a tool: validates `arguments` against its input schema (isError result naming the field
// when invalid), calls the handler, turns an escaping exception into an isError result.
nlohmann::json invoke_tool(const ToolDef& tool, const nlohmann::json& arguments,
                           ToolContext& context);

// Opaque page cursors (exposed for tests): encode an offset, decode → nullopt when invalid.
std::string encode_cursor(std::size_t offset);
std::optional<std::size_t> decode_cursor(const std::string& cursor);

}  // namespace autocomp::server
