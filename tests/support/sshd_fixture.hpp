#pragma once

// A real OpenSSH server on 127.0.0.1 for tests and benchmarks: its own host key, authorized_keys,
// config, pid file and log in a private folder, running as the current user.

#include <arpa/inet.h>
#include <dirent.h>
#include <fcntl.h>
#include <netinet/in.h>
#include <signal.h>
#include <spawn.h>
#include <sys/socket.h>
#include <sys/wait.h>
#include <unistd.h>

#include <chrono>
#include <cstdlib>
#include <filesystem>
#include <fstream>
#include <sstream>
#include <stdexcept>
#include <string>
#include <thread>
#include <vector>

#include "core/process.hpp"

extern char** environ;

namespace autocomp::testing {

inline std::string read_text(const std::filesystem::path& path) {
  std::ifstream in(path);
  std::ostringstream text;
  text << in.rdbuf();
  return text.str();
}

// Runs a helper program (ssh-keygen, pgrep) and throws if it cannot be started.
inline core::ProcessResult run_tool(const std::vector<std::string>& argv) {
  core::ProcessSpec spec;
  spec.argv = argv;
  spec.timeout = std::chrono::seconds(30);
  auto result = core::run_process(spec);
  if (!result.ok()) {
    throw std::runtime_error(result.failure().describe());
  }
  return result.value();
}

// A fresh ed25519 key pair at `path` (private) and `path`.pub.
inline void generate_key(const std::filesystem::path& path) {
  auto result = run_tool(
      {"ssh-keygen", "-q", "-t", "ed25519", "-N", "", "-C", "autocomp-test", "-f", path.string()});
  if (!result.succeeded()) {
    throw std::runtime_error("ssh-keygen failed: " + result.stderr_text);
  }
}

// A temporary folder removed with everything in it on destruction.
class TempDir {
 public:
  explicit TempDir(const std::string& prefix = "autocomp-test") {
    std::string pattern = (std::filesystem::temp_directory_path() / (prefix + "-XXXXXX")).string();
    if (::mkdtemp(pattern.data()) == nullptr) {
      throw std::runtime_error("mkdtemp failed");
    }
    m_path = pattern;
  }
  ~TempDir() {
    std::error_code ec;
    std::filesystem::remove_all(m_path, ec);
  }
  TempDir(const TempDir&) = delete;
  TempDir& operator=(const TempDir&) = delete;
  const std::filesystem::path& path() const { return m_path; }

 private:
  std::filesystem::path m_path;
};

inline int free_loopback_port() {
  int fd = ::socket(AF_INET, SOCK_STREAM, 0);
  sockaddr_in address{};
  address.sin_family = AF_INET;
  address.sin_addr.s_addr = htonl(INADDR_LOOPBACK);
  address.sin_port = 0;
  socklen_t length = sizeof address;
  if (::bind(fd, reinterpret_cast<sockaddr*>(&address), sizeof address) != 0 ||
      ::getsockname(fd, reinterpret_cast<sockaddr*>(&address), &length) != 0) {
    ::close(fd);
    throw std::runtime_error("cannot find a free port");
  }
  int port = ntohs(address.sin_port);
  ::close(fd);
  return port;
}

inline bool port_accepts(int port) {
  int fd = ::socket(AF_INET, SOCK_STREAM, 0);
  sockaddr_in address{};
  address.sin_family = AF_INET;
  address.sin_addr.s_addr = htonl(INADDR_LOOPBACK);
  address.sin_port = htons(static_cast<uint16_t>(port));
  bool ok = ::connect(fd, reinterpret_cast<sockaddr*>(&address), sizeof address) == 0;
  ::close(fd);
  return ok;
}

// Direct and indirect children of `pid`, from /proc.
inline std::vector<pid_t> descendants_of(pid_t pid) {
  std::vector<std::pair<pid_t, pid_t>> parent_of;  // (pid, ppid)
  if (DIR* dir = ::opendir("/proc")) {
    while (dirent* entry = ::readdir(dir)) {
      std::string name = entry->d_name;
      if (name.empty() || name.find_first_not_of("0123456789") != std::string::npos) {
        continue;
      }
      std::string stat = read_text("/proc/" + name + "/stat");
      auto close = stat.rfind(')');
      if (close == std::string::npos) {
        continue;
      }
      std::istringstream rest(stat.substr(close + 2));
      char state = 0;
      pid_t ppid = 0;
      rest >> state >> ppid;
      parent_of.emplace_back(static_cast<pid_t>(std::stoi(name)), ppid);
    }
    ::closedir(dir);
  }
  std::vector<pid_t> found{pid};
  for (std::size_t i = 0; i < found.size(); ++i) {
    for (const auto& [child, parent] : parent_of) {
      if (parent == found[i]) {
        found.push_back(child);
      }
    }
  }
  found.erase(found.begin());
  return found;
}

class LoopbackSshd {
 public:
  // Starts sshd in `dir` (created), authorising `user_public_key` (a .pub file).
  LoopbackSshd(const std::filesystem::path& dir, const std::filesystem::path& user_public_key)
      : m_dir(dir) {
    namespace fs = std::filesystem;
    fs::create_directories(m_dir);
    fs::create_directories("/run/sshd");  // sshd's privilege separation folder
    generate_key(m_dir / "host_key");
    fs::copy_file(user_public_key, m_dir / "authorized_keys", fs::copy_options::overwrite_existing);
    m_port = free_loopback_port();
    std::ofstream config(m_dir / "sshd_config");
    config << "Port " << m_port << "\n"
           << "ListenAddress 127.0.0.1\n"
           << "HostKey " << (m_dir / "host_key").string() << "\n"
           << "PidFile " << (m_dir / "sshd.pid").string() << "\n"
           << "AuthorizedKeysFile " << (m_dir / "authorized_keys").string() << "\n"
           << "StrictModes no\nUsePAM no\nPermitRootLogin yes\nPasswordAuthentication no\n"
           << "KbdInteractiveAuthentication no\nPubkeyAuthentication yes\n"
           << "Subsystem sftp internal-sftp\nLogLevel ERROR\nMaxStartups 100\nMaxSessions 100\n";
    config.close();
    start();
  }
  ~LoopbackSshd() { kill(); }
  LoopbackSshd(const LoopbackSshd&) = delete;
  LoopbackSshd& operator=(const LoopbackSshd&) = delete;

  int port() const { return m_port; }
  // The known_hosts line for this server ("[127.0.0.1]:PORT ssh-ed25519 AAAA...").
  std::string known_hosts_line() const {
    std::string key = read_text(m_dir / "host_key.pub");
    while (!key.empty() && key.back() == '\n') {
      key.pop_back();
    }
    return "[127.0.0.1]:" + std::to_string(m_port) + " " + key + "\n";
  }
  std::string log() const { return read_text(m_dir / "sshd.log"); }

  // Stops the server and every session it forked, like a host going down.
  void kill() {
    if (m_pid <= 0) {
      return;
    }
    for (pid_t child : descendants_of(m_pid)) {
      ::kill(child, SIGKILL);
    }
    ::kill(m_pid, SIGKILL);
    int status = 0;
    ::waitpid(m_pid, &status, 0);
    m_pid = -1;
  }

 private:
  void start() {
    std::string log = (m_dir / "sshd.log").string();
    posix_spawn_file_actions_t actions;
    posix_spawn_file_actions_init(&actions);
    posix_spawn_file_actions_addopen(&actions, STDIN_FILENO, "/dev/null", O_RDONLY, 0);
    posix_spawn_file_actions_addopen(&actions, STDOUT_FILENO, log.c_str(),
                                     O_WRONLY | O_CREAT | O_APPEND, 0644);
    posix_spawn_file_actions_adddup2(&actions, STDOUT_FILENO, STDERR_FILENO);
    // sshd runs commands through the user's shell, which on this machine sources a ~/.bashrc
    // that may run `pyenv rehash`; tests that kill remote process trees can kill it mid-way and
    // leave a lock that makes every later login wait 60 s. Where a private mount namespace is
    // available, sshd and its sessions see an empty ~/.bashrc instead (nothing else changes).
    const char* home = std::getenv("HOME");
    std::string bashrc = home != nullptr ? std::string(home) + "/.bashrc" : std::string();
    std::vector<std::string> args{"/usr/sbin/sshd", "-D", "-e", "-f",
                                  (m_dir / "sshd_config").string()};
    if (!bashrc.empty() && std::filesystem::exists(bashrc) &&
        std::filesystem::exists("/usr/bin/unshare") &&
        run_tool({"/usr/bin/unshare", "-m", "true"}).succeeded()) {
      std::string empty = (m_dir / "empty_bashrc").string();
      std::ofstream(empty).close();
      std::string script = "mount --bind '" + empty + "' '" + bashrc +
                           "' 2>/dev/null; exec /usr/sbin/sshd -D -e -f '" +
                           (m_dir / "sshd_config").string() + "'";
      args = {"/usr/bin/unshare", "-m", "/bin/sh", "-c", script};
    }
    std::vector<char*> argv;
    for (auto& a : args) {
      argv.push_back(a.data());
    }
    argv.push_back(nullptr);
    int rc = ::posix_spawn(&m_pid, argv[0], &actions, nullptr, argv.data(), environ);
    posix_spawn_file_actions_destroy(&actions);
    if (rc != 0) {
      throw std::runtime_error("cannot start /usr/sbin/sshd");
    }
    auto deadline = std::chrono::steady_clock::now() + std::chrono::seconds(10);
    while (!port_accepts(m_port)) {
      int status = 0;
      if (::waitpid(m_pid, &status, WNOHANG) == m_pid) {
        m_pid = -1;
        throw std::runtime_error("sshd exited at start: " + read_text(log));
      }
      if (std::chrono::steady_clock::now() > deadline) {
        throw std::runtime_error("sshd did not start listening: " + read_text(log));
      }
      std::this_thread::sleep_for(std::chrono::milliseconds(10));
    }
  }

  std::filesystem::path m_dir;
  int m_port = 0;
  pid_t m_pid = -1;
};

}  // namespace autocomp::testing
