#include "search/prompts/facts.hpp"

#include <cstdio>
#include <nlohmann/json.hpp>

namespace autocomp::search::prompts {

namespace {

using nlohmann::json;

std::string format_value(const json& value) {
  if (value.is_boolean()) {
    return value.get<bool>() ? "yes" : "no";
  }
  if (value.is_number()) {
    char buffer[64];
    std::snprintf(buffer, sizeof(buffer), "%g", value.get<double>());
    return buffer;
  }
  if (value.is_string()) {
    return value.get<std::string>();
  }
  return value.dump();
}

// Nested objects become "outer_inner" names.
void flatten(const json& object, const std::string& prefix,
             std::map<std::string, std::string>& out) {
  for (const auto& [name, value] : object.items()) {
    const std::string key = prefix.empty() ? name : prefix + "_" + name;
    if (value.is_object()) {
      flatten(value, key, out);
    } else {
      out[key] = format_value(value);
    }
  }
}

}  // namespace

core::Result<HardwareFacts> HardwareFacts::parse(std::string_view json_text,
                                                 std::string_view origin) {
  const json root = json::parse(json_text, nullptr, false);
  if (root.is_discarded() || !root.is_object()) {
    return core::make_failure(core::FailureKind::invalid_argument, "prompts",
                              std::string(origin) + " is not a JSON object");
  }
  HardwareFacts facts;
  if (auto targets = root.find("targets"); targets != root.end() && targets->is_object()) {
    for (const auto& [name, value] : targets->items()) {
      if (value.is_object()) {
        flatten(value, "", facts.m_targets[name]);
      }
    }
  }
  for (const char* shared : {"limits", "names"}) {
    if (auto found = root.find(shared); found != root.end() && found->is_object()) {
      flatten(*found, "", facts.m_limits);
    }
  }
  if (auto instructions = root.find("instructions");
      instructions != root.end() && instructions->is_object()) {
    for (const auto& [name, value] : instructions->items()) {
      if (!value.is_object()) {
        continue;
      }
      InstructionFact fact;
      fact.signature = value.value("signature", "");
      fact.legacy_signature = value.value("legacy_signature", "");
      fact.summary = value.value("summary", "");
      fact.engine = value.value("engine", "");
      facts.m_instructions[name] = std::move(fact);
    }
  }
  if (facts.m_targets.empty()) {
    return core::make_failure(core::FailureKind::invalid_argument, "prompts",
                              std::string(origin) + " has no targets");
  }
  return facts;
}

core::Result<HardwareFacts> HardwareFacts::load(const PromptLibrary& library) {
  auto text = library.read(std::string(k_file));
  if (!text.ok()) {
    return text.failure();
  }
  return parse(text.value(), library.dir() + "/" + std::string(k_file));
}

core::Result<std::map<std::string, std::string>> HardwareFacts::values(
    const std::string& target) const {
  auto it = m_targets.find(target);
  if (it == m_targets.end()) {
    return core::make_failure(core::FailureKind::invalid_argument, "prompts",
                              "no hardware facts for target '" + target + "'");
  }
  auto out = m_limits;
  for (const auto& [name, value] : it->second) {
    out[name] = value;
  }
  return out;
}

const InstructionFact* HardwareFacts::instruction(const std::string& name) const {
  auto it = m_instructions.find(name);
  return it == m_instructions.end() ? nullptr : &it->second;
}

}  // namespace autocomp::search::prompts
