#pragma once

#include <memory>

#include "search/llm/provider.hpp"
#include "server/tool.hpp"

namespace autocomp::tools {

// The connected MCP client's own model as an LLM provider, through sampling/createMessage. Valid
// only while the tool call whose context it wraps is running (the client channel belongs to that
// call). Failures: unavailable when the client did not declare sampling or refused,
// invalid_argument for a reply without text.
std::shared_ptr<search::llm::Provider> make_sampling_provider(const server::ToolContext& context);

}  // namespace autocomp::tools
