#pragma once

#include "server/tool.hpp"

namespace autocomp::server {

// The tools, resources and prompts that the MCP conformance suite's server scenarios call
// (`autocomp-mcp --conformance-fixtures`): test_simple_text, test_tool_with_progress,
// test://static-text, test_prompt_with_arguments, ...
void register_conformance_fixtures(Registries& registries);

}  // namespace autocomp::server
