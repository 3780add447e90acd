#pragma once

#include <optional>
#include <string>
#include <string_view>

namespace autocomp::core {

// What went wrong at a stage boundary. The first nine kinds are the harness protocol's
// (backends/harness/PROTOCOL.md); the rest arise on the C++ side.
enum class FailureKind {
  compile_error,
  runtime_error,
  mismatch,
  timeout,
  problem_error,
  unavailable,
  harness_error,
  forbidden_access,  // the kernel reached outside the NKI API (simulator internals, files, ...)
  implausible,       // a latency below the physical floor of the problem
  invalid_argument,
  io_error,
  transport_error,
  cancelled,
  budget_exhausted,
  internal,
};

std::string_view to_string(FailureKind kind);
// Unknown names map to nullopt; callers decide whether that is a harness_error.
std::optional<FailureKind> failure_kind_from_string(std::string_view name);

// A failure as a value: what kind, at which stage ("verify", "connect", "plan", ...), a message a
// person can act on, and the kernel source line when known.
struct Failure {
  FailureKind kind = FailureKind::internal;
  std::string stage;
  std::string message;
  std::optional<int> line;

  std::string describe() const;  // "compile_error at verify (line 12): message"
};

}  // namespace autocomp::core
