#pragma once

#include <chrono>
#include <cstddef>
#include <memory>
#include <string>
#include <utility>
#include <vector>

#include "core/cancel.hpp"
#include "core/clock.hpp"
#include "core/result.hpp"

namespace autocomp::core {

// A child process to run: argv[0] is looked up on PATH when it has no slash. No shell is involved.
struct ProcessSpec {
  std::vector<std::string> argv;
  // Added to (or replacing entries of) the base environment: this process's whole environment,
  // or with `minimal_environment` only what core::harness_environment() allows.
  std::vector<std::pair<std::string, std::string>> env;
  bool minimal_environment = false;
  // Runs the child behind a supervisor, for untrusted code (kernels). The supervisor starts a new
  // session and, where the system allows (unprivileged user namespaces, or root), new user and
  // PID namespaces: the child then cannot name, signal or trace this process, and every process
  // it starts is killed when it ends (setsid() and double forks included). Without namespaces the
  // supervisor is a child subreaper that kills every leftover descendant. Each process has a
  // parent-death signal, so killing this process (even with SIGKILL) takes the whole tree down.
  // Requires the calling thread to stay alive until run_process returns (it does: it waits).
  // A timeout or cancel kills the tree at once (no SIGTERM grace); `kill_grace` bounds the wait
  // for the supervisor to finish. Also makes this process non-dumpable (see protect_this_process).
  bool isolate = false;
  // With `isolate`: a folder the supervisor deletes if this process dies while the child runs
  // (the work folder of an evaluation, which this process would otherwise remove itself).
  std::string remove_if_abandoned;
  std::string cwd;         // empty: inherit
  std::string stdin_text;  // written to the child's stdin, which is then closed
  // Wall-clock limit; zero means none. On expiry the child's whole process group gets SIGTERM,
  // then SIGKILL after `kill_grace`.
  std::chrono::milliseconds timeout{0};
  std::chrono::milliseconds kill_grace{500};
  // The clock the timeout, the kill grace and `wall_ms` are measured on; null: the steady clock.
  // With a ManualClock the waits cost no real time, so a child that never ends is killed at its
  // timeout at once (only the child's own progress stays real).
  std::shared_ptr<const Clock> clock;
  // Each stream keeps at most this many bytes (the first ones); the rest is read and dropped so
  // that the child never blocks on a full pipe.
  std::size_t max_output_bytes = std::size_t{64} << 20;
};

struct ProcessResult {
  bool exited = false;  // ended by exit(); `exit_code` is valid
  int exit_code = -1;
  int signal = 0;  // the signal that ended it, when not `exited`
  bool timed_out = false;
  bool cancelled = false;
  double wall_ms = 0;
  std::string stdout_text;
  std::string stderr_text;
  bool output_truncated = false;

  bool succeeded() const { return exited && exit_code == 0 && !timed_out && !cancelled; }
  // "exit code 3", "signal 9 (Killed)", "timed out after 1000 ms", "cancelled".
  std::string describe_end() const;
};

// Runs the child in its own process group and waits for it, polling `cancel` while waiting. A
// timeout or cancellation kills the whole group and reaps the child; the group is also killed if
// the child exits while descendants still hold its output pipes. Returns a failure (io_error)
// only when the child could not be started (missing program, bad cwd, no resources); everything
// that happens after the start is described in the ProcessResult. Safe to call from many threads.
Result<ProcessResult> run_process(const ProcessSpec& spec, const CancelToken& cancel = {});

// Makes this process non-dumpable (prctl PR_SET_DUMPABLE 0): processes of the same user, such as
// kernels, can then neither ptrace it nor read its memory through /proc/<pid>/mem, and it writes
// no core files. Idempotent; run_process calls it for isolated children.
void protect_this_process();

// How isolated children are confined on this machine: "namespaces" (user+PID namespaces),
// "pid-namespace" (root without user namespaces), or "subreaper" (neither available). Probed once;
// AUTOCOMP_ISOLATION=subreaper or =pid-namespace in the environment asks for a weaker mode.
std::string isolation_mode();

// The last `max_bytes` of `text`, starting at a line boundary when one is near (for error
// messages that quote a traceback).
std::string tail_text(const std::string& text, std::size_t max_bytes);

}  // namespace autocomp::core
