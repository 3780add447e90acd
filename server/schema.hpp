#pragma once

// A small JSON-Schema (2020-12 subset) validator for tool arguments. Supported keywords: type
// (string or list; "integer" accepts integral numbers), enum, const, required, properties,
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

}  // namespace autocomp::server
