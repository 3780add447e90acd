#include "core/process.hpp"

#include <fcntl.h>
#include <poll.h>
#include <signal.h>
#include <spawn.h>
#include <sys/wait.h>
#include <unistd.h>

#include <array>
#include <cerrno>
#include <cstring>
#include <thread>

extern char** environ;

namespace autocomp::core {
namespace {

using Clock = std::chrono::steady_clock;

constexpr auto k_poll_interval = std::chrono::milliseconds(20);
// How long to keep reading after the child exited while a descendant still holds its pipes.
constexpr auto k_orphan_drain = std::chrono::milliseconds(200);

class Fd {
 public:
  Fd() = default;
  explicit Fd(int fd) : m_fd(fd) {}
  Fd(const Fd&) = delete;
  Fd& operator=(const Fd&) = delete;
  Fd(Fd&& other) noexcept : m_fd(std::exchange(other.m_fd, -1)) {}
  Fd& operator=(Fd&& other) noexcept {
    if (this != &other) {
      close();
      m_fd = std::exchange(other.m_fd, -1);
    }
    return *this;
  }
  ~Fd() { close(); }

  int get() const { return m_fd; }
  bool valid() const { return m_fd >= 0; }
  void close() {
    if (m_fd >= 0) {
      ::close(m_fd);
      m_fd = -1;
    }
  }

 private:
  int m_fd = -1;
};

// Both ends close-on-exec, so children spawned by other threads never inherit them.
bool make_pipe(Fd& read_end, Fd& write_end) {
  std::array<int, 2> fds{};
  if (::pipe2(fds.data(), O_CLOEXEC) != 0) {
    return false;
  }
  read_end = Fd(fds[0]);
  write_end = Fd(fds[1]);
  return true;
}

std::vector<std::string> build_environment(
    const std::vector<std::pair<std::string, std::string>>& additions) {
  std::vector<std::string> env;
  for (char** entry = environ; entry != nullptr && *entry != nullptr; ++entry) {
    std::string_view text(*entry);
    bool overridden = false;
    for (const auto& [name, value] : additions) {
      if (text.size() > name.size() && text.substr(0, name.size()) == name &&
          text[name.size()] == '=') {
        overridden = true;
        break;
      }
    }
    if (!overridden) {
      env.emplace_back(text);
    }
  }
  for (const auto& [name, value] : additions) {
    env.push_back(name + "=" + value);
  }
  return env;
}

std::vector<char*> pointers_to(std::vector<std::string>& strings) {
  std::vector<char*> pointers;
  pointers.reserve(strings.size() + 1);
  for (auto& s : strings) {
    pointers.push_back(s.data());
  }
  pointers.push_back(nullptr);
  return pointers;
}

double ms_since(Clock::time_point start) {
  return std::chrono::duration<double, std::milli>(Clock::now() - start).count();
}

struct Stream {
  Fd fd;
  std::string* sink = nullptr;
};

class Child {
 public:
  Child(pid_t pid, std::size_t max_output) : m_pid(pid), m_max_output(max_output) {}

  pid_t pid() const { return m_pid; }
  int status() const { return m_status; }

  // Whether the child has ended, without reaping it: while it is a zombie its pid (and so its
  // process group id) cannot be reused, which keeps signalling the group safe.
  bool has_exited() {
    if (m_exited) {
      return true;
    }
    siginfo_t info{};
    if (::waitid(P_PID, static_cast<id_t>(m_pid), &info, WEXITED | WNOHANG | WNOWAIT) == 0 &&
        info.si_pid == m_pid) {
      m_exited = true;
    }
    return m_exited;
  }

  void reap_blocking() {
    while (!m_reaped) {
      int status = 0;
      pid_t r = ::waitpid(m_pid, &status, 0);
      if (r == m_pid) {
        m_reaped = true;
        m_status = status;
      } else if (r < 0 && errno != EINTR) {
        m_reaped = true;  // nothing left to wait for
      }
    }
  }

  void signal_group(int sig) const { ::kill(-m_pid, sig); }

  // SIGTERM to the group, a grace period for it to exit, then SIGKILL; reaps the child.
  void kill_group(std::chrono::milliseconds grace) {
    signal_group(SIGTERM);
    auto deadline = Clock::now() + grace;
    while (!has_exited() && Clock::now() < deadline) {
      std::this_thread::sleep_for(std::chrono::milliseconds(5));
    }
    // Descendants may outlive the leader; SIGKILL the group either way.
    signal_group(SIGKILL);
    reap_blocking();
  }

  // Reads what is available; returns false once the stream hit EOF or an error.
  bool read_into(Stream& stream, bool& truncated) {
    std::array<char, 16384> buffer{};
    ssize_t n = ::read(stream.fd.get(), buffer.data(), buffer.size());
    if (n > 0) {
      auto room = m_max_output > stream.sink->size() ? m_max_output - stream.sink->size() : 0;
      auto take = std::min<std::size_t>(room, static_cast<std::size_t>(n));
      stream.sink->append(buffer.data(), take);
      if (take < static_cast<std::size_t>(n)) {
        truncated = true;
      }
      return true;
    }
    if (n < 0 && (errno == EINTR || errno == EAGAIN)) {
      return true;
    }
    stream.fd.close();
    return false;
  }

 private:
  pid_t m_pid;
  std::size_t m_max_output;
  bool m_exited = false;
  bool m_reaped = false;
  int m_status = 0;
};

}  // namespace

std::string ProcessResult::describe_end() const {
  if (cancelled) {
    return "cancelled";
  }
  if (timed_out) {
    return "timed out after " + std::to_string(static_cast<long long>(wall_ms)) + " ms";
  }
  if (exited) {
    return "exit code " + std::to_string(exit_code);
  }
  std::string text = "signal " + std::to_string(signal);
  if (const char* name = ::strsignal(signal)) {
    text += std::string(" (") + name + ")";
  }
  return text;
}

std::string tail_text(const std::string& text, std::size_t max_bytes) {
  if (text.size() <= max_bytes) {
    return text;
  }
  std::size_t start = text.size() - max_bytes;
  // Prefer to start on a fresh line if one begins within the first quarter of the window.
  auto newline = text.find('\n', start);
  if (newline != std::string::npos && newline + 1 < text.size() &&
      newline - start < max_bytes / 4) {
    start = newline + 1;
  }
  return "..." + text.substr(start);
}

Result<ProcessResult> run_process(const ProcessSpec& spec, const CancelToken& cancel) {
  if (spec.argv.empty()) {
    return make_failure(FailureKind::invalid_argument, "spawn", "empty command line");
  }

  Fd stdin_read, stdin_write, stdout_read, stdout_write, stderr_read, stderr_write;
  if (!make_pipe(stdin_read, stdin_write) || !make_pipe(stdout_read, stdout_write) ||
      !make_pipe(stderr_read, stderr_write)) {
    return make_failure(FailureKind::io_error, "spawn",
                        std::string("cannot create pipes: ") + std::strerror(errno));
  }

  posix_spawn_file_actions_t actions;
  posix_spawn_file_actions_init(&actions);
  posix_spawn_file_actions_adddup2(&actions, stdin_read.get(), STDIN_FILENO);
  posix_spawn_file_actions_adddup2(&actions, stdout_write.get(), STDOUT_FILENO);
  posix_spawn_file_actions_adddup2(&actions, stderr_write.get(), STDERR_FILENO);
  if (!spec.cwd.empty()) {
    posix_spawn_file_actions_addchdir_np(&actions, spec.cwd.c_str());
  }

  posix_spawnattr_t attributes;
  posix_spawnattr_init(&attributes);
  posix_spawnattr_setpgroup(&attributes, 0);
  sigset_t default_signals;
  sigemptyset(&default_signals);
  sigaddset(&default_signals, SIGPIPE);
  sigaddset(&default_signals, SIGTERM);
  sigaddset(&default_signals, SIGINT);
  posix_spawnattr_setsigdefault(&attributes, &default_signals);
  sigset_t no_signals;
  sigemptyset(&no_signals);
  posix_spawnattr_setsigmask(&attributes, &no_signals);
  posix_spawnattr_setflags(&attributes,
                           POSIX_SPAWN_SETPGROUP | POSIX_SPAWN_SETSIGDEF | POSIX_SPAWN_SETSIGMASK);

  std::vector<std::string> argv_strings = spec.argv;
  std::vector<char*> argv = pointers_to(argv_strings);
  std::vector<std::string> env_strings = build_environment(spec.env);
  std::vector<char*> envp = pointers_to(env_strings);

  auto start = Clock::now();
  pid_t pid = -1;
  int rc = ::posix_spawnp(&pid, argv[0], &actions, &attributes, argv.data(), envp.data());
  posix_spawn_file_actions_destroy(&actions);
  posix_spawnattr_destroy(&attributes);
  if (rc != 0) {
    std::string where = spec.cwd.empty() ? "" : " in " + spec.cwd;
    return make_failure(FailureKind::io_error, "spawn",
                        "cannot start " + spec.argv[0] + where + ": " + std::strerror(rc));
  }
  stdin_read.close();
  stdout_write.close();
  stderr_write.close();

  ProcessResult result;
  Child child(pid, spec.max_output_bytes);
  std::array<Stream, 2> streams{Stream{std::move(stdout_read), &result.stdout_text},
                                Stream{std::move(stderr_read), &result.stderr_text}};

  std::size_t stdin_written = 0;
  if (spec.stdin_text.empty()) {
    stdin_write.close();
  } else {
    ::fcntl(stdin_write.get(), F_SETFL, ::fcntl(stdin_write.get(), F_GETFL) | O_NONBLOCK);
  }

  const bool has_deadline = spec.timeout.count() > 0;
  const auto deadline = start + spec.timeout;
  std::optional<Clock::time_point> exited_at;

  while (true) {
    if (cancel.cancelled()) {
      result.cancelled = true;
      break;
    }
    auto now = Clock::now();
    if (has_deadline && now >= deadline) {
      result.timed_out = true;
      break;
    }
    bool streams_open = streams[0].fd.valid() || streams[1].fd.valid();
    if (child.has_exited()) {
      if (!streams_open) {
        break;
      }
      if (!exited_at) {
        exited_at = now;
      } else if (now - *exited_at > k_orphan_drain) {
        break;  // a descendant keeps the pipes open; it is killed below
      }
    } else if (!streams_open && !stdin_write.valid()) {
      // Output closed but still running: just wait for the exit (or the deadline).
      std::this_thread::sleep_for(std::chrono::milliseconds(2));
      continue;
    }

    std::array<pollfd, 3> fds{};
    nfds_t count = 0;
    std::array<int, 3> which{};
    for (int i = 0; i < 2; ++i) {
      if (streams[static_cast<std::size_t>(i)].fd.valid()) {
        fds[count] = pollfd{streams[static_cast<std::size_t>(i)].fd.get(), POLLIN, 0};
        which[count++] = i;
      }
    }
    if (stdin_write.valid()) {
      fds[count] = pollfd{stdin_write.get(), POLLOUT, 0};
      which[count++] = 2;
    }
    auto wait = k_poll_interval;
    if (has_deadline) {
      auto left = std::chrono::duration_cast<std::chrono::milliseconds>(deadline - now) +
                  std::chrono::milliseconds(1);
      wait = std::min(wait, left);
    }
    if (count == 0) {
      std::this_thread::sleep_for(std::min(wait, std::chrono::milliseconds(2)));
      continue;
    }
    int ready = ::poll(fds.data(), count, static_cast<int>(wait.count()));
    if (ready <= 0) {
      continue;
    }
    for (nfds_t i = 0; i < count; ++i) {
      if (fds[i].revents == 0) {
        continue;
      }
      if (which[i] == 2) {
        if (fds[i].revents & (POLLERR | POLLHUP)) {
          stdin_write.close();
          continue;
        }
        ssize_t n = ::write(stdin_write.get(), spec.stdin_text.data() + stdin_written,
                            spec.stdin_text.size() - stdin_written);
        if (n > 0) {
          stdin_written += static_cast<std::size_t>(n);
        } else if (n < 0 && errno != EAGAIN && errno != EINTR) {
          stdin_write.close();
        }
        if (stdin_written >= spec.stdin_text.size()) {
          stdin_write.close();
        }
      } else {
        child.read_into(streams[static_cast<std::size_t>(which[i])], result.output_truncated);
      }
    }
  }

  stdin_write.close();
  if (result.cancelled || result.timed_out) {
    child.kill_group(spec.kill_grace);
  } else {
    // Normal end: make sure nothing the child left behind keeps running.
    child.signal_group(SIGKILL);
    child.reap_blocking();
  }
  // Collect whatever is still buffered in the pipes (non-blocking: writers are gone or killed).
  for (auto& stream : streams) {
    if (stream.fd.valid()) {
      ::fcntl(stream.fd.get(), F_SETFL, ::fcntl(stream.fd.get(), F_GETFL) | O_NONBLOCK);
      while (stream.fd.valid()) {
        std::array<char, 16384> buffer{};
        ssize_t n = ::read(stream.fd.get(), buffer.data(), buffer.size());
        if (n <= 0) {
          stream.fd.close();
          break;
        }
        auto room = spec.max_output_bytes > stream.sink->size()
                        ? spec.max_output_bytes - stream.sink->size()
                        : 0;
        stream.sink->append(buffer.data(),
                            std::min<std::size_t>(room, static_cast<std::size_t>(n)));
      }
    }
  }

  result.wall_ms = ms_since(start);
  int status = child.status();
  if (WIFEXITED(status)) {
    result.exited = true;
    result.exit_code = WEXITSTATUS(status);
  } else if (WIFSIGNALED(status)) {
    result.signal = WTERMSIG(status);
  }
  return result;
}

}  // namespace autocomp::core
