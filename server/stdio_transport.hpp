#pragma once

// MCP over stdio: one JSON-RPC message per line on `in_fd`, answers and notifications one per
// line on `out_fd` (nothing else is ever written there). Returns at end of input after giving
// running calls `grace` to finish (then they are cancelled).

#include <chrono>

#include "server/protocol.hpp"

namespace autocomp::server {

struct StdioOptions {
  int in_fd = 0;
  int out_fd = 1;
  std::chrono::milliseconds grace{2000};
};

// Serves one session until end of input. Returns true when every call finished, false when some
// handler still ran after the grace period and its cancellation (the caller should then exit
// without waiting for it).
bool serve_stdio(Server& server, const StdioOptions& options);

}  // namespace autocomp::server
