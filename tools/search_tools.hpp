#pragma once

#include <memory>

#include "server/tool.hpp"
#include "tools/tool_env.hpp"

namespace autocomp::tools {

server::ToolDef make_run_beam_search_tool(std::shared_ptr<ToolEnv> env);
server::ToolDef make_get_search_status_tool(std::shared_ptr<ToolEnv> env);
server::ToolDef make_cancel_search_tool(std::shared_ptr<ToolEnv> env);
server::ToolDef make_list_runs_tool(std::shared_ptr<ToolEnv> env);

// autocomp://runs/{id}: the run's status, candidates with lineage and plans, and beams.
core::Result<nlohmann::json> read_run_resource(ToolEnv& env, const std::string& uri,
                                               const std::string& run_id);

}  // namespace autocomp::tools
