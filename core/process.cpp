#include "core/process.hpp"

#include <dirent.h>
#include <fcntl.h>
#include <poll.h>
#include <sched.h>
#include <signal.h>
#include <spawn.h>
#include <sys/prctl.h>
#include <sys/resource.h>
#include <sys/stat.h>
#include <sys/syscall.h>
#include <sys/wait.h>
#include <unistd.h>

#include <array>
#include <cerrno>
#include <cstdlib>
#include <cstring>
#include <mutex>
#include <optional>
#include <thread>

#include "core/environment.hpp"

extern char** environ;

namespace autocomp::core {
namespace {

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
    const std::vector<std::pair<std::string, std::string>>& additions, bool minimal) {
  std::vector<std::string> base;
  if (minimal) {
    for (const auto& [name, value] : harness_environment()) {
      base.push_back(name + "=" + value);
    }
  } else {
    for (char** entry = environ; entry != nullptr && *entry != nullptr; ++entry) {
      base.emplace_back(*entry);
    }
  }
  std::vector<std::string> env;
  for (const auto& entry : base) {
    std::string_view text(entry);
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

double ms_since(const Clock& clock, Clock::TimePoint start) {
  return std::chrono::duration<double, std::milli>(clock.now() - start).count();
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
  void kill_group(std::chrono::milliseconds grace, const Clock& clock) {
    // A supervisor kills its whole tree on SIGTERM; its own group is just itself.
    signal_group(SIGTERM);
    auto deadline = clock.now() + grace;
    while (!has_exited() && clock.now() < deadline) {
      clock.sleep_for(std::chrono::milliseconds(5));
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

// ---- Isolated children: a supervisor between this process and the child -----------------------
//
// This process (multi-threaded) forks the supervisor S. Between fork and exec only system calls
// are used (no allocation, no locks): everything is prepared beforehand in a SupervisorPlan.
//
//   this process ── S: new session, parent-death signal, unshare(user+pid namespaces)
//                     └─ I: PID 1 of the new namespace, parent-death SIGKILL, reaps orphans
//                          └─ H: the child proper (exec), parent-death SIGKILL, own group
//
// When H ends, I reports H's wait status to S through a pipe and exits; the kernel then kills
// everything left in the namespace. Without namespaces S forks H directly, is a child subreaper,
// and sweeps (SIGKILLs) every descendant until none is left.

enum class Isolation { namespaces, pid_namespace, subreaper };

constexpr int k_max_sweep_rounds = 1000;
constexpr auto k_supervisor_grace = std::chrono::milliseconds(5000);

struct SupervisorPlan {
  Isolation isolation = Isolation::subreaper;
  const char* path = nullptr;  // resolved program
  char* const* argv = nullptr;
  char* const* envp = nullptr;
  const char* cwd = nullptr;         // null: inherit
  const char* remove_dir = nullptr;  // null: nothing to remove
  const char* uid_map = nullptr;     // "U U 1\n"
  const char* gid_map = nullptr;
  pid_t server = 0;
  int stdin_fd = -1, stdout_fd = -1, stderr_fd = -1;
  int error_fd = -1;  // write end: errno of a failed exec (close-on-exec)
};

// A fork that runs no atfork handlers (they may take locks held by threads that do not exist in
// a forked child).
pid_t raw_fork() {
  return static_cast<pid_t>(::syscall(SYS_clone, SIGCHLD, 0, 0, 0, 0));
}

void write_all(int fd, const void* data, std::size_t size) {
  const char* p = static_cast<const char*>(data);
  while (size > 0) {
    ssize_t n = ::write(fd, p, size);
    if (n < 0 && errno == EINTR) {
      continue;
    }
    if (n <= 0) {
      return;
    }
    p += n;
    size -= static_cast<std::size_t>(n);
  }
}

bool write_proc_file(const char* path, const char* text) {
  int fd = ::open(path, O_WRONLY | O_CLOEXEC);
  if (fd < 0) {
    return false;
  }
  ssize_t n = ::write(fd, text, std::strlen(text));
  ::close(fd);
  return n == static_cast<ssize_t>(std::strlen(text));
}

void reset_signals() {
  struct sigaction action {};
  action.sa_handler = SIG_DFL;
  sigemptyset(&action.sa_mask);
  for (int sig = 1; sig < NSIG; ++sig) {
    if (sig != SIGKILL && sig != SIGSTOP) {
      ::sigaction(sig, &action, nullptr);
    }
  }
  sigset_t none;
  sigemptyset(&none);
  ::sigprocmask(SIG_SETMASK, &none, nullptr);
}

[[noreturn]] void exec_child(const SupervisorPlan& plan) {
  ::prctl(PR_SET_PDEATHSIG, SIGKILL);
  ::setpgid(0, 0);
  reset_signals();
  ::dup2(plan.stdin_fd, STDIN_FILENO);
  ::dup2(plan.stdout_fd, STDOUT_FILENO);
  ::dup2(plan.stderr_fd, STDERR_FILENO);
  // Nothing of this process's other descriptors (sockets, the stdio stream) reaches the child.
  ::syscall(SYS_close_range, 3U, ~0U, 4U /* CLOSE_RANGE_CLOEXEC */);
  if (plan.cwd != nullptr && ::chdir(plan.cwd) != 0) {
    int error = errno;
    write_all(plan.error_fd, &error, sizeof error);
    ::_exit(127);
  }
  ::execve(plan.path, plan.argv, plan.envp);
  int error = errno;
  write_all(plan.error_fd, &error, sizeof error);
  ::_exit(127);
}

// The pids of this process's children, read from /proc (no allocation: a fixed buffer).
std::size_t children_of(pid_t parent, pid_t* out, std::size_t capacity) {
  std::size_t count = 0;
  int dir = ::open("/proc", O_RDONLY | O_DIRECTORY | O_CLOEXEC);
  if (dir < 0) {
    return 0;
  }
  alignas(8) char buffer[8192];
  while (count < capacity) {
    long n = ::syscall(SYS_getdents64, dir, buffer, sizeof buffer);
    if (n <= 0) {
      break;
    }
    for (long offset = 0; offset < n && count < capacity;) {
      auto* entry = reinterpret_cast<struct dirent64*>(buffer + offset);
      offset += entry->d_reclen;
      const char* name = entry->d_name;
      if (name[0] < '1' || name[0] > '9') {
        continue;
      }
      char path[64] = "/proc/";
      std::size_t length = 6;
      for (const char* c = name; *c != '\0' && length < 40; ++c) {
        path[length++] = *c;
      }
      std::memcpy(path + length, "/stat", 6);
      int fd = ::open(path, O_RDONLY | O_CLOEXEC);
      if (fd < 0) {
        continue;
      }
      char stat[512];
      ssize_t got = ::read(fd, stat, sizeof stat - 1);
      ::close(fd);
      if (got <= 0) {
        continue;
      }
      stat[got] = '\0';
      // "pid (comm) S ppid ...": comm may hold anything, so parse after its last ')'.
      char* close_paren = nullptr;
      for (char* c = stat; *c != '\0'; ++c) {
        if (*c == ')') {
          close_paren = c;
        }
      }
      if (close_paren == nullptr || close_paren[1] == '\0' || close_paren[2] == '\0') {
        continue;
      }
      const char* c = close_paren + 4;  // ") S " then ppid
      if (c - stat >= got) {
        continue;
      }
      long ppid = 0;
      while (*c >= '0' && *c <= '9') {
        ppid = ppid * 10 + (*c++ - '0');
      }
      if (ppid == parent) {
        long pid = 0;
        for (const char* d = name; *d >= '0' && *d <= '9'; ++d) {
          pid = pid * 10 + (*d - '0');
        }
        out[count++] = static_cast<pid_t>(pid);
      }
    }
  }
  ::close(dir);
  return count;
}

// Subreaper sweep: SIGKILL every child, reap, repeat (grandchildren are re-parented to us as
// their parents die) until no child is left.
void sweep_descendants() {
  pid_t children[256];
  for (int round = 0; round < k_max_sweep_rounds; ++round) {
    std::size_t count = children_of(::getpid(), children, 256);
    for (std::size_t i = 0; i < count; ++i) {
      ::kill(children[i], SIGKILL);
    }
    int status = 0;
    while (::waitpid(-1, &status, WNOHANG) > 0) {
    }
    if (count == 0) {
      pid_t reaped = ::waitpid(-1, &status, WNOHANG);
      if (reaped < 0 && errno == ECHILD) {
        return;
      }
      if (reaped == 0) {
        // A child we could not see yet (just forked): wait briefly for it.
        struct timespec pause {
          0, 1000000
        };
        ::nanosleep(&pause, nullptr);
      }
    }
  }
}

// Removes a folder tree with system calls only (depth-limited).
void remove_tree_at(int parent, const char* name, int depth) {
  if (depth > 32) {
    return;
  }
  int dir = ::openat(parent, name, O_RDONLY | O_DIRECTORY | O_NOFOLLOW | O_CLOEXEC);
  if (dir >= 0) {
    alignas(8) char buffer[4096];
    while (true) {
      long n = ::syscall(SYS_getdents64, dir, buffer, sizeof buffer);
      if (n <= 0) {
        break;
      }
      for (long offset = 0; offset < n;) {
        auto* entry = reinterpret_cast<struct dirent64*>(buffer + offset);
        offset += entry->d_reclen;
        const char* child = entry->d_name;
        if ((child[0] == '.' && child[1] == '\0') ||
            (child[0] == '.' && child[1] == '.' && child[2] == '\0')) {
          continue;
        }
        if (::unlinkat(dir, child, 0) != 0 && (errno == EISDIR || errno == EPERM)) {
          remove_tree_at(dir, child, depth + 1);
        }
      }
    }
    ::close(dir);
  }
  ::unlinkat(parent, name, AT_REMOVEDIR);
}

// Ends S the way H ended: the same exit code, or the same signal (without a core file).
[[noreturn]] void end_like(int status) {
  if (WIFSIGNALED(status)) {
    int sig = WTERMSIG(status);
    struct rlimit none {
      0, 0
    };
    ::setrlimit(RLIMIT_CORE, &none);
    struct sigaction action {};
    action.sa_handler = SIG_DFL;
    ::sigaction(sig, &action, nullptr);
    sigset_t set;
    sigemptyset(&set);
    sigaddset(&set, sig);
    ::sigprocmask(SIG_UNBLOCK, &set, nullptr);
    ::kill(::getpid(), sig);
    ::_exit(128 + sig);
  }
  ::_exit(WIFEXITED(status) ? WEXITSTATUS(status) : 125);
}

// PID 1 of the namespace: starts H, reaps whatever ends, reports H's status and exits (which
// makes the kernel kill the rest of the namespace).
[[noreturn]] void namespace_init(const SupervisorPlan& plan, int status_fd) {
  ::prctl(PR_SET_PDEATHSIG, SIGKILL);
  pid_t child = raw_fork();
  if (child < 0) {
    int error = errno;
    write_all(plan.error_fd, &error, sizeof error);
    ::_exit(127);
  }
  if (child == 0) {
    ::close(status_fd);
    exec_child(plan);
  }
  ::close(plan.error_fd);
  ::close(plan.stdin_fd);
  ::close(plan.stdout_fd);
  ::close(plan.stderr_fd);
  while (true) {
    int status = 0;
    pid_t reaped = ::waitpid(-1, &status, 0);
    if (reaped == child) {
      write_all(status_fd, &status, sizeof status);
      ::_exit(0);
    }
    if (reaped < 0 && errno != EINTR) {
      ::_exit(125);
    }
  }
}

// Closes every descriptor from 3 up except those in `keep`: the supervisor is forked from a
// multi-threaded process, and pipes of other runs (close-on-exec, but there is no exec here) must
// not stay open in it.
void close_all_but(int* keep, std::size_t count) {
  for (std::size_t i = 1; i < count; ++i) {  // insertion sort, no allocation
    for (std::size_t j = i; j > 0 && keep[j - 1] > keep[j]; --j) {
      int t = keep[j];
      keep[j] = keep[j - 1];
      keep[j - 1] = t;
    }
  }
  unsigned int from = 3;
  for (std::size_t i = 0; i <= count; ++i) {
    unsigned int to = i < count ? static_cast<unsigned int>(keep[i]) : ~0U;
    if (i < count && keep[i] < 3) {
      continue;
    }
    if (to > from) {
      unsigned int last = i < count ? to - 1 : ~0U;
      if (::syscall(SYS_close_range, from, last, 0U) != 0) {
        for (unsigned int fd = from; fd <= last && fd < 65536; ++fd) {
          ::close(static_cast<int>(fd));
        }
      }
    }
    if (i < count) {
      from = to + 1;
    }
  }
}

[[noreturn]] void supervise(SupervisorPlan plan) {
  int keep[] = {plan.stdin_fd, plan.stdout_fd, plan.stderr_fd, plan.error_fd};
  close_all_but(keep, 4);
  reset_signals();
  ::setsid();
  ::prctl(PR_SET_PDEATHSIG, SIGTERM);
  bool orphaned = ::getppid() != plan.server;
  Isolation isolation = plan.isolation;
  if (isolation == Isolation::namespaces) {
    if (::unshare(CLONE_NEWUSER | CLONE_NEWPID) != 0 ||
        !write_proc_file("/proc/self/setgroups", "deny") ||
        !write_proc_file("/proc/self/uid_map", plan.uid_map) ||
        !write_proc_file("/proc/self/gid_map", plan.gid_map)) {
      isolation = Isolation::subreaper;  // (a half-made user namespace holds no children yet)
    }
  } else if (isolation == Isolation::pid_namespace) {
    if (::unshare(CLONE_NEWPID) != 0) {
      isolation = Isolation::subreaper;
    }
  }
  if (isolation == Isolation::subreaper) {
    ::prctl(PR_SET_CHILD_SUBREAPER, 1);
  }

  // Signals are taken synchronously from here on.
  sigset_t waited;
  sigemptyset(&waited);
  for (int sig : {SIGCHLD, SIGTERM, SIGHUP, SIGINT}) {
    sigaddset(&waited, sig);
  }
  ::sigprocmask(SIG_BLOCK, &waited, nullptr);

  int status_pipe[2] = {-1, -1};
  if (isolation != Isolation::subreaper && ::pipe2(status_pipe, O_CLOEXEC) != 0) {
    int error = errno;
    write_all(plan.error_fd, &error, sizeof error);
    ::_exit(127);
  }
  pid_t child = raw_fork();
  if (child < 0) {
    int error = errno;
    write_all(plan.error_fd, &error, sizeof error);
    ::_exit(127);
  }
  if (child == 0) {
    if (isolation == Isolation::subreaper) {
      exec_child(plan);
    }
    ::close(status_pipe[0]);
    namespace_init(plan, status_pipe[1]);
  }
  ::close(plan.error_fd);
  ::close(plan.stdin_fd);
  ::close(plan.stdout_fd);
  ::close(plan.stderr_fd);
  if (status_pipe[1] >= 0) {
    ::close(status_pipe[1]);
  }

  auto kill_all = [&] {
    if (isolation == Isolation::subreaper) {
      ::kill(-child, SIGKILL);
      sweep_descendants();
    } else {
      ::kill(child, SIGKILL);  // the namespace's init: the kernel kills the rest with it
      int status = 0;
      while (::waitpid(child, &status, 0) < 0 && errno == EINTR) {
      }
    }
  };
  auto abandon = [&] {
    kill_all();
    if (plan.remove_dir != nullptr) {
      remove_tree_at(AT_FDCWD, plan.remove_dir, 0);
    }
    ::_exit(125);
  };
  if (orphaned) {
    abandon();
  }

  int child_status = 0;
  bool child_done = false;
  while (true) {
    siginfo_t info{};
    struct timespec tick {
      0, 200000000
    };
    int sig = ::sigtimedwait(&waited, &info, &tick);
    if (sig == SIGTERM || sig == SIGHUP || sig == SIGINT) {
      if (::getppid() != plan.server) {
        abandon();
      }
      kill_all();
      ::_exit(125);
    }
    if (::getppid() != plan.server) {
      abandon();
    }
    int status = 0;
    pid_t reaped = 0;
    while ((reaped = ::waitpid(-1, &status, WNOHANG)) > 0) {
      if (reaped == child) {
        child_status = status;
        child_done = true;
      }
    }
    if (child_done) {
      break;
    }
  }
  if (isolation == Isolation::subreaper) {
    sweep_descendants();
    end_like(child_status);
  }
  int reported = 0;
  ssize_t got = ::read(status_pipe[0], &reported, sizeof reported);
  if (got != static_cast<ssize_t>(sizeof reported)) {
    ::_exit(125);  // init was killed before H ended
  }
  end_like(reported);
}

Isolation probe_isolation() {
  static Isolation mode = [] {
    // AUTOCOMP_ISOLATION=subreaper (or pid-namespace) asks for a weaker mode, e.g. to test it.
    const char* asked = std::getenv("AUTOCOMP_ISOLATION");
    if (asked != nullptr && std::string_view(asked) == "subreaper") {
      return Isolation::subreaper;
    }
    const bool only_pid = asked != nullptr && std::string_view(asked) == "pid-namespace";
    pid_t pid = ::fork();
    if (pid == 0) {
      if (!only_pid && ::unshare(CLONE_NEWUSER | CLONE_NEWPID) == 0) {
        ::_exit(0);
      }
      ::_exit(::unshare(CLONE_NEWPID) == 0 ? 1 : 2);
    }
    int status = 0;
    if (pid < 0 || ::waitpid(pid, &status, 0) != pid || !WIFEXITED(status)) {
      return Isolation::subreaper;
    }
    switch (WEXITSTATUS(status)) {
      case 0:
        return Isolation::namespaces;
      case 1:
        return Isolation::pid_namespace;
      default:
        return Isolation::subreaper;
    }
  }();
  return mode;
}

// The program as execve needs it: a path (PATH searched for a bare name).
std::optional<std::string> resolve_program(const std::string& name) {
  if (name.find('/') != std::string::npos) {
    return name;
  }
  const char* path = std::getenv("PATH");
  std::string_view rest = path != nullptr ? path : "/usr/local/bin:/usr/bin:/bin";
  while (true) {
    auto colon = rest.find(':');
    std::string dir(rest.substr(0, colon));
    std::string candidate = (dir.empty() ? std::string(".") : dir) + "/" + name;
    struct stat info {};
    if (::stat(candidate.c_str(), &info) == 0 && S_ISREG(info.st_mode) &&
        ::access(candidate.c_str(), X_OK) == 0) {
      return candidate;
    }
    if (colon == std::string_view::npos) {
      return std::nullopt;
    }
    rest = rest.substr(colon + 1);
  }
}

// Forks the supervisor for `spec` and waits until the child proper was exec'd (or failed to be).
Result<pid_t> start_supervised(const ProcessSpec& spec, std::vector<char*>& argv,
                               std::vector<char*>& envp, const Fd& stdin_read,
                               const Fd& stdout_write, const Fd& stderr_write) {
  protect_this_process();
  auto program = resolve_program(spec.argv[0]);
  if (!program) {
    return make_failure(FailureKind::io_error, "spawn",
                        "cannot start " + spec.argv[0] + ": " + std::strerror(ENOENT));
  }
  Fd error_read, error_write;
  if (!make_pipe(error_read, error_write)) {
    return make_failure(FailureKind::io_error, "spawn",
                        std::string("cannot create pipes: ") + std::strerror(errno));
  }
  const std::string uid_map =
      std::to_string(::geteuid()) + " " + std::to_string(::geteuid()) + " 1";
  const std::string gid_map =
      std::to_string(::getegid()) + " " + std::to_string(::getegid()) + " 1";
  SupervisorPlan plan;
  plan.isolation = probe_isolation();
  plan.path = program->c_str();
  plan.argv = argv.data();
  plan.envp = envp.data();
  plan.cwd = spec.cwd.empty() ? nullptr : spec.cwd.c_str();
  plan.remove_dir = spec.remove_if_abandoned.empty() ? nullptr : spec.remove_if_abandoned.c_str();
  plan.uid_map = uid_map.c_str();
  plan.gid_map = gid_map.c_str();
  plan.server = ::getpid();
  plan.stdin_fd = stdin_read.get();
  plan.stdout_fd = stdout_write.get();
  plan.stderr_fd = stderr_write.get();
  plan.error_fd = error_write.get();

  pid_t pid = ::fork();
  if (pid < 0) {
    return make_failure(FailureKind::io_error, "spawn",
                        "cannot start " + spec.argv[0] + ": " + std::strerror(errno));
  }
  if (pid == 0) {
    supervise(plan);
  }
  error_write.close();
  int error = 0;
  ssize_t got = 0;
  do {
    got = ::read(error_read.get(), &error, sizeof error);
  } while (got < 0 && errno == EINTR);
  if (got == static_cast<ssize_t>(sizeof error)) {
    int status = 0;
    ::waitpid(pid, &status, 0);
    std::string where = spec.cwd.empty() ? "" : " in " + spec.cwd;
    return make_failure(FailureKind::io_error, "spawn",
                        "cannot start " + spec.argv[0] + where + ": " + std::strerror(error));
  }
  return pid;
}

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

void protect_this_process() {
  static std::once_flag once;
  std::call_once(once, [] { ::prctl(PR_SET_DUMPABLE, 0); });
}

std::string isolation_mode() {
  switch (probe_isolation()) {
    case Isolation::namespaces:
      return "namespaces";
    case Isolation::pid_namespace:
      return "pid-namespace";
    case Isolation::subreaper:
      break;
  }
  return "subreaper";
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

  std::vector<std::string> argv_strings = spec.argv;
  std::vector<char*> argv = pointers_to(argv_strings);
  std::vector<std::string> env_strings =
      build_environment(spec.env, spec.minimal_environment || spec.isolate);
  std::vector<char*> envp = pointers_to(env_strings);

  const auto clock = clock_or_steady(spec.clock);
  auto start = clock->now();
  pid_t pid = -1;
  if (spec.isolate) {
    auto started = start_supervised(spec, argv, envp, stdin_read, stdout_write, stderr_write);
    if (!started.ok()) {
      return started.failure();
    }
    pid = started.value();
  } else {
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
    posix_spawnattr_setflags(
        &attributes, POSIX_SPAWN_SETPGROUP | POSIX_SPAWN_SETSIGDEF | POSIX_SPAWN_SETSIGMASK);

    int rc = ::posix_spawnp(&pid, argv[0], &actions, &attributes, argv.data(), envp.data());
    posix_spawn_file_actions_destroy(&actions);
    posix_spawnattr_destroy(&attributes);
    if (rc != 0) {
      std::string where = spec.cwd.empty() ? "" : " in " + spec.cwd;
      return make_failure(FailureKind::io_error, "spawn",
                          "cannot start " + spec.argv[0] + where + ": " + std::strerror(rc));
    }
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
  std::optional<Clock::TimePoint> exited_at;

  while (true) {
    if (cancel.cancelled()) {
      result.cancelled = true;
      break;
    }
    auto now = clock->now();
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
      clock->sleep_for(std::chrono::milliseconds(2));
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
      clock->sleep_for(std::min(wait, std::chrono::milliseconds(2)));
      continue;
    }
    int ready = 0;
    clock->wait_for(wait, [&](Clock::Duration real_timeout) {
      ready =
          ::poll(fds.data(), count,
                 static_cast<int>(
                     std::chrono::duration_cast<std::chrono::milliseconds>(real_timeout).count()));
      return ready > 0;
    });
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
    // A supervisor needs time to sweep the tree before it may be killed itself.
    child.kill_group(spec.isolate ? std::max(spec.kill_grace, k_supervisor_grace) : spec.kill_grace,
                     *clock);
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

  result.wall_ms = ms_since(*clock, start);
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
