// How a search uses its store: every SQL statement the store runs is counted (StoreOptions::
// on_statement), per iteration, and the journal writes that name each child. Fake provider and
// fake backend answer at once; the store is real SQLite in a temporary file. Two shapes: a wide
// beam (B=6, N=6, K=2) without memory, and a single-member beam with lessons and reflexions on.
// Prints the statements of iterations 1 and the last, and the writes per child.

#include <unistd.h>

#include <algorithm>
#include <cstdio>
#include <cstring>
#include <filesystem>
#include <map>
#include <mutex>
#include <regex>
#include <string>
#include <vector>

#include "core/hash.hpp"
#include "search/engine/beam_search.hpp"
#include "search/engine/run_store.hpp"
#include "search/store/store.hpp"
#include "unit/search/engine_test_support.hpp"

using namespace autocomp;
using namespace autocomp::search::engine;

namespace {

struct Counts {
  long statements = 0;
  long reads = 0;
  long writes = 0;
};

struct Tally {
  std::mutex mutex;
  std::string run_id;
  Counts now;
  std::vector<Counts> per_iteration;  // [0]: setup and baseline
  Counts at_last_mark;
  std::vector<std::string> child_writes;  // writes to run_candidates, candidates, evaluations
  void mark() {
    per_iteration.push_back(Counts{now.statements - at_last_mark.statements,
                                   now.reads - at_last_mark.reads,
                                   now.writes - at_last_mark.writes});
    at_last_mark = now;
  }
};

bool starts_with_word(const std::string& sql, const char* word) {
  const auto first = sql.find_first_not_of(" \n\t");
  return first != std::string::npos && sql.compare(first, std::strlen(word), word) == 0;
}

int run_shape(const char* name, int beam, int plans, int impls, bool memory, int iterations) {
  auto dir = std::filesystem::temp_directory_path() /
             ("engine_store_bench_" + std::to_string(::getpid()) + "_" + name);
  std::filesystem::create_directories(dir);
  Tally tally;
  search::store::StoreOptions options;
  options.on_statement = [&tally](std::string_view text) {
    std::string sql(text);
    std::lock_guard lock(tally.mutex);
    ++tally.now.statements;
    if (starts_with_word(sql, "SELECT") || starts_with_word(sql, "WITH")) {
      ++tally.now.reads;
    } else if (starts_with_word(sql, "INSERT") || starts_with_word(sql, "UPDATE") ||
               starts_with_word(sql, "DELETE") || starts_with_word(sql, "REPLACE")) {
      ++tally.now.writes;
      if (sql.find("run_candidates") != std::string::npos ||
          sql.find("INTO candidates") != std::string::npos ||
          sql.find("INTO evaluations") != std::string::npos) {
        tally.child_writes.push_back(sql);
      }
    }
  };
  auto opened = search::store::Store::open((dir / "bench.db").string(), options);
  if (!opened) {
    std::fprintf(stderr, "cannot open the store: %s\n", opened.failure().describe().c_str());
    return 1;
  }
  std::shared_ptr<search::store::Store> db(std::move(opened.value()));

  auto provider = std::make_shared<search::llm::FakeProvider>("fake", 8);
  provider->set_responder(
      [](const search::llm::CompletionRequest& request) -> core::Result<search::llm::Completion> {
        const std::string digest = core::sha256_hex(request.messages.back().content);
        const unsigned roll = static_cast<unsigned>(std::stoul(digest.substr(0, 4), nullptr, 16));
        search::llm::Completion completion;
        if (request.purpose == "plan") {
          completion.text = "Fuse the loops and keep tiles in SBUF (" + digest.substr(0, 8) + ").";
        } else if (request.purpose == "summarize") {
          completion.text = "- Keeping tiles in SBUF helps (" + digest.substr(0, 6) + ").\n";
        } else if (request.purpose == "reflect") {
          completion.text = "Expected: faster.\nActual: as measured.\nLesson: keep tiles.\n";
        } else {
          // One in six answers does not compile; one in eight repeats an earlier kernel.
          const std::string marker = roll % 6 == 0 && request.purpose != "repair"
                                         ? "compile_error"
                                         : "latency: " + std::to_string(40 + roll % 80);
          const std::string kernel = roll % 8 == 0 ? "kdup" : "k" + digest.substr(0, 10);
          completion.text = testing::fenced(testing::kernel(kernel, marker));
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
  config.beam = beam;
  config.plans = plans;
  config.impls = impls;
  config.iterations = iterations;
  config.repair_tries = 1;
  config.memory = memory;
  config.reflexions = memory ? 3 : 0;

  SearchHooks hooks;
  hooks.started = [&tally](const std::string& id) {
    std::lock_guard lock(tally.mutex);
    tally.run_id = id;
  };
  hooks.progress = [&tally](const ProgressEvent& event) {
    if (event.phase == "baseline" || event.phase == "iteration_done") {
      std::lock_guard lock(tally.mutex);
      tally.mark();
    }
  };
  auto outcome = run_search(config, services, {}, hooks);

  // Writes per child, attributed by the first source key each statement names (after the run
  // id): run rows (run_candidates), and every write naming the child (its source and evaluation
  // too).
  const std::regex key_pattern("[0-9a-f]{64}");
  std::map<std::string, int> row_writes;
  std::map<std::string, int> all_writes;
  for (std::string sql : tally.child_writes) {
    if (auto at = sql.find(tally.run_id); !tally.run_id.empty() && at != std::string::npos) {
      sql.erase(at, tally.run_id.size());
    }
    std::smatch match;
    if (std::regex_search(sql, match, key_pattern)) {
      ++all_writes[match.str()];
      if (sql.find("run_candidates") != std::string::npos) {
        ++row_writes[match.str()];
      }
    }
  }
  auto rows = db->runs().run_candidates(outcome.run_id).value();
  long children = 0;
  long row_total = 0;
  long all_total = 0;
  int row_most = 0;
  int all_most = 0;
  for (const auto& row : rows) {
    if (row.iteration == 0) {
      continue;
    }
    ++children;
    row_total += row_writes[row.candidate_key];
    all_total += all_writes[row.candidate_key];
    row_most = std::max(row_most, row_writes[row.candidate_key]);
    all_most = std::max(all_most, all_writes[row.candidate_key]);
  }
  std::printf("%s (B=%d N=%d K=%d, memory %s): %s after %d iterations, %ld children stored\n", name,
              beam, plans, impls, memory ? "on" : "off", outcome.status.c_str(),
              outcome.iterations_done, children);
  for (std::size_t i = 0; i < tally.per_iteration.size(); ++i) {
    if (i == 1 || i + 1 == tally.per_iteration.size() || i == 10) {
      const Counts& c = tally.per_iteration[i];
      std::printf("  iteration %2zu: %5ld statements (%5ld reads, %4ld writes)\n", i, c.statements,
                  c.reads, c.writes);
    }
  }
  const double n = children > 0 ? static_cast<double>(children) : 1.0;
  std::printf("  run-row writes per stored child: mean %.2f, most %d\n",
              static_cast<double>(row_total) / n, row_most);
  std::printf("  all writes naming a stored child (row, source, evaluation): mean %.2f, most %d\n",
              static_cast<double>(all_total) / n, all_most);
  std::filesystem::remove_all(dir);
  return outcome.status == "completed" ? 0 : 1;
}

}  // namespace

int main(int argc, char** argv) {
  const int iterations = argc > 1 ? std::atoi(argv[1]) : 20;
  int failed = run_shape("wide", 6, 6, 2, false, iterations);
  failed += run_shape("learning", 1, 4, 2, true, iterations);
  return failed == 0 ? 0 : 1;
}
