#include "backends/cacheable.hpp"

#include <gtest/gtest.h>

namespace autocomp::backends {
namespace {

EvalResult failed_with(core::FailureKind kind) {
  EvalResult result;
  result.failure = core::make_failure(kind, "verify", "x");
  return result;
}

TEST(Cacheable, SuccessesAndFailuresOfTheKernelAreAnswersOthersAreNot) {
  EXPECT_TRUE(cacheable(EvalResult{}));
  for (auto kind : {core::FailureKind::compile_error, core::FailureKind::runtime_error,
                    core::FailureKind::mismatch, core::FailureKind::problem_error,
                    core::FailureKind::forbidden_access, core::FailureKind::implausible}) {
    EXPECT_TRUE(cacheable(failed_with(kind))) << core::to_string(kind);
  }
  for (auto kind : {core::FailureKind::timeout, core::FailureKind::transport_error,
                    core::FailureKind::harness_error, core::FailureKind::unavailable,
                    core::FailureKind::cancelled, core::FailureKind::internal}) {
    EXPECT_FALSE(cacheable(failed_with(kind))) << core::to_string(kind);
  }
}

}  // namespace
}  // namespace autocomp::backends
