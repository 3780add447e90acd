#include "tools/tool_surface.hpp"

namespace autocomp::tools {

using nlohmann::json;

json hints(bool read_only, bool destructive, bool idempotent, bool open_world) {
  return {{"readOnlyHint", read_only},
          {"destructiveHint", destructive},
          {"idempotentHint", idempotent},
          {"openWorldHint", open_world}};
}

json object_schema(const std::vector<std::pair<std::string, std::string>>& properties,
                   const std::vector<std::string>& required) {
  json props = json::object();
  for (const auto& [name, type] : properties) {
    if (const auto bar = type.find('|'); bar != std::string::npos) {
      props[name] = {{"type", json::array({type.substr(0, bar), type.substr(bar + 1)})}};
    } else {
      props[name] = {{"type", type}};
    }
  }
  json out = {{"type", "object"}, {"properties", std::move(props)}};
  if (!required.empty()) {
    out["required"] = required;
  }
  return out;
}

json resource_link(const std::string& uri, const std::string& name, const std::string& mime_type) {
  return {{"type", "resource_link"}, {"uri", uri}, {"name", name}, {"mimeType", mime_type}};
}

json evaluation_link(long long evaluation_id) {
  const std::string id = std::to_string(evaluation_id);
  return resource_link("autocomp://evaluations/" + id, "evaluation " + id, "application/json");
}

json run_link(const std::string& run_id) {
  return resource_link("autocomp://runs/" + run_id, "search run " + run_id, "application/json");
}

}  // namespace autocomp::tools
