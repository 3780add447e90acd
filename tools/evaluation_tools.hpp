#pragma once

#include <memory>

#include "server/tool.hpp"
#include "tools/tool_env.hpp"

namespace autocomp::tools {

// A working kernel slower than this multiple of the best recorded version of its file has
// diverged: the tools say so and suggest revert_to_best.
inline constexpr double k_divergence_ratio = 1.5;

server::ToolDef make_verify_kernel_tool(std::shared_ptr<ToolEnv> env);
server::ToolDef make_benchmark_kernel_tool(std::shared_ptr<ToolEnv> env);
server::ToolDef make_profile_kernel_tool(std::shared_ptr<ToolEnv> env);
server::ToolDef make_revert_to_best_tool(std::shared_ptr<ToolEnv> env);

}  // namespace autocomp::tools
