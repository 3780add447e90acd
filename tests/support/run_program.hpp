#pragma once

#include <chrono>
#include <string>
#include <utility>
#include <vector>

#include "core/process.hpp"

namespace autocomp::testing {

// Runs a program (the product's binary, a helper script) with this process's environment through
// the product's process runner, waits for it, and returns (exit status, stdout); the status is
// -1 when it could not start or did not exit by itself. `with_stderr` appends stderr to the text.
inline std::pair<int, std::string> run_program(
    const std::vector<std::string>& argv, bool with_stderr = false,
    std::chrono::milliseconds timeout = std::chrono::minutes(15)) {
  core::ProcessSpec spec;
  spec.argv = argv;
  spec.timeout = timeout;
  auto result = core::run_process(spec);
  if (!result.ok()) {
    return {-1, result.failure().describe()};
  }
  const auto& ended = result.value();
  std::string text = ended.stdout_text + (with_stderr ? ended.stderr_text : std::string());
  return {ended.exited && !ended.timed_out ? ended.exit_code : -1, std::move(text)};
}

}  // namespace autocomp::testing
