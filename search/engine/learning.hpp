#pragma once

#include <set>
#include <string>
#include <vector>

#include "search/engine/after_batch.hpp"
#include "search/engine/llm_gateway.hpp"
#include "search/engine/prompts.hpp"
#include "search/engine/search_config.hpp"
#include "search/engine/stop_control.hpp"
#include "search/store/memory.hpp"

namespace autocomp::search::engine {

// What the learning steps use: the run's settings, its LLM, prompts, memory and stop state.
struct LearningContext {
  const SearchConfig& config;
  LlmGateway& llm;
  const PromptFactory& prompts;
  store::Memory& memory;
  const StopControl& stop;
  std::string run_id;
};

// Optimization memory (config.memory): gives each iteration's prompts the target's lessons, and
// after a finished batch asks the LLM to merge what its children taught with the workload's
// recorded lessons (shown with their ids and evidence). The reply is the workload's complete
// list: it replaces the recorded lessons in one store transaction; a lesson that keeps or merges
// recorded ones keeps their strongest evidence, a new one gets the batch's; near-duplicates are
// merged. Lessons of other workloads are left alone.
class LessonsStep : public AfterBatch {
 public:
  explicit LessonsStep(LearningContext context) : m_context(std::move(context)) {}

  // The target's lessons for the next iteration's prompts (also what the summary builds on).
  std::vector<std::string> for_prompts();
  void apply(const Batch& batch) override;

 private:
  LearningContext m_context;
  std::vector<std::string> m_lessons;    // those the current iteration's prompts were given
  std::vector<store::Lesson> m_records;  // the same, as stored
};

// Reflexions (single path, config.reflexions > 0): after a finished batch, one reflection per
// plan on its best attempt, stored once per kernel; the run's latest feed the next prompts.
class ReflexionStep : public AfterBatch {
 public:
  explicit ReflexionStep(LearningContext context);

  std::vector<std::string> for_prompts();
  void apply(const Batch& batch) override;

 private:
  LearningContext m_context;
  std::set<std::string> m_reflected;  // kernels the run has reflected on (also before a resume)
};

}  // namespace autocomp::search::engine
