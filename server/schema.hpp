#pragma once

// A small JSON-Schema (2020-12 subset) validator for tool arguments. Supported keywords: type
// (string or list; "integer" accepts integral numbers within 32 bits, or within 64 bits on a side
// where minimum/maximum is declared), enum, const, required, properties,
// additionalProperties (bool or schema), minimum, maximum, exclusiveMinimum, exclusiveMaximum,
// minLength, maxLength (in code points), items (schema), minItems, maxItems, uniqueItems, anyOf,
// oneOf, allOf, not, if/then/else. Other keywords ($ref, format, description, default, $schema,
// ...) are ignored.

#include <nlohmann/json.hpp>
#include <optional>
#include <string>

namespace autocomp::server {

// nullopt when `value` conforms; otherwise a message naming the first bad field by its path, e.g.
// "arguments.kernel_path: expected string, got integer" or "arguments: missing required field
// 'problem_path'".
std::optional<std::string> validate_schema(const nlohmann::json& schema,
                                           const nlohmann::json& value,
                                           const std::string& path = "arguments");

// The path of the first string inside `value` that holds a NUL character (which would cut a
// path or spec short where it reaches the system), or nullopt.
std::optional<std::string> find_nul_character(const nlohmann::json& value,
                                              const std::string& path = "arguments");

}  // namespace autocomp::server
