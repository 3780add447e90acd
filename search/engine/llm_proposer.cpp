#include <algorithm>
#include <optional>

#include "search/engine/proposer.hpp"

namespace autocomp::search::engine {

namespace {

bool stopping_failure(const core::Failure& failure) {
  return failure.kind == core::FailureKind::budget_exhausted ||
         failure.kind == core::FailureKind::cancelled;
}

// Plan-then-implement: N plans per parent from the planning prompt, K implementations per plan,
// and repairs of children that failed to compile or run. A parent's plans are asked one after
// another, each shown the plans already chosen for that parent, so siblings differ; parents,
// and the implementations of a chosen plan, run in parallel.
class LlmProposer : public Proposer {
 public:
  std::string name() const override { return "llm"; }

  void propose(const ProposeContext& ctx, const std::vector<Parent>& parents,
               const ChildSink& sink) override {
    if (!ctx.llm->has_providers()) {
      return;
    }
    TaskGroup group;
    const SearchConfig& config = *ctx.config;
    for (const Parent& parent : parents) {
      group.run(*ctx.pool, [this, &ctx, &group, &sink, &config, parent] {
        std::vector<std::string> chosen;
        for (int plan = 0; plan < config.plans; ++plan) {
          if (auto text = plan_one(ctx, group, sink, parent, plan, chosen)) {
            chosen.push_back(std::move(*text));
          }
        }
      });
    }
    group.wait();
  }

  std::optional<Proposal> repair(const ProposeContext& ctx, const RepairInput& input) override {
    if (!ctx.llm->has_providers() || ctx.stop->stopping()) {
      return std::nullopt;
    }
    const SearchConfig& config = *ctx.config;
    Proposal child;
    child.origin = input.failed.origin;
    child.origin.repair += 1;
    child.parent_key = input.failed.parent_key;
    child.plan = input.failed.plan;

    RepairPromptInput prompt;
    prompt.target = config.target;
    prompt.failed_source = input.failed.source;
    prompt.plan = input.failed.plan;
    prompt.failure = input.failure;
    prompt.attempt = child.origin.repair;
    prompt.max_attempts = config.repair_tries;
    prompt.seed = seed_for(config, child.origin, 3);
    auto request = ctx.prompts->repair(prompt);
    if (!request) {
      child.failure = request.failure();
      return child;
    }
    auto answer = ctx.llm->complete(*request, child.origin.label() + "/repair",
                                    impl_slot(config, child.origin) + child.origin.repair);
    if (!answer) {
      if (stopping_failure(answer.failure())) {
        return std::nullopt;
      }
      child.failure = answer.failure();
      return child;
    }
    fill_code(ctx, answer->text, child);
    return child;
  }

 private:
  static std::uint64_t seed_for(const SearchConfig& config, const Origin& origin, int kind) {
    return derive_seed(
        config.seed,
        {static_cast<std::uint64_t>(origin.iteration), static_cast<std::uint64_t>(origin.member),
         static_cast<std::uint64_t>(origin.plan), static_cast<std::uint64_t>(origin.impl),
         static_cast<std::uint64_t>(origin.repair), static_cast<std::uint64_t>(kind)});
  }
  static std::size_t plan_slot(const SearchConfig& config, const Origin& origin) {
    return static_cast<std::size_t>(origin.iteration + origin.member * config.plans + origin.plan);
  }
  static std::size_t impl_slot(const SearchConfig& config, const Origin& origin) {
    return plan_slot(config, origin) * static_cast<std::size_t>(config.impls) +
           static_cast<std::size_t>(origin.impl);
  }

  static void fill_code(const ProposeContext& ctx, const std::string& text, Proposal& child) {
    auto code = ctx.prompts->extract_code(text);
    if (!code) {
      child.failure = core::make_failure(core::FailureKind::invalid_argument, "implement",
                                         "the model's answer held no kernel code");
      return;
    }
    child.source = std::move(*code);
  }

  // Asks for plan `plan_index` of `parent` and starts its implementations; returns the plan,
  // or nullopt when none came.
  std::optional<std::string> plan_one(const ProposeContext& ctx, TaskGroup& group,
                                      const ChildSink& sink, const Parent& parent, int plan_index,
                                      const std::vector<std::string>& siblings) {
    if (ctx.stop->stopping()) {
      return std::nullopt;
    }
    const SearchConfig& config = *ctx.config;
    Origin origin{ctx.iteration, parent.member, plan_index, 0, 0, name()};

    PlanPromptInput prompt;
    prompt.target = config.target;
    prompt.kernel_source = parent.candidate->source;
    prompt.evaluation = &parent.candidate->eval;
    prompt.problem_source = config.problem_source;
    prompt.baseline_latency_us = ctx.history.baseline_latency_us;
    if (auto tried = ctx.history.tried_plans.find(parent.candidate->key);
        tried != ctx.history.tried_plans.end()) {
      prompt.tried_plans = tried->second;
    }
    for (const auto& result : ctx.history.recent_results) {
      // A result already listed among this parent's tried plans is not repeated.
      if (std::find(prompt.tried_plans.begin(), prompt.tried_plans.end(), result) ==
          prompt.tried_plans.end()) {
        prompt.recent_results.push_back(result);
      }
    }
    prompt.sibling_plans = siblings;
    prompt.recent_failures = ctx.recent_failures;
    prompt.lessons = ctx.lessons;
    prompt.reflexions = ctx.reflexions;
    prompt.iteration = ctx.iteration;
    prompt.iterations = config.iterations;
    prompt.dropout = config.dropout;
    prompt.seed = seed_for(config, origin, 1);
    prompt.plan_index = origin.plan;
    auto request = ctx.prompts->planning(prompt);
    auto call_id = "i" + std::to_string(origin.iteration) + "/m" + std::to_string(origin.member) +
                   "/p" + std::to_string(origin.plan) + "/" + name() + "/plan";
    auto answer = request ? ctx.llm->complete(*request, call_id, plan_slot(config, origin))
                          : core::Result<llm::Completion>(request.failure());
    if (!answer) {
      if (stopping_failure(answer.failure())) {
        return std::nullopt;
      }
      for (int impl = 0; impl < config.impls; ++impl) {
        Proposal child;
        child.origin = origin;
        child.origin.impl = impl;
        child.parent_key = parent.candidate->key;
        child.failure = answer.failure();
        sink(std::move(child));
      }
      return std::nullopt;
    }
    std::string plan = ctx.prompts->extract_plan(answer->text);
    for (int impl = 0; impl < config.impls; ++impl) {
      group.run(*ctx.pool, [this, &ctx, &sink, parent, origin, plan, impl] {
        implement_one(ctx, sink, parent, origin, plan, impl);
      });
    }
    return plan;
  }

  void implement_one(const ProposeContext& ctx, const ChildSink& sink, const Parent& parent,
                     Origin origin, const std::string& plan, int impl) {
    if (ctx.stop->stopping()) {
      return;
    }
    const SearchConfig& config = *ctx.config;
    origin.impl = impl;
    Proposal child;
    child.origin = origin;
    child.parent_key = parent.candidate->key;
    child.plan = plan;

    ImplementPromptInput prompt;
    prompt.target = config.target;
    prompt.kernel_source = parent.candidate->source;
    prompt.plan = plan;
    prompt.problem_source = config.problem_source;
    prompt.input_signature = parent.candidate->eval.input_signature;
    prompt.lessons = ctx.lessons;
    prompt.seed = seed_for(config, origin, 2);
    auto request = ctx.prompts->implementation(prompt);
    auto answer = request ? ctx.llm->complete(*request, origin.label() + "/implement",
                                              impl_slot(config, origin))
                          : core::Result<llm::Completion>(request.failure());
    if (!answer) {
      if (stopping_failure(answer.failure())) {
        return;
      }
      child.failure = answer.failure();
      sink(std::move(child));
      return;
    }
    fill_code(ctx, answer->text, child);
    sink(std::move(child));
  }
};

}  // namespace

std::unique_ptr<Proposer> make_llm_proposer() {
  return std::make_unique<LlmProposer>();
}

}  // namespace autocomp::search::engine
