// Store figures: cache-hit latency of EvaluationCache::lookup (goal <= 5 ms) and write
// throughput, on a real database file with a realistic amount of data. A lookup is timed as
// callers make it: from the request (both sources are hashed into the key) and the site.
//
// Usage: bench_store_bench [candidates=2000] [lookups=20000] [folder=$TMPDIR]

#include <time.h>
#include <unistd.h>

#include <algorithm>
#include <chrono>
#include <cstdio>
#include <cstdlib>
#include <filesystem>
#include <random>
#include <string>
#include <vector>

#include "search/store/store.hpp"

namespace {

namespace fs = std::filesystem;
namespace st = autocomp::search::store;
using Clock = std::chrono::steady_clock;

// CPU time of the calling thread: the store's own cost, independent of how busy the machine is.
double thread_cpu_us() {
  timespec now{};
  clock_gettime(CLOCK_THREAD_CPUTIME_ID, &now);
  return static_cast<double>(now.tv_sec) * 1e6 + static_cast<double>(now.tv_nsec) / 1e3;
}

double elapsed_us(Clock::time_point start) {
  return std::chrono::duration<double, std::micro>(Clock::now() - start).count();
}

struct Percentiles {
  double p50 = 0;
  double p99 = 0;
  double max = 0;
};

Percentiles percentiles(std::vector<double> samples) {
  std::sort(samples.begin(), samples.end());
  auto at = [&](double q) {
    return samples[std::min(samples.size() - 1, static_cast<std::size_t>(q * samples.size()))];
  };
  return {at(0.50), at(0.99), samples.back()};
}

autocomp::backends::EvalResult sample_result(int i) {
  autocomp::backends::EvalResult result;
  result.verified = true;
  result.correct = true;
  for (int s = 0; s < 5; ++s) {
    result.seeds.push_back({s, true, 1e-6, 1e-7, ""});
  }
  std::vector<double> samples(100);
  for (std::size_t s = 0; s < samples.size(); ++s) {
    samples[s] = 40.0 + i % 17 + static_cast<double>(s % 7) * 0.1;
  }
  result.latency = autocomp::backends::LatencyStats{40, 41, 45, samples};
  for (const char* name :
       {"total_time", "tensor_engine_active_time", "vector_engine_active_time",
        "scalar_engine_active_time", "gpsimd_engine_active_time", "dma_active_time",
        "hbm_read_bytes", "hbm_write_bytes", "sbuf_read_bytes", "sbuf_write_bytes",
        "psum_read_bytes", "flops", "mfu_estimated_percent", "spill_save_bytes", "peak_sbuf_usage",
        "peak_psum_usage"}) {
    result.metrics[name] = 1.0e-5 * (i + 1);
  }
  result.roofline = {{"compute_pct", 12}, {"hbm_pct", 40}, {"arithmetic_intensity", 2}};
  result.bottleneck = "memory-bound";
  result.device = "sim";
  result.target = "trn2";
  result.backend_identity = "sim";
  result.host = "localhost";
  result.harness_version = "1.0.0";
  result.steps = {{"run", 900}, {"parse", 1}};
  result.raw_json = std::string(3000, 'j');  // a typical harness line
  return result;
}

std::string kernel_source(int i) {
  std::string source =
      "import nki\n@nki.jit\ndef kernel(a, b):  # variant " + std::to_string(i) + "\n";
  for (int line = 0; line < 60; ++line) {
    source += "    t" + std::to_string(line) + " = nl.load(a[" + std::to_string(line) + "])\n";
  }
  return source;
}

constexpr const char* k_problem = "def inputs(seed): ...\n";

autocomp::backends::EvalRequest request_for(const std::string& kernel,
                                            autocomp::backends::EvalCommand command) {
  autocomp::backends::EvalRequest request;
  request.kernel_source = kernel;
  request.problem_source = k_problem;
  request.target = "trn2";
  request.command = command;
  return request;
}

const st::EvalSite k_site{"sim", "sim", "1.0.0", "a:float32[128,512]"};

}  // namespace

int main(int argc, char** argv) {
  const int candidates = argc > 1 ? std::atoi(argv[1]) : 2000;
  const int lookups = argc > 2 ? std::atoi(argv[2]) : 20000;
  const fs::path folder = argc > 3 ? fs::path(argv[3]) : fs::temp_directory_path();
  const fs::path db = folder / ("store_bench_" + std::to_string(getpid()) + ".db");

  auto start = Clock::now();
  auto opened = st::Store::open(db.string());
  if (!opened) {
    std::fprintf(stderr, "%s\n", opened.failure().describe().c_str());
    return 1;
  }
  std::printf("open + migrate a new database: %.1f ms\n", elapsed_us(start) / 1000);
  st::Store& store = *opened.value();
  auto& cache = store.evaluations();
  (void)cache.put_workload(k_problem, "/p.py").value();

  // Writes, each committed on its own (the way results arrive).
  std::vector<std::string> keys;
  std::vector<std::string> sources;
  start = Clock::now();
  for (int i = 0; i < candidates; ++i) {
    sources.push_back(kernel_source(i));
    keys.push_back(cache.put_candidate(sources.back(), "bench").value());
    if (!cache.record(request_for(sources.back(), autocomp::backends::EvalCommand::evaluate),
                      k_site, sample_result(i))) {
      std::fprintf(stderr, "write failed\n");
      return 1;
    }
  }
  double us = elapsed_us(start);
  std::printf("write: %d candidates + evaluations in %.2f s: %.0f evaluations/s (%.2f ms each)\n",
              candidates, us / 1e6, candidates / (us / 1e6), us / candidates / 1000);

  const std::string run = store.runs().create_run(st::RunConfig{}).value();
  start = Clock::now();
  for (int i = 0; i < candidates; ++i) {
    st::RunCandidate candidate;
    candidate.run_id = run;
    candidate.candidate_key = keys[static_cast<std::size_t>(i)];
    candidate.plan_text = "plan text of a few hundred characters " + std::string(200, 'p');
    (void)store.runs().add_run_candidate(candidate);
  }
  us = elapsed_us(start);
  std::printf("write: add_run_candidate %.0f/s\n", candidates / (us / 1e6));

  start = Clock::now();
  for (int i = 0; i < candidates; ++i) {
    st::LlmCall call;
    call.run_id = run;
    call.request_hash = "h" + std::to_string(i);
    call.prompt = std::string(8000, 'q');
    call.response = std::string(4000, 'r');
    (void)store.llm_calls().put_llm_call(call);
  }
  us = elapsed_us(start);
  std::printf("write: put_llm_call (8 KB prompt, 4 KB response) %.0f/s\n", candidates / (us / 1e6));

  // Cache hits on random keys.
  std::mt19937 random(7);
  std::uniform_int_distribution<std::size_t> pick(0, keys.size() - 1);
  auto measure = [&](const char* name, auto&& lookup) {
    std::vector<double> wall;
    std::vector<double> cpu;
    wall.reserve(static_cast<std::size_t>(lookups));
    cpu.reserve(static_cast<std::size_t>(lookups));
    int misses = 0;
    for (int i = 0; i < lookups; ++i) {
      const std::string& source = sources[pick(random)];
      const double cpu_start = thread_cpu_us();
      const auto t = Clock::now();
      const bool hit = lookup(source);
      wall.push_back(elapsed_us(t));
      cpu.push_back(thread_cpu_us() - cpu_start);
      misses += hit ? 0 : 1;
    }
    const Percentiles w = percentiles(wall);
    const Percentiles c = percentiles(cpu);
    std::printf(
        "%s (%d lookups, %d misses):\n  wall p50 %.1f us, p99 %.1f us, max %.1f us; "
        "thread CPU p50 %.1f us, p99 %.1f us\n",
        name, lookups, misses, w.p50, w.p99, w.max, c.p50, c.p99);
  };
  using autocomp::backends::EvalCommand;
  measure("cache hit lookup (evaluate, full result decoded)", [&](const std::string& source) {
    auto found = cache.lookup(request_for(source, EvalCommand::evaluate), k_site);
    return found.ok() && found.value().has_value();
  });
  measure("cache hit lookup (verify answered by evaluate)", [&](const std::string& source) {
    auto found = cache.lookup(request_for(source, EvalCommand::verify), k_site);
    return found.ok() && found.value().has_value();
  });
  measure("cache miss lookup (other harness version)", [&](const std::string& source) {
    st::EvalSite other = k_site;
    other.harness_version = "9";
    auto found = cache.lookup(request_for(source, EvalCommand::benchmark), other);
    return found.ok() && found.value().has_value();
  });
  measure("find_llm_response", [&](const std::string&) {
    auto found = store.llm_calls().find_llm_response(run, "h" + std::to_string(pick(random)));
    return found.ok() && found.value().has_value();
  });

  // A cache hit from a freshly opened store (as a new tool process would see it).
  opened.value().reset();
  start = Clock::now();
  auto reopened = st::Store::open(db.string());
  const double open_us = elapsed_us(start);
  start = Clock::now();
  auto first = reopened.value()->evaluations().lookup(
      request_for(sources.front(), EvalCommand::evaluate), k_site);
  std::printf("reopen existing database: %.1f ms; first lookup after reopen: %.2f ms (%s)\n",
              open_us / 1000, elapsed_us(start) / 1000,
              first.ok() && first.value().has_value() ? "hit" : "MISS");
  reopened.value().reset();
  std::error_code ignored;
  auto size_of = [](const fs::path& path) {
    std::error_code error;
    const auto size = fs::file_size(path, error);
    return error ? 0.0 : static_cast<double>(size);
  };
  std::printf("database size: %.1f MB\n", (size_of(db) + size_of(db.string() + "-wal")) / 1e6);
  fs::remove(db, ignored);
  fs::remove(db.string() + "-wal", ignored);
  fs::remove(db.string() + "-shm", ignored);
  return 0;
}
