#include "backends/ssh_connection.hpp"

#include <fcntl.h>
#include <libssh/libssh.h>
#include <libssh/sftp.h>
#include <netinet/in.h>
#include <netinet/tcp.h>
#include <sys/socket.h>
#include <unistd.h>

#include <array>
#include <atomic>
#include <cstdlib>
#include <filesystem>

namespace autocomp::backends {
namespace {

namespace fs = std::filesystem;

constexpr auto k_idle_before_probe = std::chrono::seconds(20);
constexpr std::size_t k_io_chunk = 32 * 1024;

std::string home_dir() {
  const char* home = std::getenv("HOME");
  return home != nullptr ? home : "";
}

std::string ssh_dir_file(const char* name) {
  auto home = home_dir();
  return home.empty() ? std::string{} : (fs::path(home) / ".ssh" / name).string();
}

std::string fingerprint_of(ssh_session session, std::string& key_type) {
  ssh_key key = nullptr;
  if (ssh_get_server_publickey(session, &key) != SSH_OK) {
    return "(no server key)";
  }
  key_type = ssh_key_type_to_char(ssh_key_type(key));
  unsigned char* hash = nullptr;
  size_t length = 0;
  std::string text = "(unknown)";
  if (ssh_get_publickey_hash(key, SSH_PUBLICKEY_HASH_SHA256, &hash, &length) == 0) {
    char* printable = ssh_get_fingerprint_hash(SSH_PUBLICKEY_HASH_SHA256, hash, length);
    if (printable != nullptr) {
      text = printable;
      ssh_string_free_char(printable);
    }
    ssh_clean_pubkey_hash(&hash);
  }
  ssh_key_free(key);
  return text;
}

void enable_tcp_keepalive(ssh_session session) {
  int fd = ssh_get_fd(session);
  if (fd < 0) {
    return;
  }
  int on = 1;
  int idle = 30;
  int interval = 10;
  int count = 3;
  ::setsockopt(fd, SOL_SOCKET, SO_KEEPALIVE, &on, sizeof on);
  ::setsockopt(fd, IPPROTO_TCP, TCP_KEEPIDLE, &idle, sizeof idle);
  ::setsockopt(fd, IPPROTO_TCP, TCP_KEEPINTVL, &interval, sizeof interval);
  ::setsockopt(fd, IPPROTO_TCP, TCP_KEEPCNT, &count, sizeof count);
}

}  // namespace

std::string SshEndpoint::describe() const {
  return (user.empty() ? "" : user + "@") + host + ":" + std::to_string(port);
}

std::string shell_quote(const std::string& text) {
  std::string quoted = "'";
  for (char c : text) {
    if (c == '\'') {
      quoted += "'\\''";
    } else {
      quoted += c;
    }
  }
  return quoted + "'";
}

struct SshConnection::Handles {
  ssh_session session = nullptr;
  sftp_session sftp = nullptr;
  ssh_channel shell = nullptr;  // the persistent sh of run_in_shell
  std::string shell_pending;    // shell output read past the last command's end marker
  std::chrono::steady_clock::time_point last_used = std::chrono::steady_clock::now();

  void close_shell() {
    if (shell != nullptr) {
      if (ssh_channel_is_open(shell) != 0) {
        ssh_channel_close(shell);
      }
      ssh_channel_free(shell);
      shell = nullptr;
    }
    shell_pending.clear();
  }

  ~Handles() {
    close_shell();
    if (sftp != nullptr) {
      sftp_free(sftp);
    }
    if (session != nullptr) {
      if (ssh_is_connected(session) != 0) {
        ssh_disconnect(session);
      }
      ssh_free(session);
    }
  }
};

SshConnection::SshConnection(SshEndpoint endpoint)
    : m_endpoint(std::move(endpoint)), m_handles(std::make_unique<Handles>()) {}

SshConnection::~SshConnection() = default;

core::Result<std::unique_ptr<SshConnection>> SshConnection::open(const SshEndpoint& endpoint) {
  std::unique_ptr<SshConnection> connection(new SshConnection(endpoint));
  const std::string where = endpoint.describe();
  auto fail = [&](core::FailureKind kind, const std::string& message) {
    return core::make_failure(kind, "connect", where + ": " + message);
  };

  ssh_session session = ssh_new();
  if (session == nullptr) {
    return fail(core::FailureKind::internal, "cannot create an ssh session");
  }
  connection->m_handles->session = session;
  ssh_options_set(session, SSH_OPTIONS_HOST, endpoint.host.c_str());
  // ~/.ssh/config first, so that what the spec says wins over it.
  ssh_options_parse_config(session, nullptr);
  if (endpoint.port > 0) {
    int port = endpoint.port;
    ssh_options_set(session, SSH_OPTIONS_PORT, &port);
  }
  if (!endpoint.user.empty()) {
    ssh_options_set(session, SSH_OPTIONS_USER, endpoint.user.c_str());
  }
  std::string known_hosts =
      endpoint.known_hosts.empty() ? ssh_dir_file("known_hosts") : endpoint.known_hosts;
  ssh_options_set(session, SSH_OPTIONS_KNOWNHOSTS, known_hosts.c_str());
  long seconds = std::max<long>(1, static_cast<long>(endpoint.timeout.count() / 1000));
  ssh_options_set(session, SSH_OPTIONS_TIMEOUT, &seconds);

  if (ssh_connect(session) != SSH_OK) {
    return fail(core::FailureKind::transport_error,
                std::string("cannot connect: ") + ssh_get_error(session));
  }
  enable_tcp_keepalive(session);

  std::string key_type;
  std::string fingerprint = fingerprint_of(session, key_type);
  switch (ssh_session_is_known_server(session)) {
    case SSH_KNOWN_HOSTS_OK:
      break;
    case SSH_KNOWN_HOSTS_CHANGED:
    case SSH_KNOWN_HOSTS_OTHER:
      return fail(core::FailureKind::unavailable,
                  "host key refused: it does not match the one recorded in " + known_hosts +
                      " (server offers " + key_type + " " + fingerprint +
                      "); if the host was really re-keyed, remove its old line from that file");
    case SSH_KNOWN_HOSTS_NOT_FOUND:
    case SSH_KNOWN_HOSTS_UNKNOWN:
      if (!endpoint.accept_new_host_key) {
        return fail(core::FailureKind::unavailable,
                    "host key refused: unknown host, not in " + known_hosts + " (server offers " +
                        key_type + " " + fingerprint +
                        "); check the fingerprint, then add accept_new_host_key=1 to the spec "
                        "to record it, or add it to known_hosts yourself");
      }
      if (ssh_session_update_known_hosts(session) != SSH_OK) {
        return fail(core::FailureKind::io_error,
                    "cannot record the host key in " + known_hosts + ": " + ssh_get_error(session));
      }
      break;
    case SSH_KNOWN_HOSTS_ERROR:
    default:
      return fail(core::FailureKind::unavailable, "cannot check the host key against " +
                                                      known_hosts + ": " + ssh_get_error(session));
  }

  // Authentication: none (rarely enough), then ssh-agent, then each key file.
  std::vector<std::string> tried;
  bool authenticated = ssh_userauth_none(session, nullptr) == SSH_AUTH_SUCCESS;
  const char* agent = std::getenv("SSH_AUTH_SOCK");
  if (!authenticated && endpoint.use_agent && agent != nullptr && *agent != '\0') {
    authenticated = ssh_userauth_agent(session, nullptr) == SSH_AUTH_SUCCESS;
    tried.emplace_back("ssh-agent");
  }
  std::vector<std::string> keys = endpoint.key_files;
  if (keys.empty()) {
    for (const char* name : {"id_ed25519", "id_ecdsa", "id_rsa"}) {
      auto path = ssh_dir_file(name);
      std::error_code ec;
      if (!path.empty() && fs::exists(path, ec)) {
        keys.push_back(path);
      }
    }
  }
  for (const auto& path : keys) {
    if (authenticated) {
      break;
    }
    ssh_key key = nullptr;
    if (ssh_pki_import_privkey_file(path.c_str(), nullptr, nullptr, nullptr, &key) != SSH_OK) {
      tried.push_back(path + " (unreadable, or needs a passphrase: load it into ssh-agent)");
      continue;
    }
    int rc = ssh_userauth_publickey(session, nullptr, key);
    ssh_key_free(key);
    if (rc == SSH_AUTH_SUCCESS) {
      authenticated = true;
    } else if (rc == SSH_AUTH_ERROR) {
      return fail(core::FailureKind::transport_error,
                  std::string("authentication broke off: ") + ssh_get_error(session));
    } else {
      tried.push_back(path + " (rejected)");
    }
  }
  if (!authenticated) {
    std::string list;
    for (const auto& t : tried) {
      list += (list.empty() ? "" : ", ") + t;
    }
    return fail(core::FailureKind::unavailable,
                "authentication failed: the server accepted none of the credentials tried (" +
                    (list.empty() ? std::string("no ssh-agent and no key files in ~/.ssh") : list) +
                    "); set key=PATH in the spec or add your public key to the host's "
                    "authorized_keys");
  }

  sftp_session sftp = sftp_new(session);
  if (sftp == nullptr || sftp_init(sftp) != SSH_OK) {
    if (sftp != nullptr) {
      sftp_free(sftp);
    }
    return fail(core::FailureKind::transport_error,
                std::string("cannot start SFTP: ") + ssh_get_error(session));
  }
  connection->m_handles->sftp = sftp;
  connection->m_handles->last_used = std::chrono::steady_clock::now();
  return connection;
}

core::Failure SshConnection::sftp_failure(const std::string& what, const std::string& path) const {
  ssh_session session = m_handles->session;
  if (ssh_is_connected(session) == 0) {
    return core::make_failure(
        core::FailureKind::transport_error, "sftp",
        m_endpoint.describe() + ": connection lost during " + what + " " + path);
  }
  int code = sftp_get_error(m_handles->sftp);
  return core::make_failure(core::FailureKind::io_error, "sftp",
                            m_endpoint.describe() + ": cannot " + what + " " + path +
                                " (sftp status " + std::to_string(code) + ": " +
                                ssh_get_error(session) + ")");
}

bool SshConnection::alive() {
  ssh_session session = m_handles->session;
  if (session == nullptr || ssh_is_connected(session) == 0) {
    return false;
  }
  if (std::chrono::steady_clock::now() - m_handles->last_used > k_idle_before_probe) {
    if (ssh_send_ignore(session, "keepalive") != SSH_OK) {
      return false;
    }
    m_handles->last_used = std::chrono::steady_clock::now();
  }
  return ssh_is_connected(session) != 0;
}

core::Result<ExecOutput> SshConnection::exec(const std::string& command,
                                             std::chrono::milliseconds timeout,
                                             const core::CancelToken& cancel,
                                             std::size_t max_output) {
  ssh_session session = m_handles->session;
  m_handles->last_used = std::chrono::steady_clock::now();
  const auto deadline = std::chrono::steady_clock::now() + timeout;
  auto transport = [&](const std::string& what) {
    return core::make_failure(core::FailureKind::transport_error, "exec",
                              m_endpoint.describe() + ": " + what + ": " + ssh_get_error(session));
  };
  ssh_channel channel = ssh_channel_new(session);
  if (channel == nullptr) {
    return transport("cannot create a channel");
  }
  struct ChannelGuard {
    ssh_channel channel;
    ~ChannelGuard() {
      if (ssh_channel_is_open(channel) != 0) {
        ssh_channel_close(channel);
      }
      ssh_channel_free(channel);
    }
  } guard{channel};
  if (ssh_channel_open_session(channel) != SSH_OK) {
    return transport("cannot open a channel");
  }
  if (ssh_channel_request_exec(channel, command.c_str()) != SSH_OK) {
    return transport("cannot start the remote command");
  }

  ExecOutput output;
  std::array<char, k_io_chunk> buffer{};
  auto append = [&](std::string& sink, int n) {
    if (n > 0 && sink.size() < max_output) {
      sink.append(buffer.data(),
                  std::min<std::size_t>(static_cast<std::size_t>(n), max_output - sink.size()));
    }
  };
  while (true) {
    if (cancel.cancelled()) {
      return core::make_failure(core::FailureKind::cancelled, "exec", "cancelled");
    }
    if (std::chrono::steady_clock::now() >= deadline) {
      return core::make_failure(core::FailureKind::timeout, "exec",
                                m_endpoint.describe() + ": no end of the remote command after " +
                                    std::to_string(timeout.count()) + " ms");
    }
    int n = ssh_channel_read_timeout(channel, buffer.data(), buffer.size(), 0, 50);
    if (n == SSH_ERROR) {
      return transport("reading the remote command's output failed");
    }
    append(output.stdout_text, n);
    int e = ssh_channel_read_nonblocking(channel, buffer.data(), buffer.size(), 1);
    if (e == SSH_ERROR) {
      return transport("reading the remote command's errors failed");
    }
    append(output.stderr_text, e);
    if (ssh_channel_is_eof(channel) != 0 || ssh_channel_is_open(channel) == 0) {
      // Drain what is left of both streams.
      for (int is_stderr : {0, 1}) {
        int rest = 0;
        while ((rest = ssh_channel_read_nonblocking(channel, buffer.data(), buffer.size(),
                                                    is_stderr)) > 0) {
          append(is_stderr != 0 ? output.stderr_text : output.stdout_text, rest);
        }
      }
      break;
    }
    if (ssh_is_connected(session) == 0) {
      return transport("the connection dropped");
    }
  }
  output.exit_status = ssh_channel_get_exit_status(channel);
  m_handles->last_used = std::chrono::steady_clock::now();
  return output;
}

core::Result<ExecOutput> SshConnection::run_in_shell(const std::string& command,
                                                     std::chrono::milliseconds timeout,
                                                     const core::CancelToken& cancel,
                                                     std::size_t max_output) {
  ssh_session session = m_handles->session;
  m_handles->last_used = std::chrono::steady_clock::now();
  const auto deadline = std::chrono::steady_clock::now() + timeout;
  auto transport = [&](const std::string& what) {
    m_handles->close_shell();
    return core::make_failure(core::FailureKind::transport_error, "exec",
                              m_endpoint.describe() + ": " + what + ": " + ssh_get_error(session));
  };
  if (m_handles->shell == nullptr || ssh_channel_is_open(m_handles->shell) == 0 ||
      ssh_channel_is_eof(m_handles->shell) != 0) {
    m_handles->close_shell();
    ssh_channel channel = ssh_channel_new(session);
    if (channel == nullptr) {
      return transport("cannot create a channel");
    }
    m_handles->shell = channel;
    if (ssh_channel_open_session(channel) != SSH_OK) {
      return transport("cannot open a channel");
    }
    if (ssh_channel_request_exec(channel, "exec sh") != SSH_OK) {
      return transport("cannot start a remote shell");
    }
  }
  ssh_channel channel = m_handles->shell;

  // The end marker carries a fresh nonce, so no output of the command can fake it.
  static std::atomic<unsigned long long> counter{0};
  const std::string nonce =
      "__autocomp_end_" + std::to_string(::getpid()) + "_" + std::to_string(counter.fetch_add(1)) +
      "_" + std::to_string(std::chrono::steady_clock::now().time_since_epoch().count());
  const std::string line =
      "( " + command + " ) </dev/null 2>&1; printf '\\n%s %d\\n' " + nonce + " \"$?\"\n";
  std::size_t sent = 0;
  while (sent < line.size()) {
    int n =
        ssh_channel_write(channel, line.data() + sent, static_cast<uint32_t>(line.size() - sent));
    if (n == SSH_ERROR) {
      return transport("cannot send the command to the remote shell");
    }
    sent += static_cast<std::size_t>(n);
  }

  const std::string marker = "\n" + nonce + " ";
  std::string output = std::move(m_handles->shell_pending);
  m_handles->shell_pending.clear();
  std::array<char, k_io_chunk> buffer{};
  while (true) {
    auto at = output.find(marker);
    if (at != std::string::npos) {
      auto end = output.find('\n', at + marker.size());
      if (end != std::string::npos) {
        ExecOutput result;
        result.exit_status = std::atoi(output.c_str() + at + marker.size());
        m_handles->shell_pending = output.substr(end + 1);
        output.resize(std::min(at, max_output));
        result.stdout_text = std::move(output);
        m_handles->last_used = std::chrono::steady_clock::now();
        return result;
      }
    }
    if (cancel.cancelled()) {
      m_handles->close_shell();
      return core::make_failure(core::FailureKind::cancelled, "exec", "cancelled");
    }
    if (std::chrono::steady_clock::now() >= deadline) {
      m_handles->close_shell();
      return core::make_failure(core::FailureKind::timeout, "exec",
                                m_endpoint.describe() + ": no end of the remote command after " +
                                    std::to_string(timeout.count()) + " ms");
    }
    int n = ssh_channel_read_timeout(channel, buffer.data(), buffer.size(), 0, 50);
    if (n == SSH_ERROR) {
      return transport("reading the remote shell failed");
    }
    if (n > 0) {
      // Keep the head (for the caller) and the tail (where the marker will be) within bounds.
      output.append(buffer.data(), static_cast<std::size_t>(n));
      constexpr std::size_t k_tail = 64 * 1024;
      if (output.size() > max_output + k_tail) {
        std::string tail = output.substr(output.size() - k_tail);
        output.resize(max_output / 2);
        output += tail;
      }
    }
    int e = ssh_channel_read_nonblocking(channel, buffer.data(), buffer.size(), 1);
    if (e == SSH_ERROR) {
      return transport("reading the remote shell's errors failed");
    }
    if (n == 0 && (ssh_channel_is_eof(channel) != 0 || ssh_channel_is_open(channel) == 0)) {
      return transport("the remote shell ended");
    }
  }
}

core::Result<std::string> SshConnection::home() {
  char* path = sftp_canonicalize_path(m_handles->sftp, ".");
  if (path == nullptr) {
    return sftp_failure("resolve the home folder", ".");
  }
  std::string text = path;
  ssh_string_free_char(path);
  return text;
}

core::Status SshConnection::make_dirs(const std::string& path) {
  m_handles->last_used = std::chrono::steady_clock::now();
  std::string partial;
  std::size_t start = 0;
  if (!path.empty() && path.front() == '/') {
    partial = "/";
    start = 1;
  }
  while (start <= path.size()) {
    auto slash = path.find('/', start);
    std::string part =
        path.substr(start, slash == std::string::npos ? std::string::npos : slash - start);
    if (!part.empty()) {
      partial += (partial.empty() || partial.back() == '/' ? "" : "/") + part;
      if (sftp_mkdir(m_handles->sftp, partial.c_str(), 0755) != SSH_OK) {
        // Already there is fine; anything else shows up when the last component is checked.
        if (ssh_is_connected(m_handles->session) == 0) {
          return sftp_failure("create folder", partial);
        }
      }
    }
    if (slash == std::string::npos) {
      break;
    }
    start = slash + 1;
  }
  sftp_attributes attributes = sftp_stat(m_handles->sftp, path.c_str());
  if (attributes == nullptr) {
    return sftp_failure("create folder", path);
  }
  bool is_dir = attributes->type == SSH_FILEXFER_TYPE_DIRECTORY;
  sftp_attributes_free(attributes);
  if (!is_dir) {
    return core::make_failure(core::FailureKind::io_error, "sftp",
                              m_endpoint.describe() + ": " + path + " exists and is not a folder");
  }
  return core::ok_status();
}

core::Status SshConnection::write_file(const std::string& path, const std::string& content,
                                       int mode) {
  m_handles->last_used = std::chrono::steady_clock::now();
  sftp_file file = sftp_open(m_handles->sftp, path.c_str(), O_WRONLY | O_CREAT | O_TRUNC,
                             static_cast<mode_t>(mode));
  if (file == nullptr) {
    return sftp_failure("create", path);
  }
  std::size_t written = 0;
  while (written < content.size()) {
    std::size_t chunk = std::min(k_io_chunk, content.size() - written);
    ssize_t n = sftp_write(file, content.data() + written, chunk);
    if (n <= 0) {
      sftp_close(file);
      return sftp_failure("write", path);
    }
    written += static_cast<std::size_t>(n);
  }
  if (sftp_close(file) != SSH_OK) {
    return sftp_failure("close", path);
  }
  return core::ok_status();
}

core::Result<std::string> SshConnection::read_file(const std::string& path, std::size_t max_bytes,
                                                   bool tail) {
  m_handles->last_used = std::chrono::steady_clock::now();
  sftp_file file = sftp_open(m_handles->sftp, path.c_str(), O_RDONLY, 0);
  if (file == nullptr) {
    return sftp_failure("open", path);
  }
  if (tail) {
    sftp_attributes attributes = sftp_fstat(file);
    if (attributes != nullptr) {
      if (attributes->size > max_bytes) {
        sftp_seek64(file, attributes->size - max_bytes);
      }
      sftp_attributes_free(attributes);
    }
  }
  std::string content;
  std::array<char, k_io_chunk> buffer{};
  while (content.size() < max_bytes) {
    ssize_t n = sftp_read(file, buffer.data(), std::min(buffer.size(), max_bytes - content.size()));
    if (n < 0) {
      sftp_close(file);
      return sftp_failure("read", path);
    }
    if (n == 0) {
      break;
    }
    content.append(buffer.data(), static_cast<std::size_t>(n));
  }
  sftp_close(file);
  return content;
}

core::Result<bool> SshConnection::exists(const std::string& path) {
  m_handles->last_used = std::chrono::steady_clock::now();
  sftp_attributes attributes = sftp_stat(m_handles->sftp, path.c_str());
  if (attributes != nullptr) {
    sftp_attributes_free(attributes);
    return true;
  }
  if (ssh_is_connected(m_handles->session) == 0) {
    return sftp_failure("check", path);
  }
  int code = sftp_get_error(m_handles->sftp);
  if (code == SSH_FX_NO_SUCH_FILE || code == SSH_FX_NO_SUCH_PATH) {
    return false;
  }
  return sftp_failure("check", path);
}

core::Status SshConnection::make_dir(const std::string& path) {
  m_handles->last_used = std::chrono::steady_clock::now();
  if (sftp_mkdir(m_handles->sftp, path.c_str(), 0755) != SSH_OK) {
    return sftp_failure("create folder", path);
  }
  return core::ok_status();
}

core::Status SshConnection::remove_tree(const std::string& path, int max_depth) {
  m_handles->last_used = std::chrono::steady_clock::now();
  if (max_depth <= 0) {
    return core::make_failure(core::FailureKind::io_error, "sftp",
                              m_endpoint.describe() + ": folder tree too deep at " + path);
  }
  sftp_dir dir = sftp_opendir(m_handles->sftp, path.c_str());
  if (dir == nullptr) {
    return sftp_failure("list", path);
  }
  std::vector<std::pair<std::string, bool>> entries;  // (name, is folder)
  while (sftp_attributes entry = sftp_readdir(m_handles->sftp, dir)) {
    std::string name = entry->name != nullptr ? entry->name : "";
    if (name != "." && name != "..") {
      entries.emplace_back(name, entry->type == SSH_FILEXFER_TYPE_DIRECTORY);
    }
    sftp_attributes_free(entry);
  }
  sftp_closedir(dir);
  for (const auto& [name, is_dir] : entries) {
    std::string child = path + "/" + name;
    if (is_dir) {
      if (auto removed = remove_tree(child, max_depth - 1); !removed.ok()) {
        return removed;
      }
    } else if (sftp_unlink(m_handles->sftp, child.c_str()) != SSH_OK) {
      return sftp_failure("delete", child);
    }
  }
  if (sftp_rmdir(m_handles->sftp, path.c_str()) != SSH_OK) {
    return sftp_failure("delete folder", path);
  }
  return core::ok_status();
}

core::Status SshConnection::rename(const std::string& from, const std::string& to) {
  m_handles->last_used = std::chrono::steady_clock::now();
  if (sftp_rename(m_handles->sftp, from.c_str(), to.c_str()) != SSH_OK) {
    return sftp_failure("rename " + from + " to", to);
  }
  return core::ok_status();
}

}  // namespace autocomp::backends
