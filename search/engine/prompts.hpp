#pragma once

#include <cstdint>
#include <map>
#include <memory>
#include <optional>
#include <string>
#include <vector>

#include "backends/backend.hpp"
#include "core/failure.hpp"
#include "core/result.hpp"
#include "search/engine/candidate.hpp"
#include "search/llm/provider.hpp"
#include "search/prompts/prompt_builder.hpp"

namespace autocomp::search::engine {

// What a planning prompt is built from. Everything here is fixed before the iteration starts so
// that the same run asks the same question every time (resume replays answers by request hash).
struct PlanPromptInput {
  std::string target;
  std::string kernel_source;
  const backends::EvalResult* evaluation = nullptr;  // the parent's measurement and profile
  std::string problem_source;
  std::optional<double> baseline_latency_us;  // the kernel the search started from
  std::vector<std::string> tried_plans;       // plans already tried on this parent, with outcome
  std::vector<std::string> recent_results;    // the last iteration's children, with profile change
  std::vector<std::string> sibling_plans;     // plans already chosen for this parent this iteration
  std::vector<std::string> recent_failures;
  std::vector<std::string> lessons;     // optimization memory of the target
  std::vector<std::string> reflexions;  // single path: what the last attempts taught
  int iteration = 1;
  int iterations = 1;
  double dropout = 0.7;
  std::uint64_t seed = 0;  // drives menu dropout and the occasional "invent"/"unlike" request
  int plan_index = -1;     // which of a parent's plan requests (0: always shows the best item)
};

struct ImplementPromptInput {
  std::string target;
  std::string kernel_source;
  std::string plan;
  std::string problem_source;
  std::string input_signature;       // the parent's measured inputs ("name:dtype[d0,d1];...")
  std::vector<std::string> lessons;  // from earlier runs on this target, newest first
  std::uint64_t seed = 0;
};

struct RepairPromptInput {
  std::string target;
  std::string failed_source;
  std::string plan;
  core::Failure failure;  // compile or runtime error, with the kernel line when known
  int attempt = 1;
  int max_attempts = 2;
  std::uint64_t seed = 0;
};

// One finished attempt of an iteration, for the lesson summary.
struct LessonAttempt {
  std::string plan;
  double parent_latency_us = 0;
  std::optional<double> latency_us;
  std::string outcome;  // "faster (latency -5.0%)", "slower ...", "within noise ...", the failure
};

struct SummarizePromptInput {
  std::string target;
  std::string problem_source;   // scopes the lessons to this workload
  std::string input_signature;  // the measured inputs, for shapes and dtypes
  std::vector<LessonAttempt> attempts;
  std::vector<std::string> existing_lessons;
  // When not empty, parallel to existing_lessons: the workload's recorded lessons' ids and
  // evidence; the reply is then the complete merged list (prompts::parse_merged_lessons).
  std::vector<std::int64_t> existing_ids;
  std::vector<std::string> existing_evidence;
};

// One evaluated attempt to reflect on (single-path search).
struct ReflectPromptInput {
  std::string target;
  std::string plan;
  std::string parent_source;
  const backends::EvalResult* parent_evaluation = nullptr;
  std::string child_source;
  const backends::EvalResult* child_evaluation = nullptr;
  std::string outcome;  // measured, in words ("1.32x faster", "compile_error: ...")
};

// The facts the engine knows before an iteration and the prompts state: the starting latency,
// per parent (by key) the plans already tried on it and their outcome, and what each child of
// the previous iteration did (outcome and profile difference from its parent).
struct PromptHistory {
  std::optional<double> baseline_latency_us;
  std::map<std::string, std::vector<std::string>> tried_plans;
  std::vector<std::string> recent_results;
};

// Builds the history for iteration `iteration` from the run's candidates (any order; those of
// `iteration` and later are ignored, so a resumed run asks the same questions) and its baseline.
// A plan tried by several implementations appears once, with the best outcome.
PromptHistory prompt_history(const std::vector<Candidate>& candidates, const Candidate& baseline,
                             int iteration, std::size_t max_plans_per_parent = 8,
                             std::size_t max_recent_results = 8);

// The template builder's planning input for the engine's: problem notes from the problem source
// and the measured input signature, lessons scoped to the workload. propose_plan and the engine
// both plan through this.
prompts::PlanPromptInput plan_builder_input(const PlanPromptInput& input);

// The workload a problem describes (its KERNEL name), to scope lessons; "" when unknown.
std::string workload_of(const std::string& problem_source);

// Turns engine state into LLM requests and LLM text back into plans and kernels, through the
// editable templates under prompts/ (search/prompts/prompt_builder). A template that cannot be
// read or rendered is a failure naming the file; nothing falls back to other wording.
// Implementations are deterministic in their inputs (seed included) and thread-safe.
class PromptFactory {
 public:
  virtual ~PromptFactory() = default;
  virtual core::Result<llm::CompletionRequest> planning(const PlanPromptInput& input) const = 0;
  virtual core::Result<llm::CompletionRequest> implementation(
      const ImplementPromptInput& input) const = 0;
  virtual core::Result<llm::CompletionRequest> repair(const RepairPromptInput& input) const = 0;
  // Asks for short lessons from an iteration's improvements, regressions and neutral results.
  virtual core::Result<llm::CompletionRequest> summarize(
      const SummarizePromptInput& input) const = 0;
  // The new lessons a summarize reply holds (near-duplicates of input.existing_lessons and of each
  // other dropped), scoped to the input's workload; empty when it holds none.
  virtual std::vector<std::string> parse_lessons(const std::string& response,
                                                 const SummarizePromptInput& input) const = 0;
  // Asks what one attempt taught (templates/reflect.md fields).
  virtual core::Result<llm::CompletionRequest> reflect(const ReflectPromptInput& input) const = 0;
  // The reflexion a reply holds; never fails (unreadable replies keep only raw_text).
  virtual prompts::ReflexionRecord parse_reflexion(const std::string& response) const = 0;
  // The plan in words (reasoning preambles removed).
  virtual std::string extract_plan(const std::string& response) const = 0;
  // One complete kernel from a response, fenced or not; nullopt when there is none.
  virtual std::optional<std::string> extract_code(const std::string& response) const = 0;
};

// The factory over the templates in `prompts_dir` (resolve_prompts_dir() when empty). When the
// folder cannot be found every request is that failure.
std::unique_ptr<PromptFactory> make_template_prompt_factory(const std::string& prompts_dir = "");

// The factory the product uses: make_template_prompt_factory() of the resolved prompts folder.
std::unique_ptr<PromptFactory> make_default_prompt_factory();

}  // namespace autocomp::search::engine
