#include "server/protocol.hpp"

#include <openssl/crypto.h>
#include <openssl/evp.h>
#include <openssl/hmac.h>
#include <openssl/rand.h>
#include <openssl/sha.h>
#include <spdlog/spdlog.h>

#include <algorithm>
#include <array>
#include <cmath>
#include <cstdint>
#include <exception>
#include <stdexcept>

#include "server/methods.hpp"
#include "server/protocol_detail.hpp"
#include "server/schema.hpp"

// What both protocol generations share: the session's message entry points, tool calls and the
// contexts their handlers see, and the Server. The 2025-11-25 session is in server/session.cpp,
// the 2026-07-28 stateless requests in server/stateless.cpp, the method table in
// server/methods.cpp.

namespace autocomp::server {

namespace detail {

std::string id_key(const nlohmann::json& id) {
  return jsonrpc::serialize(id);
}

const nlohmann::json& object_or_empty(const nlohmann::json& params) {
  static const nlohmann::json k_empty = nlohmann::json::object();
  return params.is_object() ? params : k_empty;
}

std::string required_string(const nlohmann::json& params, const char* name) {
  const auto& object = object_or_empty(params);
  auto it = object.find(name);
  if (it == object.end() || !it->is_string()) {
    throw RpcError{jsonrpc::k_invalid_params,
                   std::string("Invalid params: \"") + name + "\" must be a string"};
  }
  return it->get<std::string>();
}

std::size_t page_start(const nlohmann::json& params) {
  const auto& object = object_or_empty(params);
  auto it = object.find("cursor");
  if (it == object.end() || it->is_null()) {
    return 0;
  }
  if (!it->is_string()) {
    throw RpcError{jsonrpc::k_invalid_params, "Invalid params: \"cursor\" must be a string"};
  }
  auto offset = decode_cursor(it->get<std::string>());
  if (!offset) {
    throw RpcError{jsonrpc::k_invalid_params, "Invalid params: unknown cursor"};
  }
  return *offset;
}

void put_if_not_empty(nlohmann::json& object, const char* key, const std::string& value) {
  if (!value.empty()) {
    object[key] = value;
  }
}

std::string percent_decode(std::string_view text) {
  std::string out;
  for (std::size_t i = 0; i < text.size(); ++i) {
    if (text[i] == '%' && i + 2 < text.size() &&
        std::isxdigit(static_cast<unsigned char>(text[i + 1])) &&
        std::isxdigit(static_cast<unsigned char>(text[i + 2]))) {
      out.push_back(static_cast<char>(std::stoi(std::string(text.substr(i + 1, 2)), nullptr, 16)));
      i += 2;
    } else {
      out.push_back(text[i]);
    }
  }
  return out;
}

// Integral values are written as integers (50, not 50.0).
nlohmann::json json_number(double value) {
  if (std::isfinite(value) && std::floor(value) == value && std::fabs(value) < 9e15) {
    return static_cast<std::int64_t>(value);
  }
  return value;
}

core::Failure rpc_failure(const std::string& method, const nlohmann::json& error) {
  std::string message = "the client answered " + method + " with an error";
  if (error.is_object()) {
    message += ": " + error.value("message", std::string("(no message)"));
  }
  return core::make_failure(core::FailureKind::transport_error, "client-request", message);
}

}  // namespace detail

namespace {

std::string base64_encode(std::string_view bytes) {
  std::string out(4 * ((bytes.size() + 2) / 3) + 1, '\0');
  const int n = EVP_EncodeBlock(reinterpret_cast<unsigned char*>(out.data()),
                                reinterpret_cast<const unsigned char*>(bytes.data()),
                                static_cast<int>(bytes.size()));
  out.resize(static_cast<std::size_t>(std::max(n, 0)));
  return out;
}

std::optional<std::string> base64_decode(std::string_view text) {
  if (text.size() % 4 != 0 ||
      text.find_first_not_of("ABCDEFGHIJKLMNOPQRSTUVWXYZabcdefghijklmnopqrstuvwxyz0123456789+/=") !=
          std::string_view::npos) {
    return std::nullopt;
  }
  std::string out(3 * (text.size() / 4) + 1, '\0');
  const int n = EVP_DecodeBlock(reinterpret_cast<unsigned char*>(out.data()),
                                reinterpret_cast<const unsigned char*>(text.data()),
                                static_cast<int>(text.size()));
  if (n < 0) {
    return std::nullopt;
  }
  std::size_t size = static_cast<std::size_t>(n);
  for (std::size_t i = text.size(); i > 0 && text[i - 1] == '='; --i) {
    --size;  // EVP_DecodeBlock counts the padding as zero bytes
  }
  out.resize(size);
  return out;
}

std::string hex(const unsigned char* data, std::size_t size) {
  static const char* k_digits = "0123456789abcdef";
  std::string out;
  for (std::size_t i = 0; i < size; ++i) {
    out.push_back(k_digits[data[i] >> 4]);
    out.push_back(k_digits[data[i] & 15]);
  }
  return out;
}

std::string hmac_hex(const std::string& key, std::string_view text) {
  std::array<unsigned char, EVP_MAX_MD_SIZE> digest{};
  unsigned int size = 0;
  HMAC(EVP_sha256(), key.data(), static_cast<int>(key.size()),
       reinterpret_cast<const unsigned char*>(text.data()), text.size(), digest.data(), &size);
  return hex(digest.data(), size);
}

}  // namespace

using namespace detail;

std::optional<std::string> outbound_endpoint_in(const nlohmann::json& arguments,
                                                const std::vector<std::string>& trusted) {
  if (!arguments.is_object()) {
    return std::nullopt;
  }
  auto is_trusted = [&](const std::string& text) {
    return std::find(trusted.begin(), trusted.end(), text) != trusted.end();
  };
  if (auto llm = arguments.find("llm"); llm != arguments.end()) {
    std::vector<nlohmann::json> specs;
    if (llm->is_array()) {
      specs.assign(llm->begin(), llm->end());
    } else {
      specs.push_back(*llm);
    }
    for (const auto& spec : specs) {
      if (!spec.is_string()) {
        continue;  // the schema check reports it
      }
      const auto& text = spec.get_ref<const std::string&>();
      if ((text.find('@') != std::string::npos || text.find("://") != std::string::npos) &&
          !is_trusted(text)) {
        return "the llm spec '" + text + "' names its own model server";
      }
    }
  }
  if (auto backend = arguments.find("backend");
      backend != arguments.end() && backend->is_string()) {
    const auto& text = backend->get_ref<const std::string&>();
    if (!is_trusted(text)) {
      std::size_t start = 0;
      while (start <= text.size()) {
        auto comma = text.find(',', start);
        if (comma == std::string::npos) {
          comma = text.size();
        }
        std::string piece = text.substr(start, comma - start);
        piece.erase(0, piece.find_first_not_of(" \t"));
        piece.erase(piece.find_last_not_of(" \t") + 1);
        const std::string scheme = piece.substr(0, piece.find_first_of("?:"));
        if (!piece.empty() && scheme != "sim" && scheme != "local") {
          return "the backend '" + piece + "' names hosts to connect to";
        }
        start = comma + 1;
      }
    }
  }
  return std::nullopt;
}

std::string encode_cursor(std::size_t offset) {
  return "page:" + std::to_string(offset);
}

std::optional<std::size_t> decode_cursor(const std::string& cursor) {
  constexpr std::string_view k_prefix = "page:";
  if (cursor.size() <= k_prefix.size() || cursor.size() > k_prefix.size() + 12 ||
      cursor.compare(0, k_prefix.size(), k_prefix) != 0) {
    return std::nullopt;
  }
  std::size_t offset = 0;
  for (std::size_t i = k_prefix.size(); i < cursor.size(); ++i) {
    if (cursor[i] < '0' || cursor[i] > '9') {
      return std::nullopt;
    }
    offset = offset * 10 + static_cast<std::size_t>(cursor[i] - '0');
  }
  return offset;
}

nlohmann::json to_call_tool_result(const ToolResult& result) {
  nlohmann::json content = nlohmann::json::array();
  if (!result.text.empty()) {
    content.push_back({{"type", "text"}, {"text", result.text}});
  } else if (!result.structured.is_null()) {
    content.push_back({{"type", "text"}, {"text", jsonrpc::serialize(result.structured)}});
  }
  if (result.extra_content.is_array()) {
    for (const auto& block : result.extra_content) {
      content.push_back(block);
    }
  }
  nlohmann::json out = {{"content", std::move(content)}};
  // An error result carries its message as text only: clients check structuredContent against the
  // tool's output schema even on errors, and an error object never matches it.
  if (result.structured.is_object() && !result.is_error) {
    out["structuredContent"] = result.structured;
  }
  if (result.is_error) {
    out["isError"] = true;
  }
  return out;
}

nlohmann::json invoke_tool(const ToolDef& tool, const nlohmann::json& arguments,
                           ToolContext& context) {
  nlohmann::json args = arguments.is_null() ? nlohmann::json::object() : arguments;
  if (!args.is_object()) {
    return to_call_tool_result(tool_error("Invalid arguments for tool '" + tool.name +
                                          "': arguments must be a JSON object"));
  }
  if (auto error = validate_schema(tool.input_schema, args)) {
    return to_call_tool_result(
        tool_error("Invalid arguments for tool '" + tool.name + "': " + *error));
  }
  if (auto where = find_nul_character(args)) {
    return to_call_tool_result(tool_error("Invalid arguments for tool '" + tool.name +
                                          "': " + *where +
                                          ": contains a NUL character (\\u0000), which no path, "
                                          "spec or source text may hold"));
  }
  ToolResult result;
  try {
    result = tool.handler(args, context);
  } catch (const std::exception& error) {
    spdlog::error("tool {} threw: {}", tool.name, error.what());
    result = tool_error("Tool '" + tool.name + "' failed with an internal error: " + error.what());
  } catch (...) {
    spdlog::error("tool {} threw a non-standard exception", tool.name);
    result = tool_error("Tool '" + tool.name + "' failed with an internal error");
  }
  if (!result.is_error && !tool.output_schema.is_null()) {
    if (!result.structured.is_object()) {
      spdlog::error("tool {} returned no structured content despite its output schema", tool.name);
      result = tool_error("Tool '" + tool.name +
                          "' produced no structured result (internal error; please report it)");
    } else if (auto error = validate_schema(tool.output_schema, result.structured, "result")) {
      spdlog::error("tool {} returned output violating its schema: {}", tool.name, *error);
      result = tool_error("Tool '" + tool.name +
                          "' produced a result that violates its output schema (internal error; "
                          "please report it): " +
                          *error);
    }
  }
  return to_call_tool_result(result);
}

// ---------------------------------------------------------------------------------------------
// Session

Session::Session(Server& server, std::shared_ptr<Outbox> standalone, SessionTransport transport)
    : m_server(server), m_transport(transport), m_standalone(std::move(standalone)) {}

Session::~Session() {
  close();
}

std::string Session::protocol_version() const {
  std::lock_guard lock(m_mutex);
  return m_protocol_version;
}

void Session::set_standalone(std::shared_ptr<Outbox> standalone) {
  std::lock_guard lock(m_mutex);
  m_standalone = std::move(standalone);
}

void Session::send_standalone(const nlohmann::json& message) {
  std::shared_ptr<Outbox> standalone;
  {
    std::lock_guard lock(m_mutex);
    standalone = m_standalone;
  }
  if (standalone) {
    standalone->send(message);
  }
}

std::size_t Session::running_calls() const {
  std::lock_guard lock(m_mutex);
  return m_in_flight.size();
}

void Session::close() {
  if (m_closed.exchange(true)) {
    return;
  }
  std::lock_guard lock(m_mutex);
  for (auto& [key, call] : m_in_flight) {
    call.cancelled = true;
    call.cancel.cancel();
  }
  for (auto& [key, pending] : m_pending) {
    std::lock_guard pending_lock(pending->mutex);
    pending->failed = true;
    pending->done.notify_all();
  }
}

void Session::resource_updated(const std::string& uri) {
  {
    std::lock_guard lock(m_mutex);
    if (m_subscriptions.count(uri) == 0) {
      return;
    }
  }
  send_standalone(jsonrpc::make_notification("notifications/resources/updated", {{"uri", uri}}));
}

void Session::handle_raw(std::string_view raw, const std::shared_ptr<Outbox>& outbox) {
  handle(jsonrpc::parse(raw, m_server.options().limits), outbox);
}

void Session::handle(jsonrpc::Message message, const std::shared_ptr<Outbox>& outbox) {
  if (auto* request = std::get_if<jsonrpc::Request>(&message)) {
    handle_request(std::move(*request), outbox);
  } else if (auto* notification = std::get_if<jsonrpc::Notification>(&message)) {
    handle_notification(*notification);
  } else if (auto* response = std::get_if<jsonrpc::Response>(&message)) {
    handle_response(*response);
  } else if (auto* invalid = std::get_if<jsonrpc::Invalid>(&message)) {
    spdlog::debug("invalid message: {}", invalid->error_response["error"].value("message", ""));
    if (outbox) {
      outbox->finish(std::move(invalid->error_response));
    }
  }
}

bool Session::log_enabled(LogLevel level) const {
  std::lock_guard lock(m_mutex);
  // Until the client chooses, info and above are sent.
  return level >= m_log_level.value_or(LogLevel::info);
}

ToolContext Session::make_context(const jsonrpc::Request& request,
                                  const std::shared_ptr<Outbox>& outbox,
                                  const core::CancelToken& cancel,
                                  const std::shared_ptr<ModernCall>& modern) {
  ToolContext context;
  context.cancel = cancel;
  if (modern) {
    context.client_capabilities = modern->capabilities;
  } else {
    std::lock_guard lock(m_mutex);
    context.client_capabilities = m_client_capabilities;
  }
  context.client_supports_sampling =
      context.client_capabilities.is_object() && context.client_capabilities.contains("sampling");
  context.client_supports_elicitation = context.client_capabilities.is_object() &&
                                        context.client_capabilities.contains("elicitation");
  context.remote_endpoints_allowed =
      m_transport != SessionTransport::http || m_server.options().allow_remote_endpoints;
  std::weak_ptr<Session> weak = weak_from_this();
  const auto& params = object_or_empty(request.params);
  nlohmann::json token;
  if (auto meta = params.find("_meta"); meta != params.end() && meta->is_object()) {
    if (auto it = meta->find("progressToken");
        it != meta->end() && (it->is_string() || it->is_number_integer())) {
      token = *it;
    }
  }
  if (!token.is_null()) {
    context.progress_sink = [outbox, token, cancel](double done, std::optional<double> total,
                                                    const std::string& message) {
      if (cancel.cancelled()) {
        return;
      }
      nlohmann::json progress = {{"progressToken", token}, {"progress", json_number(done)}};
      if (total) {
        progress["total"] = json_number(*total);
      }
      if (!message.empty()) {
        progress["message"] = message;
      }
      outbox->send(jsonrpc::make_notification("notifications/progress", std::move(progress)));
    };
  }
  context.log_sink = [weak, outbox](LogLevel level, const std::string& logger,
                                    const nlohmann::json& data) {
    auto self = weak.lock();
    if (!self || !self->log_enabled(level)) {
      return;
    }
    nlohmann::json message = {{"level", std::string(to_string(level))}, {"data", data}};
    if (!logger.empty()) {
      message["logger"] = logger;
    }
    outbox->send(jsonrpc::make_notification("notifications/message", std::move(message)));
  };
  context.request_sink = [weak, outbox](
                             const std::string& method, const nlohmann::json& params_,
                             std::chrono::milliseconds timeout,
                             const core::CancelToken& token_) -> core::Result<nlohmann::json> {
    auto self = weak.lock();
    if (!self) {
      return core::make_failure(core::FailureKind::transport_error, "client-request",
                                "the client session has ended");
    }
    return self->client_request(method, params_, outbox, timeout, token_);
  };
  context.session_request_sink =
      [weak](const std::string& method, const nlohmann::json& params_,
             std::chrono::milliseconds timeout,
             const core::CancelToken& token_) -> core::Result<nlohmann::json> {
    auto self = weak.lock();
    if (!self) {
      return core::make_failure(
          core::FailureKind::unavailable, "client-request",
          "the MCP session has ended, so " + method + " cannot reach the client");
    }
    return self->session_request(method, params_, timeout, token_);
  };
  context.working_dir_sink = [weak, outbox]() -> std::string {
    auto self = weak.lock();
    return self ? self->working_dir(outbox) : std::string();
  };
  context.close_stream_sink = [outbox](std::chrono::milliseconds retry) {
    outbox->close_connection(retry);
  };
  if (modern) {
    // 2026-07-28: the server sends no requests; what it needs from the client comes back with
    // the retried call. request() (used by code written for sessions) stops the call at its first
    // unanswered request; request_input gathers every input the handler asks for in one round.
    context.log_sink = [modern, outbox](LogLevel level, const std::string& logger,
                                        const nlohmann::json& data) {
      if (!modern->log_level || level < *modern->log_level) {
        return;  // no notifications/message without io.modelcontextprotocol/logLevel
      }
      nlohmann::json message = {{"level", std::string(to_string(level))}, {"data", data}};
      if (!logger.empty()) {
        message["logger"] = logger;
      }
      outbox->send(jsonrpc::make_notification("notifications/message", std::move(message)));
    };
    context.request_sink = [modern, cancel](const std::string& method,
                                            const nlohmann::json& params_,
                                            std::chrono::milliseconds, const core::CancelToken&) {
      std::string key;
      {
        std::lock_guard lock(modern->mutex);
        const std::string kind = method.substr(0, method.find('/'));
        key = kind + "-" + std::to_string(++modern->requests);
      }
      auto answer = modern_input(*modern, key, method, params_);
      if (!answer.ok()) {
        cancel.cancel();  // the call runs again once the client has answered
      }
      return answer;
    };
    context.input_sink = [modern](const std::string& key, const std::string& method,
                                  const nlohmann::json& params_) {
      return modern_input(*modern, key, method, params_);
    };
    context.session_request_sink = [](const std::string& method, const nlohmann::json&,
                                      std::chrono::milliseconds,
                                      const core::CancelToken&) -> core::Result<nlohmann::json> {
      return core::make_failure(core::FailureKind::unavailable, "client-request",
                                "a 2026-07-28 client takes no requests outside a call, so " +
                                    method + " cannot reach it");
    };
    // Roots would cost every call a round trip: relative paths resolve against the server's
    // working folder.
    context.working_dir_sink = []() { return std::string(); };
  }
  return context;
}

void Session::start_tool_call(jsonrpc::Request request, const std::shared_ptr<Outbox>& outbox,
                              std::shared_ptr<ModernCall> modern) {
  const auto& params = object_or_empty(request.params);
  auto name = params.find("name");
  if (name == params.end() || !name->is_string()) {
    outbox->finish(jsonrpc::make_error(request.id, jsonrpc::k_invalid_params,
                                       "Invalid params: \"name\" must be a string"));
    return;
  }
  const ToolDef* tool = m_server.registries().tools.find(name->get<std::string>());
  if (tool == nullptr) {
    outbox->finish(jsonrpc::make_error(request.id, jsonrpc::k_invalid_params,
                                       "Unknown tool: " + name->get<std::string>(),
                                       {{"name", *name}}));
    return;
  }
  if (auto args = params.find("arguments");
      args != params.end() && !args->is_null() && !args->is_object()) {
    outbox->finish(jsonrpc::make_error(request.id, jsonrpc::k_invalid_params,
                                       "Invalid params: \"arguments\" must be an object"));
    return;
  }
  if (start_task(*tool, request, outbox, modern)) {  // server/tasks.cpp
    return;
  }
  const std::string key = id_key(request.id);
  core::CancelToken cancel;
  {
    std::lock_guard lock(m_mutex);
    if (m_in_flight.count(key) != 0) {
      outbox->finish(jsonrpc::make_error(
          request.id, jsonrpc::k_invalid_request,
          "Invalid Request: request id " + key + " is already in use by a running request"));
      return;
    }
    m_in_flight[key] = InFlight{cancel, false};
  }
  auto self = shared_from_this();
  auto job = [self, tool, request, outbox, cancel, key, modern]() {
    nlohmann::json response;
    try {
      response =
          jsonrpc::make_result(request.id, self->run_tool(*tool, request, outbox, cancel, modern));
    } catch (const RpcError& error) {
      response = jsonrpc::make_error(request.id, error.code, error.message, error.data);
    } catch (const std::exception& error) {
      response = jsonrpc::make_error(request.id, jsonrpc::k_internal_error,
                                     std::string("Internal error: ") + error.what());
    }
    bool cancelled = false;
    {
      std::lock_guard lock(self->m_mutex);
      if (auto it = self->m_in_flight.find(key); it != self->m_in_flight.end()) {
        cancelled = it->second.cancelled;
        self->m_in_flight.erase(it);
      }
    }
    if (cancelled) {
      outbox->finish(std::nullopt);
    } else {
      outbox->finish(std::move(response));
    }
  };
  if (!m_server.pool().submit(std::move(job))) {
    {
      std::lock_guard lock(m_mutex);
      m_in_flight.erase(key);
    }
    outbox->finish(
        jsonrpc::make_error(request.id, jsonrpc::k_internal_error,
                            "Server busy: too many tool calls are waiting; retry later"));
  }
}

nlohmann::json Session::run_tool(const ToolDef& tool, const jsonrpc::Request& request,
                                 const std::shared_ptr<Outbox>& outbox,
                                 const core::CancelToken& cancel,
                                 const std::shared_ptr<ModernCall>& modern) {
  ToolContext context = make_context(request, outbox, cancel, modern);
  return run_tool_in(tool, request, context, modern);
}

nlohmann::json Session::run_tool_in(const ToolDef& tool, const jsonrpc::Request& request,
                                    ToolContext& context,
                                    const std::shared_ptr<ModernCall>& modern) {
  const auto& params = object_or_empty(request.params);
  const nlohmann::json arguments = params.value("arguments", nlohmann::json::object());
  const auto started = std::chrono::steady_clock::now();
  const auto& options = m_server.options();
  if (!context.remote_endpoints_allowed) {
    if (auto endpoint = outbound_endpoint_in(arguments, options.trusted_endpoints)) {
      spdlog::warn("tool {} over HTTP refused: {}", tool.name, *endpoint);
      return to_call_tool_result(tool_error(
          "Refused: " + *endpoint +
          ". Over HTTP the server does not contact endpoints named in tool arguments (a web page "
          "could otherwise make it fetch code from anywhere); configure them when starting the "
          "server (--llm, --backend) or start it with --allow-remote-endpoints"));
    }
  }
  nlohmann::json result = invoke_tool(tool, arguments, context);
  if (modern) {
    result = modern_outcome(m_server, *modern, std::move(result));
  }
  spdlog::debug("tool {} finished in {} ms{}", tool.name,
                std::chrono::duration_cast<std::chrono::milliseconds>(
                    std::chrono::steady_clock::now() - started)
                    .count(),
                result.value("isError", false) ? " (error result)" : "");
  return result;
}

// ---------------------------------------------------------------------------------------------
// Server

Server::Server(Registries& registries, ServerOptions options)
    : m_registries(registries),
      m_options(std::move(options)),
      m_clock(core::clock_or_steady(m_options.clock)),
      m_pool(m_options.worker_threads, m_options.max_queued_calls) {
  std::array<unsigned char, 32> key{};
  if (RAND_bytes(key.data(), static_cast<int>(key.size())) != 1) {
    throw std::runtime_error("no random bytes for the request-state key");
  }
  m_state_key.assign(reinterpret_cast<const char*>(key.data()), key.size());
  m_tasks = std::make_unique<TaskStore>(m_pool);
  m_registries.resources.set_update_listener(
      [this](const std::string& uri) { broadcast_resource_updated(uri); });
}

Server::~Server() {
  m_registries.resources.set_update_listener(nullptr);
  close_all_sessions();
  m_tasks->stop_all();
}

std::shared_ptr<Session> Server::create_session(std::shared_ptr<Outbox> standalone,
                                                SessionTransport transport) {
  auto session = std::make_shared<Session>(*this, std::move(standalone), transport);
  std::lock_guard lock(m_sessions_mutex);
  m_sessions.erase(std::remove_if(m_sessions.begin(), m_sessions.end(),
                                  [](const std::weak_ptr<Session>& s) { return s.expired(); }),
                   m_sessions.end());
  m_sessions.push_back(session);
  return session;
}

void Server::close_all_sessions() {
  std::vector<std::shared_ptr<Session>> sessions;
  {
    std::lock_guard lock(m_sessions_mutex);
    for (auto& weak : m_sessions) {
      if (auto session = weak.lock()) {
        sessions.push_back(std::move(session));
      }
    }
  }
  for (auto& session : sessions) {
    session->close();
  }
}

nlohmann::json Server::capabilities(bool modern) const {
  nlohmann::json capabilities = {{"tools", {{"listChanged", false}}},
                                 {"resources", {{"subscribe", true}, {"listChanged", false}}},
                                 {"prompts", {{"listChanged", false}}},
                                 {"logging", nlohmann::json::object()},
                                 {"completions", nlohmann::json::object()}};
  if (modern) {
    // 2026-07-28 has tasks only as an extension (no `tasks` slot); a request that declares it in
    // its _meta gets tasks for the calls that support them.
    capabilities["extensions"][std::string(k_tasks_extension)] = nlohmann::json::object();
  }
  return capabilities;
}

std::string Server::seal_state(const nlohmann::json& payload) const {
  std::string body = base64_encode(jsonrpc::serialize(payload));
  return body + "." + hmac_hex(m_state_key, body);
}

std::optional<nlohmann::json> Server::open_state(const std::string& state) const {
  const auto dot = state.rfind('.');
  if (dot == std::string::npos) {
    return std::nullopt;
  }
  const std::string body = state.substr(0, dot);
  const std::string tag = state.substr(dot + 1);
  const std::string expected = hmac_hex(m_state_key, body);
  if (tag.size() != expected.size() ||
      CRYPTO_memcmp(tag.data(), expected.data(), expected.size()) != 0) {
    return std::nullopt;
  }
  auto text = base64_decode(body);
  if (!text) {
    return std::nullopt;
  }
  auto payload = nlohmann::json::parse(*text, nullptr, false);
  if (!payload.is_object()) {
    return std::nullopt;
  }
  const auto now = std::chrono::duration_cast<std::chrono::seconds>(
                       std::chrono::system_clock::now().time_since_epoch())
                       .count();
  if (payload.value("expires", std::int64_t{0}) < now) {
    return std::nullopt;
  }
  return payload;
}

void Server::add_listener(const std::string& id, std::weak_ptr<Outbox> outbox,
                          std::set<std::string> uris, nlohmann::json subscription_id) {
  std::lock_guard lock(m_sessions_mutex);
  for (auto it = m_listeners.begin(); it != m_listeners.end();) {
    it = it->second.outbox.expired() ? m_listeners.erase(it) : std::next(it);
  }
  m_listeners[id] = Listener{std::move(outbox), std::move(uris), std::move(subscription_id)};
}

void Server::remove_listener(const std::string& id) {
  std::lock_guard lock(m_sessions_mutex);
  m_listeners.erase(id);
}

void Server::broadcast_resource_updated(const std::string& uri) {
  std::vector<std::shared_ptr<Session>> sessions;
  std::vector<std::pair<std::shared_ptr<Outbox>, nlohmann::json>> listeners;
  {
    std::lock_guard lock(m_sessions_mutex);
    for (auto it = m_listeners.begin(); it != m_listeners.end();) {
      auto outbox = it->second.outbox.lock();
      if (!outbox || !outbox->connected()) {
        it = m_listeners.erase(it);
        continue;
      }
      if (it->second.uris.count(uri) != 0) {
        listeners.emplace_back(std::move(outbox), it->second.subscription_id);
      }
      ++it;
    }
    for (auto& weak : m_sessions) {
      if (auto session = weak.lock()) {
        sessions.push_back(std::move(session));
      }
    }
  }
  for (auto& session : sessions) {
    session->resource_updated(uri);
  }
  for (auto& [outbox, subscription_id] : listeners) {
    outbox->send(jsonrpc::make_notification(
        "notifications/resources/updated",
        {{"uri", uri}, {"_meta", {{k_meta_subscription_id, subscription_id}}}}));
  }
}

std::optional<nlohmann::json> Server::call_tool(const std::string& name,
                                                const nlohmann::json& arguments,
                                                ToolContext& context) {
  const ToolDef* tool = m_registries.tools.find(name);
  if (tool == nullptr) {
    return std::nullopt;
  }
  return invoke_tool(*tool, arguments, context);
}

}  // namespace autocomp::server
