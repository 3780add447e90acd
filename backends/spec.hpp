#pragma once

#include <map>
#include <optional>
#include <string>
#include <string_view>
#include <vector>

#include "core/result.hpp"

namespace autocomp::backends {

// The most evaluation slots one backend spec may ask for ("slots=N"). Slot counts are added to
// each other (reserved interactive slots, several hosts), so an unbounded one would overflow.
constexpr int k_max_slots = 1024;

// One parsed backend spec: "sim", "local?device=fake&slots=4",
// "ssh://user@host:2222?device=sim&slots=2". Query values are percent-decoded.
struct BackendSpec {
  std::string text;    // as given
  std::string scheme;  // "sim", "local", "ssh", ...
  std::string user;    // empty when not given
  std::string host;    // empty for local schemes
  int port = 0;        // 0 when not given
  std::map<std::string, std::string> params;
  std::string origin;  // "FILE:LINE" when the spec came from a hosts file; prefixes its errors

  std::optional<std::string> param(const std::string& name) const;
  // The parameter as a positive integer; a failure names the spec when it is not one, or when
  // it is "slots" above k_max_slots.
  core::Result<std::optional<int>> int_param(const std::string& name) const;
  bool flag(const std::string& name) const;  // "1", "true", "yes" (case-sensitive)
};

// Parses one spec. Fails (invalid_argument) on an empty text, a bad port or a malformed query.
core::Result<BackendSpec> parse_spec(std::string_view text);

// Splits "a,b, c" into trimmed, non-empty specs.
std::vector<std::string> split_specs(std::string_view text);

// "~" and "~/rest" become $HOME and $HOME/rest; any other path (and any path when HOME is unset
// or empty) is returned unchanged. "~user" is not expanded.
std::string expand_home(std::string_view path);

}  // namespace autocomp::backends
