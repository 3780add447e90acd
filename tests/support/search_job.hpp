#pragma once

// A small run_beam_search through the tool, waited for to its end: for integration tests that
// check what a search started from a tool call ran on and how it ended.

#include <chrono>
#include <optional>
#include <string>

#include "core/cancel.hpp"
#include "server/tool.hpp"
#include "tools/search_jobs.hpp"
#include "tools/search_tools.hpp"
#include "tools/tool_env.hpp"

namespace autocomp::testing {

// Starts a one-member, one-plan, one-iteration search of `kernel` on `problem` (seed 1).
inline server::ToolResult start_small_search(const std::shared_ptr<tools::ToolEnv>& env,
                                             const std::string& kernel,
                                             const std::string& problem) {
  auto tool = tools::make_run_beam_search_tool(env);
  server::ToolContext context;
  return tool.handler({{"kernel", kernel},
                       {"problem", problem},
                       {"beam", 1},
                       {"plans", 1},
                       {"iterations", 1},
                       {"seed", 1}},
                      context);
}

// The job's last snapshot once it has finished (up to ten minutes), or nothing.
inline std::optional<tools::JobSnapshot> finished_job(tools::ToolEnv& env,
                                                      const std::string& run_id) {
  auto live = env.jobs().snapshot(run_id);
  core::CancelToken never;
  for (int i = 0; i < 600 && live && !live->finished; ++i) {
    live = env.jobs().wait(run_id, live->updates, std::chrono::seconds(1), never);
  }
  return live && live->finished ? live : std::nullopt;
}

}  // namespace autocomp::testing
