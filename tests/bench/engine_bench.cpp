// The search engine's own overhead per iteration: an instantly answering fake provider, an
// instantly answering fake backend and a real SQLite store in a temporary file, at the default
// beam shape (B=6, N=6, K=2). Everything measured is engine work: prompt assembly, hashing,
// batching, dedup, store writes, selection. Prints one line per iteration and a summary.

#include <chrono>
#include <cstdio>
#include <filesystem>
#include <mutex>
#include <vector>

#include "search/engine/beam_search.hpp"
#include "search/engine/run_store.hpp"
#include "search/store/store.hpp"
#include "unit/search/engine_test_support.hpp"

using namespace autocomp;
using namespace autocomp::search::engine;

int main(int argc, char** argv) {
  int iterations = argc > 1 ? std::atoi(argv[1]) : 5;
  auto dir =
      std::filesystem::temp_directory_path() / ("engine_bench_" + std::to_string(::getpid()));
  std::filesystem::create_directories(dir);
  auto opened = search::store::Store::open((dir / "bench.db").string());
  if (!opened) {
    std::fprintf(stderr, "cannot open the store: %s\n", opened.failure().describe().c_str());
    return 1;
  }
  std::shared_ptr<search::store::Store> db(std::move(opened.value()));

  auto provider = std::make_shared<search::llm::FakeProvider>("fake", 8);
  provider->set_responder(
      [](const search::llm::CompletionRequest& request) -> core::Result<search::llm::Completion> {
        const std::string digest = core::sha256_hex(request.messages.back().content);
        search::llm::Completion completion;
        if (request.purpose == "plan") {
          completion.text = "Fuse the loops and keep tiles in SBUF (" + digest.substr(0, 8) + ").";
        } else {
          int latency = 40 + static_cast<int>(std::stoul(digest.substr(0, 4), nullptr, 16) % 80);
          completion.text = testing::fenced(
              testing::kernel("k" + digest.substr(0, 10), "latency: " + std::to_string(latency)));
        }
        return completion;
      });

  SearchServices services;
  services.backend = std::make_shared<testing::FakeBackend>(8);
  services.store = parts_of(db);
  services.facts = RunFacts{"bench.py", "problem.py", "fake", {"fake"}};
  services.providers = {provider};
  services.prompts = std::shared_ptr<const PromptFactory>(make_default_prompt_factory());

  SearchConfig config = testing::small_config(testing::kernel("k", "latency: 100"));
  config.beam = 6;
  config.plans = 6;
  config.impls = 2;
  config.iterations = iterations;

  std::mutex mutex;
  double last = 0;
  std::vector<double> per_iteration;
  SearchHooks hooks;
  hooks.progress = [&](const ProgressEvent& event) {
    std::lock_guard lock(mutex);
    if (event.phase == "baseline") {
      last = event.elapsed_s;
    } else if (event.phase == "iteration_done") {
      double ms = (event.elapsed_s - last) * 1000;
      last = event.elapsed_s;
      per_iteration.push_back(ms);
      std::printf(
          "iteration %d: %.1f ms engine overhead, %ld children evaluated so far, best %.0f us\n",
          event.iteration, ms, event.candidates_evaluated, event.best_latency_us);
    }
  };
  auto outcome = run_search(config, services, {}, hooks);
  double total = 0;
  for (double ms : per_iteration) {
    total += ms;
  }
  std::printf(
      "B=%d N=%d K=%d: %zu iterations, mean %.1f ms per iteration (%ld LLM calls, %ld "
      "backend evaluations, status %s)\n",
      config.beam, config.plans, config.impls, per_iteration.size(),
      per_iteration.empty() ? 0.0 : total / per_iteration.size(), outcome.llm_calls,
      outcome.backend_evaluations, outcome.status.c_str());
  std::filesystem::remove_all(dir);
  return outcome.status == "completed" ? 0 : 1;
}
