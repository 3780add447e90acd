#include "server/schema.hpp"

#include <algorithm>
#include <cmath>
#include <set>

namespace autocomp::server {

namespace {

std::string type_name(const nlohmann::json& value) {
  switch (value.type()) {
    case nlohmann::json::value_t::null:
      return "null";
    case nlohmann::json::value_t::boolean:
      return "boolean";
    case nlohmann::json::value_t::number_integer:
    case nlohmann::json::value_t::number_unsigned:
      return "integer";
    case nlohmann::json::value_t::number_float:
      return "number";
    case nlohmann::json::value_t::string:
      return "string";
    case nlohmann::json::value_t::array:
      return "array";
    case nlohmann::json::value_t::object:
      return "object";
    default:
      return "unknown";
  }
}

bool has_type(const nlohmann::json& value, const std::string& type) {
  if (type == "object") {
    return value.is_object();
  }
  if (type == "array") {
    return value.is_array();
  }
  if (type == "string") {
    return value.is_string();
  }
  if (type == "boolean") {
    return value.is_boolean();
  }
  if (type == "null") {
    return value.is_null();
  }
  if (type == "number") {
    return value.is_number();
  }
  if (type == "integer") {
    if (value.is_number_integer()) {
      return true;
    }
    if (value.is_number_float()) {
      const double d = value.get<double>();
      return std::isfinite(d) && std::floor(d) == d;
    }
    return false;
  }
  return true;  // unknown type names do not reject
}

bool schema_says_integer(const nlohmann::json& schema) {
  auto it = schema.find("type");
  if (it == schema.end()) {
    return false;
  }
  if (it->is_string()) {
    return it->get_ref<const std::string&>() == "integer";
  }
  if (it->is_array()) {
    return std::find(it->begin(), it->end(), nlohmann::json("integer")) != it->end() &&
           std::find(it->begin(), it->end(), nlohmann::json("number")) == it->end();
  }
  return false;
}

std::size_t code_points(const std::string& text) {
  std::size_t count = 0;
  for (unsigned char c : text) {
    if ((c & 0xC0u) != 0x80u) {
      ++count;
    }
  }
  return count;
}

std::string short_json(const nlohmann::json& value) {
  std::string text = value.dump(-1, ' ', false, nlohmann::json::error_handler_t::replace);
  if (text.size() > 60) {
    text = text.substr(0, 57) + "...";
  }
  return text;
}

std::string number_text(double d) {
  nlohmann::json j = d;
  if (std::floor(d) == d && std::fabs(d) < 1e15) {
    j = static_cast<long long>(d);
  }
  return j.dump();
}

std::optional<std::string> validate_at(const nlohmann::json& schema, const nlohmann::json& value,
                                       const std::string& path, int depth) {
  if (depth > 64) {
    return path + ": schema nesting too deep";
  }
  if (schema.is_boolean()) {
    if (!schema.get<bool>()) {
      return path + ": no value is allowed here";
    }
    return std::nullopt;
  }
  if (!schema.is_object()) {
    return std::nullopt;
  }
  if (auto it = schema.find("type"); it != schema.end()) {
    bool ok = false;
    std::string expected;
    if (it->is_string()) {
      ok = has_type(value, it->get<std::string>());
      expected = it->get<std::string>();
    } else if (it->is_array()) {
      for (const auto& type : *it) {
        if (type.is_string()) {
          ok = ok || has_type(value, type.get<std::string>());
          expected += (expected.empty() ? "" : " or ") + type.get<std::string>();
        }
      }
    } else {
      ok = true;
    }
    if (!ok) {
      return path + ": expected " + expected + ", got " + type_name(value);
    }
  }
  if (auto it = schema.find("const"); it != schema.end() && value != *it) {
    return path + ": must be " + short_json(*it);
  }
  if (auto it = schema.find("enum"); it != schema.end() && it->is_array()) {
    bool found = false;
    for (const auto& option : *it) {
      found = found || option == value;
    }
    if (!found) {
      std::string options;
      for (const auto& option : *it) {
        options += (options.empty() ? "" : ", ") + short_json(option);
      }
      return path + ": must be one of " + options + " (got " + short_json(value) + ")";
    }
  }
  if (value.is_number()) {
    const double d = value.get<double>();
    if (schema_says_integer(schema)) {
      // Integers are used as C++ ints by the tools: without declared bounds they must fit in 32
      // bits, and never beyond 64, so that nothing is silently wrapped.
      const bool has_min = schema.contains("minimum") && schema["minimum"].is_number();
      const bool has_max = schema.contains("maximum") && schema["maximum"].is_number();
      const double low = has_min ? -9223372036854775808.0 : -2147483648.0;
      const double high = has_max ? 9223372036854775807.0 : 2147483647.0;
      if (d < low || d > high) {
        return path + ": integer " + short_json(value) + " is out of range (" + number_text(low) +
               " to " + number_text(high) + ")";
      }
    }
    if (auto it = schema.find("minimum");
        it != schema.end() && it->is_number() && d < it->get<double>()) {
      return path + ": must be >= " + number_text(it->get<double>()) + " (got " +
             short_json(value) + ")";
    }
    if (auto it = schema.find("maximum");
        it != schema.end() && it->is_number() && d > it->get<double>()) {
      return path + ": must be <= " + number_text(it->get<double>()) + " (got " +
             short_json(value) + ")";
    }
    if (auto it = schema.find("exclusiveMinimum");
        it != schema.end() && it->is_number() && d <= it->get<double>()) {
      return path + ": must be > " + number_text(it->get<double>()) + " (got " + short_json(value) +
             ")";
    }
    if (auto it = schema.find("exclusiveMaximum");
        it != schema.end() && it->is_number() && d >= it->get<double>()) {
      return path + ": must be < " + number_text(it->get<double>()) + " (got " + short_json(value) +
             ")";
    }
  }
  if (value.is_string()) {
    const std::size_t length = code_points(value.get_ref<const std::string&>());
    if (auto it = schema.find("minLength");
        it != schema.end() && it->is_number() && static_cast<double>(length) < it->get<double>()) {
      return path + ": must be at least " + number_text(it->get<double>()) + " characters long";
    }
    if (auto it = schema.find("maxLength");
        it != schema.end() && it->is_number() && static_cast<double>(length) > it->get<double>()) {
      return path + ": must be at most " + number_text(it->get<double>()) + " characters long";
    }
  }
  if (value.is_array()) {
    if (auto it = schema.find("minItems"); it != schema.end() && it->is_number() &&
                                           static_cast<double>(value.size()) < it->get<double>()) {
      return path + ": must have at least " + number_text(it->get<double>()) + " items";
    }
    if (auto it = schema.find("maxItems"); it != schema.end() && it->is_number() &&
                                           static_cast<double>(value.size()) > it->get<double>()) {
      return path + ": must have at most " + number_text(it->get<double>()) + " items";
    }
    if (auto it = schema.find("uniqueItems"); it != schema.end() && it->is_boolean() && *it) {
      std::set<nlohmann::json> seen;
      for (const auto& item : value) {
        if (!seen.insert(item).second) {
          return path + ": items must be unique (" + short_json(item) + " repeats)";
        }
      }
    }
    if (auto it = schema.find("items");
        it != schema.end() && (it->is_object() || it->is_boolean())) {
      for (std::size_t i = 0; i < value.size(); ++i) {
        if (auto error =
                validate_at(*it, value[i], path + "[" + std::to_string(i) + "]", depth + 1)) {
          return error;
        }
      }
    }
  }
  if (value.is_object()) {
    if (auto it = schema.find("required"); it != schema.end() && it->is_array()) {
      for (const auto& name : *it) {
        if (name.is_string() && !value.contains(name.get<std::string>())) {
          return path + ": missing required field '" + name.get<std::string>() + "'";
        }
      }
    }
    const auto properties = schema.find("properties");
    const bool has_properties = properties != schema.end() && properties->is_object();
    const auto additional = schema.find("additionalProperties");
    for (const auto& [key, item] : value.items()) {
      const std::string item_path = path + "." + key;
      if (has_properties) {
        if (auto property = properties->find(key); property != properties->end()) {
          if (auto error = validate_at(*property, item, item_path, depth + 1)) {
            return error;
          }
          continue;
        }
      }
      if (additional != schema.end()) {
        if (additional->is_boolean() && !additional->get<bool>()) {
          std::string known;
          if (has_properties) {
            for (const auto& [name, unused] : properties->items()) {
              known += (known.empty() ? "" : ", ") + name;
            }
          }
          return item_path + ": unknown field" +
                 (known.empty() ? std::string(" (no fields are accepted)")
                                : " (accepted: " + known + ")");
        }
        if (additional->is_object()) {
          if (auto error = validate_at(*additional, item, item_path, depth + 1)) {
            return error;
          }
        }
      }
    }
  }
  if (auto it = schema.find("allOf"); it != schema.end() && it->is_array()) {
    for (const auto& sub : *it) {
      if (auto error = validate_at(sub, value, path, depth + 1)) {
        return error;
      }
    }
  }
  if (auto it = schema.find("anyOf"); it != schema.end() && it->is_array() && !it->empty()) {
    std::optional<std::string> first;
    bool any = false;
    for (const auto& sub : *it) {
      auto error = validate_at(sub, value, path, depth + 1);
      if (!error) {
        any = true;
        break;
      }
      if (!first) {
        first = error;
      }
    }
    if (!any) {
      return *first;
    }
  }
  if (auto it = schema.find("oneOf"); it != schema.end() && it->is_array() && !it->empty()) {
    int matches = 0;
    std::optional<std::string> first;
    for (const auto& sub : *it) {
      auto error = validate_at(sub, value, path, depth + 1);
      if (!error) {
        ++matches;
      } else if (!first) {
        first = error;
      }
    }
    if (matches == 0) {
      return *first;
    }
    if (matches > 1) {
      return path + ": matches more than one of the allowed forms";
    }
  }
  if (auto it = schema.find("if"); it != schema.end()) {
    const bool holds = !validate_at(*it, value, path, depth + 1);
    const auto branch = schema.find(holds ? "then" : "else");
    if (branch != schema.end()) {
      if (auto error = validate_at(*branch, value, path, depth + 1)) {
        return error;
      }
    }
  }
  if (auto it = schema.find("not"); it != schema.end()) {
    if (!validate_at(*it, value, path, depth + 1)) {
      return path + ": has a form that is not allowed";
    }
  }
  return std::nullopt;
}

}  // namespace

std::optional<std::string> find_nul_character(const nlohmann::json& value,
                                              const std::string& path) {
  if (value.is_string()) {
    if (value.get_ref<const std::string&>().find('\0') != std::string::npos) {
      return path;
    }
  } else if (value.is_array()) {
    for (std::size_t i = 0; i < value.size(); ++i) {
      if (auto found = find_nul_character(value[i], path + "[" + std::to_string(i) + "]")) {
        return found;
      }
    }
  } else if (value.is_object()) {
    for (const auto& [key, item] : value.items()) {
      if (auto found = find_nul_character(item, path + "." + key)) {
        return found;
      }
    }
  }
  return std::nullopt;
}

std::optional<std::string> validate_schema(const nlohmann::json& schema,
                                           const nlohmann::json& value, const std::string& path) {
  return validate_at(schema, value, path, 0);
}

}  // namespace autocomp::server
