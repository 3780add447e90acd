#pragma once

// MCP Streamable HTTP (2025-11-25) on one endpoint, /mcp: POST carries client messages (answered
// with JSON, or with an SSE stream for tool calls when the client accepts it), GET opens the
// session's server stream or resumes a stream with Last-Event-ID, DELETE ends a session.
// Sessions are keyed by Mcp-Session-Id. Origin/Host checks guard against DNS rebinding; a bearer
// token is required when listening beyond loopback. Connections are served by an elastic set of
// threads up to max_connections (503 beyond it); event streams are capped so that pings and new
// sessions always find room; request bodies are limited while they are read (413).

#include <atomic>
#include <chrono>
#include <memory>
#include <string>

#include "core/result.hpp"
#include "server/jsonrpc.hpp"
#include "server/protocol.hpp"

namespace httplib {
struct Request;
struct Response;
class ContentReader;
}  // namespace httplib

namespace autocomp::server {

struct HttpOptions {
  std::string host = "127.0.0.1";
  int port = 0;                  // 0: pick a free port
  std::string auth_token;        // non-empty: every request needs "Authorization: Bearer <token>"
  std::string port_file;         // non-empty: the bound port is written there once listening
  std::size_t http_threads = 8;  // connection threads kept ready
  std::size_t max_connections = 512;  // connections served at once; beyond: 503 at once
  std::size_t max_event_streams = 0;  // open SSE GET streams (0: half of max_connections);
                                      // beyond: 503 + Retry-After
  // Beyond this, sessions that never made a request after initialize make room; sessions that
  // did are kept until they idle out, and new sessions are refused (503) instead.
  std::size_t max_sessions = 1024;
  std::chrono::seconds session_idle_timeout{3600};  // unused this long: session ends (0: never)
  std::chrono::seconds read_timeout{10};            // a stalled request read is dropped
  std::chrono::seconds keep_alive_timeout{5};       // an idle keep-alive connection is closed
  int listen_backlog = 1024;
  std::chrono::milliseconds keepalive{15000};  // SSE comment interval on idle streams
};

class HttpTransport {
 public:
  HttpTransport(Server& server, HttpOptions options);
  ~HttpTransport();
  HttpTransport(const HttpTransport&) = delete;
  HttpTransport& operator=(const HttpTransport&) = delete;

  // Binds (refusing a non-loopback host without a token) and writes the port file.
  core::Status bind();
  int port() const { return m_port; }
  // Sessions currently kept (for tests and logs).
  std::size_t session_count() const;
  // Serves until stop(); returns when the listener has closed.
  void serve();
  // Thread-safe; ends open streams and makes serve() return.
  void stop();

 private:
  // The route handlers bind() installs (server/http_transport.cpp), in the order a request meets
  // them: the guard, then POST (stateless 2026-07-28, initialize, or a session's message), GET
  // (event streams), DELETE (end a session).
  bool refuse_before_routing(const httplib::Request& request, httplib::Response& response);
  void answer_unrouted(httplib::Response& response) const;
  void handle_post(const httplib::Request& request, httplib::Response& response,
                   const httplib::ContentReader& reader);
  void serve_modern(const httplib::Request& request, httplib::Response& response,
                    jsonrpc::Message message);
  void start_session(httplib::Response& response, jsonrpc::Message message);
  void post_in_session(const httplib::Request& request, httplib::Response& response,
                       jsonrpc::Message message);
  void handle_get(const httplib::Request& request, httplib::Response& response);
  void handle_delete(const httplib::Request& request, httplib::Response& response,
                     const httplib::ContentReader& reader);
  core::Status write_port_file() const;

  struct Impl;
  Server& m_server;
  HttpOptions m_options;
  int m_port = 0;
  std::unique_ptr<Impl> m_impl;
};

}  // namespace autocomp::server
