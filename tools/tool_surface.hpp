#pragma once

#include <nlohmann/json.hpp>
#include <string>
#include <utility>
#include <vector>

// Small helpers that keep every tool's listing complete and short (tools/list is read by the
// client's model before any work starts).
namespace autocomp::tools {

// The four MCP annotation hints, every one stated.
nlohmann::json hints(bool read_only, bool destructive, bool idempotent, bool open_world);

// An object output schema from (property, JSON type) pairs; `required` names properties that
// every successful result carries. A type may be a list written "string|null".
nlohmann::json object_schema(const std::vector<std::pair<std::string, std::string>>& properties,
                             const std::vector<std::string>& required);

// A resource_link content block for a result (the client may read `uri` with resources/read).
nlohmann::json resource_link(const std::string& uri, const std::string& name,
                             const std::string& mime_type);

// The resource_link of a stored evaluation (autocomp://evaluations/{id}) and of a search run.
nlohmann::json evaluation_link(long long evaluation_id);
nlohmann::json run_link(const std::string& run_id);

}  // namespace autocomp::tools
