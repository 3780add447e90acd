#include "backends/cacheable.hpp"

namespace autocomp::backends {

bool is_deterministic_failure(core::FailureKind kind) {
  switch (kind) {
    case core::FailureKind::compile_error:
    case core::FailureKind::runtime_error:
    case core::FailureKind::mismatch:
    case core::FailureKind::problem_error:
    case core::FailureKind::forbidden_access:
    case core::FailureKind::implausible:
      return true;
    default:
      return false;
  }
}

bool cacheable(const EvalResult& result) {
  return !result.failure.has_value() || is_deterministic_failure(result.failure->kind);
}

}  // namespace autocomp::backends
