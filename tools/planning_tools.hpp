#pragma once

#include <deque>
#include <map>
#include <memory>
#include <mutex>
#include <optional>
#include <string>

#include "server/tool.hpp"
#include "tools/tool_env.hpp"

namespace autocomp::tools {

// Planning prompts assembled by propose_plan, served as autocomp://plan-prompts/{key} so that the
// tool's own result stays small. Bounded: the oldest are forgotten first. Thread-safe.
class PlanPromptCache {
 public:
  explicit PlanPromptCache(std::size_t capacity = 64);
  std::string put(std::string text);  // returns the key
  std::optional<std::string> get(const std::string& key) const;

 private:
  std::size_t m_capacity;
  mutable std::mutex m_mutex;
  std::map<std::string, std::string> m_texts;
  std::deque<std::string> m_order;
};

server::ToolDef make_propose_plan_tool(std::shared_ptr<ToolEnv> env,
                                       std::shared_ptr<PlanPromptCache> cache);

}  // namespace autocomp::tools
