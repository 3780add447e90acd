#include <spdlog/spdlog.h>

#include "search/engine/prompts.hpp"
#include "search/prompts/code_extract.hpp"
#include "search/prompts/prompt_builder.hpp"

namespace autocomp::search::engine {

namespace {

prompts::KernelSnapshot snapshot(const std::string& source, const backends::EvalResult* eval) {
  prompts::KernelSnapshot kernel;
  kernel.source = source;
  if (eval != nullptr) {
    if (eval->latency) {
      kernel.latency_us = eval->latency->median_us;
    }
    kernel.metrics = eval->metrics;
    kernel.roofline = eval->roofline;
    kernel.bottleneck = eval->bottleneck;
  }
  return kernel;
}

// The editable templates and menus under prompts/. A template that cannot be rendered (a user's
// edit broke it) falls back to the basic wording for that request, with a warning, so that a run
// is never lost to a typo.
class TemplatePromptFactory : public PromptFactory {
 public:
  explicit TemplatePromptFactory(prompts::PromptBuilder builder)
      : m_builder(std::move(builder)), m_basic(make_basic_prompt_factory()) {}

  llm::CompletionRequest planning(const PlanPromptInput& input) const override {
    prompts::PlanPromptInput in;
    in.target = input.target;
    in.kernel = snapshot(input.kernel_source, input.evaluation);
    in.recent_failures = input.recent_failures;
    in.lessons = input.lessons;
    in.reflexions = input.reflexions;
    in.iteration = input.iteration;
    in.total_iterations = input.iterations;
    in.dropout = input.dropout;
    in.seed = input.seed;
    auto prompt = m_builder.plan(in);
    if (!prompt) {
      spdlog::warn("planning template failed ({}); using the basic prompt",
                   prompt.failure().describe());
      return m_basic->planning(input);
    }
    return prompt->request;
  }

  llm::CompletionRequest implementation(const ImplementPromptInput& input) const override {
    prompts::ImplementPromptInput in;
    in.target = input.target;
    in.kernel = snapshot(input.kernel_source, nullptr);
    in.plan = input.plan;
    auto request = m_builder.implement(in);
    if (!request) {
      spdlog::warn("implementation template failed ({}); using the basic prompt",
                   request.failure().describe());
      return m_basic->implementation(input);
    }
    return request.value();
  }

  llm::CompletionRequest repair(const RepairPromptInput& input) const override {
    prompts::RepairPromptInput in;
    in.target = input.target;
    in.source = input.failed_source;
    in.plan = input.plan;
    in.failure = input.failure;
    in.attempt = input.attempt;
    in.max_attempts = input.max_attempts;
    auto request = m_builder.repair(in);
    if (!request) {
      spdlog::warn("repair template failed ({}); using the basic prompt",
                   request.failure().describe());
      return m_basic->repair(input);
    }
    return request.value();
  }

  llm::CompletionRequest summarize(const SummarizePromptInput& input) const override {
    prompts::SummarizeLessonsInput in;
    in.target = input.target;
    in.existing_lessons = input.existing_lessons;
    for (const auto& attempt : input.attempts) {
      in.attempts.push_back(prompts::AttemptRecord{attempt.plan, attempt.parent_latency_us,
                                                   attempt.latency_us, attempt.outcome});
    }
    auto request = m_builder.summarize_lessons(in);
    if (!request) {
      spdlog::warn("lesson template failed ({}); using the basic prompt",
                   request.failure().describe());
      return PromptFactory::summarize(input);
    }
    request->purpose = "summarize";
    return request.value();
  }

  llm::CompletionRequest reflect(const ReflectPromptInput& input) const override {
    prompts::ReflectInput in;
    in.target = input.target;
    in.plan = input.plan;
    in.parent = snapshot(input.parent_source, input.parent_evaluation);
    in.child = snapshot(input.child_source, input.child_evaluation);
    in.outcome = input.outcome;
    auto request = m_builder.reflect(in);
    if (!request) {
      spdlog::warn("reflection template failed ({}); using the basic prompt",
                   request.failure().describe());
      return PromptFactory::reflect(input);
    }
    request->purpose = "reflect";
    return request.value();
  }

  std::string extract_plan(const std::string& response) const override {
    return prompts::extract_plan(response);
  }

  std::optional<std::string> extract_code(const std::string& response) const override {
    auto code = prompts::extract_kernel_code(response);
    if (!code) {
      return std::nullopt;
    }
    return code.value();
  }

 private:
  prompts::PromptBuilder m_builder;
  std::unique_ptr<PromptFactory> m_basic;
};

}  // namespace

std::unique_ptr<PromptFactory> make_default_prompt_factory() {
  auto builder = prompts::PromptBuilder::open();
  if (!builder) {
    spdlog::warn("prompt templates not found ({}); using built-in prompts",
                 builder.failure().describe());
    return make_basic_prompt_factory();
  }
  return std::make_unique<TemplatePromptFactory>(std::move(builder.value()));
}

}  // namespace autocomp::search::engine
