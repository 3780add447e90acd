#pragma once

#include <chrono>
#include <memory>
#include <mutex>
#include <string>

#include "backends/ssh_connection.hpp"
#include "core/cancel.hpp"
#include "core/result.hpp"

namespace autocomp::backends {

// The machine where Slurm's commands run (a login or head node) and whose filesystem the compute
// nodes share: this machine, or a remote one over SSH. Commands go through a POSIX shell; their
// stderr is merged into stdout. Thread-safe.
class SlurmHead {
 public:
  virtual ~SlurmHead() = default;

  // "localhost" or "user@host:port".
  virtual std::string label() const = 0;
  virtual core::Result<ExecOutput> run(const std::string& command,
                                       std::chrono::milliseconds timeout,
                                       const core::CancelToken& cancel) = 0;
  virtual core::Status write_file(const std::string& path, const std::string& content) = 0;
  virtual core::Result<std::string> read_file(const std::string& path, std::size_t max_bytes,
                                              bool tail) = 0;
  virtual core::Status make_dirs(const std::string& path) = 0;
  virtual core::Result<bool> exists(const std::string& path) = 0;
  virtual core::Status rename(const std::string& from, const std::string& to) = 0;
  virtual core::Result<std::string> home() = 0;
};

std::unique_ptr<SlurmHead> make_local_head();
std::unique_ptr<SlurmHead> make_ssh_head(SshEndpoint endpoint);

}  // namespace autocomp::backends
