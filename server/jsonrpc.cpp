#include "server/jsonrpc.hpp"

namespace autocomp::server::jsonrpc {

bool valid_utf8(std::string_view bytes) {
  std::size_t i = 0;
  const std::size_t n = bytes.size();
  while (i < n) {
    const auto c = static_cast<unsigned char>(bytes[i]);
    if (c < 0x80) {
      ++i;
      continue;
    }
    std::size_t length = 0;
    std::uint32_t code = 0;
    if (c >= 0xC2 && c <= 0xDF) {
      length = 2;
      code = c & 0x1Fu;
    } else if (c >= 0xE0 && c <= 0xEF) {
      length = 3;
      code = c & 0x0Fu;
    } else if (c >= 0xF0 && c <= 0xF4) {
      length = 4;
      code = c & 0x07u;
    } else {
      return false;
    }
    if (i + length > n) {
      return false;
    }
    for (std::size_t k = 1; k < length; ++k) {
      const auto cc = static_cast<unsigned char>(bytes[i + k]);
      if ((cc & 0xC0u) != 0x80u) {
        return false;
      }
      code = (code << 6) | (cc & 0x3Fu);
    }
    if ((length == 3 && (code < 0x800 || (code >= 0xD800 && code <= 0xDFFF))) ||
        (length == 4 && (code < 0x10000 || code > 0x10FFFF))) {
      return false;
    }
    i += length;
  }
  return true;
}

std::size_t json_depth(std::string_view text, std::size_t limit) {
  std::size_t depth = 0;
  std::size_t max_depth = 0;
  bool in_string = false;
  bool escaped = false;
  for (char c : text) {
    if (in_string) {
      if (escaped) {
        escaped = false;
      } else if (c == '\\') {
        escaped = true;
      } else if (c == '"') {
        in_string = false;
      }
      continue;
    }
    if (c == '"') {
      in_string = true;
    } else if (c == '[' || c == '{') {
      ++depth;
      if (depth > max_depth) {
        max_depth = depth;
        if (max_depth > limit) {
          return max_depth;
        }
      }
    } else if ((c == ']' || c == '}') && depth > 0) {
      --depth;
    }
  }
  return max_depth;
}

namespace {

Invalid invalid(const nlohmann::json& id, int code, const std::string& message) {
  return Invalid{make_error(id, code, message)};
}

bool valid_id(const nlohmann::json& id) {
  return id.is_string() || id.is_number_integer();
}

}  // namespace

Message parse(std::string_view raw, const Limits& limits) {
  if (raw.size() > limits.max_message_bytes) {
    return invalid(nullptr, k_invalid_request,
                   "Invalid Request: message of " + std::to_string(raw.size()) +
                       " bytes exceeds the limit of " + std::to_string(limits.max_message_bytes) +
                       " bytes");
  }
  if (raw.find('\0') != std::string_view::npos) {
    return invalid(nullptr, k_parse_error,
                   "Parse error: message contains a NUL byte (JSON text never does)");
  }
  if (!valid_utf8(raw)) {
    return invalid(nullptr, k_parse_error, "Parse error: message is not valid UTF-8");
  }
  if (json_depth(raw, limits.max_depth) > limits.max_depth) {
    return invalid(nullptr, k_invalid_request,
                   "Invalid Request: JSON nesting deeper than " + std::to_string(limits.max_depth) +
                       " levels");
  }
  nlohmann::json value = nlohmann::json::parse(raw, nullptr, /*allow_exceptions=*/false);
  if (value.is_discarded()) {
    return invalid(nullptr, k_parse_error, "Parse error: message is not valid JSON");
  }
  return classify(value);
}

Message classify(const nlohmann::json& value) {
  if (value.is_array()) {
    return invalid(nullptr, k_invalid_request,
                   "Invalid Request: JSON-RPC batches are not supported (MCP 2025-06-18 and "
                   "later); send one message per request");
  }
  if (!value.is_object()) {
    return invalid(nullptr, k_invalid_request, "Invalid Request: a message must be a JSON object");
  }
  const auto id_it = value.find("id");
  const bool has_id = id_it != value.end();
  const nlohmann::json reply_id = has_id && valid_id(*id_it) ? *id_it : nlohmann::json(nullptr);
  const auto version = value.find("jsonrpc");
  if (version == value.end() || !version->is_string() || *version != "2.0") {
    return invalid(reply_id, k_invalid_request, "Invalid Request: \"jsonrpc\" must be \"2.0\"");
  }
  const auto method = value.find("method");
  if (method != value.end()) {
    if (!method->is_string()) {
      return invalid(reply_id, k_invalid_request, "Invalid Request: \"method\" must be a string");
    }
    nlohmann::json params = nullptr;
    if (auto it = value.find("params"); it != value.end()) {
      if (!it->is_object() && !it->is_null()) {
        return invalid(reply_id, k_invalid_request,
                       "Invalid Request: \"params\" must be an object");
      }
      params = *it;
    }
    if (!has_id) {
      return Notification{method->get<std::string>(), std::move(params)};
    }
    if (!valid_id(*id_it)) {
      return invalid(nullptr, k_invalid_request,
                     "Invalid Request: \"id\" must be a string or an integer (not null)");
    }
    return Request{*id_it, method->get<std::string>(), std::move(params)};
  }
  const auto result = value.find("result");
  const auto error = value.find("error");
  if (has_id && (result != value.end()) != (error != value.end())) {
    Response response{*id_it, std::nullopt, std::nullopt};
    if (result != value.end()) {
      response.result = *result;
    } else {
      response.error = *error;
    }
    return response;
  }
  return invalid(reply_id, k_invalid_request,
                 "Invalid Request: expected a request (method, id), a notification (method) or a "
                 "response (id with result or error)");
}

nlohmann::json make_result(const nlohmann::json& id, nlohmann::json result) {
  return {{"jsonrpc", "2.0"}, {"id", id}, {"result", std::move(result)}};
}

nlohmann::json make_error(const nlohmann::json& id, int code, const std::string& message,
                          const nlohmann::json& data) {
  nlohmann::json error = {{"code", code}, {"message", message}};
  if (!data.is_null()) {
    error["data"] = data;
  }
  return {{"jsonrpc", "2.0"}, {"id", id}, {"error", std::move(error)}};
}

nlohmann::json make_notification(const std::string& method, nlohmann::json params) {
  nlohmann::json message = {{"jsonrpc", "2.0"}, {"method", method}};
  if (!params.is_null()) {
    message["params"] = std::move(params);
  }
  return message;
}

nlohmann::json make_request(const nlohmann::json& id, const std::string& method,
                            nlohmann::json params) {
  nlohmann::json message = {{"jsonrpc", "2.0"}, {"id", id}, {"method", method}};
  if (!params.is_null()) {
    message["params"] = std::move(params);
  }
  return message;
}

std::string serialize(const nlohmann::json& message) {
  return message.dump(-1, ' ', false, nlohmann::json::error_handler_t::replace);
}

}  // namespace autocomp::server::jsonrpc
