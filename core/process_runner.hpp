#pragma once

// Starting child processes as a seam: code that runs a program (the harness, sbatch, neuron-ls)
// takes a ProcessRunner, so that tests script what the program answers instead of starting one.
// The system runner is core::run_process; tests use a fake (tests/support/fake_process_runner.hpp)
// that records each ProcessSpec and returns the result the test chose.

#include <memory>

#include "core/cancel.hpp"
#include "core/process.hpp"
#include "core/result.hpp"

namespace autocomp::core {

class ProcessRunner {
 public:
  virtual ~ProcessRunner() = default;
  // Runs `spec` to its end, as run_process does: a failure only when it could not start;
  // everything after the start (exit code, signal, timeout, cancel, output) is in the result.
  // Called from many threads at once.
  virtual Result<ProcessResult> run(const ProcessSpec& spec, const CancelToken& cancel) = 0;
};

// Runs real processes (core::run_process). Shared; never null.
std::shared_ptr<ProcessRunner> system_process_runner();

// `runner` when set, else the system runner: for optional runner parameters.
std::shared_ptr<ProcessRunner> runner_or_system(std::shared_ptr<ProcessRunner> runner);

}  // namespace autocomp::core
