#pragma once

#include <stdexcept>
#include <utility>
#include <variant>

#include "core/failure.hpp"

namespace autocomp::core {

// A value or a Failure. Accessing the wrong side is a programmer error and throws.
template <class T>
class [[nodiscard]] Result {
 public:
  Result(T value) : m_state(std::move(value)) {}            // NOLINT(google-explicit-constructor)
  Result(Failure failure) : m_state(std::move(failure)) {}  // NOLINT(google-explicit-constructor)

  bool ok() const { return std::holds_alternative<T>(m_state); }
  explicit operator bool() const { return ok(); }

  T& value() & { return checked_value(); }
  const T& value() const& {
    if (!ok()) {
      throw std::logic_error("Result::value() on a failure: " + failure().describe());
    }
    return std::get<T>(m_state);
  }
  T&& value() && { return std::move(checked_value()); }

  const Failure& failure() const {
    if (ok()) {
      throw std::logic_error("Result::failure() on a value");
    }
    return std::get<Failure>(m_state);
  }

  T* operator->() { return &checked_value(); }
  const T* operator->() const { return &value(); }
  T& operator*() { return checked_value(); }
  const T& operator*() const { return value(); }

 private:
  T& checked_value() {
    if (!ok()) {
      throw std::logic_error("Result::value() on a failure: " + failure().describe());
    }
    return std::get<T>(m_state);
  }

  std::variant<T, Failure> m_state;
};

// For stages that produce nothing but may fail.
struct Unit {};
using Status = Result<Unit>;
inline Status ok_status() {
  return Unit{};
}

inline Failure make_failure(FailureKind kind, std::string stage, std::string message) {
  return Failure{kind, std::move(stage), std::move(message), std::nullopt};
}

}  // namespace autocomp::core
