// Figures for the evaluation backends, on loopback OpenSSH servers started here:
//  1. the overhead of an SSH evaluation over the same evaluation run by the local backend
//     (the simulator, a small seed kernel, warm sessions and an uploaded bundle);
//  2. throughput with 1, 2 and 4 slots across two hosts with the fake device, whose device work
//     is a timed wait (so the figure measures the scheduler, not this machine's cores).
// Usage: bench_backend_bench [overhead_runs=7] [throughput_batch=8 (0: skip)] [fake_ms=200]

#include <algorithm>
#include <chrono>
#include <cstdio>
#include <cstdlib>
#include <filesystem>
#include <fstream>
#include <map>
#include <string>
#include <vector>

#include "backends/backend.hpp"
#include "backends/ssh_backend.hpp"
#include "support/sshd_fixture.hpp"

namespace {

namespace fs = std::filesystem;
using autocomp::backends::Backend;
using autocomp::backends::EvalRequest;
using autocomp::backends::EvalResult;
using Clock = std::chrono::steady_clock;

const char* k_problem = R"(import numpy as np

SHAPE = (@SHAPE@)
KERNEL = "transpose_kernel"
RTOL = 0.0
ATOL = 0.0
SEEDS = [0, 1]


def inputs(seed):
    rng = np.random.default_rng(seed)
    return {"x": rng.standard_normal(SHAPE, dtype=np.float32)}


def reference(x):
    return np.ascontiguousarray(np.transpose(x, (0, 2, 1)))
)";

double median(std::vector<double> values) {
  if (values.empty()) {
    return 0;
  }
  std::sort(values.begin(), values.end());
  return values[values.size() / 2];
}

double ms_since(Clock::time_point start) {
  return std::chrono::duration<double, std::milli>(Clock::now() - start).count();
}

// Both backends run the same copy of the harness bundle, so that neither pays for edits made to
// the source tree meanwhile (stale bytecode caches).
autocomp::backends::BackendOptions g_options;

std::shared_ptr<Backend> make(const std::string& spec) {
  auto backend = autocomp::backends::make_backend(spec, g_options);
  if (!backend.ok()) {
    std::fprintf(stderr, "cannot make %s: %s\n", spec.c_str(),
                 backend.failure().describe().c_str());
    std::exit(1);
  }
  return backend.value();
}

// Wall time of one single-request batch, and its steps.
double timed_evaluate(Backend& backend, const EvalRequest& request,
                      std::map<std::string, std::vector<double>>* steps) {
  auto start = Clock::now();
  auto results = backend.evaluate({request}, {}, {});
  double wall = ms_since(start);
  if (!results[0].ok()) {
    std::fprintf(stderr, "evaluation failed on %s: %s\n", backend.identity().c_str(),
                 results[0].failure->describe().c_str());
    std::exit(1);
  }
  if (steps != nullptr) {
    for (const auto& step : results[0].steps) {
      (*steps)[step.step].push_back(step.ms);
    }
  }
  return wall;
}

}  // namespace

int main(int argc, char** argv) {
  int overhead_runs = argc > 1 ? std::atoi(argv[1]) : 7;
  int batch_size = argc > 2 ? std::atoi(argv[2]) : 8;
  int fake_ms = argc > 3 ? std::atoi(argv[3]) : 200;

  autocomp::testing::TempDir tmp("autocomp-backend-bench");
  // Remote sessions do not inherit it; without bytecode caches every local run would recompile
  // the harness and the simulator, which is not what a user's machine does.
  ::unsetenv("PYTHONDONTWRITEBYTECODE");
  fs::create_directories(tmp.path() / "bundle");
  for (const char* part : {"harness", "nkisim"}) {
    fs::copy(fs::path(AUTOCOMP_SOURCE_DIR) / "backends" / part, tmp.path() / "bundle" / part,
             fs::copy_options::recursive);
  }
  g_options.harness_dir = (tmp.path() / "bundle").string();
  fs::path key = tmp.path() / "user_key";
  autocomp::testing::generate_key(key);
  autocomp::testing::LoopbackSshd a(tmp.path() / "a", key.string() + ".pub");
  autocomp::testing::LoopbackSshd b(tmp.path() / "b", key.string() + ".pub");
  fs::path known = tmp.path() / "known_hosts";
  std::ofstream(known) << a.known_hosts_line() << b.known_hosts_line();
  auto spec = [&](const autocomp::testing::LoopbackSshd& server, const std::string& extra) {
    return "ssh://root@127.0.0.1:" + std::to_string(server.port()) + "?key=" + key.string() +
           "&known_hosts=" + known.string() + "&python=" AUTOCOMP_PYTHON +
           "&remote_dir=" + (tmp.path() / "remote").string() + "&" + extra;
  };

  // 1. Overhead.
  EvalRequest request;
  request.kernel_source = autocomp::testing::read_text(fs::path(AUTOCOMP_SOURCE_DIR) / "seeds" /
                                                       "transpose" / "naive.py");
  request.iters = 5;
  auto local = make("sim");
  auto remote = make(spec(a, "device=sim"));
  for (const char* shape : {"1, 128, 256", "4, 512, 256"}) {
    request.problem_source = k_problem;
    request.problem_source.replace(request.problem_source.find("@SHAPE@"), 7, shape);
    timed_evaluate(*local, request, nullptr);   // warm: version query, page cache
    timed_evaluate(*remote, request, nullptr);  // warm: session, bundle upload
    std::vector<double> local_ms, remote_ms;
    std::map<std::string, std::vector<double>> local_steps, remote_steps;
    for (int i = 0; i < overhead_runs; ++i) {  // interleaved, so load changes hit both alike
      local_ms.push_back(timed_evaluate(*local, request, &local_steps));
      remote_ms.push_back(timed_evaluate(*remote, request, &remote_steps));
    }
    double local_median = median(local_ms);
    double remote_median = median(remote_ms);
    double overhead = remote_median - local_median;
    std::printf("== SSH overhead (sim, seeds/transpose/naive.py, input shape (%s), %d runs)\n",
                shape, overhead_runs);
    std::printf("local backend evaluation   median %8.1f ms\n", local_median);
    std::printf("ssh backend evaluation     median %8.1f ms\n", remote_median);
    std::printf("overhead                          %8.1f ms  (%.1f%% of the local evaluation)\n",
                overhead, 100.0 * overhead / local_median);
    std::printf("ssh steps (median ms):");
    for (const char* step : {"connect", "upload", "run", "fetch", "cleanup"}) {
      std::printf(" %s %.1f", step, median(remote_steps[step]));
    }
    std::printf("\nlocal steps (median ms):");
    for (const char* step : {"write", "run", "parse", "cleanup"}) {
      std::printf(" %s %.1f", step, median(local_steps[step]));
    }
    double ssh_outside_run = median(remote_steps["connect"]) + median(remote_steps["upload"]) +
                             median(remote_steps["fetch"]) + median(remote_steps["cleanup"]);
    std::printf("\nssh steps outside the remote run: %.1f ms\n\n", ssh_outside_run);
  }

  if (batch_size <= 0) {
    return 0;
  }
  // 2. Throughput with the fake device.
  std::printf("== Throughput, fake device (fake_ms=%d, default seeds/warmup/iters), batch of %d\n",
              fake_ms, batch_size);
  EvalRequest fake;
  fake.kernel_source = "def kernel(a):\n    return a\n";
  fake.problem_source = "import numpy as np\n";
  const std::string fake_option = "device=fake&fake_ms=" + std::to_string(fake_ms);
  struct Config {
    const char* name;
    std::string spec;
  };
  std::vector<Config> configs{
      {"1 slot  (host a x1)", spec(a, fake_option + "&slots=1")},
      {"2 slots (a x1, b x1)",
       spec(a, fake_option + "&slots=1") + "," + spec(b, fake_option + "&slots=1")},
      {"4 slots (a x2, b x2)",
       spec(a, fake_option + "&slots=2") + "," + spec(b, fake_option + "&slots=2")},
  };
  double base_rate = 0;
  for (const auto& config : configs) {
    auto backend = make(config.spec);
    // Warm every session so connection set-up is not part of the figure.
    backend->evaluate(std::vector<EvalRequest>(static_cast<std::size_t>(backend->slots()), fake),
                      {}, {});
    auto start = Clock::now();
    auto results = backend->evaluate(
        std::vector<EvalRequest>(static_cast<std::size_t>(batch_size), fake), {}, {});
    double wall = ms_since(start);
    for (const auto& result : results) {
      if (!result.ok()) {
        std::fprintf(stderr, "failed: %s\n", result.failure->describe().c_str());
        return 1;
      }
    }
    double rate = batch_size / (wall / 1000.0);
    if (base_rate == 0) {
      base_rate = rate;
    }
    std::printf("%-22s %8.0f ms  %6.2f evaluations/s  speed-up %.2fx\n", config.name, wall, rate,
                rate / base_rate);
  }
  return 0;
}
