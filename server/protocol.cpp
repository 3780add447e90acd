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

#include "server/schema.hpp"

namespace autocomp::server {

namespace {

// A JSON-RPC error raised inside dispatch; becomes the error response.
struct RpcError {
  int code;
  std::string message;
  nlohmann::json data = nullptr;
};

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

// Fills result[key] with the page of `items` starting at the params' cursor.
template <class T, class ToJson>
nlohmann::json paginate(const std::vector<T>& items, const nlohmann::json& params,
                        std::size_t page_size, const char* key, ToJson to_json) {
  const std::size_t start = page_start(params);
  if (start > items.size()) {
    throw RpcError{jsonrpc::k_invalid_params, "Invalid params: cursor past the end"};
  }
  const std::size_t end = std::min(items.size(), start + std::max<std::size_t>(page_size, 1));
  nlohmann::json list = nlohmann::json::array();
  for (std::size_t i = start; i < end; ++i) {
    list.push_back(to_json(items[i]));
  }
  nlohmann::json result = {{key, std::move(list)}};
  if (end < items.size()) {
    result["nextCursor"] = encode_cursor(end);
  }
  return result;
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

// The client capability a server→client request needs (nullptr: none).
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

// Cache hints of a modern list/read result.
nlohmann::json cacheable(nlohmann::json result, std::int64_t ttl_ms, const char* scope) {
  result["resultType"] = "complete";
  result["ttlMs"] = ttl_ms;
  result["cacheScope"] = scope;
  return result;
}

// Static lists (tools, prompts, templates, the server's description) do not change while the
// process runs; resources (jobs, results) do, so they are not cached.
constexpr std::int64_t k_static_ttl_ms = 5 * 60 * 1000;

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

std::atomic<std::uint64_t> g_next_listener{1};

}  // namespace

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
  static const std::set<std::string, std::less<>> k_methods = {
      "server/discover", "tools/list", "tools/call", "resources/list", "resources/read",
      "prompts/list", "prompts/get", "resources/templates/list", "completion/complete",
      "subscriptions/listen",
      // The io.modelcontextprotocol/tasks extension (SEP-2663); no tasks/result or tasks/list.
      "tasks/get", "tasks/update", "tasks/cancel"};
  return k_methods.count(method) != 0;
}

std::optional<ModernRejection> check_modern_shape(const jsonrpc::Request& request) {
  if (!is_modern_method(request.method)) {
    if (request.method == "initialize" || request.method == "ping" ||
        request.method == "logging/setLevel" || request.method == "resources/subscribe" ||
        request.method == "resources/unsubscribe") {
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
    handle_modern(std::move(request), outbox);
    return;
  }
  if (request.method == "tools/call" && m_initialized) {
    start_tool_call(std::move(request), outbox);
    return;
  }
  if (request.method.rfind("tasks/", 0) == 0 && m_initialized) {
    handle_task_request(request, outbox);  // server/tasks.cpp
    return;
  }
  try {
    outbox->finish(jsonrpc::make_result(request.id, dispatch(request)));
  } catch (const RpcError& error) {
    outbox->finish(jsonrpc::make_error(request.id, error.code, error.message, error.data));
  } catch (const std::exception& error) {
    spdlog::error("{} failed: {}", request.method, error.what());
    outbox->finish(jsonrpc::make_error(request.id, jsonrpc::k_internal_error,
                                       std::string("Internal error: ") + error.what()));
  }
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
    if (request.method == "tools/call" || request.method == "prompts/get") {
      call->bound_to =
          request.method + " " + object_or_empty(request.params).value("name", std::string());
      load_inputs(request.params, *call, m_server);
    }
    if (request.method == "tools/call") {
      start_tool_call(std::move(request), outbox, std::move(call));
      return;
    }
    if (request.method == "subscriptions/listen") {
      listen(request, outbox);
      return;
    }
    if (request.method.rfind("tasks/", 0) == 0) {
      handle_task_request(request, outbox);  // server/tasks.cpp
      return;
    }
    outbox->finish(jsonrpc::make_result(request.id, dispatch_modern(request, call)));
  } catch (const RpcError& error) {
    outbox->finish(jsonrpc::make_error(request.id, error.code, error.message, error.data));
  } catch (const std::exception& error) {
    spdlog::error("{} failed: {}", request.method, error.what());
    outbox->finish(jsonrpc::make_error(request.id, jsonrpc::k_internal_error,
                                       std::string("Internal error: ") + error.what()));
  }
}

nlohmann::json Session::dispatch_modern(const jsonrpc::Request& request,
                                        const std::shared_ptr<ModernCall>& call) {
  const std::string& method = request.method;
  const nlohmann::json& params = request.params;
  if (method == "tools/list") {
    // Once per client connection in practice: says which era a client settled on.
    std::string version = "?";
    if (auto meta = params.find("_meta");
        params.is_object() && meta != params.end() && meta->is_object() &&
        meta->value(k_meta_protocol_version, nlohmann::json()).is_string()) {
      version = (*meta)[k_meta_protocol_version].get<std::string>();
    }
    spdlog::info("stateless tools/list, protocol {}", version);
  }
  if (method == "server/discover") {
    const auto& options = m_server.options();
    nlohmann::json server_info = {{"name", options.name}, {"version", options.version}};
    put_if_not_empty(server_info, "title", options.title);
    nlohmann::json result = {{"supportedVersions", all_protocol_versions()},
                             {"capabilities", m_server.capabilities(true)},
                             {"_meta", {{k_meta_server_info, std::move(server_info)}}}};
    put_if_not_empty(result, "instructions", options.instructions);
    return cacheable(std::move(result), k_static_ttl_ms, "public");
  }
  if (method == "tools/list") {
    return cacheable(list_tools(params), k_static_ttl_ms, "public");
  }
  if (method == "prompts/list") {
    return cacheable(list_prompts(params), k_static_ttl_ms, "public");
  }
  if (method == "resources/templates/list") {
    return cacheable(list_resource_templates(params), k_static_ttl_ms, "public");
  }
  if (method == "resources/list") {
    return cacheable(list_resources(params), 0, "private");
  }
  if (method == "resources/read") {
    try {
      return cacheable(read_resource(params), 0, "private");
    } catch (RpcError& error) {
      if (error.code == jsonrpc::k_resource_not_found) {
        error.code = jsonrpc::k_invalid_params;  // 2026-07-28 (SEP-2164)
      }
      throw;
    }
  }
  if (method == "prompts/get") {
    return get_prompt(params, call);
  }
  if (method == "completion/complete") {
    nlohmann::json result = complete(params);
    result["resultType"] = "complete";
    return result;
  }
  throw RpcError{jsonrpc::k_method_not_found, "Method not found: " + method};
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

nlohmann::json Session::dispatch(const jsonrpc::Request& request) {
  const std::string& method = request.method;
  const nlohmann::json& params = request.params;
  if (method == "ping") {
    return nlohmann::json::object();
  }
  if (method == "initialize") {
    return initialize(params);
  }
  static const std::set<std::string> k_methods = {
      "tools/list",       "tools/call",          "resources/list",           "resources/read",
      "prompts/list",     "prompts/get",         "resources/templates/list", "resources/subscribe",
      "logging/setLevel", "completion/complete", "resources/unsubscribe"};
  if (k_methods.count(method) == 0) {
    if (method == "server/discover") {
      throw RpcError{jsonrpc::k_method_not_found,
                     "Method not found: server/discover (this server speaks MCP 2025-11-25, "
                     "2025-06-18 and 2025-03-26; send initialize)",
                     {{"supported", supported_protocol_versions()}}};
    }
    throw RpcError{jsonrpc::k_method_not_found, "Method not found: " + method};
  }
  if (!m_initialized) {
    throw RpcError{jsonrpc::k_invalid_request,
                   "Invalid Request: the session is not initialized; send initialize first"};
  }
  if (method == "tools/list") {
    return list_tools(params);
  }
  if (method == "resources/list") {
    return list_resources(params);
  }
  if (method == "resources/templates/list") {
    return list_resource_templates(params);
  }
  if (method == "resources/read") {
    return read_resource(params);
  }
  if (method == "resources/subscribe") {
    return subscribe(params, true);
  }
  if (method == "resources/unsubscribe") {
    return subscribe(params, false);
  }
  if (method == "prompts/list") {
    return list_prompts(params);
  }
  if (method == "prompts/get") {
    return get_prompt(params);
  }
  if (method == "logging/setLevel") {
    return set_log_level(params);
  }
  if (method == "completion/complete") {
    return complete(params);
  }
  throw RpcError{jsonrpc::k_method_not_found, "Method not found: " + method};
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

nlohmann::json Session::list_tools(const nlohmann::json& params) const {
  return paginate(m_server.registries().tools.all(), params, m_server.options().page_size, "tools",
                  [](const ToolDef& tool) {
                    nlohmann::json entry = {{"name", tool.name},
                                            {"description", tool.description},
                                            {"inputSchema", tool.input_schema}};
                    put_if_not_empty(entry, "title", tool.title);
                    if (!tool.output_schema.is_null()) {
                      entry["outputSchema"] = tool.output_schema;
                    }
                    if (!tool.annotations.is_null()) {
                      entry["annotations"] = tool.annotations;
                    }
                    if (!tool.meta.is_null()) {
                      entry["_meta"] = tool.meta;
                    }
                    add_task_execution(entry, tool);
                    return entry;
                  });
}

nlohmann::json Session::list_resources(const nlohmann::json& params) const {
  return paginate(m_server.registries().resources.resources(), params, m_server.options().page_size,
                  "resources", [](const ResourceDef& resource) {
                    nlohmann::json entry = {{"uri", resource.uri}, {"name", resource.name}};
                    put_if_not_empty(entry, "title", resource.title);
                    put_if_not_empty(entry, "description", resource.description);
                    put_if_not_empty(entry, "mimeType", resource.mime_type);
                    return entry;
                  });
}

nlohmann::json Session::list_resource_templates(const nlohmann::json& params) const {
  return paginate(m_server.registries().resources.templates(), params, m_server.options().page_size,
                  "resourceTemplates", [](const ResourceTemplateDef& resource_template) {
                    nlohmann::json entry = {{"uriTemplate", resource_template.uri_template},
                                            {"name", resource_template.name}};
                    put_if_not_empty(entry, "title", resource_template.title);
                    put_if_not_empty(entry, "description", resource_template.description);
                    put_if_not_empty(entry, "mimeType", resource_template.mime_type);
                    return entry;
                  });
}

nlohmann::json Session::read_resource(const nlohmann::json& params) const {
  const std::string uri = required_string(params, "uri");
  auto match = m_server.registries().resources.match(uri);
  if (!match) {
    throw RpcError{jsonrpc::k_resource_not_found, "Resource not found: " + uri, {{"uri", uri}}};
  }
  auto contents = match->read(uri, match->variables);
  if (!contents.ok()) {
    const auto& failure = contents.failure();
    const int code = failure.kind == core::FailureKind::invalid_argument ? jsonrpc::k_invalid_params
                     : failure.kind == core::FailureKind::unavailable
                         ? jsonrpc::k_resource_not_found
                         : jsonrpc::k_internal_error;
    throw RpcError{code, failure.message, {{"uri", uri}}};
  }
  nlohmann::json list =
      contents.value().is_array() ? contents.value() : nlohmann::json::array({contents.value()});
  return {{"contents", std::move(list)}};
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

nlohmann::json Session::list_prompts(const nlohmann::json& params) const {
  return paginate(
      m_server.registries().prompts.all(), params, m_server.options().page_size, "prompts",
      [](const PromptDef& prompt) {
        nlohmann::json entry = {{"name", prompt.name}};
        put_if_not_empty(entry, "title", prompt.title);
        put_if_not_empty(entry, "description", prompt.description);
        nlohmann::json arguments = nlohmann::json::array();
        for (const auto& argument : prompt.arguments) {
          nlohmann::json item = {{"name", argument.name}, {"required", argument.required}};
          put_if_not_empty(item, "description", argument.description);
          arguments.push_back(std::move(item));
        }
        entry["arguments"] = std::move(arguments);
        return entry;
      });
}

nlohmann::json Session::get_prompt(const nlohmann::json& params,
                                   const std::shared_ptr<ModernCall>& modern) const {
  const std::string name = required_string(params, "name");
  const PromptDef* prompt = m_server.registries().prompts.find(name);
  if (prompt == nullptr) {
    throw RpcError{jsonrpc::k_invalid_params, "Invalid params: unknown prompt '" + name + "'"};
  }
  std::map<std::string, std::string> arguments;
  if (auto it = params.find("arguments"); it != params.end() && !it->is_null()) {
    if (!it->is_object()) {
      throw RpcError{jsonrpc::k_invalid_params, "Invalid params: \"arguments\" must be an object"};
    }
    for (const auto& [key, value] : it->items()) {
      if (!value.is_string()) {
        throw RpcError{jsonrpc::k_invalid_params,
                       "Invalid params: prompt argument '" + key + "' must be a string"};
      }
      arguments[key] = value.get<std::string>();
    }
  }
  for (const auto& argument : prompt->arguments) {
    if (argument.required && arguments.count(argument.name) == 0) {
      throw RpcError{jsonrpc::k_invalid_params, "Invalid params: prompt '" + name +
                                                    "' needs the argument '" + argument.name + "'"};
    }
  }
  core::Result<nlohmann::json> result = nlohmann::json();
  if (prompt->get_with_context) {
    ToolContext context;
    if (modern) {
      context.client_capabilities = modern->capabilities;
      context.client_supports_sampling = modern->capabilities.contains("sampling");
      context.client_supports_elicitation = modern->capabilities.contains("elicitation");
      context.input_sink = [modern](const std::string& key, const std::string& method,
                                    const nlohmann::json& request_params) {
        return modern_input(*modern, key, method, request_params);
      };
    } else {
      // prompts/get is answered on the reader thread: no request can be sent and waited for.
      context.input_sink = [](const std::string&, const std::string& method,
                              const nlohmann::json&) -> core::Result<nlohmann::json> {
        return core::make_failure(
            core::FailureKind::unavailable, "client-request",
            "prompts/get cannot ask the client for input (" + method + ") in a 2025-11-25 session");
      };
    }
    result = prompt->get_with_context(arguments, context);
  } else {
    result = prompt->get(arguments);
  }
  if (modern) {
    bool waiting = false;
    {
      std::lock_guard lock(modern->mutex);
      waiting = !modern->pending.empty() || !modern->missing_capabilities.empty();
    }
    if (waiting) {
      return modern_outcome(m_server, *modern, nlohmann::json::object());
    }
  }
  if (!result.ok()) {
    const auto& failure = result.failure();
    throw RpcError{failure.kind == core::FailureKind::invalid_argument ? jsonrpc::k_invalid_params
                                                                       : jsonrpc::k_internal_error,
                   failure.message};
  }
  nlohmann::json out = result.value();
  if (!out.is_object() || !out.contains("messages")) {
    throw RpcError{jsonrpc::k_internal_error, "prompt '" + name + "' produced no messages"};
  }
  if (!out.contains("description") && !prompt->description.empty()) {
    out["description"] = prompt->description;
  }
  return modern ? modern_outcome(m_server, *modern, std::move(out)) : out;
}

nlohmann::json Session::complete(const nlohmann::json& params) const {
  const auto& object = object_or_empty(params);
  auto ref = object.find("ref");
  auto argument = object.find("argument");
  if (ref == object.end() || !ref->is_object() || argument == object.end() ||
      !argument->is_object()) {
    throw RpcError{jsonrpc::k_invalid_params,
                   "Invalid params: completion needs \"ref\" and \"argument\" objects"};
  }
  const std::string argument_name = required_string(*argument, "name");
  std::string prefix;
  if (auto value = argument->find("value"); value != argument->end() && value->is_string()) {
    prefix = value->get<std::string>();
  }
  std::map<std::string, std::string> context;
  if (auto ctx = object.find("context"); ctx != object.end() && ctx->is_object()) {
    if (auto resolved = ctx->find("arguments"); resolved != ctx->end() && resolved->is_object()) {
      for (const auto& [key, value] : resolved->items()) {
        if (value.is_string()) {
          context[key] = value.get<std::string>();
        }
      }
    }
  }
  const std::string type = ref->value("type", std::string());
  Completer completer;
  if (type == "ref/prompt") {
    const std::string name = required_string(*ref, "name");
    const PromptDef* prompt = m_server.registries().prompts.find(name);
    if (prompt == nullptr) {
      throw RpcError{jsonrpc::k_invalid_params, "Invalid params: unknown prompt '" + name + "'"};
    }
    completer = prompt->complete;
  } else if (type == "ref/resource") {
    const std::string uri = required_string(*ref, "uri");
    for (const auto& resource_template : m_server.registries().resources.templates()) {
      if (resource_template.uri_template == uri) {
        completer = resource_template.complete;
      }
    }
  } else {
    throw RpcError{jsonrpc::k_invalid_params,
                   "Invalid params: ref.type must be \"ref/prompt\" or \"ref/resource\""};
  }
  std::vector<std::string> values;
  if (completer) {
    values = completer(argument_name, prefix, context);
  }
  const std::size_t total = values.size();
  if (values.size() > 100) {
    values.resize(100);
  }
  return {{"completion", {{"values", values}, {"total", total}, {"hasMore", total > 100}}}};
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

bool Session::log_enabled(LogLevel level) const {
  std::lock_guard lock(m_mutex);
  // Until the client chooses, info and above are sent.
  return level >= m_log_level.value_or(LogLevel::info);
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
  const auto deadline = std::chrono::steady_clock::now() + timeout;
  std::unique_lock lock(pending->mutex);
  for (;;) {
    if (pending->response) {
      break;
    }
    if (pending->failed) {
      return core::make_failure(core::FailureKind::transport_error, "client-request",
                                "the client connection closed before it answered " + method);
    }
    const bool timed_out = std::chrono::steady_clock::now() >= deadline;
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
    pending->done.wait_for(lock, std::chrono::milliseconds(50));
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
  if (start_task(*tool, request, outbox)) {  // server/tasks.cpp
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
