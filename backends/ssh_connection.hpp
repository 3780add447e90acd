#pragma once

#include <chrono>
#include <cstddef>
#include <memory>
#include <string>
#include <vector>

#include "core/cancel.hpp"
#include "core/result.hpp"

namespace autocomp::backends {

// Where and how to log in. Empty fields take the defaults documented on SshConnection::open.
struct SshEndpoint {
  std::string host;
  int port = 22;
  std::string user;                    // empty: the local user (or ~/.ssh/config)
  std::vector<std::string> key_files;  // empty: ~/.ssh/id_ed25519, id_ecdsa, id_rsa that exist
  std::string known_hosts;             // empty: ~/.ssh/known_hosts
  bool accept_new_host_key = false;    // record an unknown (never a changed) host key
  bool use_agent = true;               // try ssh-agent first when SSH_AUTH_SOCK is set
  std::chrono::milliseconds timeout{std::chrono::seconds(20)};  // connect and each blocking call

  std::string describe() const;  // "user@host:port"
};

struct ExecOutput {
  int exit_status = -1;  // -1 when the remote reported none (killed by a signal, dropped)
  std::string stdout_text;
  std::string stderr_text;
};

// One authenticated SSH session with its SFTP subsystem. Not thread-safe: one owner at a time.
// Every method returns failures as values: transport_error when the session broke (the owner
// should drop it), io_error for a remote file problem on a working session, timeout when the
// step's deadline passed, cancelled when the token fired.
class SshConnection {
 public:
  ~SshConnection();
  SshConnection(const SshConnection&) = delete;
  SshConnection& operator=(const SshConnection&) = delete;

  // Connects, verifies the host key against known_hosts (an unknown or changed key is refused
  // with its SHA256 fingerprint unless accept_new_host_key records an unknown one), then
  // authenticates with ssh-agent and the key files. Stage "connect".
  static core::Result<std::unique_ptr<SshConnection>> open(const SshEndpoint& endpoint);

  // Runs `command` through the remote user's shell and collects its output (each stream at most
  // `max_output` bytes). On deadline or cancel the channel is closed and a failure returned; the
  // remote process is the caller's to kill.
  core::Result<ExecOutput> exec(const std::string& command, std::chrono::milliseconds timeout,
                                const core::CancelToken& cancel,
                                std::size_t max_output = std::size_t{4} << 20);

  // Like exec, but runs `command` (in a subshell, stdin from /dev/null, stderr merged into
  // stdout) through one `sh` kept running on its own channel, so the login shell's start-up files
  // run once per session instead of once per command. The shell is started on first use; a
  // deadline, cancel or transport failure closes it (the next call starts a new one).
  core::Result<ExecOutput> run_in_shell(const std::string& command,
                                        std::chrono::milliseconds timeout,
                                        const core::CancelToken& cancel,
                                        std::size_t max_output = std::size_t{4} << 20);

  // The remote home folder as an absolute path.
  core::Result<std::string> home();
  core::Status make_dirs(const std::string& path);  // like mkdir -p
  core::Status write_file(const std::string& path, const std::string& content, int mode = 0644);
  // At most `max_bytes` from the end of the file when `tail` is set, else from its start.
  core::Result<std::string> read_file(const std::string& path, std::size_t max_bytes,
                                      bool tail = false);
  core::Result<bool> exists(const std::string& path);
  core::Status rename(const std::string& from, const std::string& to);
  // Creates one folder whose parent exists.
  core::Status make_dir(const std::string& path);
  // Deletes a folder and everything in it over SFTP (no remote process); gives up below
  // `max_depth` levels.
  core::Status remove_tree(const std::string& path, int max_depth = 8);

  // Whether the session still works: sends an ignore message after an idle period.
  bool alive();
  const SshEndpoint& endpoint() const { return m_endpoint; }

 private:
  struct Handles;
  explicit SshConnection(SshEndpoint endpoint);
  core::Failure sftp_failure(const std::string& what, const std::string& path) const;

  SshEndpoint m_endpoint;
  std::unique_ptr<Handles> m_handles;
};

// Single-quotes `text` for a POSIX shell.
std::string shell_quote(const std::string& text);

}  // namespace autocomp::backends
