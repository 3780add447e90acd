#include <algorithm>
#include <regex>

#include "core/text.hpp"
#include "search/engine/prompts.hpp"
#include "search/prompts/code_extract.hpp"
#include "search/prompts/problem_notes.hpp"
#include "search/prompts/profile_text.hpp"
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
    kernel.hotspots = eval->hotspots;
    kernel.waits = eval->waits;
    if (eval->ok()) {
      kernel.floors = prompts::compute_floors(*eval);
    }
  }
  return kernel;
}

// The editable templates, menus, notes and facts under prompts/, read at call time so that an
// edit takes effect during a run; a broken edit is a failure naming the file.
class TemplatePromptFactory : public PromptFactory {
 public:
  explicit TemplatePromptFactory(core::Result<prompts::PromptBuilder> builder)
      : m_builder(std::move(builder)) {}

  core::Result<llm::CompletionRequest> planning(const PlanPromptInput& input) const override {
    if (!m_builder) {
      return m_builder.failure();
    }
    auto prompt = m_builder->plan(plan_builder_input(input));
    if (!prompt) {
      return prompt.failure();
    }
    return prompt->request;
  }

  core::Result<llm::CompletionRequest> implementation(
      const ImplementPromptInput& input) const override {
    if (!m_builder) {
      return m_builder.failure();
    }
    prompts::ImplementPromptInput in;
    in.target = input.target;
    in.kernel = snapshot(input.kernel_source, nullptr);
    in.plan = input.plan;
    in.problem_notes = prompts::describe_problem(input.problem_source, input.input_signature);
    in.lessons = prompts::lessons_for(input.lessons, workload_of(input.problem_source));
    return m_builder->implement(in);
  }

  core::Result<llm::CompletionRequest> repair(const RepairPromptInput& input) const override {
    if (!m_builder) {
      return m_builder.failure();
    }
    prompts::RepairPromptInput in;
    in.target = input.target;
    in.source = input.failed_source;
    in.plan = input.plan;
    in.failure = input.failure;
    in.attempt = input.attempt;
    in.max_attempts = input.max_attempts;
    return m_builder->repair(in);
  }

  core::Result<llm::CompletionRequest> summarize(const SummarizePromptInput& input) const override {
    if (!m_builder) {
      return m_builder.failure();
    }
    prompts::SummarizeLessonsInput in;
    in.target = input.target;
    in.problem_notes = prompts::describe_problem(input.problem_source, input.input_signature);
    if (input.existing_ids.empty()) {
      in.existing_lessons =
          prompts::lessons_for(input.existing_lessons, workload_of(input.problem_source));
    } else {
      // The workload's own lessons, one for one with their ids (no merging here: the reply
      // merges them).
      for (const auto& lesson : input.existing_lessons) {
        const auto shown = prompts::lessons_for({lesson}, workload_of(input.problem_source));
        in.existing_lessons.push_back(shown.empty() ? lesson : shown.front());
      }
      in.existing_ids = input.existing_ids;
      in.existing_evidence = input.existing_evidence;
    }
    for (const auto& attempt : input.attempts) {
      in.attempts.push_back(prompts::AttemptRecord{attempt.plan, attempt.parent_latency_us,
                                                   attempt.latency_us, attempt.outcome});
    }
    return m_builder->summarize_lessons(in);
  }

  std::vector<std::string> parse_lessons(const std::string& response,
                                         const SummarizePromptInput& input) const override {
    const auto workload = workload_of(input.problem_source);
    // Compare like with like: the existing lessons as stored (scoped), the new ones scoped too.
    std::vector<std::string> scoped;
    for (const auto& lesson : prompts::parse_lessons(response)) {
      scoped.push_back(prompts::scope_lesson(lesson, workload));
    }
    std::string reply;
    for (const auto& lesson : scoped) {
      reply += "- " + lesson + "\n";
    }
    return prompts::new_lessons(reply, input.existing_lessons);
  }

  core::Result<llm::CompletionRequest> reflect(const ReflectPromptInput& input) const override {
    if (!m_builder) {
      return m_builder.failure();
    }
    prompts::ReflectInput in;
    in.target = input.target;
    in.plan = input.plan;
    in.parent = snapshot(input.parent_source, input.parent_evaluation);
    in.child = snapshot(input.child_source, input.child_evaluation);
    in.outcome = input.outcome;
    return m_builder->reflect(in);
  }

  prompts::ReflexionRecord parse_reflexion(const std::string& response) const override {
    return prompts::parse_reflexion(response);
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
  core::Result<prompts::PromptBuilder> m_builder;
};

// One attempt's outcome against its parent, in a few words.
std::string outcome_words(const Candidate& child, std::optional<double> parent_us) {
  if (child.duplicate) {
    return "same kernel as an earlier attempt";
  }
  if (!child.correct()) {
    const std::string why =
        child.eval.failure ? child.eval.failure->describe() : std::string("wrong results");
    return "failed: " + core::utf8_prefix(why, 160);
  }
  if (!parent_us || *parent_us <= 0 || child.latency_us() <= 0) {
    return "correct";
  }
  return core::describe_speed_change(*parent_us, child.latency_us());
}

// Better outcomes first: correct before failed, then faster.
bool better(const Candidate& a, const Candidate& b) {
  if (a.correct() != b.correct()) {
    return a.correct();
  }
  return a.correct() && a.latency_us() < b.latency_us();
}

}  // namespace

prompts::PlanPromptInput plan_builder_input(const PlanPromptInput& input) {
  prompts::PlanPromptInput in;
  in.target = input.target;
  in.kernel = snapshot(input.kernel_source, input.evaluation);
  in.baseline_latency_us = input.baseline_latency_us;
  in.problem_notes = prompts::describe_problem(
      input.problem_source, input.evaluation != nullptr ? input.evaluation->input_signature : "");
  in.recent_failures = input.recent_failures;
  in.lessons = prompts::lessons_for(input.lessons, workload_of(input.problem_source));
  in.reflexions = input.reflexions;
  in.tried_plans = input.tried_plans;
  in.recent_results = input.recent_results;
  in.sibling_plans = input.sibling_plans;
  in.iteration = input.iteration;
  in.total_iterations = input.iterations;
  in.dropout = input.dropout;
  in.seed = input.seed;
  in.plan_index = input.plan_index;
  const auto launch = prompts::problem_launch(input.problem_source);
  in.rtol = launch.rtol;
  in.programs = launch.programs;
  return in;
}

PromptHistory prompt_history(const std::vector<Candidate>& candidates, const Candidate& baseline,
                             int iteration, std::size_t max_plans_per_parent,
                             std::size_t max_recent_results) {
  PromptHistory history;
  if (baseline.correct()) {
    history.baseline_latency_us = baseline.latency_us();
  }
  std::map<std::string, double> latency;            // key -> median us of correct kernels
  std::map<std::string, const Candidate*> correct;  // key -> a correct, measured kernel
  if (baseline.correct()) {
    latency[baseline.key] = baseline.latency_us();
    correct[baseline.key] = &baseline;
  }
  for (const auto& c : candidates) {
    if (!c.key.empty() && c.correct()) {
      latency[c.key] = c.latency_us();
      correct.emplace(c.key, &c);
    }
  }
  // "[outcome] plan; profile: difference from the parent" for a correct child.
  auto describe = [&correct](const Candidate& c, const std::string& outcome) {
    std::string plan = core::utf8_prefix(c.plan, 400);
    std::replace(plan.begin(), plan.end(), '\n', ' ');
    std::string line = "[" + outcome + "] " + plan;
    auto parent = correct.find(c.parent_key);
    if (c.correct() && !c.duplicate && parent != correct.end()) {
      const auto difference = prompts::profile_difference(parent->second->eval, c.eval);
      if (!difference.empty()) {
        line += " | profile vs parent: " + difference;
      }
    }
    return line;
  };
  // (parent, plan) -> best attempt, in origin order of the first attempt
  std::vector<const Candidate*> ordered;
  for (const auto& c : candidates) {
    if (!c.parent_key.empty() && !c.plan.empty() && c.origin.iteration < iteration) {
      ordered.push_back(&c);
    }
  }
  std::stable_sort(ordered.begin(), ordered.end(),
                   [](const Candidate* a, const Candidate* b) { return a->origin < b->origin; });
  std::map<std::pair<std::string, std::string>, const Candidate*> best;
  std::vector<std::pair<std::string, std::string>> order;
  for (const Candidate* c : ordered) {
    const auto where = std::make_pair(c->parent_key, c->plan);
    auto [it, inserted] = best.emplace(where, c);
    if (inserted) {
      order.push_back(where);
    } else if (better(*c, *it->second)) {
      it->second = c;
    }
  }
  for (const auto& where : order) {
    const Candidate& c = *best.at(where);
    std::optional<double> parent_us;
    if (auto it = latency.find(where.first); it != latency.end()) {
      parent_us = it->second;
    }
    auto& list = history.tried_plans[where.first];
    list.push_back(describe(c, outcome_words(c, parent_us)));
    if (list.size() > max_plans_per_parent) {
      list.erase(list.begin());
    }
  }
  // The previous iteration's children, in origin order (the best of each plan, as above).
  for (const auto& where : order) {
    const Candidate& c = *best.at(where);
    if (c.origin.iteration != iteration - 1) {
      continue;
    }
    std::optional<double> parent_us;
    if (auto it = latency.find(where.first); it != latency.end()) {
      parent_us = it->second;
    }
    history.recent_results.push_back(describe(c, outcome_words(c, parent_us)));
  }
  if (history.recent_results.size() > max_recent_results) {
    history.recent_results.erase(
        history.recent_results.begin(),
        history.recent_results.end() - static_cast<std::ptrdiff_t>(max_recent_results));
  }
  return history;
}

std::string workload_of(const std::string& problem_source) {
  static const std::regex k_kernel(R"((^|\n)KERNEL\s*=\s*["']([A-Za-z_][A-Za-z0-9_]*)["'])");
  std::smatch match;
  if (std::regex_search(problem_source, match, k_kernel)) {
    return match[2].str();
  }
  return {};
}

std::unique_ptr<PromptFactory> make_template_prompt_factory(const std::string& prompts_dir) {
  return std::make_unique<TemplatePromptFactory>(prompts::PromptBuilder::open(prompts_dir));
}

std::unique_ptr<PromptFactory> make_default_prompt_factory() {
  return make_template_prompt_factory();
}

}  // namespace autocomp::search::engine
