// The 2025-11-25 session (also serving 2025-06-18 and 2025-03-26 clients): the initialize
// handshake and version negotiation, methods only a session has (logging/setLevel,
// resources/subscribe), notifications, and server→client requests with their answers.

#include <spdlog/spdlog.h>

#include <algorithm>

#include "server/methods.hpp"
#include "server/protocol.hpp"
#include "server/protocol_detail.hpp"

namespace autocomp::server {

using namespace detail;

const std::vector<std::string>& supported_protocol_versions() {
  static const std::vector<std::string> k_versions = {"2025-11-25", "2025-06-18", "2025-03-26"};
  return k_versions;
}

bool is_supported_protocol_version(std::string_view version) {
  const auto& versions = supported_protocol_versions();
  return std::find(versions.begin(), versions.end(), version) != versions.end();
}

std::string negotiate_protocol_version(const nlohmann::json& requested) {
  if (requested.is_string() && is_supported_protocol_version(requested.get<std::string>())) {
    return requested.get<std::string>();
  }
  return std::string(k_latest_protocol_version);
}

void Session::handle_request(jsonrpc::Request request, const std::shared_ptr<Outbox>& outbox) {
  if (!outbox) {
    return;
  }
  if (m_closed) {
    outbox->finish(
        jsonrpc::make_error(request.id, jsonrpc::k_internal_error, "The session is closed"));
    return;
  }
  if (has_modern_meta(request.params)) {
    handle_modern(std::move(request), outbox);  // server/stateless.cpp
    return;
  }
  try {
    const MethodRow* row = find_method(request.method);
    if (row == nullptr || !row->legacy) {
      if (request.method == "server/discover") {
        throw RpcError{jsonrpc::k_method_not_found,
                       "Method not found: server/discover (this server speaks MCP 2025-11-25, "
                       "2025-06-18 and 2025-03-26; send initialize)",
                       {{"supported", supported_protocol_versions()}}};
      }
      throw RpcError{jsonrpc::k_method_not_found, "Method not found: " + request.method};
    }
    if (!row->before_initialize && !m_initialized) {
      throw RpcError{jsonrpc::k_invalid_request,
                     "Invalid Request: the session is not initialized; send initialize first"};
    }
    switch (row->route) {
      case MethodRoute::tool_call:
        start_tool_call(std::move(request), outbox);
        return;
      case MethodRoute::task:
        handle_task_request(request, outbox);  // server/tasks.cpp
        return;
      case MethodRoute::listen:
      case MethodRoute::answer:
        break;
    }
    outbox->finish(jsonrpc::make_result(request.id, row->answer(*this, request.params, nullptr)));
  } catch (const RpcError& error) {
    outbox->finish(jsonrpc::make_error(request.id, error.code, error.message, error.data));
  } catch (const std::exception& error) {
    spdlog::error("{} failed: {}", request.method, error.what());
    outbox->finish(jsonrpc::make_error(request.id, jsonrpc::k_internal_error,
                                       std::string("Internal error: ") + error.what()));
  }
}

nlohmann::json Session::initialize(const nlohmann::json& params) {
  if (!params.is_object()) {
    throw RpcError{jsonrpc::k_invalid_params, "Invalid params: initialize needs an object"};
  }
  auto version = params.find("protocolVersion");
  if (version == params.end() || !version->is_string()) {
    throw RpcError{jsonrpc::k_invalid_params,
                   "Invalid params: \"protocolVersion\" must be a string",
                   {{"supported", supported_protocol_versions()}}};
  }
  if (auto capabilities = params.find("capabilities");
      capabilities != params.end() && !capabilities->is_object()) {
    throw RpcError{jsonrpc::k_invalid_params, "Invalid params: \"capabilities\" must be an object"};
  }
  if (auto info = params.find("clientInfo"); info != params.end() && !info->is_object()) {
    throw RpcError{jsonrpc::k_invalid_params, "Invalid params: \"clientInfo\" must be an object"};
  }
  if (m_initialized) {
    throw RpcError{jsonrpc::k_invalid_request,
                   "Invalid Request: the session is already initialized"};
  }
  const std::string negotiated = negotiate_protocol_version(*version);
  {
    std::lock_guard lock(m_mutex);
    m_protocol_version = negotiated;
    m_client_capabilities = params.value("capabilities", nlohmann::json::object());
    m_client_info = params.value("clientInfo", nlohmann::json::object());
  }
  m_initialized = true;
  const auto& options = m_server.options();
  nlohmann::json server_info = {{"name", options.name}, {"version", options.version}};
  put_if_not_empty(server_info, "title", options.title);
  nlohmann::json result = {{"protocolVersion", negotiated},
                           {"capabilities", m_server.capabilities(false)},
                           {"serverInfo", std::move(server_info)}};
  add_task_capabilities(result["capabilities"], params.value("capabilities", nlohmann::json()));
  put_if_not_empty(result, "instructions", options.instructions);
  auto info_text = [this](const char* key) {
    auto it = m_client_info.find(key);
    return it != m_client_info.end() && it->is_string() ? it->get<std::string>() : std::string("?");
  };
  spdlog::info("session initialized: client {} {}, protocol {}", info_text("name"),
               info_text("version"), negotiated);
  return result;
}

nlohmann::json Session::subscribe(const nlohmann::json& params, bool on) {
  const std::string uri = required_string(params, "uri");
  std::lock_guard lock(m_mutex);
  if (on) {
    m_subscriptions.insert(uri);
  } else {
    m_subscriptions.erase(uri);
  }
  return nlohmann::json::object();
}

nlohmann::json Session::set_log_level(const nlohmann::json& params) {
  const std::string name = required_string(params, "level");
  auto level = log_level_from_string(name);
  if (!level) {
    throw RpcError{jsonrpc::k_invalid_params,
                   "Invalid params: unknown log level '" + name +
                       "' (debug, info, notice, warning, error, critical, alert, emergency)"};
  }
  std::lock_guard lock(m_mutex);
  m_log_level = level;
  return nlohmann::json::object();
}

void Session::handle_notification(const jsonrpc::Notification& notification) {
  const std::string& method = notification.method;
  if (method == "notifications/cancelled") {
    const auto& params = object_or_empty(notification.params);
    auto id = params.find("requestId");
    if (id == params.end()) {
      return;
    }
    std::shared_ptr<Outbox> listen;
    {
      std::lock_guard lock(m_mutex);
      if (auto it = m_in_flight.find(id_key(*id)); it != m_in_flight.end()) {
        spdlog::info("request {} cancelled by the client", id_key(*id));
        it->second.cancelled = true;
        it->second.cancel.cancel();
      }
      if (auto it = m_listens.find(id_key(*id)); it != m_listens.end()) {
        listen = it->second;
        m_listens.erase(it);
      }
    }
    if (listen) {
      listen->finish(std::nullopt);  // the listener goes when its stream is released
    }
  } else if (method == "notifications/roots/list_changed") {
    std::lock_guard lock(m_mutex);
    m_roots_dir.reset();
  } else if (method == "notifications/initialized") {
    spdlog::debug("client sent notifications/initialized");
  }
  // Other notifications (progress, unknown) are ignored, as the protocol requires.
}

void Session::handle_response(const jsonrpc::Response& response) {
  std::shared_ptr<PendingRequest> pending;
  {
    std::lock_guard lock(m_mutex);
    auto it = m_pending.find(id_key(response.id));
    if (it == m_pending.end()) {
      spdlog::debug("response to unknown request {}", id_key(response.id));
      return;
    }
    pending = it->second;
    m_pending.erase(it);
  }
  std::lock_guard lock(pending->mutex);
  pending->response = response;
  pending->done.notify_all();
}

core::Result<nlohmann::json> Session::client_request(const std::string& method,
                                                     const nlohmann::json& params,
                                                     const std::shared_ptr<Outbox>& outbox,
                                                     std::chrono::milliseconds timeout,
                                                     const core::CancelToken& cancel) {
  auto pending = std::make_shared<PendingRequest>();
  nlohmann::json id;
  std::shared_ptr<Outbox> target = outbox;
  {
    std::lock_guard lock(m_mutex);
    if (m_closed) {
      return core::make_failure(core::FailureKind::transport_error, "client-request",
                                "the client connection is closed");
    }
    id = "autocomp-" + std::to_string(m_next_request_id++);
    m_pending[id_key(id)] = pending;
    if (!target) {
      target = m_standalone;
    }
  }
  if (!target) {
    std::lock_guard lock(m_mutex);
    m_pending.erase(id_key(id));
    return core::make_failure(core::FailureKind::unavailable, "client-request",
                              "no stream to the client is open for " + method);
  }
  target->send(jsonrpc::make_request(id, method, params));
  const core::Clock& clock = m_server.clock();
  const auto deadline = clock.now() + timeout;
  std::unique_lock lock(pending->mutex);
  for (;;) {
    if (pending->response) {
      break;
    }
    if (pending->failed) {
      return core::make_failure(core::FailureKind::transport_error, "client-request",
                                "the client connection closed before it answered " + method);
    }
    const bool timed_out = clock.now() >= deadline;
    if (cancel.cancelled() || timed_out) {
      lock.unlock();
      {
        std::lock_guard session_lock(m_mutex);
        m_pending.erase(id_key(id));
      }
      target->send(jsonrpc::make_notification(
          "notifications/cancelled",
          {{"requestId", id}, {"reason", timed_out ? "timed out" : "cancelled"}}));
      if (timed_out) {
        return core::make_failure(core::FailureKind::timeout, "client-request",
                                  "the client did not answer " + method + " in time");
      }
      return core::make_failure(core::FailureKind::cancelled, "client-request",
                                method + " was cancelled");
    }
    // On a clock that runs only when told, the wait moves it (no real waiting for a deadline).
    clock.wait_for(std::chrono::milliseconds(50), [&](core::Clock::Duration real) {
      return pending->done.wait_for(lock, real,
                                    [&] { return pending->response || pending->failed; });
    });
  }
  const auto& response = *pending->response;
  if (response.error) {
    return rpc_failure(method, *response.error);
  }
  return response.result.value_or(nlohmann::json::object());
}

core::Result<nlohmann::json> Session::session_request(const std::string& method,
                                                      const nlohmann::json& params,
                                                      std::chrono::milliseconds timeout,
                                                      const core::CancelToken& cancel) {
  std::shared_ptr<Outbox> standalone;
  {
    std::lock_guard lock(m_mutex);
    if (m_closed) {
      return core::make_failure(core::FailureKind::unavailable, "client-request",
                                "the MCP session has ended, so " + method +
                                    " cannot reach the client; start the work again from a "
                                    "connected session");
    }
    standalone = m_standalone;
  }
  if (!standalone || !standalone->connected()) {
    return core::make_failure(
        core::FailureKind::unavailable, "client-request",
        "no stream to the client is open for " + method +
            ": over Streamable HTTP the client must keep the session's GET /mcp event stream "
            "open (open the GET stream) to receive requests that belong to no tool call");
  }
  auto answer = client_request(method, params, standalone, timeout, cancel);
  if (!answer.ok() && answer.failure().kind == core::FailureKind::transport_error && m_closed) {
    return core::make_failure(core::FailureKind::unavailable, "client-request",
                              "the MCP session ended before the client answered " + method);
  }
  return answer;
}

std::string Session::working_dir(const std::shared_ptr<Outbox>& outbox) {
  {
    std::lock_guard lock(m_mutex);
    if (m_roots_dir) {
      return *m_roots_dir;
    }
    if (!m_client_capabilities.contains("roots")) {
      return {};
    }
  }
  std::string dir;
  core::CancelToken never;
  auto roots = client_request("roots/list", nlohmann::json::object(), outbox,
                              m_server.options().roots_timeout, never);
  if (roots.ok() && roots.value().is_object()) {
    for (const auto& root : roots.value().value("roots", nlohmann::json::array())) {
      const std::string uri = root.is_object() ? root.value("uri", std::string()) : std::string();
      if (uri.rfind("file://", 0) == 0) {
        dir = percent_decode(uri.substr(7));
        break;
      }
    }
  }
  std::lock_guard lock(m_mutex);
  m_roots_dir = dir;  // cached even when empty: ask once per session
  return dir;
}

}  // namespace autocomp::server
