#pragma once

// JSON-RPC 2.0 framing for MCP: checking raw bytes, classifying messages, building responses.

#include <cstddef>
#include <nlohmann/json.hpp>
#include <optional>
#include <string>
#include <string_view>
#include <variant>

namespace autocomp::server::jsonrpc {

inline constexpr int k_parse_error = -32700;
inline constexpr int k_invalid_request = -32600;
inline constexpr int k_method_not_found = -32601;
inline constexpr int k_invalid_params = -32602;
inline constexpr int k_internal_error = -32603;
inline constexpr int k_resource_not_found = -32002;
inline constexpr int k_session_not_found = -32001;
// 2026-07-28 (answered with HTTP 400 over Streamable HTTP).
inline constexpr int k_header_mismatch = -32020;
inline constexpr int k_missing_client_capability = -32021;
inline constexpr int k_unsupported_protocol_version = -32022;

struct Limits {
  std::size_t max_message_bytes = 4 * 1024 * 1024;
  std::size_t max_depth = 128;  // nesting of arrays/objects
};

// True when `bytes` is well-formed UTF-8 (no overlongs, no surrogates, nothing above U+10FFFF).
bool valid_utf8(std::string_view bytes);

// The nesting depth of JSON text (brackets outside strings); stops counting past `limit`.
std::size_t json_depth(std::string_view text, std::size_t limit);

struct Request {
  nlohmann::json id;  // string or integer
  std::string method;
  nlohmann::json params;  // object, or null when absent
};
struct Notification {
  std::string method;
  nlohmann::json params;
};
struct Response {  // a client's answer to a server→client request
  nlohmann::json id;
  std::optional<nlohmann::json> result;
  std::optional<nlohmann::json> error;
};
// A message that must be answered with this error response (already built; id may be null).
struct Invalid {
  nlohmann::json error_response;
};

using Message = std::variant<Request, Notification, Response, Invalid>;

// Checks size, UTF-8, nesting, JSON syntax, batching and the JSON-RPC shape. Never throws.
Message parse(std::string_view raw, const Limits& limits);
// The shape check alone, for an already parsed value.
Message classify(const nlohmann::json& value);

nlohmann::json make_result(const nlohmann::json& id, nlohmann::json result);
nlohmann::json make_error(const nlohmann::json& id, int code, const std::string& message,
                          const nlohmann::json& data = nullptr);
nlohmann::json make_notification(const std::string& method, nlohmann::json params);
nlohmann::json make_request(const nlohmann::json& id, const std::string& method,
                            nlohmann::json params);

// Compact serialization that never throws (invalid UTF-8 in strings is replaced).
std::string serialize(const nlohmann::json& message);

}  // namespace autocomp::server::jsonrpc
