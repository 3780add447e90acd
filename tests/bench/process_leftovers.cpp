// Leftover processes after hostile evaluations (issue: processes escaping the timeout kill).
// Each evaluation starts children that call setsid(), double-fork, and leave sleeping
// grandchildren; half of them end by themselves, half are killed at their timeout. Prints how
// many of those processes are still alive afterwards, with the isolation of run_process
// (ProcessSpec::isolate) and, for comparison, without it.
//
//   build/tests/bench_process_leftovers [evaluations=100]
#include <chrono>
#include <cstdio>
#include <cstdlib>
#include <string>
#include <thread>

#include "core/process.hpp"

namespace {

using namespace std::chrono_literals;
using autocomp::core::ProcessSpec;
using autocomp::core::run_process;

int count_alive(const std::string& marker) {
  ProcessSpec spec;
  spec.argv = {"pgrep", "-f", "-c", marker};  // not through sh, whose command line would match
  auto run = run_process(spec);
  return run.ok() ? std::atoi(run->stdout_text.c_str()) : -1;
}

void kill_leftovers(const std::string& marker) {
  ProcessSpec spec;
  spec.argv = {"pkill", "-KILL", "-f", marker};
  static_cast<void>(run_process(spec));
}

int hostile_round(bool isolate, int evaluations, const std::string& marker, double& seconds) {
  const std::string sleeper = "sleep 30; : " + marker;
  const std::string script = "setsid sh -c '" + sleeper +
                             "' </dev/null >/dev/null 2>&1 & "  // setsid
                             "(setsid sh -c '(" +
                             sleeper +
                             ") &' </dev/null >/dev/null 2>&1 &); "  // double fork
                             "sh -c '(" +
                             sleeper + ") & (" + sleeper +
                             ") & wait' </dev/null >/dev/null 2>&1 & "  // grandchildren
                             "sleep 0.1; if [ \"$1\" = stay ]; then sleep 30; fi";
  auto start = std::chrono::steady_clock::now();
  for (int i = 0; i < evaluations; ++i) {
    ProcessSpec spec;
    bool stay = i % 2 == 1;
    spec.argv = {"sh", "-c", script, "hostile", stay ? "stay" : "leave"};
    spec.isolate = isolate;
    spec.timeout = 400ms;
    spec.kill_grace = 100ms;
    static_cast<void>(run_process(spec));
  }
  seconds = std::chrono::duration<double>(std::chrono::steady_clock::now() - start).count();
  std::this_thread::sleep_for(300ms);  // let the kernel finish any kill in flight
  int alive = count_alive(marker);
  kill_leftovers(marker);
  return alive;
}

}  // namespace

int main(int argc, char** argv) {
  int evaluations = argc > 1 ? std::atoi(argv[1]) : 100;
  std::printf("isolation mode: %s\n", autocomp::core::isolation_mode().c_str());
  for (bool isolate : {false, true}) {
    const std::string marker = std::string("autocomp_bench_leftover_") +
                               (isolate ? "iso_" : "plain_") + std::to_string(::getpid());
    double seconds = 0;
    int alive = hostile_round(isolate, evaluations, marker, seconds);
    std::printf("%-28s %d hostile evaluations, %d leftover processes (%.1f s)\n",
                isolate ? "isolated (ProcessSpec.isolate)" : "process group only", evaluations,
                alive, seconds);
  }
  return 0;
}
