#pragma once

#include <memory>

#include "server/tool.hpp"
#include "tools/tool_env.hpp"

namespace autocomp::tools {

server::ToolDef make_list_lessons_tool(std::shared_ptr<ToolEnv> env);
server::ToolDef make_clear_lessons_tool(std::shared_ptr<ToolEnv> env);

}  // namespace autocomp::tools
