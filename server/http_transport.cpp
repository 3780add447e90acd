#include "server/http_transport.hpp"

#include <httplib.h>
#include <openssl/crypto.h>
#include <openssl/rand.h>
#include <spdlog/spdlog.h>

#include <algorithm>
#include <cctype>
#include <condition_variable>
#include <cstdio>
#include <deque>
#include <filesystem>
#include <fstream>
#include <list>
#include <map>
#include <mutex>

namespace autocomp::server {

namespace {

constexpr std::size_t k_standalone_buffer = 1000;   // events kept for a standalone stream
constexpr std::size_t k_streams_per_session = 256;  // finished POST streams kept for resumption

std::string random_hex(std::size_t bytes) {
  std::vector<unsigned char> buffer(bytes);
  if (RAND_bytes(buffer.data(), static_cast<int>(buffer.size())) != 1) {
    std::random_device device;
    for (auto& b : buffer) {
      b = static_cast<unsigned char>(device());
    }
  }
  static constexpr char k_digits[] = "0123456789abcdef";
  std::string out;
  for (unsigned char b : buffer) {
    out.push_back(k_digits[b >> 4]);
    out.push_back(k_digits[b & 0xF]);
  }
  return out;
}

std::string lower(std::string text) {
  std::transform(text.begin(), text.end(), text.begin(),
                 [](unsigned char c) { return static_cast<char>(std::tolower(c)); });
  return text;
}

// The messages of one POST request (SSE or JSON mode), or a session's standalone stream.
// Events are kept so that a client can resume with Last-Event-ID.
class EventStream : public Outbox {
 public:
  EventStream(std::string id, bool sse, bool standalone)
      : m_id(std::move(id)), m_sse(sse), m_standalone(standalone) {}

  const std::string& id() const { return m_id; }

  void set_fallback(std::shared_ptr<Outbox> fallback) { m_fallback = std::move(fallback); }

  void send(const nlohmann::json& message) override {
    if (!m_sse) {
      // A JSON response has no room for related messages: they go on the standalone stream.
      if (auto fallback = m_fallback.lock()) {
        fallback->send(message);
      }
      return;
    }
    push(jsonrpc::serialize(message));
  }

  void finish(std::optional<nlohmann::json> response) override {
    std::lock_guard lock(m_mutex);
    if (m_finished) {
      return;
    }
    if (response && m_sse) {
      push_locked(jsonrpc::serialize(*response));
    }
    m_response = std::move(response);
    m_finished = true;
    m_changed.notify_all();
  }

  void close_connection(std::chrono::milliseconds retry) override {
    std::lock_guard lock(m_mutex);
    m_retry = retry;
    ++m_close_generation;
    m_changed.notify_all();
  }

  // A standalone stream reaches the client only while a GET stream is attached to it.
  bool connected() const override {
    std::lock_guard lock(m_mutex);
    return !m_shutdown && (!m_standalone || m_attached);
  }

  void shutdown() {
    std::lock_guard lock(m_mutex);
    m_shutdown = true;
    m_changed.notify_all();
  }

  // JSON mode: waits for the response (nullopt: cancelled, or the server is stopping).
  std::optional<nlohmann::json> wait_response() {
    std::unique_lock lock(m_mutex);
    m_changed.wait(lock, [this] { return m_finished || m_shutdown; });
    return m_finished ? m_response : std::nullopt;
  }

  bool finished() const {
    std::lock_guard lock(m_mutex);
    return m_finished;
  }

  // A connection's reading position; `first` marks that the priming event is still due.
  struct Cursor {
    std::uint64_t next = 1;  // seq of the next event to write
    std::uint64_t close_generation = 0;
    bool primed = false;
    std::chrono::steady_clock::time_point last_write = std::chrono::steady_clock::now();
  };

  Cursor open_cursor(std::optional<std::uint64_t> after) {
    std::lock_guard lock(m_mutex);
    Cursor cursor;
    cursor.close_generation = m_close_generation;
    if (after) {
      cursor.next = std::max<std::uint64_t>(*after + 1, m_base);
      cursor.primed = true;  // a resumed stream needs no priming event
    } else if (m_standalone) {
      cursor.next = std::max(m_delivered + 1, m_base);
    }
    return cursor;
  }

  bool try_attach() {
    std::lock_guard lock(m_mutex);
    if (m_attached) {
      return false;
    }
    m_attached = true;
    return true;
  }
  void detach() {
    std::lock_guard lock(m_mutex);
    m_attached = false;
  }

  // One step of an SSE connection: writes what is due, or waits briefly. False ends the
  // connection abruptly (write failed); sink.done() ends it cleanly.
  bool pump(Cursor& cursor, httplib::DataSink& sink, std::chrono::milliseconds keepalive) {
    std::vector<std::pair<std::uint64_t, std::string>> due;
    bool end = false;
    std::string prefix;
    {
      std::unique_lock lock(m_mutex);
      if (!cursor.primed) {
        cursor.primed = true;
        prefix = "id: " + m_id + "_" + std::to_string(cursor.next - 1) +
                 "\nretry: " + std::to_string(m_retry.count()) + "\ndata: \n\n";
      } else {
        m_changed.wait_for(lock, std::chrono::milliseconds(500), [&] {
          return m_shutdown || cursor.next < m_base + m_events.size() ||
                 cursor.close_generation != m_close_generation ||
                 (m_finished && cursor.next >= m_base + m_events.size());
        });
      }
      if (cursor.next < m_base) {
        cursor.next = m_base;  // dropped from the buffer
      }
      for (; cursor.next < m_base + m_events.size(); ++cursor.next) {
        due.emplace_back(cursor.next, m_events[cursor.next - m_base]);
      }
      if (!due.empty()) {
        m_delivered = std::max(m_delivered, due.back().first);
      }
      const bool closing = cursor.close_generation != m_close_generation;
      if (closing) {
        cursor.close_generation = m_close_generation;
        prefix += "retry: " + std::to_string(m_retry.count()) + "\n\n";
      }
      end = m_shutdown || closing || (m_finished && !m_standalone);
    }
    std::string text = prefix;
    for (const auto& [seq, data] : due) {
      text +=
          "id: " + m_id + "_" + std::to_string(seq) + "\nevent: message\ndata: " + data + "\n\n";
    }
    const auto now = std::chrono::steady_clock::now();
    if (text.empty() && now - cursor.last_write >= keepalive) {
      text = ": keepalive\n\n";
    }
    if (!text.empty()) {
      if (!sink.write(text.data(), text.size())) {
        return false;
      }
      cursor.last_write = now;
    } else if (sink.is_writable && !sink.is_writable()) {
      return false;
    }
    if (end) {
      sink.done();
    }
    return true;
  }

 private:
  void push(std::string data) {
    std::lock_guard lock(m_mutex);
    push_locked(std::move(data));
  }
  void push_locked(std::string data) {
    m_events.push_back(std::move(data));
    if (m_standalone && m_events.size() > k_standalone_buffer) {
      m_events.pop_front();
      ++m_base;
    }
    m_changed.notify_all();
  }

  std::string m_id;
  bool m_sse;
  bool m_standalone;
  std::weak_ptr<Outbox> m_fallback;
  mutable std::mutex m_mutex;
  std::condition_variable m_changed;
  std::deque<std::string> m_events;  // event seq = m_base + index
  std::uint64_t m_base = 1;
  std::uint64_t m_delivered = 0;
  std::optional<nlohmann::json> m_response;
  bool m_finished = false;
  bool m_shutdown = false;
  bool m_attached = false;
  std::uint64_t m_close_generation = 0;
  std::chrono::milliseconds m_retry{1000};
};

struct HttpSession {
  std::string id;
  std::shared_ptr<Session> session;
  std::shared_ptr<EventStream> standalone;
  std::mutex mutex;
  std::map<std::string, std::shared_ptr<EventStream>> streams;  // POST SSE streams by id
  std::list<std::string> stream_order;
};

bool wants_sse(const httplib::Request& request) {
  return lower(request.get_header_value("Accept")).find("text/event-stream") != std::string::npos;
}

void set_json(httplib::Response& response, int status, const nlohmann::json& body) {
  response.status = status;
  response.set_content(jsonrpc::serialize(body), "application/json");
}

nlohmann::json error_body(int code, const std::string& message,
                          const nlohmann::json& id = nullptr) {
  return jsonrpc::make_error(id, code, message);
}

bool constant_time_equal(const std::string& a, const std::string& b) {
  if (a.size() != b.size()) {
    return false;
  }
  return CRYPTO_memcmp(a.data(), b.data(), a.size()) == 0;
}

}  // namespace

bool is_loopback_host(const std::string& host) {
  const std::string h = lower(host);
  return h == "localhost" || h == "::1" || h == "[::1]" || h.rfind("127.", 0) == 0;
}

std::string host_of_authority(std::string_view authority) {
  std::string text = lower(std::string(authority));
  if (!text.empty() && text.front() == '[') {
    auto close = text.find(']');
    return close == std::string::npos ? text : text.substr(0, close + 1);
  }
  auto colon = text.find(':');
  return colon == std::string::npos ? text : text.substr(0, colon);
}

std::string host_of_origin(std::string_view origin) {
  auto scheme = origin.find("://");
  if (scheme == std::string_view::npos) {
    return {};
  }
  std::string_view rest = origin.substr(scheme + 3);
  auto slash = rest.find('/');
  if (slash != std::string_view::npos) {
    rest = rest.substr(0, slash);
  }
  return host_of_authority(rest);
}

struct HttpTransport::Impl {
  httplib::Server http;
  std::atomic<bool> stopping{false};
  std::mutex sessions_mutex;
  std::map<std::string, std::shared_ptr<HttpSession>> sessions;
  std::list<std::string> lru;  // front = most recently used

  std::shared_ptr<HttpSession> find_session(const std::string& id) {
    std::lock_guard lock(sessions_mutex);
    auto it = sessions.find(id);
    if (it == sessions.end()) {
      return nullptr;
    }
    lru.remove(id);
    lru.push_front(id);
    return it->second;
  }

  void add_session(const std::shared_ptr<HttpSession>& session, std::size_t max_sessions) {
    std::vector<std::shared_ptr<HttpSession>> evicted;
    {
      std::lock_guard lock(sessions_mutex);
      sessions[session->id] = session;
      lru.push_front(session->id);
      while (sessions.size() > max_sessions && !lru.empty()) {
        auto oldest = lru.back();
        lru.pop_back();
        if (auto it = sessions.find(oldest); it != sessions.end()) {
          evicted.push_back(it->second);
          sessions.erase(it);
        }
      }
    }
    for (auto& old : evicted) {
      spdlog::info("HTTP session {} dropped (session limit reached)", old->id);
      end_session(*old);
    }
  }

  std::shared_ptr<HttpSession> remove_session(const std::string& id) {
    std::lock_guard lock(sessions_mutex);
    auto it = sessions.find(id);
    if (it == sessions.end()) {
      return nullptr;
    }
    auto session = it->second;
    sessions.erase(it);
    lru.remove(id);
    return session;
  }

  static void end_session(HttpSession& session) {
    session.session->close();
    session.standalone->shutdown();
    std::lock_guard lock(session.mutex);
    for (auto& [id, stream] : session.streams) {
      stream->shutdown();
    }
  }

  void end_all() {
    std::map<std::string, std::shared_ptr<HttpSession>> all;
    {
      std::lock_guard lock(sessions_mutex);
      all.swap(sessions);
      lru.clear();
    }
    for (auto& [id, session] : all) {
      end_session(*session);
    }
  }
};

HttpTransport::HttpTransport(Server& server, HttpOptions options)
    : m_server(server), m_options(std::move(options)), m_impl(std::make_unique<Impl>()) {}

HttpTransport::~HttpTransport() {
  stop();
}

core::Status HttpTransport::bind() {
  if (!is_loopback_host(m_options.host) && m_options.auth_token.empty()) {
    return core::make_failure(
        core::FailureKind::invalid_argument, "http",
        "refusing to listen on " + m_options.host +
            " without --auth-token TOKEN: a non-loopback address exposes kernel evaluation to "
            "the network; pass a bearer token or bind 127.0.0.1");
  }
  auto& http = m_impl->http;
  const std::size_t threads = std::max<std::size_t>(m_options.http_threads, 4);
  http.new_task_queue = [threads] { return new httplib::ThreadPool(threads); };
  http.set_keep_alive_max_count(100000);
  http.set_keep_alive_timeout(30);
  http.set_tcp_nodelay(true);
  http.set_read_timeout(30, 0);
  http.set_write_timeout(30, 0);
  const std::size_t limit = m_server.options().limits.max_message_bytes;
  http.set_payload_max_length(limit * 2 + 1024 * 1024);

  const bool loopback_bind = is_loopback_host(m_options.host);
  const std::string bound_host = host_of_authority(m_options.host);

  http.set_pre_routing_handler([this, loopback_bind, bound_host](const httplib::Request& request,
                                                                 httplib::Response& response) {
    if (!m_options.auth_token.empty()) {
      const std::string expected = "Bearer " + m_options.auth_token;
      if (!constant_time_equal(request.get_header_value("Authorization"), expected)) {
        response.set_header("WWW-Authenticate", "Bearer realm=\"autocomp-mcp\"");
        set_json(response, 401,
                 error_body(jsonrpc::k_invalid_request,
                            "Unauthorized: send \"Authorization: Bearer <token>\" with the token "
                            "given to --auth-token"));
        return httplib::Server::HandlerResponse::Handled;
      }
    }
    if (loopback_bind && request.has_header("Host")) {
      const std::string host = host_of_authority(request.get_header_value("Host"));
      if (!is_loopback_host(host)) {
        set_json(response, 403,
                 error_body(jsonrpc::k_invalid_request,
                            "Forbidden: Host '" + host + "' is not a loopback name"));
        return httplib::Server::HandlerResponse::Handled;
      }
    }
    if (request.has_header("Origin")) {
      const std::string origin = request.get_header_value("Origin");
      const std::string host = host_of_origin(origin);
      const bool allowed = is_loopback_host(host) || (!loopback_bind && host == bound_host);
      if (!allowed) {
        set_json(response, 403,
                 error_body(jsonrpc::k_invalid_request,
                            "Forbidden: Origin '" + origin + "' is not allowed"));
        return httplib::Server::HandlerResponse::Handled;
      }
    }
    return httplib::Server::HandlerResponse::Unhandled;
  });

  http.set_error_handler([limit](const httplib::Request&, httplib::Response& response) {
    if (response.status == 413) {
      set_json(
          response, 413,
          error_body(jsonrpc::k_invalid_request, "Invalid Request: message exceeds the limit of " +
                                                     std::to_string(limit) + " bytes"));
    } else if (response.body.empty()) {
      set_json(response, response.status,
               error_body(jsonrpc::k_invalid_request, "HTTP " + std::to_string(response.status) +
                                                          " (the MCP endpoint is /mcp)"));
    }
  });
  http.set_exception_handler([](const httplib::Request&, httplib::Response& response,
                                std::exception_ptr error) {
    std::string message = "unknown error";
    try {
      if (error) {
        std::rethrow_exception(error);
      }
    } catch (const std::exception& e) {
      message = e.what();
    } catch (...) {
    }
    spdlog::error("HTTP handler failed: {}", message);
    set_json(response, 500, error_body(jsonrpc::k_internal_error, "Internal error: " + message));
  });

  // --- POST: client messages -----------------------------------------------------------------
  http.Post("/mcp", [this](const httplib::Request& request, httplib::Response& response) {
    Impl& impl = *m_impl;
    if (request.has_header("Content-Type")) {
      const std::string type = lower(request.get_header_value("Content-Type"));
      if (type.find("application/json") == std::string::npos) {
        set_json(response, 415,
                 error_body(jsonrpc::k_invalid_request,
                            "Unsupported Media Type: POST bodies must be application/json"));
        return;
      }
    }
    if (request.has_header("MCP-Protocol-Version") &&
        !is_supported_protocol_version(request.get_header_value("MCP-Protocol-Version"))) {
      set_json(response, 400,
               error_body(jsonrpc::k_invalid_request,
                          "Bad Request: unsupported MCP-Protocol-Version '" +
                              request.get_header_value("MCP-Protocol-Version") +
                              "' (supported: 2025-11-25, 2025-06-18, 2025-03-26)"));
      return;
    }
    jsonrpc::Message message = jsonrpc::parse(request.body, m_server.options().limits);
    if (auto* invalid = std::get_if<jsonrpc::Invalid>(&message)) {
      set_json(response, 400, invalid->error_response);
      return;
    }
    auto* rpc_request = std::get_if<jsonrpc::Request>(&message);

    if (rpc_request != nullptr && rpc_request->method == "initialize") {
      auto http_session = std::make_shared<HttpSession>();
      http_session->id = random_hex(16);
      http_session->standalone = std::make_shared<EventStream>(random_hex(4), true, true);
      http_session->session = m_server.create_session(http_session->standalone);
      auto outbox = std::make_shared<EventStream>(random_hex(4), false, false);
      http_session->session->handle(std::move(message), outbox);
      auto answer = outbox->wait_response();
      if (!answer) {
        response.status = 500;
        return;
      }
      if (answer->contains("result")) {
        impl.add_session(http_session, m_options.max_sessions);
        response.set_header("Mcp-Session-Id", http_session->id);
        spdlog::info("HTTP session {} started", http_session->id);
      }
      set_json(response, 200, *answer);
      return;
    }

    const nlohmann::json reply_id = rpc_request != nullptr ? rpc_request->id : nlohmann::json();
    if (!request.has_header("Mcp-Session-Id")) {
      if (rpc_request != nullptr && rpc_request->method == "server/discover") {
        set_json(response, 400,
                 error_body(jsonrpc::k_method_not_found,
                            "Method not found: server/discover (this server speaks MCP "
                            "2025-11-25; send initialize)",
                            reply_id));
        return;
      }
      if (rpc_request != nullptr && rpc_request->method == "ping") {
        set_json(response, 200, jsonrpc::make_result(reply_id, nlohmann::json::object()));
        return;
      }
      set_json(response, 400,
               error_body(jsonrpc::k_invalid_request,
                          "Bad Request: missing Mcp-Session-Id header (send initialize first)",
                          reply_id));
      return;
    }
    auto http_session = impl.find_session(request.get_header_value("Mcp-Session-Id"));
    if (!http_session) {
      set_json(response, 404,
               error_body(jsonrpc::k_session_not_found,
                          "Session not found: it ended or never existed; send initialize again",
                          reply_id));
      return;
    }
    response.set_header("Mcp-Session-Id", http_session->id);
    if (rpc_request == nullptr) {  // notification or response
      http_session->session->handle(std::move(message), nullptr);
      response.status = 202;
      return;
    }
    const bool sse = rpc_request->method == "tools/call" && wants_sse(request);
    auto stream = std::make_shared<EventStream>(random_hex(6), sse, false);
    stream->set_fallback(http_session->standalone);
    if (!sse) {
      http_session->session->handle(std::move(message), stream);
      auto answer = stream->wait_response();
      if (!answer) {
        response.status = 202;  // cancelled: no response
        return;
      }
      set_json(response, 200, *answer);
      return;
    }
    {
      std::lock_guard lock(http_session->mutex);
      http_session->streams[stream->id()] = stream;
      http_session->stream_order.push_back(stream->id());
      while (http_session->stream_order.size() > k_streams_per_session) {
        const auto oldest = http_session->stream_order.front();
        auto it = http_session->streams.find(oldest);
        if (it != http_session->streams.end() && !it->second->finished()) {
          break;  // keep streams of running calls
        }
        http_session->streams.erase(oldest);
        http_session->stream_order.pop_front();
      }
    }
    http_session->session->handle(std::move(message), stream);
    response.status = 200;
    response.set_header("Cache-Control", "no-cache");
    response.set_header("X-Accel-Buffering", "no");
    auto cursor = std::make_shared<EventStream::Cursor>(stream->open_cursor(std::nullopt));
    const auto keepalive = m_options.keepalive;
    response.set_chunked_content_provider(
        "text/event-stream", [stream, cursor, keepalive](std::size_t, httplib::DataSink& sink) {
          return stream->pump(*cursor, sink, keepalive);
        });
  });

  // --- GET: standalone stream, or resumption of a stream -------------------------------------
  http.Get("/mcp", [this](const httplib::Request& request, httplib::Response& response) {
    Impl& impl = *m_impl;
    if (!wants_sse(request)) {
      response.set_header("Allow", "POST, DELETE");
      set_json(response, 405,
               error_body(jsonrpc::k_invalid_request,
                          "Method Not Allowed: GET opens an SSE stream; send Accept: "
                          "text/event-stream"));
      return;
    }
    if (!request.has_header("Mcp-Session-Id")) {
      set_json(
          response, 400,
          error_body(jsonrpc::k_invalid_request, "Bad Request: missing Mcp-Session-Id header"));
      return;
    }
    auto http_session = impl.find_session(request.get_header_value("Mcp-Session-Id"));
    if (!http_session) {
      set_json(response, 404, error_body(jsonrpc::k_session_not_found, "Session not found"));
      return;
    }
    std::shared_ptr<EventStream> stream;
    std::optional<std::uint64_t> after;
    bool standalone = false;
    if (request.has_header("Last-Event-ID")) {
      const std::string last = request.get_header_value("Last-Event-ID");
      const auto underscore = last.rfind('_');
      if (underscore != std::string::npos) {
        const std::string stream_id = last.substr(0, underscore);
        try {
          after = std::stoull(last.substr(underscore + 1));
        } catch (const std::exception&) {
          after.reset();
        }
        if (stream_id == http_session->standalone->id()) {
          stream = http_session->standalone;
          standalone = true;
        } else {
          std::lock_guard lock(http_session->mutex);
          if (auto it = http_session->streams.find(stream_id); it != http_session->streams.end()) {
            stream = it->second;
          }
        }
      }
      if (!stream || !after) {
        set_json(response, 404,
                 error_body(jsonrpc::k_invalid_request,
                            "Not Found: no stream matches Last-Event-ID '" + last + "'"));
        return;
      }
    } else {
      stream = http_session->standalone;
      standalone = true;
    }
    if (standalone && !stream->try_attach()) {
      set_json(response, 409,
               error_body(jsonrpc::k_invalid_request,
                          "Conflict: this session already has an open GET stream"));
      return;
    }
    response.status = 200;
    response.set_header("Mcp-Session-Id", http_session->id);
    response.set_header("Cache-Control", "no-cache");
    response.set_header("X-Accel-Buffering", "no");
    auto cursor = std::make_shared<EventStream::Cursor>(stream->open_cursor(after));
    const auto keepalive = m_options.keepalive;
    response.set_chunked_content_provider(
        "text/event-stream",
        [stream, cursor, keepalive](std::size_t, httplib::DataSink& sink) {
          return stream->pump(*cursor, sink, keepalive);
        },
        [stream, standalone](bool) {
          if (standalone) {
            stream->detach();
          }
        });
  });

  // --- DELETE: end a session -----------------------------------------------------------------
  http.Delete("/mcp", [this](const httplib::Request& request, httplib::Response& response) {
    if (!request.has_header("Mcp-Session-Id")) {
      set_json(
          response, 400,
          error_body(jsonrpc::k_invalid_request, "Bad Request: missing Mcp-Session-Id header"));
      return;
    }
    auto http_session = m_impl->remove_session(request.get_header_value("Mcp-Session-Id"));
    if (!http_session) {
      set_json(response, 404, error_body(jsonrpc::k_session_not_found, "Session not found"));
      return;
    }
    Impl::end_session(*http_session);
    spdlog::info("HTTP session {} ended by the client", http_session->id);
    response.status = 200;
  });

  const int port = m_options.port == 0
                       ? http.bind_to_any_port(m_options.host)
                       : (http.bind_to_port(m_options.host, m_options.port) ? m_options.port : -1);
  if (port <= 0) {
    return core::make_failure(core::FailureKind::io_error, "http",
                              "cannot listen on " + m_options.host + ":" +
                                  std::to_string(m_options.port) +
                                  " (address in use, or not an address of this machine?)");
  }
  m_port = port;
  if (!m_options.port_file.empty()) {
    const std::string temporary = m_options.port_file + ".tmp";
    {
      std::ofstream out(temporary, std::ios::trunc);
      out << port << "\n";
      if (!out) {
        return core::make_failure(core::FailureKind::io_error, "http",
                                  "cannot write the port file " + m_options.port_file);
      }
    }
    std::error_code error;
    std::filesystem::rename(temporary, m_options.port_file, error);
    if (error) {
      return core::make_failure(
          core::FailureKind::io_error, "http",
          "cannot write the port file " + m_options.port_file + ": " + error.message());
    }
  }
  return core::ok_status();
}

void HttpTransport::serve() {
  spdlog::info("listening on http://{}:{}/mcp", m_options.host, m_port);
  m_impl->http.listen_after_bind();
}

void HttpTransport::stop() {
  if (!m_impl || m_impl->stopping.exchange(true)) {
    return;
  }
  m_impl->end_all();
  m_impl->http.stop();
}

}  // namespace autocomp::server
