#include <sstream>

#include "search/engine/prompts.hpp"
#include "search/prompts/prompt_builder.hpp"

namespace autocomp::search::engine {

namespace {

std::string describe_evaluation(const backends::EvalResult* eval) {
  if (eval == nullptr) {
    return "not measured";
  }
  std::ostringstream out;
  if (eval->latency) {
    out << "latency " << eval->latency->median_us << " us (median)";
  }
  if (!eval->bottleneck.empty()) {
    out << "; bottleneck: " << eval->bottleneck;
  }
  for (const auto& [name, value] : eval->metrics) {
    out << "\n  " << name << " = " << value;
  }
  for (const auto& [name, value] : eval->roofline) {
    out << "\n  roofline " << name << " = " << value;
  }
  return out.str();
}

std::string strip_thinking(const std::string& text) {
  const std::string close = "</think>";
  auto pos = text.rfind(close);
  std::string out = pos == std::string::npos ? text : text.substr(pos + close.size());
  auto first = out.find_first_not_of(" \t\r\n");
  auto last = out.find_last_not_of(" \t\r\n");
  if (first == std::string::npos) {
    return "";
  }
  return out.substr(first, last - first + 1);
}

class BasicPromptFactory : public PromptFactory {
 public:
  llm::CompletionRequest planning(const PlanPromptInput& input) const override {
    std::ostringstream user;
    user << "Target: " << input.target << ". This is iteration " << input.iteration << " of "
         << input.iterations << ".\n"
         << "Current kernel (" << describe_evaluation(input.evaluation) << "):\n```python\n"
         << input.kernel_source << "```\n";
    if (!input.recent_failures.empty()) {
      user << "Recent failures:\n";
      for (const auto& failure : input.recent_failures) {
        user << "- " << failure << "\n";
      }
    }
    if (!input.lessons.empty()) {
      user << "Lessons from earlier attempts on this target:\n";
      for (const auto& lesson : input.lessons) {
        user << "- " << lesson << "\n";
      }
    }
    if (!input.reflexions.empty()) {
      user << "Reflections on recent attempts:\n";
      for (const auto& reflexion : input.reflexions) {
        user << "- " << reflexion << "\n";
      }
    }
    user << "Propose one optimization plan for this kernel, in words. Variation " << input.seed
         << ".\n";
    llm::CompletionRequest request;
    request.system = "You are an expert NKI performance engineer.";
    request.messages.push_back({"user", user.str()});
    request.purpose = "plan";
    return request;
  }

  llm::CompletionRequest implementation(const ImplementPromptInput& input) const override {
    std::ostringstream user;
    user << "Target: " << input.target << ".\nKernel:\n```python\n"
         << input.kernel_source << "```\nPlan:\n"
         << input.plan << "\nRewrite the kernel according to the plan. Answer with one complete "
         << "kernel in a python code block. Variation " << input.seed << ".\n";
    llm::CompletionRequest request;
    request.system = "You are an expert NKI performance engineer.";
    request.messages.push_back({"user", user.str()});
    request.purpose = "implement";
    return request;
  }

  llm::CompletionRequest repair(const RepairPromptInput& input) const override {
    std::ostringstream user;
    user << "Target: " << input.target << ".\nThis kernel failed (" << input.failure.describe()
         << "):\n```python\n"
         << input.failed_source << "```\nIt was meant to apply this plan:\n"
         << input.plan << "\nFix the error and answer with one complete kernel in a python code "
         << "block. Attempt " << input.attempt << ".\n";
    llm::CompletionRequest request;
    request.system = "You are an expert NKI performance engineer.";
    request.messages.push_back({"user", user.str()});
    request.purpose = "repair";
    return request;
  }

  std::string extract_plan(const std::string& response) const override {
    return strip_thinking(response);
  }

  std::optional<std::string> extract_code(const std::string& response) const override {
    std::string text = strip_thinking(response);
    // The last fenced block wins: models often show the old code first.
    std::optional<std::string> found;
    std::size_t pos = 0;
    while ((pos = text.find("```", pos)) != std::string::npos) {
      auto line_end = text.find('\n', pos);
      if (line_end == std::string::npos) {
        break;
      }
      auto close = text.find("```", line_end + 1);
      if (close == std::string::npos) {
        found = text.substr(line_end + 1);
        break;
      }
      found = text.substr(line_end + 1, close - line_end - 1);
      pos = close + 3;
    }
    if (!found && (text.find("def ") != std::string::npos)) {
      found = text;
    }
    if (found && found->find("def ") == std::string::npos) {
      return std::nullopt;
    }
    if (found && !found->empty() && found->back() != '\n') {
      found->push_back('\n');
    }
    return found;
  }
};

}  // namespace

llm::CompletionRequest PromptFactory::summarize(const SummarizePromptInput& input) const {
  std::ostringstream user;
  user << "Target: " << input.target << ". Attempts of the last search iteration:\n";
  for (const auto& attempt : input.attempts) {
    user << "- plan: " << attempt.plan << "\n  parent " << attempt.parent_latency_us << " us";
    if (attempt.latency_us) {
      user << ", child " << *attempt.latency_us << " us";
    }
    user << ", outcome: " << attempt.outcome << "\n";
  }
  if (!input.existing_lessons.empty()) {
    user << "Lessons already known:\n";
    for (const auto& lesson : input.existing_lessons) {
      user << "- " << lesson << "\n";
    }
  }
  user << "Write at most 8 new short, general lessons, one per line, each starting with \"- \".\n";
  llm::CompletionRequest request;
  request.system = "You are an expert NKI performance engineer.";
  request.messages.push_back({"user", user.str()});
  request.purpose = "summarize";
  return request;
}

llm::CompletionRequest PromptFactory::reflect(const ReflectPromptInput& input) const {
  std::ostringstream user;
  user << "Target: " << input.target
       << ". An optimization attempt on an NKI kernel.\nPlan: " << input.plan << "\nBefore:\n"
       << input.parent_source << "\n";
  if (!input.child_source.empty()) {
    user << "After:\n" << input.child_source << "\n";
  }
  user << "Outcome: " << input.outcome << "\n"
       << "Answer with seven lines: diagnosis_right: yes|no, fix_worked: yes|no, expected: ..., "
          "actual: ..., lessons: ..., avoid: ..., try_next: ...\n";
  llm::CompletionRequest request;
  request.system = "You are an expert NKI performance engineer.";
  request.messages.push_back({"user", user.str()});
  request.purpose = "reflect";
  return request;
}

prompts::ReflexionRecord PromptFactory::parse_reflexion(const std::string& response) const {
  return prompts::parse_reflexion(response);
}

std::vector<std::string> PromptFactory::parse_lessons(const std::string& response) const {
  return prompts::parse_lessons(response);
}

std::unique_ptr<PromptFactory> make_basic_prompt_factory() {
  return std::make_unique<BasicPromptFactory>();
}

}  // namespace autocomp::search::engine
