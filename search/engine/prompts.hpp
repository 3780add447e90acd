#pragma once

#include <cstdint>
#include <memory>
#include <optional>
#include <string>
#include <vector>

#include "backends/backend.hpp"
#include "core/failure.hpp"
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
  std::vector<std::string> recent_failures;
  std::vector<std::string> lessons;     // optimization memory of the target
  std::vector<std::string> reflexions;  // single path: what the last attempts taught
  int iteration = 1;
  int iterations = 1;
  double dropout = 0.7;
  std::uint64_t seed = 0;  // drives menu dropout and the occasional "invent"/"unlike" request
};

struct ImplementPromptInput {
  std::string target;
  std::string kernel_source;
  std::string plan;
  std::string problem_source;
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
  std::string outcome;  // faster | slower | the failure
};

struct SummarizePromptInput {
  std::string target;
  std::vector<LessonAttempt> attempts;
  std::vector<std::string> existing_lessons;
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

// Turns engine state into LLM requests and LLM text back into plans and kernels. Implementations
// must be deterministic in their inputs (seed included) and thread-safe.
class PromptFactory {
 public:
  virtual ~PromptFactory() = default;
  virtual llm::CompletionRequest planning(const PlanPromptInput& input) const = 0;
  virtual llm::CompletionRequest implementation(const ImplementPromptInput& input) const = 0;
  virtual llm::CompletionRequest repair(const RepairPromptInput& input) const = 0;
  // Asks for short lessons from an iteration's improvements and regressions.
  virtual llm::CompletionRequest summarize(const SummarizePromptInput& input) const;
  // The lessons a summarize reply holds; empty when it holds none.
  virtual std::vector<std::string> parse_lessons(const std::string& response) const;
  // Asks what one attempt taught (templates/reflect.md fields).
  virtual llm::CompletionRequest reflect(const ReflectPromptInput& input) const;
  // The reflexion a reply holds; never fails (unreadable replies keep only raw_text).
  virtual prompts::ReflexionRecord parse_reflexion(const std::string& response) const;
  // The plan in words (reasoning preambles removed).
  virtual std::string extract_plan(const std::string& response) const = 0;
  // One complete kernel from a response, fenced or not; nullopt when there is none.
  virtual std::optional<std::string> extract_code(const std::string& response) const = 0;
};

// A self-contained factory with short built-in templates; used when the template-driven prompt
// builder is not available (tests, benchmarks).
std::unique_ptr<PromptFactory> make_basic_prompt_factory();

// The factory the product uses: the editable templates and menus under prompts/ when they can be
// found, otherwise the basic one.
std::unique_ptr<PromptFactory> make_default_prompt_factory();

}  // namespace autocomp::search::engine
