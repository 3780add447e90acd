// Figures for the Slurm backend, on a single-node Slurm cluster started here on loopback:
//  1. the per-evaluation overhead of Slurm over the local backend (device fake, one evaluation
//     at a time, so the figure is submission + scheduling + polling + staging);
//  2. throughput of a batch with at most 1 and at most 4 array tasks running at once
//     (max_parallel), with the fake device whose device work is a timed wait.
// Usage: bench_slurm_bench [overhead_runs=7] [throughput_batch=8 (0: skip)] [fake_ms=1000]

#include <algorithm>
#include <chrono>
#include <cstdio>
#include <cstdlib>
#include <string>
#include <vector>

#include "backends/backend.hpp"
#include "support/slurm_cluster.hpp"

namespace {

using autocomp::backends::Backend;
using autocomp::backends::EvalRequest;
using autocomp::backends::EvalResult;
using Clock = std::chrono::steady_clock;

std::shared_ptr<Backend> make(const std::string& spec) {
  auto backend = autocomp::backends::make_backend(spec, {});
  if (!backend.ok()) {
    std::fprintf(stderr, "cannot build %s: %s\n", spec.c_str(),
                 backend.failure().describe().c_str());
    std::exit(1);
  }
  return backend.value();
}

EvalRequest fake_request() {
  EvalRequest request;
  request.kernel_source = "def kernel(a):\n    return a\n";
  request.problem_source = "import numpy as np\n";
  request.seeds = {0};
  request.warmup = 0;
  request.iters = 1;
  request.timeout = std::chrono::minutes(5);
  return request;
}

double seconds_for(Backend& backend, const std::vector<EvalRequest>& batch) {
  auto start = Clock::now();
  auto results = backend.evaluate(batch, {}, {});
  double seconds = std::chrono::duration<double>(Clock::now() - start).count();
  for (const auto& result : results) {
    if (!result.ok()) {
      std::fprintf(stderr, "evaluation failed: %s\n", result.failure->describe().c_str());
      std::exit(1);
    }
  }
  return seconds;
}

double median(std::vector<double> values) {
  std::sort(values.begin(), values.end());
  return values[values.size() / 2];
}

}  // namespace

int main(int argc, char** argv) {
  int runs = argc > 1 ? std::atoi(argv[1]) : 7;
  int batch_size = argc > 2 ? std::atoi(argv[2]) : 8;
  int fake_ms = argc > 3 ? std::atoi(argv[3]) : 1000;
  if (auto missing = autocomp::testing::SlurmCluster::missing_binaries(); !missing.empty()) {
    std::fprintf(stderr, "Slurm is not installed (missing %s)\n", missing.c_str());
    return 1;
  }
  autocomp::testing::TempDir tmp("autocomp-slurm-bench");
  autocomp::testing::SlurmCluster cluster(tmp.path() / "cluster");
  std::string base = std::string("slurm:?partition=") +
                     autocomp::testing::SlurmCluster::k_partition +
                     "&python=" AUTOCOMP_PYTHON "&stage=" + (tmp.path() / "stage").string();

  if (runs > 0) {
    auto local = make("local?device=fake&fake_ms=10&python=" AUTOCOMP_PYTHON);
    auto slurm = make(base + "&device=fake&fake_ms=10");
    seconds_for(*slurm, {fake_request()});  // stages the bundle
    std::vector<double> local_s;
    std::vector<double> slurm_s;
    for (int i = 0; i < runs; ++i) {
      local_s.push_back(seconds_for(*local, {fake_request()}));
      slurm_s.push_back(seconds_for(*slurm, {fake_request()}));
    }
    auto last = slurm->evaluate({fake_request()}, {}, {});
    std::printf("steps of one Slurm evaluation:");
    for (const auto& step : last[0].steps) {
      std::printf(" %s %.0f ms;", step.step.c_str(), step.ms);
    }
    std::printf("\n");
    double l = median(local_s) * 1000;
    double s = median(slurm_s) * 1000;
    std::printf(
        "overhead: median of %d single evaluations (device fake, fake_ms 10): local %.0f ms, "
        "slurm %.0f ms, slurm overhead %.0f ms per evaluation\n",
        runs, l, s, s - l);
  }
  if (batch_size > 0) {
    std::vector<EvalRequest> batch(static_cast<std::size_t>(batch_size), fake_request());
    double rates[2] = {0, 0};
    int parallel[2] = {1, 4};
    for (int i = 0; i < 2; ++i) {
      auto slurm = make(base + "&device=fake&fake_ms=" + std::to_string(fake_ms) +
                        "&max_parallel=" + std::to_string(parallel[i]));
      seconds_for(*slurm, {fake_request()});  // stages the bundle
      double seconds = seconds_for(*slurm, batch);
      rates[i] = batch_size / seconds;
      std::printf(
          "throughput: %d evaluations, at most %d at once (fake_ms %d): %.2f s, %.2f "
          "evaluations/s\n",
          batch_size, parallel[i], fake_ms, seconds, rates[i]);
    }
    std::printf("throughput ratio 4 vs 1 concurrent tasks: %.2fx (goal >= 3.5x)\n",
                rates[1] / rates[0]);
  }
  return 0;
}
