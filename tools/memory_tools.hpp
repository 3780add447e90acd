#pragma once

#include <memory>
#include <optional>
#include <string>
#include <vector>

#include "search/prompts/prompt_builder.hpp"
#include "search/store/store.hpp"
#include "server/tool.hpp"
#include "tools/tool_env.hpp"

namespace autocomp::tools {

// The last change to a kernel file as the store saw it: the version before `current_key` among
// the file's recorded versions (same problem and target as the current one), and both median
// latencies when they were measured correct on that problem and target.
struct FileAttempt {
  std::string previous_key;
  std::optional<double> previous_us;
  std::optional<double> current_us;
  // "correct, 1.25x faster (100.0 us -> 80.0 us)", or what is known.
  std::string describe() const;
};
std::optional<FileAttempt> last_attempt(search::store::FileHistory& files,
                                        search::store::EvaluationCache& evaluations,
                                        const std::string& abs_path,
                                        const std::string& current_key);

// Reflexions of a kernel file (scope: its absolute path), oldest first, as planning-prompt lines.
std::vector<std::string> reflexion_lines(search::store::Memory& memory, const std::string& abs_path,
                                         int limit);

server::ToolDef make_list_lessons_tool(std::shared_ptr<ToolEnv> env);
server::ToolDef make_clear_lessons_tool(std::shared_ptr<ToolEnv> env);
server::ToolDef make_record_reflexion_tool(std::shared_ptr<ToolEnv> env);

}  // namespace autocomp::tools
