#pragma once

// MCP Streamable HTTP (2025-11-25) on one endpoint, /mcp: POST carries client messages (answered
// with JSON, or with an SSE stream for tool calls when the client accepts it), GET opens the
// session's server stream or resumes a stream with Last-Event-ID, DELETE ends a session.
// Sessions are keyed by Mcp-Session-Id. Origin/Host checks guard against DNS rebinding; a bearer
// token is required when listening beyond loopback.

#include <atomic>
#include <chrono>
#include <memory>
#include <string>

#include "core/result.hpp"
#include "server/protocol.hpp"

namespace autocomp::server {

struct HttpOptions {
  std::string host = "127.0.0.1";
  int port = 0;                   // 0: pick a free port
  std::string auth_token;         // non-empty: every request needs "Authorization: Bearer <token>"
  std::string port_file;          // non-empty: the bound port is written there once listening
  std::size_t http_threads = 64;  // connections served at once (each SSE stream holds one)
  std::size_t max_sessions = 4096;  // least recently used sessions are dropped beyond this
  std::chrono::milliseconds keepalive{15000};  // SSE comment interval on idle streams
};

// True for 127.0.0.0/8, ::1 and "localhost".
bool is_loopback_host(const std::string& host);
// Host part of a Host header or of an Origin ("http://[::1]:8080" → "[::1]"; lower-cased).
std::string host_of_authority(std::string_view authority);
std::string host_of_origin(std::string_view origin);

class HttpTransport {
 public:
  HttpTransport(Server& server, HttpOptions options);
  ~HttpTransport();
  HttpTransport(const HttpTransport&) = delete;
  HttpTransport& operator=(const HttpTransport&) = delete;

  // Binds (refusing a non-loopback host without a token) and writes the port file.
  core::Status bind();
  int port() const { return m_port; }
  // Serves until stop(); returns when the listener has closed.
  void serve();
  // Thread-safe; ends open streams and makes serve() return.
  void stop();

 private:
  struct Impl;
  Server& m_server;
  HttpOptions m_options;
  int m_port = 0;
  std::unique_ptr<Impl> m_impl;
};

}  // namespace autocomp::server
