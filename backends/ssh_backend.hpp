#pragma once

#include <chrono>
#include <functional>
#include <memory>
#include <string>
#include <vector>

#include "backends/backend.hpp"
#include "backends/spec.hpp"
#include "core/result.hpp"

namespace autocomp::backends {

// A pool of hosts reached over SSH (libssh), one spec per host:
// ssh://[user@]host[:port][?device=neuron|sim|fake&slots=N&target=trn2&key=PATH
//   &known_hosts=PATH&python=PATH&accept_new_host_key=1&remote_dir=PATH&fake_ms=MS
//   &connect_timeout=SECONDS]
// See docs/backends.md for the steps, timeouts and the rotation policy. The rotation policy's
// back-off of hosts out of rotation is measured on options.clock.
core::Result<std::shared_ptr<Backend>> make_ssh_backend(const std::vector<BackendSpec>& specs,
                                                        const BackendOptions& options);

// What a pool knows about one of its hosts (for status displays and tests).
struct SshHostStatus {
  std::string host;  // user@host:port
  bool in_rotation = true;
  std::string reason;                     // why it is out of rotation
  std::chrono::milliseconds retry_in{0};  // out of rotation: until it is tried again
  int slots = 0;
  int evaluations = 0;  // runs that produced a harness result
  int errors = 0;       // connect, authentication and transport failures
  int timeouts = 0;
  int bundle_uploads = 0;
};

// The hosts of an SSH pool; empty for any other backend.
std::vector<SshHostStatus> ssh_pool_status(const Backend& backend);

// Fault seam for tests: called on the evaluating thread at the start of every attempt on a host
// (its label, user@host:port) with the attempt's number on that host (1, 2, ...), before the
// connection is used; a test cuts a host there, at a known point instead of a moment in time.
// Set it before the first evaluate; false for any backend other than an SSH pool.
using SshAttemptHook = std::function<void(const std::string& host, int attempt)>;
bool set_ssh_attempt_hook(Backend& backend, SshAttemptHook hook);

}  // namespace autocomp::backends
