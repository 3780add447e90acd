#pragma once

// Helpers for the server integration tests: start the real autocomp-mcp binary over stdio pipes
// or HTTP (port file), exchange messages, collect exit codes.

#include <arpa/inet.h>
#include <fcntl.h>
#include <netinet/in.h>
#include <poll.h>
#include <signal.h>
#include <spawn.h>
#include <sys/socket.h>
#include <sys/wait.h>
#include <unistd.h>

#include <chrono>
#include <cstdio>
#include <cstdlib>
#include <filesystem>
#include <fstream>
#include <nlohmann/json.hpp>
#include <optional>
#include <string>
#include <thread>
#include <vector>

extern char** environ;

namespace autocomp::test {

using namespace std::chrono_literals;

inline std::vector<char*> make_argv(std::vector<std::string>& args) {
  std::vector<char*> argv;
  for (auto& arg : args) {
    argv.push_back(arg.data());
  }
  argv.push_back(nullptr);
  return argv;
}

// A child process with stdin/stdout pipes; stderr goes to a file (or is inherited).
class Child {
 public:
  explicit Child(std::vector<std::string> args, bool quiet_stderr = true) {
    args.insert(args.begin(), AUTOCOMP_BINARY);
    int in_pipe[2];
    int out_pipe[2];
    if (::pipe(in_pipe) != 0 || ::pipe(out_pipe) != 0) {
      std::abort();
    }
    posix_spawn_file_actions_t actions;
    posix_spawn_file_actions_init(&actions);
    posix_spawn_file_actions_adddup2(&actions, in_pipe[0], 0);
    posix_spawn_file_actions_adddup2(&actions, out_pipe[1], 1);
    posix_spawn_file_actions_addclose(&actions, in_pipe[1]);
    posix_spawn_file_actions_addclose(&actions, out_pipe[0]);
    if (quiet_stderr) {
      posix_spawn_file_actions_addopen(&actions, 2, "/dev/null", O_WRONLY, 0);
    }
    auto argv = make_argv(args);
    if (posix_spawn(&m_pid, argv[0], &actions, nullptr, argv.data(), environ) != 0) {
      m_pid = -1;
    }
    posix_spawn_file_actions_destroy(&actions);
    ::close(in_pipe[0]);
    ::close(out_pipe[1]);
    m_in = in_pipe[1];
    m_out = out_pipe[0];
  }
  ~Child() {
    close_stdin();
    if (m_pid > 0 && !m_exit) {
      ::kill(m_pid, SIGKILL);
      int status = 0;
      ::waitpid(m_pid, &status, 0);
    }
    if (m_out >= 0) {
      ::close(m_out);
    }
  }
  Child(const Child&) = delete;
  Child& operator=(const Child&) = delete;

  pid_t pid() const { return m_pid; }

  bool write_raw(const std::string& bytes) {
    std::size_t done = 0;
    while (done < bytes.size()) {
      const ssize_t n = ::write(m_in, bytes.data() + done, bytes.size() - done);
      if (n <= 0) {
        return false;
      }
      done += static_cast<std::size_t>(n);
    }
    return true;
  }
  bool send(const std::string& line) { return write_raw(line + "\n"); }
  bool send(const nlohmann::json& message) { return send(message.dump()); }

  // The next line on stdout, or nullopt after `timeout` / at end of output.
  std::optional<std::string> read_line(std::chrono::milliseconds timeout = 5s) {
    const auto deadline = std::chrono::steady_clock::now() + timeout;
    for (;;) {
      if (auto newline = m_buffer.find('\n'); newline != std::string::npos) {
        std::string line = m_buffer.substr(0, newline);
        m_buffer.erase(0, newline + 1);
        return line;
      }
      const auto left = std::chrono::duration_cast<std::chrono::milliseconds>(
          deadline - std::chrono::steady_clock::now());
      if (left.count() <= 0) {
        return std::nullopt;
      }
      pollfd fd{m_out, POLLIN, 0};
      if (::poll(&fd, 1, static_cast<int>(left.count())) <= 0) {
        continue;
      }
      char chunk[65536];
      const ssize_t n = ::read(m_out, chunk, sizeof chunk);
      if (n <= 0) {
        return std::nullopt;
      }
      m_buffer.append(chunk, static_cast<std::size_t>(n));
    }
  }

  // The next message that is a response (skipping notifications and server requests).
  std::optional<nlohmann::json> read_response(std::chrono::milliseconds timeout = 5s) {
    const auto deadline = std::chrono::steady_clock::now() + timeout;
    while (std::chrono::steady_clock::now() < deadline) {
      auto line = read_line(std::chrono::duration_cast<std::chrono::milliseconds>(
          deadline - std::chrono::steady_clock::now()));
      if (!line) {
        return std::nullopt;
      }
      auto message = nlohmann::json::parse(*line, nullptr, false);
      if (message.is_discarded()) {
        m_stray_lines.push_back(*line);
        continue;
      }
      if (message.contains("result") || message.contains("error")) {
        return message;
      }
      m_other.push_back(message);
    }
    return std::nullopt;
  }
  // Notifications and requests skipped by read_response.
  std::vector<nlohmann::json>& other_messages() { return m_other; }
  const std::vector<std::string>& stray_lines() const { return m_stray_lines; }

  nlohmann::json request(const nlohmann::json& id, const std::string& method,
                         nlohmann::json params = nullptr) {
    nlohmann::json message = {{"jsonrpc", "2.0"}, {"id", id}, {"method", method}};
    if (!params.is_null()) {
      message["params"] = std::move(params);
    }
    send(message);
    return read_response().value_or(nlohmann::json());
  }

  void initialize() {
    request(0, "initialize",
            {{"protocolVersion", "2025-11-25"},
             {"capabilities", nlohmann::json::object()},
             {"clientInfo", {{"name", "integration-test"}, {"version", "1"}}}});
    send(nlohmann::json{{"jsonrpc", "2.0"}, {"method", "notifications/initialized"}});
  }

  void close_stdin() {
    if (m_in >= 0) {
      ::close(m_in);
      m_in = -1;
    }
  }

  // Exit code, or nullopt when still running after `timeout` (or killed by a signal: -signal).
  std::optional<int> wait_exit(std::chrono::milliseconds timeout = 10s) {
    if (m_exit) {
      return m_exit;
    }
    const auto deadline = std::chrono::steady_clock::now() + timeout;
    while (std::chrono::steady_clock::now() < deadline) {
      int status = 0;
      const pid_t done = ::waitpid(m_pid, &status, WNOHANG);
      if (done == m_pid) {
        m_exit = WIFEXITED(status) ? WEXITSTATUS(status) : -WTERMSIG(status);
        return m_exit;
      }
      std::this_thread::sleep_for(10ms);
    }
    return std::nullopt;
  }

 private:
  pid_t m_pid = -1;
  int m_in = -1;
  int m_out = -1;
  std::string m_buffer;
  std::vector<nlohmann::json> m_other;
  std::vector<std::string> m_stray_lines;
  std::optional<int> m_exit;
};

inline std::string temp_path(const std::string& name) {
  return (std::filesystem::temp_directory_path() /
          (name + "-" + std::to_string(::getpid()) + "-" +
           std::to_string(std::chrono::steady_clock::now().time_since_epoch().count())))
      .string();
}

// An HTTP server process; port() is read from its port file.
class HttpChild {
 public:
  explicit HttpChild(std::vector<std::string> extra = {}, std::string host = "127.0.0.1")
      : m_port_file(temp_path("autocomp-port")) {
    std::vector<std::string> args = {"--http", host + ":0", "--port-file", m_port_file};
    args.insert(args.end(), extra.begin(), extra.end());
    m_child = std::make_unique<Child>(args);
    for (int i = 0; i < 500 && m_port == 0; ++i) {
      std::ifstream in(m_port_file);
      int port = 0;
      if (in >> port && port > 0) {
        m_port = port;
        break;
      }
      if (m_child->wait_exit(0ms)) {
        break;
      }
      std::this_thread::sleep_for(10ms);
    }
  }
  ~HttpChild() {
    if (m_child && m_child->pid() > 0) {
      ::kill(m_child->pid(), SIGTERM);
      m_child->wait_exit(5s);
    }
    std::filesystem::remove(m_port_file);
  }
  int port() const { return m_port; }
  Child& child() { return *m_child; }

 private:
  std::string m_port_file;
  std::unique_ptr<Child> m_child;
  int m_port = 0;
};

// Runs the binary to completion; returns exit code and stdout.
struct RunResult {
  int exit_code = -1;
  std::string out;
};
inline RunResult run_binary(std::vector<std::string> args) {
  Child child(std::move(args));
  child.close_stdin();
  RunResult result;
  while (auto line = child.read_line(30s)) {
    result.out += *line + "\n";
  }
  result.exit_code = child.wait_exit(30s).value_or(-100);
  return result;
}

// A raw connection to the server, for requests no well-behaved client sends.
class RawConnection {
 public:
  explicit RawConnection(int port) {
    m_fd = ::socket(AF_INET, SOCK_STREAM, 0);
    sockaddr_in address{};
    address.sin_family = AF_INET;
    address.sin_port = htons(static_cast<std::uint16_t>(port));
    address.sin_addr.s_addr = htonl(INADDR_LOOPBACK);
    if (::connect(m_fd, reinterpret_cast<sockaddr*>(&address), sizeof(address)) != 0) {
      ::close(m_fd);
      m_fd = -1;
    }
  }
  ~RawConnection() {
    if (m_fd >= 0) {
      ::close(m_fd);
    }
  }
  RawConnection(const RawConnection&) = delete;
  RawConnection& operator=(const RawConnection&) = delete;

  bool ok() const { return m_fd >= 0; }
  bool readable() const {
    pollfd fd{m_fd, POLLIN, 0};
    return ::poll(&fd, 1, 0) > 0;
  }
  // False once the server stopped reading (closed or reset the connection).
  bool send(const std::string& data) {
    std::size_t sent = 0;
    while (sent < data.size()) {
      const ssize_t n = ::send(m_fd, data.data() + sent, data.size() - sent, MSG_NOSIGNAL);
      if (n <= 0) {
        return false;
      }
      sent += static_cast<std::size_t>(n);
    }
    return true;
  }
  // What arrives within `timeout` (until the server closes, or the timeout).
  std::string read_all(std::chrono::milliseconds timeout) {
    std::string out;
    const auto deadline = std::chrono::steady_clock::now() + timeout;
    char buffer[4096];
    while (std::chrono::steady_clock::now() < deadline) {
      pollfd fd{m_fd, POLLIN, 0};
      if (::poll(&fd, 1, 50) <= 0) {
        continue;
      }
      const ssize_t n = ::recv(m_fd, buffer, sizeof(buffer), 0);
      if (n <= 0) {
        break;
      }
      out.append(buffer, static_cast<std::size_t>(n));
    }
    return out;
  }
  // Reads until `marker` arrives (or the timeout).
  std::string read_until(const std::string& marker, std::chrono::milliseconds timeout) {
    std::string out;
    const auto deadline = std::chrono::steady_clock::now() + timeout;
    char buffer[4096];
    while (out.find(marker) == std::string::npos && std::chrono::steady_clock::now() < deadline) {
      pollfd fd{m_fd, POLLIN, 0};
      if (::poll(&fd, 1, 50) <= 0) {
        continue;
      }
      const ssize_t n = ::recv(m_fd, buffer, sizeof(buffer), 0);
      if (n <= 0) {
        break;
      }
      out.append(buffer, static_cast<std::size_t>(n));
    }
    return out;
  }

 private:
  int m_fd = -1;
};

inline int status_of(const std::string& response) {
  if (response.rfind("HTTP/1.1 ", 0) != 0 || response.size() < 12) {
    return 0;
  }
  return std::stoi(response.substr(9, 3));
}

}  // namespace autocomp::test
