#pragma once

// The one rule for which evaluation results may answer a later, equal request (the evaluation
// cache of the store, the search engine and the tools all follow it).

#include "backends/backend.hpp"
#include "core/failure.hpp"

namespace autocomp::backends {

// Failures that are a property of the kernel or the problem and recur on every re-run:
// compile_error, runtime_error, mismatch, problem_error, forbidden_access (refused by the
// sandbox before it is timed) and implausible (below the problem's physical floor). Timeouts,
// transport, harness, unavailable, cancelled and internal failures are about the run, not the
// kernel.
bool is_deterministic_failure(core::FailureKind kind);

// Whether `result` may be served again for an equal request: successes and deterministic failures.
bool cacheable(const EvalResult& result);

}  // namespace autocomp::backends
