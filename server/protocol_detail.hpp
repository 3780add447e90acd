#pragma once

// Helpers the protocol's files share (protocol.cpp, methods.cpp, session.cpp, stateless.cpp);
// not part of the server's interface.

#include <algorithm>
#include <cstddef>
#include <nlohmann/json.hpp>
#include <string>
#include <string_view>
#include <vector>

#include "core/failure.hpp"
#include "core/result.hpp"
#include "server/jsonrpc.hpp"
#include "server/protocol.hpp"

namespace autocomp::server::detail {

// A JSON-RPC error raised inside a method handler; becomes the error response.
struct RpcError {
  int code;
  std::string message;
  nlohmann::json data = nullptr;
};

// A request id as a map key.
std::string id_key(const nlohmann::json& id);
const nlohmann::json& object_or_empty(const nlohmann::json& params);
// params[name] as a string; RpcError (invalid params) otherwise.
std::string required_string(const nlohmann::json& params, const char* name);
// The offset named by params.cursor (0 without one); RpcError for a bad cursor.
std::size_t page_start(const nlohmann::json& params);
void put_if_not_empty(nlohmann::json& object, const char* key, const std::string& value);
std::string percent_decode(std::string_view text);
// Integral values are written as integers (50, not 50.0).
nlohmann::json json_number(double value);
// A client's error answer to a server→client request, as a failure.
core::Failure rpc_failure(const std::string& method, const nlohmann::json& error);

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

// The client capability a server→client request needs (nullptr: none).
const char* capability_for(const std::string& method);
// 2026-07-28 (server/stateless.cpp). One input of a modern call: the answer when the client gave
// it, else it is recorded as missing (or as a capability the client did not declare) and the
// failure says the call waits for it.
core::Result<nlohmann::json> modern_input(Session::ModernCall& call, const std::string& key,
                                          const std::string& method, const nlohmann::json& params);
// The final result of a modern call: -32021 when it needed undeclared capabilities, an
// input_required result while inputs are missing, else `result` marked complete.
nlohmann::json modern_outcome(const Server& server, Session::ModernCall& call,
                              nlohmann::json result);

}  // namespace autocomp::server::detail
