#include "core/failure.hpp"

#include <array>
#include <utility>

namespace autocomp::core {
namespace {

constexpr std::array<std::pair<FailureKind, std::string_view>, 15> k_failure_names{{
    {FailureKind::compile_error, "compile_error"},
    {FailureKind::runtime_error, "runtime_error"},
    {FailureKind::mismatch, "mismatch"},
    {FailureKind::timeout, "timeout"},
    {FailureKind::problem_error, "problem_error"},
    {FailureKind::unavailable, "unavailable"},
    {FailureKind::harness_error, "harness_error"},
    {FailureKind::forbidden_access, "forbidden_access"},
    {FailureKind::implausible, "implausible"},
    {FailureKind::invalid_argument, "invalid_argument"},
    {FailureKind::io_error, "io_error"},
    {FailureKind::transport_error, "transport_error"},
    {FailureKind::cancelled, "cancelled"},
    {FailureKind::budget_exhausted, "budget_exhausted"},
    {FailureKind::internal, "internal"},
}};

}  // namespace

std::string_view to_string(FailureKind kind) {
  for (const auto& [k, name] : k_failure_names) {
    if (k == kind) {
      return name;
    }
  }
  return "internal";
}

std::optional<FailureKind> failure_kind_from_string(std::string_view name) {
  for (const auto& [k, n] : k_failure_names) {
    if (n == name) {
      return k;
    }
  }
  return std::nullopt;
}

std::string Failure::describe() const {
  std::string text(to_string(kind));
  if (!stage.empty()) {
    text += " at " + stage;
  }
  if (line) {
    text += " (line " + std::to_string(*line) + ")";
  }
  if (!message.empty()) {
    text += ": " + message;
  }
  return text;
}

}  // namespace autocomp::core
