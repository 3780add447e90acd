#pragma once

#include <cstdint>
#include <functional>
#include <memory>
#include <optional>
#include <string>
#include <vector>

#include "core/result.hpp"
#include "search/engine/candidate.hpp"
#include "search/engine/llm_gateway.hpp"
#include "search/engine/prompts.hpp"
#include "search/engine/search_config.hpp"
#include "search/engine/stop_control.hpp"
#include "search/engine/task_pool.hpp"

namespace autocomp::search::engine {

// What the engine lends a proposer for one iteration. Pointers stay valid during the call.
struct ProposeContext {
  int iteration = 1;  // 1-based
  const SearchConfig* config = nullptr;
  LlmGateway* llm = nullptr;  // never null; has_providers() may be false
  const PromptFactory* prompts = nullptr;
  TaskPool* pool = nullptr;  // for fanning work out; wait for it before returning
  const StopControl* stop = nullptr;
  // Failures of the previous iteration, in origin order (fixed before the iteration starts).
  std::vector<std::string> recent_failures;
  // Optimization memory of the target (fixed before the iteration starts).
  std::vector<std::string> lessons;
  // Single path: what the run's last attempts taught (fixed before the iteration starts).
  std::vector<std::string> reflexions;
  // Starting latency and the plans tried per parent, for the prompts (prompt_history()).
  PromptHistory history;
};

// A beam member offered for expansion.
struct Parent {
  int member = 0;  // its index in the beam
  const Candidate* candidate = nullptr;
};

// A child that failed to compile or run, offered back to the proposer that made it.
struct RepairInput {
  Proposal failed;  // origin, parent, plan and source of the failed child
  core::Failure failure;
};

// Receives children as soon as they exist, from any thread.
using ChildSink = std::function<void(Proposal)>;

// One way of making children from beam members (LLM plan-then-implement, knob autotuning, ...).
// Made by name (ProposerMaker); the engine runs every configured proposer on the whole beam each
// iteration.
// Implementations are thread-safe and deterministic in (config.seed, iteration, member, index):
// a resumed run must ask for the same children in the same words.
class Proposer {
 public:
  virtual ~Proposer() = default;
  virtual std::string name() const = 0;

  // Proposes children for every parent and hands each to `sink`. Returns when all of its work is
  // done, or promptly once ctx.stop is stopping.
  virtual void propose(const ProposeContext& ctx, const std::vector<Parent>& parents,
                       const ChildSink& sink) = 0;

  // A new attempt at a child that failed with compile_error or runtime_error (origin.repair + 1),
  // or nullopt when this proposer does not repair. Called from pool threads.
  virtual std::optional<Proposal> repair(const ProposeContext& /*ctx*/,
                                         const RepairInput& /*input*/) {
    return std::nullopt;
  }
};

// Makes the proposer registered under a name (search/launch holds the table of every kind); an
// unknown name is an invalid_argument failure listing the known ones.
using ProposerMaker = std::function<core::Result<std::unique_ptr<Proposer>>(const std::string&)>;

// The engine's own proposer: plan-then-implement with the run's LLM providers ("llm").
std::unique_ptr<Proposer> make_llm_proposer();

// A 64-bit seed mixing the run seed with a child's coordinates (splitmix64 steps).
std::uint64_t derive_seed(std::uint64_t run_seed, std::initializer_list<std::uint64_t> parts);

}  // namespace autocomp::search::engine
