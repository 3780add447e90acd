#include "server/http_transport.hpp"

#include <arpa/inet.h>
#include <httplib.h>
#include <netinet/in.h>
#include <openssl/evp.h>
#include <openssl/rand.h>
#include <poll.h>
#include <spdlog/spdlog.h>
#include <sys/socket.h>

#include <algorithm>
#include <array>
#include <cctype>
#include <cerrno>
#include <condition_variable>
#include <cstdio>
#include <cstring>
#include <deque>
#include <filesystem>
#include <fstream>
#include <list>
#include <map>
#include <mutex>
#include <thread>

#include "server/http_guard.hpp"

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

std::string trim(std::string text) {
  const auto first = text.find_first_not_of(" \t");
  if (first == std::string::npos) {
    return {};
  }
  return text.substr(first, text.find_last_not_of(" \t") - first + 1);
}

// A header value of SEP-2243: "=?base64?...?=" carries Base64 (for values that are not plain
// ASCII); anything else is literal. nullopt: a malformed Base64 value.
std::optional<std::string> header_text(const std::string& raw) {
  const std::string value = trim(raw);
  constexpr std::string_view k_open = "=?base64?";
  constexpr std::string_view k_close = "?=";
  if (value.size() < k_open.size() + k_close.size() ||
      value.compare(0, k_open.size(), k_open) != 0 ||
      value.compare(value.size() - k_close.size(), k_close.size(), k_close) != 0) {
    return value;
  }
  const std::string data =
      value.substr(k_open.size(), value.size() - k_open.size() - k_close.size());
  if (data.size() % 4 != 0 ||
      data.find_first_not_of("ABCDEFGHIJKLMNOPQRSTUVWXYZabcdefghijklmnopqrstuvwxyz0123456789+/=") !=
          std::string::npos) {
    return std::nullopt;
  }
  const auto padding = data.find('=');
  if (padding != std::string::npos &&
      (data.size() - padding > 2 || data.find_first_not_of('=', padding) != std::string::npos)) {
    return std::nullopt;
  }
  std::string out(3 * (data.size() / 4) + 1, '\0');
  const int n = EVP_DecodeBlock(reinterpret_cast<unsigned char*>(out.data()),
                                reinterpret_cast<const unsigned char*>(data.data()),
                                static_cast<int>(data.size()));
  if (n < 0) {
    return std::nullopt;
  }
  out.resize(static_cast<std::size_t>(n) - (data.size() - std::min(data.size(), padding)));
  return out;
}

// The text a body value is mirrored as in an Mcp-Param header.
std::string header_form(const nlohmann::json& value) {
  return value.is_string() ? value.get<std::string>() : jsonrpc::serialize(value);
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

  void set_fallback(const std::shared_ptr<Outbox>& fallback) { m_fallback = fallback; }

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

  // SSE mode: waits for the first message; true when it is the response (nothing came before
  // it), so that the request can be answered as plain JSON with a status that fits it.
  bool wait_first_is_response() {
    std::unique_lock lock(m_mutex);
    m_changed.wait(lock, [this] { return !m_events.empty() || m_finished || m_shutdown; });
    return m_finished && m_events.size() <= 1;
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
  bool attached() const {
    std::lock_guard lock(m_mutex);
    return m_attached;
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
  // Guarded by Impl::sessions_mutex.
  core::Clock::TimePoint last_used{};  // set when the session is added
  std::uint64_t requests = 0;          // requests after initialize

  // In use: a GET stream is attached or a call runs; such a session is never dropped.
  bool busy() const { return standalone->attached() || session->running_calls() > 0; }
};

bool wants_sse(const httplib::Request& request) {
  return lower(request.get_header_value("Accept")).find("text/event-stream") != std::string::npos;
}

std::string session_limit_message(std::size_t max_sessions, std::chrono::seconds idle_timeout) {
  std::string message = "Service Unavailable: all " + std::to_string(max_sessions) +
                        " sessions are in use by clients that made requests; working sessions "
                        "are never dropped for new ones. End one (DELETE /mcp with its "
                        "Mcp-Session-Id), ";
  if (idle_timeout.count() > 0) {
    message += "wait until one has been idle " + std::to_string(idle_timeout.count()) + " s, ";
  }
  return message + "or restart the server with a larger --max-sessions";
}

void set_json(httplib::Response& response, int status, const nlohmann::json& body) {
  response.status = status;
  response.set_content(jsonrpc::serialize(body), "application/json");
}

nlohmann::json error_body(int code, const std::string& message,
                          const nlohmann::json& id = nullptr) {
  return jsonrpc::make_error(id, code, message);
}

// The socket of the connection the current thread serves (set by GuardedServer), so that an
// answer that ends the connection can close it gracefully.
thread_local int t_connection_socket = -1;

// Stops sending, then reads and drops what the client still sends for a short while, so that
// the answer already written is not lost to a reset when the socket closes with unread data.
void linger_close(int socket, std::chrono::milliseconds budget) {
  if (socket < 0) {
    return;
  }
  ::shutdown(socket, SHUT_WR);
  const auto deadline = std::chrono::steady_clock::now() + budget;
  char buffer[64 * 1024];
  for (;;) {
    const auto left = std::chrono::duration_cast<std::chrono::milliseconds>(
        deadline - std::chrono::steady_clock::now());
    if (left.count() <= 0) {
      return;
    }
    pollfd fd{socket, POLLIN, 0};
    if (::poll(&fd, 1, static_cast<int>(left.count())) <= 0) {
      return;
    }
    const ssize_t n = ::recv(socket, buffer, sizeof(buffer), MSG_DONTWAIT);
    if (n == 0 || (n < 0 && errno != EAGAIN && errno != EINTR)) {
      return;
    }
  }
}

// An answer after which the connection ends (its request body, if any, is left unread): the body
// is written, then the connection closes (the provider fails on purpose so that the server does
// not read the unread body as the next request).
void answer_and_close(httplib::Response& response, int status, const nlohmann::json& body) {
  response.status = status;
  response.set_header("Connection", "close");
  auto text = std::make_shared<std::string>(jsonrpc::serialize(body));
  response.set_content_provider(text->size(), "application/json",
                                [text](std::size_t offset, std::size_t, httplib::DataSink& sink) {
                                  if (offset < text->size()) {
                                    sink.write(text->data() + offset, text->size() - offset);
                                  }
                                  linger_close(t_connection_socket,
                                               std::chrono::milliseconds(1000));
                                  return false;
                                });
}

// Serves connections on an elastic set of threads: `keep` stay ready, more are started while all
// are busy, up to `max`; threads above `keep` end after a quiet minute.
class ConnectionQueue : public httplib::TaskQueue {
 public:
  ConnectionQueue(std::size_t keep, std::size_t max) : m_keep(keep), m_max(std::max(keep, max)) {}
  ~ConnectionQueue() override { shutdown(); }

  void enqueue(std::function<void()> job) override {
    std::lock_guard lock(m_mutex);
    reap_locked();
    m_jobs.push_back(std::move(job));
    if (m_idle < m_jobs.size() && m_live < m_max) {
      start_locked();
    }
    m_work.notify_one();
  }

  void shutdown() override {
    std::list<Worker> workers;
    {
      std::lock_guard lock(m_mutex);
      m_stopping = true;
      m_work.notify_all();
      workers.swap(m_workers);
    }
    for (auto& worker : workers) {
      if (worker.thread.joinable()) {
        worker.thread.join();
      }
    }
  }

 private:
  struct Worker {
    std::thread thread;
    bool finished = false;
  };

  void start_locked() {
    m_workers.emplace_back();
    auto it = std::prev(m_workers.end());
    ++m_live;
    ++m_idle;
    it->thread = std::thread([this, it] { run(*it); });
  }

  void reap_locked() {
    for (auto it = m_workers.begin(); it != m_workers.end();) {
      if (it->finished) {
        it->thread.join();
        it = m_workers.erase(it);
      } else {
        ++it;
      }
    }
  }

  void run(Worker& self) {
    std::unique_lock lock(m_mutex);
    for (;;) {
      const bool woken = m_work.wait_for(lock, std::chrono::seconds(60),
                                         [this] { return m_stopping || !m_jobs.empty(); });
      if (m_jobs.empty()) {
        if (m_stopping || (!woken && m_live > m_keep)) {
          break;
        }
        continue;
      }
      auto job = std::move(m_jobs.front());
      m_jobs.pop_front();
      --m_idle;
      lock.unlock();
      try {
        job();
      } catch (...) {
        spdlog::error("an HTTP connection ended with an exception");
      }
      lock.lock();
      ++m_idle;
    }
    --m_idle;
    --m_live;
    self.finished = true;
  }

  std::size_t m_keep;
  std::size_t m_max;
  std::mutex m_mutex;
  std::condition_variable m_work;
  std::deque<std::function<void()>> m_jobs;
  std::list<Worker> m_workers;
  std::size_t m_live = 0;
  std::size_t m_idle = 0;
  bool m_stopping = false;
};

// One connection as cpp-httplib's Stream, with what its own stream lacks: a deadline for reading
// each whole request (a client trickling bytes cannot hold a connection), a byte budget per
// request (endless headers cannot grow memory), and poll() (no descriptor number limit).
class ConnectionStream : public httplib::Stream {
 public:
  ConnectionStream(int socket, std::chrono::seconds write_timeout)
      : m_socket(socket), m_write_timeout(write_timeout) {}

  bool has_buffered() const { return m_offset < m_size; }

  void start_request(std::chrono::steady_clock::time_point read_deadline, std::size_t budget) {
    m_deadline = read_deadline;
    m_budget = budget;
    m_head.clear();
    m_head_complete = false;
  }

  // The Host and Origin values of the current request exactly as sent (cpp-httplib drops empty
  // values and percent-decodes the others, so its view cannot be judged).
  struct GuardHeaders {
    std::optional<std::string> host;
    std::optional<std::string> origin;
    bool repeated = false;
  };
  GuardHeaders guard_headers() const {
    GuardHeaders out;
    std::size_t start = m_head.find("\r\n");
    while (start != std::string::npos && start + 2 < m_head.size()) {
      const std::size_t end = m_head.find("\r\n", start + 2);
      const std::string line =
          m_head.substr(start + 2, (end == std::string::npos ? m_head.size() : end) - start - 2);
      const auto colon = line.find(':');
      if (colon != std::string::npos) {
        const std::string name = lower(line.substr(0, colon));
        auto* slot = name == "host" ? &out.host : name == "origin" ? &out.origin : nullptr;
        if (slot != nullptr) {
          std::string value = line.substr(colon + 1);
          value.erase(0, value.find_first_not_of(" \t"));
          value.erase(value.find_last_not_of(" \t") + 1);
          out.repeated = out.repeated || slot->has_value();
          *slot = value;
        }
      }
      start = end;
    }
    return out;
  }

  bool is_readable() const override {
    if (m_offset < m_size) {
      return true;
    }
    const auto left = std::chrono::duration_cast<std::chrono::milliseconds>(
        m_deadline - std::chrono::steady_clock::now());
    return left.count() > 0 && wait(POLLIN, left);
  }

  bool is_writable() const override {
    if (!wait(POLLOUT, m_write_timeout)) {
      return false;
    }
    // A peer that closed shows as readable with nothing to read.
    pollfd fd{m_socket, POLLIN, 0};
    if (::poll(&fd, 1, 0) > 0) {
      char byte = 0;
      return ::recv(m_socket, &byte, 1, MSG_PEEK | MSG_DONTWAIT) != 0;
    }
    return true;
  }

  ssize_t read(char* ptr, std::size_t size) override {
    if (m_offset >= m_size) {
      if (m_budget == 0 || !is_readable()) {
        return -1;
      }
      const ssize_t n = ::recv(m_socket, m_buffer.data(), std::min(m_buffer.size(), m_budget), 0);
      if (n <= 0) {
        return n;
      }
      m_budget -= static_cast<std::size_t>(n);
      m_offset = 0;
      m_size = static_cast<std::size_t>(n);
    }
    const std::size_t count = std::min(size, m_size - m_offset);
    std::memcpy(ptr, m_buffer.data() + m_offset, count);
    m_offset += count;
    if (!m_head_complete) {
      m_head.append(ptr, count);
      m_head_complete = m_head.find("\r\n\r\n") != std::string::npos || m_head.size() > 64 * 1024;
    }
    return static_cast<ssize_t>(count);
  }

  ssize_t write(const char* ptr, std::size_t size) override {
    if (!wait(POLLOUT, m_write_timeout)) {
      return -1;
    }
    return ::send(m_socket, ptr, size, MSG_NOSIGNAL);
  }

  void get_remote_ip_and_port(std::string& ip, int& port) const override {
    address(true, ip, port);
  }
  void get_local_ip_and_port(std::string& ip, int& port) const override {
    address(false, ip, port);
  }
  // cpp-httplib refuses descriptors beyond FD_SETSIZE for its select(); this stream polls.
  socket_t socket() const override { return 0; }

 private:
  bool wait(short events, std::chrono::milliseconds timeout) const {
    pollfd fd{m_socket, events, 0};
    for (;;) {
      const int n = ::poll(&fd, 1, static_cast<int>(std::max<long long>(timeout.count(), 0)));
      if (n < 0 && errno == EINTR) {
        continue;
      }
      return n > 0;
    }
  }

  void address(bool remote, std::string& ip, int& port) const {
    sockaddr_storage storage{};
    socklen_t length = sizeof(storage);
    auto* raw = reinterpret_cast<sockaddr*>(&storage);
    const int status =
        remote ? ::getpeername(m_socket, raw, &length) : ::getsockname(m_socket, raw, &length);
    if (status != 0) {
      return;
    }
    char text[INET6_ADDRSTRLEN] = {};
    if (storage.ss_family == AF_INET) {
      const auto* in = reinterpret_cast<const sockaddr_in*>(&storage);
      ::inet_ntop(AF_INET, &in->sin_addr, text, sizeof(text));
      port = ntohs(in->sin_port);
    } else if (storage.ss_family == AF_INET6) {
      const auto* in6 = reinterpret_cast<const sockaddr_in6*>(&storage);
      ::inet_ntop(AF_INET6, &in6->sin6_addr, text, sizeof(text));
      port = ntohs(in6->sin6_port);
    }
    ip = text;
  }

  int m_socket;
  std::chrono::milliseconds m_write_timeout;
  std::chrono::steady_clock::time_point m_deadline = std::chrono::steady_clock::now();
  std::size_t m_budget = 0;
  std::array<char, 16 * 1024> m_buffer{};
  std::size_t m_offset = 0;
  std::size_t m_size = 0;
  std::string m_head;  // the current request's header block, as read
  bool m_head_complete = false;
};

thread_local const ConnectionStream* t_connection_stream = nullptr;

// cpp-httplib's server with our own connection loop: a connection limit (503 at once beyond it),
// a deadline and a byte budget for reading each request, keep-alive waits that shorten when
// connections are many, and a listen backlog of our choosing (the library's is 5).
class GuardedServer : public httplib::Server {
 public:
  std::size_t max_connections = 512;
  std::chrono::seconds request_timeout{10};
  std::chrono::seconds keep_alive{5};
  std::chrono::seconds write_timeout{30};
  std::size_t request_budget = 8 * 1024 * 1024;

  void set_backlog(int backlog) {
    const socket_t socket = svr_sock_;
    if (socket >= 0) {
      ::listen(socket, backlog);
    }
  }

 private:
  bool process_and_close_socket(socket_t socket) override {
    struct Count {
      std::atomic<std::size_t>& open;
      explicit Count(std::atomic<std::size_t>& o) : open(o) { ++open; }
      ~Count() { --open; }
    } count(m_open);
    if (m_open.load() > max_connections) {
      const std::string& answer = busy_answer();
      (void)::send(socket, answer.data(), answer.size(), MSG_NOSIGNAL | MSG_DONTWAIT);
      linger_close(socket, std::chrono::milliseconds(200));
      ::close(socket);
      return false;
    }
    t_connection_socket = socket;
    ConnectionStream stream(socket, write_timeout);
    t_connection_stream = &stream;
    bool result = false;
    while (svr_sock_ != INVALID_SOCKET && (stream.has_buffered() || wait_for_request(socket))) {
      // While more than half of the slots are taken, requests get less time to arrive.
      const auto allowed =
          crowded() ? std::min(request_timeout, std::chrono::seconds(2)) : request_timeout;
      stream.start_request(std::chrono::steady_clock::now() + allowed, request_budget);
      bool closed = false;
      result = process_request(stream, false, closed, nullptr);
      if (!result || closed) {
        break;
      }
    }
    t_connection_socket = -1;
    t_connection_stream = nullptr;
    ::shutdown(socket, SHUT_RDWR);
    ::close(socket);
    return result;
  }

  // Waits for the next request on a kept-alive connection; idle connections are let go after
  // `keep_alive`, or after a second while more than half of the connection slots are taken.
  bool wait_for_request(int socket) const {
    const auto start = std::chrono::steady_clock::now();
    for (;;) {
      pollfd fd{socket, POLLIN, 0};
      const int n = ::poll(&fd, 1, 100);
      if (n > 0) {
        return true;
      }
      if (n < 0 && errno != EINTR) {
        return false;
      }
      const auto limit = crowded() ? std::chrono::seconds(1) : keep_alive;
      if (svr_sock_ == INVALID_SOCKET || std::chrono::steady_clock::now() - start >= limit) {
        return false;
      }
    }
  }

  bool crowded() const { return m_open.load() > max_connections / 2; }

  static const std::string& busy_answer() {
    static const std::string k_answer = [] {
      const std::string body = jsonrpc::serialize(
          error_body(jsonrpc::k_invalid_request,
                     "Service Unavailable: too many open connections; retry in a second"));
      return "HTTP/1.1 503 Service Unavailable\r\nContent-Type: application/json\r\n"
             "Retry-After: 1\r\nConnection: close\r\nContent-Length: " +
             std::to_string(body.size()) + "\r\n\r\n" + body;
    }();
    return k_answer;
  }

  std::atomic<std::size_t> m_open{0};
};

// An exception escaping a handler becomes a 500 with a JSON-RPC error body.
void answer_exception(const httplib::Request&, httplib::Response& response,
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
}

}  // namespace

struct HttpTransport::Impl {
  explicit Impl(const core::Clock& c) : clock(c) {}
  const core::Clock& clock;  // of session idle expiry (the server's clock)
  GuardedServer http;
  std::atomic<bool> stopping{false};
  std::atomic<std::size_t> open_streams{0};
  mutable std::mutex sessions_mutex;
  std::map<std::string, std::shared_ptr<HttpSession>> sessions;
  core::Clock::TimePoint last_sweep = clock.now();
  std::mutex modern_mutex;
  std::vector<std::weak_ptr<EventStream>> modern_streams;  // open 2026-07-28 response streams

  void track_modern(const std::shared_ptr<EventStream>& stream) {
    std::lock_guard lock(modern_mutex);
    modern_streams.erase(std::remove_if(modern_streams.begin(), modern_streams.end(),
                                        [](const auto& weak) { return weak.expired(); }),
                         modern_streams.end());
    modern_streams.push_back(stream);
  }

  // `is_use`: the lookup serves a request or opens a stream (not a notification or a DELETE);
  // a session that was used is never dropped to make room (see add_session).
  std::shared_ptr<HttpSession> find_session(const std::string& id,
                                            std::chrono::seconds idle_timeout, bool is_use) {
    std::vector<std::shared_ptr<HttpSession>> expired;
    std::shared_ptr<HttpSession> found;
    {
      std::lock_guard lock(sessions_mutex);
      const auto now = clock.now();
      if (now - last_sweep >= std::chrono::seconds(1)) {
        last_sweep = now;
        expire_locked(now, idle_timeout, expired);
      }
      if (auto it = sessions.find(id); it != sessions.end()) {
        found = it->second;
        found->last_used = now;
        if (is_use) {
          ++found->requests;
        }
      }
    }
    end_sessions(expired, "expired after " + std::to_string(idle_timeout.count()) + " s idle");
    return found;
  }

  // Sessions idle longer than the timeout (and not busy) are removed.
  void expire_locked(core::Clock::TimePoint now, std::chrono::seconds idle_timeout,
                     std::vector<std::shared_ptr<HttpSession>>& out) {
    if (idle_timeout.count() <= 0) {
      return;
    }
    for (auto it = sessions.begin(); it != sessions.end();) {
      if (now - it->second->last_used > idle_timeout && !it->second->busy()) {
        out.push_back(it->second);
        it = sessions.erase(it);
      } else {
        ++it;
      }
    }
  }

  // Adds a session. Beyond the limit, sessions idle past the timeout go first, then sessions that
  // never made a request after initialize (abandoned handshakes), least recently used first.
  // A session that made a request is never dropped before it idles out, so a flood of
  // initialize calls cannot end the sessions of working clients; when only such sessions are
  // left, false: the new session is refused.
  bool add_session(const std::shared_ptr<HttpSession>& session, std::size_t max_sessions,
                   std::chrono::seconds idle_timeout) {
    std::vector<std::shared_ptr<HttpSession>> expired;
    std::vector<std::shared_ptr<HttpSession>> evicted;
    bool added = true;
    {
      std::lock_guard lock(sessions_mutex);
      const auto now = clock.now();
      expire_locked(now, idle_timeout, expired);
      while (sessions.size() >= std::max<std::size_t>(max_sessions, 1)) {
        auto victim = sessions.end();
        for (auto it = sessions.begin(); it != sessions.end(); ++it) {
          if (it->second->requests > 0 || it->second->busy()) {
            continue;
          }
          if (victim == sessions.end() || it->second->last_used < victim->second->last_used) {
            victim = it;
          }
        }
        if (victim == sessions.end()) {
          added = false;
          break;
        }
        evicted.push_back(victim->second);
        sessions.erase(victim);
      }
      if (added) {
        session->last_used = now;
        sessions[session->id] = session;
      }
    }
    end_sessions(expired, "expired after " + std::to_string(idle_timeout.count()) + " s idle");
    end_sessions(evicted, "dropped (session limit reached; it made no request after initialize)");
    return added;
  }

  std::shared_ptr<HttpSession> remove_session(const std::string& id) {
    std::lock_guard lock(sessions_mutex);
    auto it = sessions.find(id);
    if (it == sessions.end()) {
      return nullptr;
    }
    auto session = it->second;
    sessions.erase(it);
    return session;
  }

  static void end_sessions(const std::vector<std::shared_ptr<HttpSession>>& list,
                           const std::string& why) {
    for (const auto& session : list) {
      spdlog::info("HTTP session {} {}", session->id, why);
      end_session(*session);
    }
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
    }
    {
      std::lock_guard lock(modern_mutex);
      for (auto& weak : modern_streams) {
        if (auto stream = weak.lock()) {
          stream->shutdown();
        }
      }
      modern_streams.clear();
    }
    for (auto& [id, session] : all) {
      end_session(*session);
    }
  }
};

HttpTransport::HttpTransport(Server& server, HttpOptions options)
    : m_server(server),
      m_options(std::move(options)),
      m_impl(std::make_unique<Impl>(server.clock())) {}

HttpTransport::~HttpTransport() {
  stop();
}

std::size_t HttpTransport::session_count() const {
  std::lock_guard lock(m_impl->sessions_mutex);
  return m_impl->sessions.size();
}

core::Status HttpTransport::bind() {
  if (!is_loopback_host(m_options.host) && m_options.auth_token.empty()) {
    return core::make_failure(
        core::FailureKind::invalid_argument, "http",
        "refusing to listen on " + m_options.host +
            " without a bearer token: a non-loopback address exposes kernel evaluation to the "
            "network; give one with --auth-token-file PATH or AUTOCOMP_AUTH_TOKEN, or bind "
            "127.0.0.1");
  }
  auto& http = m_impl->http;
  const std::size_t keep = std::max<std::size_t>(m_options.http_threads, 2);
  const std::size_t max_connections = std::max<std::size_t>(m_options.max_connections, 8);
  http.max_connections = max_connections;
  http.request_timeout = std::max(m_options.read_timeout, std::chrono::seconds(1));
  http.keep_alive = std::max(m_options.keep_alive_timeout, std::chrono::seconds(1));
  http.request_budget = m_server.options().limits.max_message_bytes + 256 * 1024;
  // A few threads beyond the limit answer the connections over it with a quick 503.
  http.new_task_queue = [keep, max_connections] {
    return new ConnectionQueue(keep, max_connections + 16);
  };
  http.set_keep_alive_max_count(100000);
  http.set_keep_alive_timeout(std::max<time_t>(m_options.keep_alive_timeout.count(), 1));
  http.set_tcp_nodelay(true);
  http.set_read_timeout(std::max<time_t>(m_options.read_timeout.count(), 1), 0);
  http.set_write_timeout(30, 0);
  const std::size_t limit = m_server.options().limits.max_message_bytes;
  http.set_payload_max_length(limit);

  http.set_pre_routing_handler([this](const httplib::Request& request,
                                      httplib::Response& response) {
    return refuse_before_routing(request, response) ? httplib::Server::HandlerResponse::Handled
                                                    : httplib::Server::HandlerResponse::Unhandled;
  });

  http.set_error_handler(
      [this](const httplib::Request&, httplib::Response& response) { answer_unrouted(response); });
  http.set_exception_handler(answer_exception);
  http.Post("/mcp", [this](const httplib::Request& request, httplib::Response& response,
                           const httplib::ContentReader& reader) {
    handle_post(request, response, reader);
  });
  http.Get("/mcp", [this](const httplib::Request& request, httplib::Response& response) {
    handle_get(request, response);
  });
  http.Delete("/mcp", [this](const httplib::Request& request, httplib::Response& response,
                             const httplib::ContentReader& reader) {
    handle_delete(request, response, reader);
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
  http.set_backlog(m_options.listen_backlog);
  return write_port_file();
}

// Writes the bound port to --port-file (through a temporary file, so a reader never sees half).
core::Status HttpTransport::write_port_file() const {
  if (m_options.port_file.empty()) {
    return core::ok_status();
  }
  const std::string temporary = m_options.port_file + ".tmp";
  {
    std::ofstream out(temporary, std::ios::trunc);
    out << m_port << "\n";
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
  return core::ok_status();
}

// --- Request guard: Host/Origin, bearer token, body limits, before any handler --------------
bool HttpTransport::refuse_before_routing(const httplib::Request& request,
                                          httplib::Response& response) {
  const bool loopback_bind = is_loopback_host(m_options.host);
  const std::string& listen_host = m_options.host;
  const std::size_t limit = m_server.options().limits.max_message_bytes;
  auto header = [&](const char* name) -> std::optional<std::string> {
    if (!request.has_header(name)) {
      return std::nullopt;
    }
    return request.get_header_value(name);
  };
  std::optional<std::string> host = header("Host");
  std::optional<std::string> origin = header("Origin");
  if (t_connection_stream != nullptr) {
    auto raw = t_connection_stream->guard_headers();
    if (raw.repeated) {
      answer_and_close(
          response, 400,
          error_body(jsonrpc::k_invalid_request, "Bad Request: a repeated Host or Origin header"));
      return true;
    }
    host = raw.host;
    origin = raw.origin;
  }
  if (auto refusal = check_host_and_origin(host, origin, loopback_bind, listen_host, m_port)) {
    answer_and_close(response, refusal->status,
                     error_body(jsonrpc::k_invalid_request, refusal->message));
    return true;
  }
  if (!m_options.auth_token.empty() &&
      !bearer_token_matches(request.get_header_value("Authorization"), m_options.auth_token)) {
    response.set_header("WWW-Authenticate", "Bearer realm=\"autocomp-mcp\"");
    answer_and_close(response, 401,
                     error_body(jsonrpc::k_invalid_request,
                                "Unauthorized: send \"Authorization: Bearer <token>\" with the "
                                "server's token (--auth-token-file or AUTOCOMP_AUTH_TOKEN)"));
    return true;
  }
  // Bodies are read only by the /mcp POST and DELETE handlers, which enforce the limit while
  // reading; anything else with a body is refused before a byte of it is read.
  const bool chunked = request.has_header("Transfer-Encoding");
  std::optional<unsigned long long> length;
  if (request.has_header("Content-Length")) {
    const std::string text = request.get_header_value("Content-Length");
    if (text.empty() || text.size() > 19 ||
        text.find_first_not_of("0123456789") != std::string::npos) {
      answer_and_close(
          response, 400,
          error_body(jsonrpc::k_invalid_request, "Bad Request: malformed Content-Length"));
      return true;
    }
    length = std::stoull(text);
  }
  const bool has_body = chunked || length.value_or(0) > 0;
  const bool reads_body =
      request.path == "/mcp" && (request.method == "POST" || request.method == "DELETE");
  if (has_body && !reads_body) {
    answer_and_close(response, request.path == "/mcp" ? 405 : 404,
                     error_body(jsonrpc::k_invalid_request,
                                "HTTP " + request.method + " " + request.path +
                                    " takes no body (the MCP endpoint is POST /mcp)"));
    return true;
  }
  if (length && *length > limit) {
    answer_and_close(
        response, 413,
        error_body(jsonrpc::k_invalid_request,
                   "Payload Too Large: message of " + std::to_string(*length) +
                       " bytes exceeds the limit of " + std::to_string(limit) + " bytes"));
    return true;
  }
  return false;
}

// Answers left without a body by the HTTP layer (no route, limit exceeded) get a JSON-RPC error.
void HttpTransport::answer_unrouted(httplib::Response& response) const {
  const std::size_t limit = m_server.options().limits.max_message_bytes;
  if (response.content_provider_) {
    return;  // an answer already made (answer_and_close, event streams)
  }
  if (response.status == 413) {
    set_json(
        response, 413,
        error_body(jsonrpc::k_invalid_request, "Invalid Request: message exceeds the limit of " +
                                                   std::to_string(limit) + " bytes"));
  } else if (response.body.empty()) {
    set_json(response, response.status,
             error_body(jsonrpc::k_invalid_request,
                        "HTTP " + std::to_string(response.status) + " (the MCP endpoint is /mcp)"));
  }
}

// --- 2026-07-28: one request served statelessly ----------------------------------------------
void HttpTransport::serve_modern(const httplib::Request& request, httplib::Response& response,
                                 jsonrpc::Message message) {
  auto* rpc_request = std::get_if<jsonrpc::Request>(&message);
  if (rpc_request == nullptr) {
    response.status = 202;  // notifications and responses carry nothing a stateless server keeps
    return;
  }
  const jsonrpc::Request& rpc = *rpc_request;
  auto reject = [&](int status, int code, const std::string& text,
                    const nlohmann::json& data = nullptr) {
    set_json(response, status, jsonrpc::make_error(rpc.id, code, text, data));
  };
  if (auto rejection = check_modern_shape(rpc)) {
    reject(rejection->code == jsonrpc::k_method_not_found ? 404 : 400, rejection->code,
           rejection->message, rejection->data);
    return;
  }
  // The routing headers (SEP-2243) must agree with the body.
  const auto& params = rpc.params;
  const auto meta_version = params.at("_meta").at(k_meta_protocol_version).get<std::string>();
  if (!request.has_header("MCP-Protocol-Version")) {
    reject(400, jsonrpc::k_header_mismatch, "Header mismatch: missing MCP-Protocol-Version header");
    return;
  }
  if (const std::string header = trim(request.get_header_value("MCP-Protocol-Version"));
      header != meta_version) {
    reject(400, jsonrpc::k_header_mismatch,
           "Header mismatch: MCP-Protocol-Version '" + header + "' differs from _meta " +
               k_meta_protocol_version + " '" + meta_version + "'");
    return;
  }
  if (!request.has_header("Mcp-Method")) {
    reject(400, jsonrpc::k_header_mismatch, "Header mismatch: missing Mcp-Method header");
    return;
  }
  if (const auto method = header_text(request.get_header_value("Mcp-Method"));
      !method || *method != rpc.method) {
    reject(400, jsonrpc::k_header_mismatch,
           "Header mismatch: Mcp-Method does not match the body method '" + rpc.method + "'");
    return;
  }
  const char* name_field = rpc.method == "tools/call" || rpc.method == "prompts/get" ? "name"
                           : rpc.method == "resources/read"                          ? "uri"
                           : rpc.method.rfind("tasks/", 0) == 0                      ? "taskId"
                                                                                     : nullptr;
  if (name_field != nullptr && params.contains(name_field) && params[name_field].is_string()) {
    const std::string expected = params[name_field].get<std::string>();
    if (!request.has_header("Mcp-Name")) {
      reject(400, jsonrpc::k_header_mismatch,
             "Header mismatch: missing Mcp-Name header (it mirrors params." +
                 std::string(name_field) + ")");
      return;
    }
    const auto name = header_text(request.get_header_value("Mcp-Name"));
    if (!name || *name != expected) {
      reject(400, jsonrpc::k_header_mismatch,
             name ? "Header mismatch: Mcp-Name does not match params." + std::string(name_field)
                  : std::string("Header mismatch: Mcp-Name carries malformed Base64"));
      return;
    }
  }
  if (rpc.method == "tools/call") {
    // Arguments a tool marks with x-mcp-header are mirrored in Mcp-Param-<Name> headers.
    const ToolDef* tool = m_server.registries().tools.find(params.value("name", std::string()));
    const nlohmann::json arguments = params.value("arguments", nlohmann::json::object());
    if (tool != nullptr && tool->input_schema.contains("properties") && arguments.is_object()) {
      for (const auto& [property, schema] : tool->input_schema["properties"].items()) {
        if (!schema.is_object() || !schema.contains("x-mcp-header") ||
            !schema["x-mcp-header"].is_string()) {
          continue;
        }
        const std::string header = "Mcp-Param-" + schema["x-mcp-header"].get<std::string>();
        const bool in_body = arguments.contains(property) && !arguments[property].is_null();
        if (!request.has_header(header)) {
          if (in_body) {
            reject(
                400, jsonrpc::k_header_mismatch,
                "Header mismatch: missing " + header + " (it mirrors arguments." + property + ")");
            return;
          }
          continue;
        }
        const auto value = header_text(request.get_header_value(header));
        if (!value || !in_body || *value != header_form(arguments[property])) {
          reject(400, jsonrpc::k_header_mismatch,
                 !value ? "Header mismatch: " + header + " carries malformed Base64"
                        : "Header mismatch: " + header + " does not match arguments." + property);
          return;
        }
      }
    }
  }
  if (auto rejection = check_modern_version(rpc)) {
    reject(400, rejection->code, rejection->message, rejection->data);
    return;
  }
  const bool listen = rpc.method == "subscriptions/listen";
  const bool sse = (rpc.method == "tools/call" || listen) && wants_sse(request);
  if (listen && !sse) {
    reject(406, jsonrpc::k_invalid_request,
           "Not Acceptable: subscriptions/listen answers with an event stream; send Accept: "
           "text/event-stream");
    return;
  }
  auto session = m_server.create_session(nullptr, SessionTransport::http);
  auto stream = std::make_shared<EventStream>(random_hex(6), sse, false);
  session->handle_modern(std::move(*rpc_request), stream);
  auto answer_json = [&](const nlohmann::json& answer) {
    int status = 200;
    if (auto error = answer.find("error"); error != answer.end() && error->is_object()) {
      status = modern_http_status(error->value("code", 0));
    }
    set_json(response, status, answer);
  };
  if (!sse) {
    auto answer = stream->wait_response();
    if (!answer) {
      response.status = 202;
      return;
    }
    answer_json(*answer);
    return;
  }
  if (!listen && stream->wait_first_is_response()) {
    auto answer = stream->wait_response();
    if (!answer) {
      response.status = 202;
      return;
    }
    answer_json(*answer);
    return;
  }
  Impl& impl = *m_impl;
  impl.track_modern(stream);
  ++impl.open_streams;
  response.status = 200;
  response.set_header("Cache-Control", "no-cache");
  response.set_header("X-Accel-Buffering", "no");
  auto cursor = std::make_shared<EventStream::Cursor>(stream->open_cursor(std::nullopt));
  cursor->primed = true;  // 2026-07-28 streams are not resumed: no priming event
  const auto keepalive = m_options.keepalive;
  response.set_chunked_content_provider(
      "text/event-stream",
      [stream, cursor, keepalive](std::size_t, httplib::DataSink& sink) {
        return stream->pump(*cursor, sink, keepalive);
      },
      [stream, session, impl = m_impl.get()](bool) {
        --impl->open_streams;
        if (!stream->finished()) {
          session->close();  // closing a request's stream cancels it
        }
        stream->shutdown();
      });
}

// --- POST: client messages -----------------------------------------------------------------
void HttpTransport::handle_post(const httplib::Request& request, httplib::Response& response,
                                const httplib::ContentReader& reader) {
  const std::size_t limit = m_server.options().limits.max_message_bytes;
  // The body, read with the message limit enforced as it arrives (chunked bodies included).
  std::string body;
  bool too_big = false;
  const bool complete = reader([&](const char* data, std::size_t size) {
    if (body.size() + size > limit) {
      too_big = true;
      return false;
    }
    body.append(data, size);
    return true;
  });
  if (too_big) {
    answer_and_close(
        response, 413,
        error_body(jsonrpc::k_invalid_request, "Payload Too Large: message exceeds the limit of " +
                                                   std::to_string(limit) + " bytes"));
    return;
  }
  if (!complete) {
    answer_and_close(
        response, 400,
        error_body(jsonrpc::k_invalid_request, "Bad Request: the request body could not be read"));
    return;
  }
  if (request.has_header("Content-Type")) {
    const std::string type = lower(request.get_header_value("Content-Type"));
    if (type.find("application/json") == std::string::npos) {
      set_json(response, 415,
               error_body(jsonrpc::k_invalid_request,
                          "Unsupported Media Type: POST bodies must be application/json"));
      return;
    }
  }
  jsonrpc::Message message = jsonrpc::parse(body, m_server.options().limits);
  if (auto* invalid = std::get_if<jsonrpc::Invalid>(&message)) {
    set_json(response, 400, invalid->error_response);
    return;
  }
  auto* rpc_request = std::get_if<jsonrpc::Request>(&message);
  // Era: a request outside any session that names a version other than a legacy one (header) or
  // carries 2026-07-28 _meta is served statelessly; initialize starts a legacy session.
  const bool has_version_header = request.has_header("MCP-Protocol-Version");
  const std::string version_header = trim(request.get_header_value("MCP-Protocol-Version"));
  if (!request.has_header("Mcp-Session-Id") &&
      ((has_version_header && !is_supported_protocol_version(version_header)) ||
       (rpc_request != nullptr && has_modern_meta(rpc_request->params)))) {
    serve_modern(request, response, std::move(message));
    return;
  }
  if (has_version_header && !is_supported_protocol_version(version_header)) {
    set_json(response, 400,
             error_body(jsonrpc::k_invalid_request,
                        "Bad Request: unsupported MCP-Protocol-Version '" + version_header +
                            "' in a 2025-11-25 session (supported: 2025-11-25, 2025-06-18, "
                            "2025-03-26)",
                        rpc_request != nullptr ? rpc_request->id : nlohmann::json()));
    return;
  }

  if (rpc_request != nullptr && rpc_request->method == "initialize") {
    start_session(response, std::move(message));
    return;
  }
  post_in_session(request, response, std::move(message));
}

// initialize: a new 2025-11-25 session, kept when the handshake succeeds and the limit allows.
void HttpTransport::start_session(httplib::Response& response, jsonrpc::Message message) {
  Impl& impl = *m_impl;
  const nlohmann::json id = std::get<jsonrpc::Request>(message).id;
  auto http_session = std::make_shared<HttpSession>();
  http_session->id = random_hex(16);
  http_session->standalone = std::make_shared<EventStream>(random_hex(4), true, true);
  http_session->session = m_server.create_session(http_session->standalone, SessionTransport::http);
  auto outbox = std::make_shared<EventStream>(random_hex(4), false, false);
  http_session->session->handle(std::move(message), outbox);
  auto answer = outbox->wait_response();
  if (!answer) {
    response.status = 500;
    return;
  }
  if (answer->contains("result")) {
    if (!impl.add_session(http_session, m_options.max_sessions, m_options.session_idle_timeout)) {
      Impl::end_session(*http_session);
      response.set_header("Retry-After", "5");
      set_json(
          response, 503,
          error_body(jsonrpc::k_invalid_request,
                     session_limit_message(m_options.max_sessions, m_options.session_idle_timeout),
                     id));
      return;
    }
    response.set_header("Mcp-Session-Id", http_session->id);
    spdlog::info("HTTP session {} started", http_session->id);
  }
  set_json(response, 200, *answer);
}

// Any other message of a 2025-11-25 session (named by Mcp-Session-Id).
void HttpTransport::post_in_session(const httplib::Request& request, httplib::Response& response,
                                    jsonrpc::Message message) {
  Impl& impl = *m_impl;
  const auto* rpc_request = std::get_if<jsonrpc::Request>(&message);
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
    set_json(
        response, 400,
        error_body(jsonrpc::k_invalid_request,
                   "Bad Request: missing Mcp-Session-Id header (send initialize first)", reply_id));
    return;
  }
  auto http_session = impl.find_session(request.get_header_value("Mcp-Session-Id"),
                                        m_options.session_idle_timeout, rpc_request != nullptr);
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
}

// --- GET: standalone stream, or resumption of a stream -------------------------------------
void HttpTransport::handle_get(const httplib::Request& request, httplib::Response& response) {
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
    set_json(response, 400,
             error_body(jsonrpc::k_invalid_request, "Bad Request: missing Mcp-Session-Id header"));
    return;
  }
  auto http_session = impl.find_session(request.get_header_value("Mcp-Session-Id"),
                                        m_options.session_idle_timeout, true);
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
  const std::size_t max_streams = m_options.max_event_streams > 0
                                      ? m_options.max_event_streams
                                      : std::max<std::size_t>(m_options.max_connections / 2, 4);
  if (impl.open_streams.load() >= max_streams) {
    response.set_header("Retry-After", "5");
    set_json(response, 503,
             error_body(jsonrpc::k_invalid_request,
                        "Service Unavailable: " + std::to_string(max_streams) +
                            " event streams are open; retry later"));
    return;
  }
  if (standalone && !stream->try_attach()) {
    set_json(response, 409,
             error_body(jsonrpc::k_invalid_request,
                        "Conflict: this session already has an open GET stream"));
    return;
  }
  ++impl.open_streams;
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
      [stream, standalone, impl = m_impl.get()](bool) {
        --impl->open_streams;
        if (standalone) {
          stream->detach();
        }
      });
}

// --- DELETE: end a session -----------------------------------------------------------------
void HttpTransport::handle_delete(const httplib::Request& request, httplib::Response& response,
                                  const httplib::ContentReader& reader) {
  const std::size_t limit = m_server.options().limits.max_message_bytes;
  std::size_t body_size = 0;
  const bool read = reader([&](const char*, std::size_t size) {
    body_size += size;
    return body_size <= limit;
  });
  if (!read) {
    answer_and_close(response, body_size > limit ? 413 : 400,
                     error_body(jsonrpc::k_invalid_request,
                                "Bad Request: DELETE takes no body (or a small one)"));
    return;
  }
  if (!request.has_header("Mcp-Session-Id")) {
    set_json(response, 400,
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
