#pragma once

// The method table: every JSON-RPC method the server answers, which protocol generation serves it
// (2025-11-25 sessions in server/session.cpp, 2026-07-28 stateless requests in
// server/stateless.cpp) and how. Both generations dispatch through it; adding a method is a row.

#include <cstdint>
#include <memory>
#include <nlohmann/json.hpp>
#include <string_view>

#include "server/protocol.hpp"

namespace autocomp::server {

enum class MethodRoute {
  answer,     // answered at once by `answer`
  tool_call,  // runs on the worker pool (Session::start_tool_call)
  task,       // protocol tasks (server/tasks.cpp)
  listen,     // subscriptions/listen: a stream that stays open
};

struct MethodRow {
  using Answer = nlohmann::json (*)(Session& session, const nlohmann::json& params,
                                    const std::shared_ptr<Session::ModernCall>& modern);
  std::string_view name;
  bool legacy = false;  // served in a 2025-11-25 session
  bool modern = false;  // served statelessly (2026-07-28)
  MethodRoute route = MethodRoute::answer;
  bool before_initialize = false;  // a session answers it before initialize
  Answer answer = nullptr;         // route answer; `modern` is null in a session
  // >= 0: a modern answer carries cache hints (ttlMs, cacheScope).
  std::int64_t modern_ttl_ms = -1;
  const char* cache_scope = nullptr;
  bool takes_inputs = false;  // modern: inputResponses and requestState apply
};

// The row of `name`; nullptr for a method no generation serves.
const MethodRow* find_method(std::string_view name);

}  // namespace autocomp::server
