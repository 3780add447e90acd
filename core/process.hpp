#pragma once

#include <chrono>
#include <cstddef>
#include <string>
#include <utility>
#include <vector>

#include "core/cancel.hpp"
#include "core/result.hpp"

namespace autocomp::core {

// A child process to run: argv[0] is looked up on PATH when it has no slash. No shell is involved.
struct ProcessSpec {
  std::vector<std::string> argv;
  // Added to (or replacing entries of) this process's environment.
  std::vector<std::pair<std::string, std::string>> env;
  std::string cwd;         // empty: inherit
  std::string stdin_text;  // written to the child's stdin, which is then closed
  // Wall-clock limit; zero means none. On expiry the child's whole process group gets SIGTERM,
  // then SIGKILL after `kill_grace`.
  std::chrono::milliseconds timeout{0};
  std::chrono::milliseconds kill_grace{500};
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

// The last `max_bytes` of `text`, starting at a line boundary when one is near (for error
// messages that quote a traceback).
std::string tail_text(const std::string& text, std::size_t max_bytes);

}  // namespace autocomp::core
