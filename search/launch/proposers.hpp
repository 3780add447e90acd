#pragma once

// The table of proposer kinds a search can name in its config: the engine's plan-then-implement
// "llm" and knob autotuning "autotune". It lives here, above both, so that neither the engine nor
// a proposer depends on the other.

#include <memory>
#include <string>
#include <vector>

#include "core/result.hpp"
#include "search/engine/proposer.hpp"

namespace autocomp::search::launch {

using ProposerFactory = std::function<std::unique_ptr<engine::Proposer>()>;

// The proposer registered as `name`; unknown names fail with invalid_argument listing the known.
core::Result<std::unique_ptr<engine::Proposer>> make_proposer(const std::string& name);
std::vector<std::string> proposer_names();
// Adds or replaces a row (tests, plug-ins); not for use while a search runs.
void register_proposer(const std::string& name, ProposerFactory factory);

}  // namespace autocomp::search::launch
