// Prints the planning and implementation prompts the search would send for a seed, so their
// content can be read without a model in the loop:
//   bench_prompt_examples <seed dir> [target] [input signature] [plan]
// The kernel is <seed dir>/naive.py, the problem <seed dir>/problem.py; the parent is shown as
// measured at 2x the starting latency (as after a first improvement).
#include <cstdio>
#include <fstream>
#include <sstream>

#include "search/engine/prompts.hpp"

namespace {

std::string read_file(const std::string& path) {
  std::ifstream in(path);
  std::stringstream text;
  text << in.rdbuf();
  return text.str();
}

}  // namespace

int main(int argc, char** argv) {
  using namespace autocomp::search::engine;
  if (argc < 2) {
    std::fprintf(stderr, "usage: %s <seed dir> [target] [input signature] [plan]\n", argv[0]);
    return 2;
  }
  const std::string dir = argv[1];
  const std::string target = argc > 2 ? argv[2] : "trn2";
  const std::string signature = argc > 3 ? argv[3] : "";
  const std::string plan =
      argc > 4 ? argv[4]
               : "Replace the two nl.mean reductions by nisa.bn_stats on 512-column chunks and "
                 "one nisa.bn_aggr, then normalize with one nisa.tensor_scalar (subtract mean, "
                 "multiply by rstd).";
  auto factory = make_default_prompt_factory();

  autocomp::backends::EvalResult eval;
  eval.correct = true;
  eval.latency = autocomp::backends::LatencyStats{};
  eval.latency->median_us = 500;
  eval.input_signature = signature;
  eval.bottleneck = "memory-bound";

  PlanPromptInput plan_input;
  plan_input.target = target;
  plan_input.kernel_source = read_file(dir + "/naive.py");
  plan_input.evaluation = &eval;
  plan_input.problem_source = read_file(dir + "/problem.py");
  plan_input.baseline_latency_us = 1000;
  plan_input.tried_plans = {"[1.3x faster] hoist the gamma and beta loads out of the row loop"};
  plan_input.iteration = 2;
  plan_input.iterations = 3;
  plan_input.seed = 1;
  auto planning = factory->planning(plan_input);
  if (!planning) {
    std::fprintf(stderr, "%s\n", planning.failure().describe().c_str());
    return 1;
  }
  std::printf("===== plan prompt (user message) =====\n%s\n\n",
              planning->messages.at(0).content.c_str());

  ImplementPromptInput implement_input;
  implement_input.target = target;
  implement_input.kernel_source = plan_input.kernel_source;
  implement_input.plan = plan;
  implement_input.problem_source = plan_input.problem_source;
  implement_input.input_signature = signature;
  auto implementation = factory->implementation(implement_input);
  if (!implementation) {
    std::fprintf(stderr, "%s\n", implementation.failure().describe().c_str());
    return 1;
  }
  std::printf("===== implementation prompt (user message) =====\n%s\n",
              implementation->messages.at(0).content.c_str());
  return 0;
}
