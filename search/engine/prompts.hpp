#pragma once

#include <cstdint>
#include <memory>
#include <optional>
#include <string>
#include <vector>

#include "backends/backend.hpp"
#include "core/failure.hpp"
#include "search/llm/provider.hpp"

namespace autocomp::search::engine {

// What a planning prompt is built from. Everything here is fixed before the iteration starts so
// that the same run asks the same question every time (resume replays answers by request hash).
struct PlanPromptInput {
  std::string target;
  std::string kernel_source;
  const backends::EvalResult* evaluation = nullptr;  // the parent's measurement and profile
  std::string problem_source;
  std::vector<std::string> recent_failures;
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

// Turns engine state into LLM requests and LLM text back into plans and kernels. Implementations
// must be deterministic in their inputs (seed included) and thread-safe.
class PromptFactory {
 public:
  virtual ~PromptFactory() = default;
  virtual llm::CompletionRequest planning(const PlanPromptInput& input) const = 0;
  virtual llm::CompletionRequest implementation(const ImplementPromptInput& input) const = 0;
  virtual llm::CompletionRequest repair(const RepairPromptInput& input) const = 0;
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
