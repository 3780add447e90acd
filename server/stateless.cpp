// The 2026-07-28 stateless requests: each names its own version, client capabilities and log
// level in params._meta; server/discover; inputs the server needs come back with a retry of the
// call (input_required, MRTR); subscriptions/listen streams change notifications.

#include <openssl/crypto.h>
#include <spdlog/spdlog.h>

#include <algorithm>
#include <atomic>
#include <set>

#include "server/methods.hpp"
#include "server/protocol.hpp"
#include "server/protocol_detail.hpp"

namespace autocomp::server {

using namespace detail;

namespace {

// Cache hints of a modern list/read result.
nlohmann::json cacheable(nlohmann::json result, std::int64_t ttl_ms, const char* scope) {
  result["resultType"] = "complete";
  result["ttlMs"] = ttl_ms;
  result["cacheScope"] = scope;
  return result;
}

// Reads inputResponses and requestState of a modern tools/call or prompts/get into `call`.
void load_inputs(const nlohmann::json& params, Session::ModernCall& call, const Server& server) {
  const auto& object = object_or_empty(params);
  if (auto state = object.find("requestState"); state != object.end()) {
    if (!state->is_string()) {
      throw RpcError{jsonrpc::k_invalid_params,
                     "Invalid params: \"requestState\" must be a string"};
    }
    auto payload = server.open_state(state->get<std::string>());
    if (!payload || payload->value("for", std::string()) != call.bound_to) {
      throw RpcError{jsonrpc::k_invalid_params,
                     "Invalid params: requestState failed its integrity check (altered, expired, "
                     "made for another request or by another server process); send the request "
                     "again without requestState and inputResponses"};
    }
    call.answers = payload->value("answers", nlohmann::json::object());
  }
  if (auto responses = object.find("inputResponses"); responses != object.end()) {
    if (!responses->is_object()) {
      throw RpcError{jsonrpc::k_invalid_params,
                     "Invalid params: \"inputResponses\" must be an object of answers by key"};
    }
    for (const auto& [key, value] : responses->items()) {
      if (!value.is_object()) {
        throw RpcError{jsonrpc::k_invalid_params, "Invalid params: inputResponses[\"" + key +
                                                      "\"] must be an object (the "
                                                      "result of the request it answers)"};
      }
      call.answers[key] = value;
    }
  }
}

std::atomic<std::uint64_t> g_next_listener{1};

}  // namespace

namespace detail {

const char* capability_for(const std::string& method) {
  if (method == "sampling/createMessage") {
    return "sampling";
  }
  if (method == "elicitation/create") {
    return "elicitation";
  }
  if (method == "roots/list") {
    return "roots";
  }
  return nullptr;
}

// One input of a modern call: the answer when the client gave it, else it is recorded as missing
// (or as a capability the client did not declare) and the failure says the call waits for it.
core::Result<nlohmann::json> modern_input(Session::ModernCall& call, const std::string& key,
                                          const std::string& method, const nlohmann::json& params) {
  std::lock_guard lock(call.mutex);
  if (auto it = call.answers.find(key); it != call.answers.end() && it->is_object()) {
    return *it;
  }
  if (const char* capability = capability_for(method);
      capability != nullptr && !call.capabilities.contains(capability)) {
    call.missing_capabilities[capability] = nlohmann::json::object();
    return core::make_failure(core::FailureKind::unavailable, "client-request",
                              std::string("the client did not declare the ") + capability +
                                  " capability, which " + method + " needs");
  }
  call.pending[key] = {{"method", method}, {"params", params}};
  return core::make_failure(
      core::FailureKind::unavailable, "client-request",
      "waiting for the client's answer to " + method + " (it comes with the retried request)");
}

// The final result of a modern call: -32021 when it needed undeclared capabilities, an
// input_required result while inputs are missing, else `result` marked complete.
nlohmann::json modern_outcome(const Server& server, Session::ModernCall& call,
                              nlohmann::json result) {
  std::lock_guard lock(call.mutex);
  if (!call.missing_capabilities.empty()) {
    std::string names;
    for (const auto& [name, value] : call.missing_capabilities.items()) {
      names += (names.empty() ? "" : ", ") + name;
    }
    throw RpcError{jsonrpc::k_missing_client_capability,
                   "Missing required client capability: " + names +
                       " (declare it in io.modelcontextprotocol/clientCapabilities)",
                   {{"requiredCapabilities", call.missing_capabilities}}};
  }
  if (!call.pending.empty()) {
    const auto expires = std::chrono::duration_cast<std::chrono::seconds>(
                             std::chrono::system_clock::now().time_since_epoch())
                             .count() +
                         3600;
    return {{"resultType", "input_required"},
            {"inputRequests", call.pending},
            {"requestState",
             server.seal_state(
                 {{"for", call.bound_to}, {"answers", call.answers}, {"expires", expires}})}};
  }
  if (!result.is_object()) {
    result = nlohmann::json::object();
  }
  result["resultType"] = "complete";
  return result;
}

}  // namespace detail

const std::vector<std::string>& modern_protocol_versions() {
  static const std::vector<std::string> k_versions = {std::string(k_modern_protocol_version)};
  return k_versions;
}

bool is_modern_protocol_version(std::string_view version) {
  const auto& versions = modern_protocol_versions();
  return std::find(versions.begin(), versions.end(), version) != versions.end();
}

const std::vector<std::string>& all_protocol_versions() {
  static const std::vector<std::string> k_versions = [] {
    std::vector<std::string> versions = modern_protocol_versions();
    const auto& legacy = supported_protocol_versions();
    versions.insert(versions.end(), legacy.begin(), legacy.end());
    return versions;
  }();
  return k_versions;
}

bool has_modern_meta(const nlohmann::json& params) {
  if (!params.is_object()) {
    return false;
  }
  auto meta = params.find("_meta");
  return meta != params.end() && meta->is_object() && meta->contains(k_meta_protocol_version);
}

int modern_http_status(int code) {
  switch (code) {
    case jsonrpc::k_method_not_found:
      return 404;
    case jsonrpc::k_header_mismatch:
    case jsonrpc::k_missing_client_capability:
    case jsonrpc::k_unsupported_protocol_version:
      return 400;
    default:
      return 200;
  }
}

bool is_modern_method(std::string_view method) {
  const MethodRow* row = find_method(method);
  return row != nullptr && row->modern;
}

std::optional<ModernRejection> check_modern_shape(const jsonrpc::Request& request) {
  if (!is_modern_method(request.method)) {
    if (const MethodRow* row = find_method(request.method); row != nullptr && row->legacy) {
      return ModernRejection{jsonrpc::k_method_not_found,
                             "Method not found: " + request.method +
                                 " is not part of MCP 2026-07-28 (for 2025-11-25, send initialize "
                                 "without 2026-07-28 _meta)"};
    }
    return ModernRejection{jsonrpc::k_method_not_found, "Method not found: " + request.method};
  }
  const auto& params = object_or_empty(request.params);
  auto meta = params.find("_meta");
  const std::string needs =
      " (a 2026-07-28 request carries params._meta with io.modelcontextprotocol/protocolVersion "
      "and io.modelcontextprotocol/clientCapabilities)";
  if (meta == params.end() || !meta->is_object()) {
    return ModernRejection{jsonrpc::k_invalid_params, "Invalid params: missing _meta" + needs};
  }
  auto version = meta->find(k_meta_protocol_version);
  if (version == meta->end() || !version->is_string()) {
    return ModernRejection{jsonrpc::k_invalid_params, std::string("Invalid params: _meta lacks ") +
                                                          k_meta_protocol_version + needs};
  }
  auto capabilities = meta->find(k_meta_client_capabilities);
  if (capabilities == meta->end() || !capabilities->is_object()) {
    return ModernRejection{jsonrpc::k_invalid_params, std::string("Invalid params: _meta lacks ") +
                                                          k_meta_client_capabilities + needs};
  }
  if (auto level = meta->find(k_meta_log_level); level != meta->end()) {
    if (!level->is_string() || !log_level_from_string(level->get<std::string>())) {
      return ModernRejection{jsonrpc::k_invalid_params,
                             std::string("Invalid params: ") + k_meta_log_level +
                                 " must be one of debug, info, notice, warning, error, critical, "
                                 "alert, emergency"};
    }
  }
  return std::nullopt;
}

std::optional<ModernRejection> check_modern_version(const jsonrpc::Request& request) {
  const auto& meta = object_or_empty(request.params).value("_meta", nlohmann::json::object());
  const std::string version = meta.value(k_meta_protocol_version, std::string());
  if (is_modern_protocol_version(version)) {
    return std::nullopt;
  }
  return ModernRejection{
      jsonrpc::k_unsupported_protocol_version,
      "Unsupported protocol version '" + version +
          "' for a request without initialize: this server serves 2026-07-28 that way, and "
          "2025-11-25, 2025-06-18 and 2025-03-26 after an initialize handshake",
      {{"supported", modern_protocol_versions()}, {"requested", version}}};
}

void Session::handle_modern(jsonrpc::Request request, const std::shared_ptr<Outbox>& outbox) {
  if (!outbox) {
    return;
  }
  try {
    if (auto rejection = check_modern_shape(request)) {
      throw RpcError{rejection->code, rejection->message, rejection->data};
    }
    if (auto rejection = check_modern_version(request)) {
      throw RpcError{rejection->code, rejection->message, rejection->data};
    }
    const auto& meta = request.params.at("_meta");
    auto call = std::make_shared<ModernCall>();
    call->version = meta.at(k_meta_protocol_version).get<std::string>();
    call->capabilities = meta.at(k_meta_client_capabilities);
    if (auto level = meta.find(k_meta_log_level); level != meta.end()) {
      call->log_level = log_level_from_string(level->get<std::string>());
    }
    const MethodRow& row = *find_method(request.method);  // check_modern_shape: it exists
    if (row.takes_inputs) {
      call->bound_to =
          request.method + " " + object_or_empty(request.params).value("name", std::string());
      load_inputs(request.params, *call, m_server);
    }
    switch (row.route) {
      case MethodRoute::tool_call:
        start_tool_call(std::move(request), outbox, std::move(call));
        return;
      case MethodRoute::listen:
        listen(request, outbox);
        return;
      case MethodRoute::task:
        handle_task_request(request, outbox);  // server/tasks.cpp
        return;
      case MethodRoute::answer:
        break;
    }
    outbox->finish(jsonrpc::make_result(request.id, dispatch_modern(row, request, call)));
  } catch (const RpcError& error) {
    outbox->finish(jsonrpc::make_error(request.id, error.code, error.message, error.data));
  } catch (const std::exception& error) {
    spdlog::error("{} failed: {}", request.method, error.what());
    outbox->finish(jsonrpc::make_error(request.id, jsonrpc::k_internal_error,
                                       std::string("Internal error: ") + error.what()));
  }
}

nlohmann::json Session::dispatch_modern(const MethodRow& row, const jsonrpc::Request& request,
                                        const std::shared_ptr<ModernCall>& call) {
  if (request.method == "tools/list") {
    // Once per client connection in practice: says which era a client settled on.
    spdlog::info("stateless tools/list, protocol {}", call->version);
  }
  nlohmann::json result;
  try {
    result = row.answer(*this, request.params, call);
  } catch (RpcError& error) {
    if (error.code == jsonrpc::k_resource_not_found) {
      error.code = jsonrpc::k_invalid_params;  // 2026-07-28 (SEP-2164)
    }
    throw;
  }
  if (row.modern_ttl_ms >= 0) {
    return cacheable(std::move(result), row.modern_ttl_ms, row.cache_scope);
  }
  if (result.is_object() && !result.contains("resultType")) {
    result["resultType"] = "complete";
  }
  return result;
}

nlohmann::json Session::discover() const {
  const auto& options = m_server.options();
  nlohmann::json server_info = {{"name", options.name}, {"version", options.version}};
  put_if_not_empty(server_info, "title", options.title);
  nlohmann::json result = {{"supportedVersions", all_protocol_versions()},
                           {"capabilities", m_server.capabilities(true)},
                           {"_meta", {{k_meta_server_info, std::move(server_info)}}}};
  put_if_not_empty(result, "instructions", options.instructions);
  return result;
}

void Session::listen(const jsonrpc::Request& request, const std::shared_ptr<Outbox>& outbox) {
  const auto& params = object_or_empty(request.params);
  auto filter = params.find("notifications");
  if (filter == params.end() || !filter->is_object()) {
    throw RpcError{jsonrpc::k_invalid_params,
                   "Invalid params: subscriptions/listen needs a \"notifications\" object "
                   "(toolsListChanged, promptsListChanged, resourcesListChanged, "
                   "resourceSubscriptions)"};
  }
  std::set<std::string> uris;
  nlohmann::json honoured = nlohmann::json::object();
  if (auto list = filter->find("resourceSubscriptions"); list != filter->end()) {
    if (!list->is_array()) {
      throw RpcError{jsonrpc::k_invalid_params,
                     "Invalid params: \"resourceSubscriptions\" must be an array of URIs"};
    }
    for (const auto& uri : *list) {
      if (!uri.is_string()) {
        throw RpcError{jsonrpc::k_invalid_params,
                       "Invalid params: \"resourceSubscriptions\" must be an array of URIs"};
      }
      uris.insert(uri.get<std::string>());
    }
    honoured["resourceSubscriptions"] = *list;
  }
  // The tool, prompt and resource lists never change while the server runs, so the list-changed
  // kinds are not part of the acknowledged filter.
  const std::string listener = std::to_string(g_next_listener++) + ":" + id_key(request.id);
  {
    std::lock_guard lock(m_mutex);
    m_listens[id_key(request.id)] = outbox;
  }
  outbox->send(jsonrpc::make_notification(
      "notifications/subscriptions/acknowledged",
      {{"notifications", std::move(honoured)}, {"_meta", {{k_meta_subscription_id, request.id}}}}));
  m_server.add_listener(listener, outbox, std::move(uris), request.id);
}

}  // namespace autocomp::server
