// The real binary in --autonomous mode on the rmsnorm seed in the simulator, with a scripted
// OpenAI-compatible server on loopback playing plans and code.

#include <gtest/gtest.h>
#include <signal.h>
#include <sys/wait.h>
#include <unistd.h>

#include <algorithm>
#include <chrono>
#include <filesystem>
#include <fstream>
#include <sstream>
#include <string>
#include <thread>
#include <vector>

#include "core/hash.hpp"
#include "search/store/store.hpp"
#include "support/scripted_llm_server.hpp"

namespace {

namespace fs = std::filesystem;
using autocomp::testing::ScriptedLlmServer;
using autocomp::testing::ScriptedResponse;

std::string read(const fs::path& path) {
  std::ifstream in(path, std::ios::binary);
  std::ostringstream text;
  text << in.rdbuf();
  return text.str();
}

void write(const fs::path& path, const std::string& text) {
  std::ofstream out(path, std::ios::binary);
  out << text;
}

std::string replace(std::string text, const std::string& from, const std::string& to) {
  auto pos = text.find(from);
  EXPECT_NE(pos, std::string::npos) << from;
  if (pos != std::string::npos) {
    text.replace(pos, from.size(), to);
  }
  return text;
}

std::string fenced(const std::string& code) {
  return "Here it is.\n```python\n" + code + "```\n";
}

constexpr const char* k_plan_phrase = "Study the kernel and its measurements";
// Phrases of templates/summarize_lessons.md and templates/reflect.md.
constexpr const char* k_summary_phrase = "Distil at most";
constexpr const char* k_reflect_phrase = "Reflect on this attempt";
constexpr const char* k_lesson = "Hoisting the weight broadcast out of the row loop cut DMA time.";
constexpr const char* k_reflection =
    "diagnosis_right: yes\nfix_worked: yes\nexpected: less DMA time\nactual: as expected\n"
    "lessons: broadcasts belong outside loops\navoid: normalizing twice\n"
    "try_next: fuse the scale into the activation\n";

class Autonomous : public ::testing::Test {
 protected:
  void SetUp() override {
    dir = fs::temp_directory_path() /
          ("autonomous_test_" + std::to_string(::getpid()) + "_" +
           ::testing::UnitTest::GetInstance()->current_test_info()->name());
    fs::remove_all(dir);
    fs::create_directories(dir);
    const fs::path seed = fs::path(AUTOCOMP_SOURCE_DIR) / "seeds" / "rmsnorm";
    naive = read(seed / "naive.py");
    optimized = read(seed / "optimized.py");
    write(dir / "kernel.py", naive);
    fs::copy_file(seed / "problem.py", dir / "problem.py");
    broken =
        replace(naive, "g_tile = nl.load(g_2d[0:1, :])", "g_tile = nl.load_tile(g_2d[0:1, :])");
    slower = replace(naive, "        out_tile = nl.multiply(normalized, g_bcast)\n",
                     "        normalized = nl.multiply(normalized, 1.0)\n"
                     "        normalized = nl.multiply(normalized, 1.0)\n"
                     "        out_tile = nl.multiply(normalized, g_bcast)\n");
    repaired = replace(naive, "        out_tile = nl.multiply(normalized, g_bcast)\n",
                       "        out_tile = nl.multiply(g_bcast, normalized)\n");
    ::setenv("AUTOCOMP_SMALL", "1", 1);
    ::setenv("AUTOCOMP_PYTHON", AUTOCOMP_PYTHON, 1);
    ::setenv("OPENAI_BASE_URL", server.openai_base_url().c_str(), 1);
    ::setenv("OPENAI_API_KEY", "test-key", 1);
  }
  void TearDown() override {
    server.stop();
    fs::remove_all(dir);
  }

  std::vector<std::string> args(std::vector<std::string> extra) const {
    std::vector<std::string> out{AUTOCOMP_BINARY, "--autonomous",
                                 "--kernel",      (dir / "kernel.py").string(),
                                 "--problem",     (dir / "problem.py").string(),
                                 "--db",          (dir / "store.db").string(),
                                 "--backend",     "sim",
                                 "--seed",        "1"};
    out.insert(out.end(), extra.begin(), extra.end());
    return out;
  }

  // Starts the binary with stdout and stderr in files; returns its pid.
  pid_t start(const std::vector<std::string>& argv, const std::string& name) const {
    pid_t pid = ::fork();
    if (pid == 0) {
      FILE* out = std::freopen((dir / (name + ".out")).c_str(), "w", stdout);
      FILE* err = std::freopen((dir / (name + ".err")).c_str(), "w", stderr);
      (void)out;
      (void)err;
      std::vector<char*> raw;
      for (const auto& arg : argv) {
        raw.push_back(const_cast<char*>(arg.c_str()));
      }
      raw.push_back(nullptr);
      ::execv(raw[0], raw.data());
      std::_Exit(127);
    }
    return pid;
  }
  int finish(pid_t pid) const {
    int status = 0;
    ::waitpid(pid, &status, 0);
    return WIFEXITED(status) ? WEXITSTATUS(status) : -1;
  }
  int run(const std::vector<std::string>& argv, const std::string& name) const {
    return finish(start(argv, name));
  }
  std::string out(const std::string& name) const { return read(dir / (name + ".out")); }
  std::string err(const std::string& name) const { return read(dir / (name + ".err")); }

  long requests_containing(const std::string& text) const {
    long count = 0;
    for (const auto& request : server.requests()) {
      count += request.prompt.find(text) != std::string::npos ? 1 : 0;
    }
    return count;
  }
  // Planning and coding requests only (lesson summaries and reflections quote plans too).
  long search_requests_containing(const std::string& text) const {
    long count = 0;
    for (const auto& request : server.requests()) {
      const std::string& prompt = request.prompt;
      count += prompt.find(text) != std::string::npos &&
                       prompt.find(k_summary_phrase) == std::string::npos &&
                       prompt.find(k_reflect_phrase) == std::string::npos
                   ? 1
                   : 0;
    }
    return count;
  }
  // Implementation requests only (planning prompts quote the plans of siblings and of the last
  // iteration's attempts).
  long code_requests_containing(const std::string& text) const {
    long count = 0;
    for (const auto& request : server.requests()) {
      count += request.prompt.find(text) != std::string::npos &&
                       request.prompt.find(k_plan_phrase) == std::string::npos &&
                       request.prompt.find(k_summary_phrase) == std::string::npos &&
                       request.prompt.find(k_reflect_phrase) == std::string::npos
                   ? 1
                   : 0;
    }
    return count;
  }
  // Standing answers for the learning loop's requests; pushed before the rest so that they win
  // over answers matching a plan's words.
  void answer_learning_requests() {
    auto summary = ScriptedResponse::reply(std::string("- ") + k_lesson + "\n");
    summary.match = k_summary_phrase;
    summary.repeat = true;
    server.push(summary);
    auto reflection = ScriptedResponse::reply(k_reflection);
    reflection.match = k_reflect_phrase;
    reflection.repeat = true;
    server.push(reflection);
  }

  std::unique_ptr<autocomp::search::store::Store> open_store() const {
    auto store = autocomp::search::store::Store::open((dir / "store.db").string());
    EXPECT_TRUE(store.ok());
    return std::move(store.value());
  }
  // Stored evaluations of a kernel with this command (the search's own are `evaluate`; the
  // re-verification of its winner is a `verify`).
  long evaluations_of(
      autocomp::search::store::Store& store, const std::string& source,
      autocomp::backends::EvalCommand command = autocomp::backends::EvalCommand::evaluate) const {
    auto evaluations =
        store.evaluations().evaluations_for_candidate(autocomp::core::source_key(source), 100);
    if (!evaluations) {
      return -1;
    }
    return static_cast<long>(
        std::count_if(evaluations->begin(), evaluations->end(),
                      [command](const auto& stored) { return stored.key.command == command; }));
  }

  ScriptedLlmServer server;
  fs::path dir;
  std::string naive, optimized, broken, slower, repaired;
};

ScriptedResponse matching(const std::string& match, const std::string& text, bool repeat = false) {
  auto response = ScriptedResponse::reply(text);
  response.match = match;
  response.repeat = repeat;
  return response;
}

TEST_F(Autonomous, RepairsRejectsDedupsRetriesAndKeepsTheFasterKernel) {
  answer_learning_requests();
  auto limited = ScriptedResponse::status_code(429, R"({"error":{"message":"slow down"}})");
  limited.match = k_plan_phrase;
  limited.retry_after = "0";
  server.push(limited);
  server.push(matching(k_plan_phrase, "ZQ-BROKEN: load the weight tile with a tile loader."));
  server.push(matching(k_plan_phrase, "ZQ-SLOWER: normalize twice for safety."));
  server.push(matching(k_plan_phrase, "ZQ-DUP: keep the kernel as it is."));
  server.push(matching(k_plan_phrase, "ZQ-FASTER: hoist the weight broadcast and fuse the math."));
  server.push(matching("# A kernel that fails", fenced(repaired)));
  server.push(matching("ZQ-BROKEN", fenced(broken)));
  server.push(matching("ZQ-SLOWER", fenced(slower)));
  server.push(matching("ZQ-DUP", fenced(naive)));
  server.push(matching("ZQ-FASTER", fenced(optimized)));

  int code = run(args({"--llm", "openai:scripted", "--beam", "1", "--plans", "4", "--impls", "1",
                       "--iterations", "1"}),
                 "run");
  ASSERT_EQ(code, 0) << out("run") << err("run");
  const std::string stdout_text = out("run");
  ASSERT_EQ(stdout_text.rfind("run: ", 0), 0u) << stdout_text;
  const std::string run_id = stdout_text.substr(5, stdout_text.find('\n') - 5);

  EXPECT_EQ(read(dir / "kernel.best.py"), optimized) << "the faster kernel is kept";
  EXPECT_EQ(read(dir / "kernel.py"), naive) << "the input is untouched without --in-place";
  EXPECT_EQ(server.request_count(), 14u) << "4 plans + one 429 retry + 4 implementations + 1 "
                                            "repair + 1 lesson summary + 3 reflections (the "
                                            "duplicate is not reflected on)";
  EXPECT_EQ(server.pending(), 2u) << "only the standing learning answers remain";
  EXPECT_EQ(requests_containing("# A kernel that fails"), 1);
  EXPECT_EQ(requests_containing(k_summary_phrase), 1);
  EXPECT_EQ(requests_containing(k_reflect_phrase), 3);

  auto store = open_store();
  EXPECT_EQ(evaluations_of(*store, naive), 1) << "the duplicate was not evaluated again";
  EXPECT_EQ(evaluations_of(*store, optimized), 1);
  EXPECT_EQ(evaluations_of(*store, optimized, autocomp::backends::EvalCommand::verify), 1)
      << "the winner is verified again before it is reported";
  auto candidates = store->runs().run_candidates(run_id);
  ASSERT_TRUE(candidates.ok());
  auto status_of = [&](const std::string& source) -> std::string {
    for (const auto& candidate : candidates.value()) {
      if (candidate.candidate_key == autocomp::core::source_key(source)) {
        return std::string(autocomp::search::store::to_string(candidate.status));
      }
    }
    return "missing";
  };
  EXPECT_EQ(status_of(broken), "failed");
  EXPECT_NE(status_of(repaired), "failed");
  EXPECT_NE(status_of(repaired), "missing");
  EXPECT_EQ(status_of(slower), "rejected");
  EXPECT_EQ(status_of(optimized), "accepted");
  auto lessons = store->memory().lessons("trn2", 16);
  ASSERT_TRUE(lessons.ok());
  ASSERT_EQ(lessons->size(), 1u);
  // Lessons carry the workload they were learned on, so other workloads' prompts can label them.
  const std::string scoped_lesson = std::string("[rmsnorm_kernel] ") + k_lesson;
  EXPECT_EQ(lessons->front().text, scoped_lesson);
  EXPECT_EQ(lessons->front().source_run, run_id);
  auto reflexions = store->memory().recent_reflexions(run_id, 10);
  ASSERT_TRUE(reflexions.ok());
  EXPECT_EQ(reflexions->size(), 3u);
  auto run_record = store->runs().get_run(run_id);
  ASSERT_TRUE(run_record.ok() && run_record.value());
  ASSERT_TRUE(run_record.value()->best_latency_us && run_record.value()->baseline_latency_us);
  const double speedup =
      *run_record.value()->baseline_latency_us / *run_record.value()->best_latency_us;
  EXPECT_GT(speedup, 1.1);  // the faster kernel wins (1.16x on the calibrated trn2 costs)
  std::ostringstream expected;
  expected.setf(std::ios::fixed);
  expected.precision(3);
  expected << "speedup " << speedup << "x";
  EXPECT_NE(stdout_text.find(expected.str()), std::string::npos) << stdout_text;

  const fs::path report = dir / "kernel.autocomp-report";
  const std::string html = read(report / "report.html");
  const std::string markdown = read(report / "report.md");
  EXPECT_NE(html.find("<svg"), std::string::npos);
  EXPECT_NE(html.find("ZQ-FASTER"), std::string::npos) << "the winner's plan in words";
  EXPECT_NE(markdown.find("ZQ-FASTER"), std::string::npos);
  EXPECT_NE(markdown.find("Lineage"), std::string::npos);
  EXPECT_NE(markdown.find("## Lessons learned\n\n- " + scoped_lesson), std::string::npos)
      << markdown;
  EXPECT_NE(html.find(k_lesson), std::string::npos);
}

// A model that proposes a kernel right only on the drawn inputs (softmax without the row-max
// subtraction) does not win: the problem's stress input refuses it, and the honest kernel wins.
// (With `STRESS = {}` appended to the problem, the gaming kernel is accepted and wins.)
TEST_F(Autonomous, AKernelRightOnlyOnTheDrawnInputsNeverWins) {
  const fs::path seed = fs::path(AUTOCOMP_SOURCE_DIR) / "seeds" / "softmax";
  const std::string input = read(seed / "naive.py");
  const std::string honest = read(seed / "optimized.py");
  const std::string gaming = read(fs::path(AUTOCOMP_SOURCE_DIR) / "tests" / "python" / "harness" /
                                  "fixtures" / "stress" / "softmax_no_max.py");
  write(dir / "kernel.py", input);
  fs::copy_file(seed / "problem.py", dir / "problem.py", fs::copy_options::overwrite_existing);
  answer_learning_requests();
  server.push(matching(k_plan_phrase, "ZQ-NOMAX: skip the row max; exp cannot overflow here."));
  server.push(matching(k_plan_phrase, "ZQ-HONEST: one pass per row block, max subtracted."));
  // Asked to repair the refused kernel, the model insists on it.
  server.push(matching("# A kernel that fails", fenced(gaming), true));
  server.push(matching("ZQ-NOMAX", fenced(gaming)));
  server.push(matching("ZQ-HONEST", fenced(honest)));

  int code = run(args({"--llm", "openai:scripted", "--beam", "1", "--plans", "2", "--impls", "1",
                       "--iterations", "1"}),
                 "stress");
  ASSERT_EQ(code, 0) << out("stress") << err("stress");
  const std::string stdout_text = out("stress");
  ASSERT_EQ(stdout_text.rfind("run: ", 0), 0u) << stdout_text;
  const std::string run_id = stdout_text.substr(5, stdout_text.find('\n') - 5);
  EXPECT_EQ(read(dir / "kernel.best.py"), honest) << "the honest kernel wins";

  auto store = open_store();
  auto candidates = store->runs().run_candidates(run_id);
  ASSERT_TRUE(candidates.ok());
  bool seen = false;
  for (const auto& candidate : candidates.value()) {
    if (candidate.candidate_key == autocomp::core::source_key(gaming)) {
      seen = true;
      EXPECT_FALSE(candidate.correct);
      EXPECT_EQ(std::string(autocomp::search::store::to_string(candidate.status)), "failed");
    }
  }
  EXPECT_TRUE(seen) << "the gaming kernel was proposed and judged";
  auto evaluations =
      store->evaluations().evaluations_for_candidate(autocomp::core::source_key(gaming), 10);
  ASSERT_TRUE(evaluations.ok());
  ASSERT_FALSE(evaluations->empty());
  const auto& failure = evaluations->front().result.failure;
  ASSERT_TRUE(failure.has_value());
  EXPECT_EQ(failure->message.rfind("stress input 'shifted_rows'", 0), 0u) << failure->message;
}

TEST_F(Autonomous, KilledRunResumesWithoutRepeatingAnything) {
  answer_learning_requests();
  server.push(matching("This is iteration 1 of 2", "ZQ-FASTER: fuse the math.", true));
  auto slow_plan = matching("This is iteration 2 of 2", "ZQ-SLOWER: normalize twice.", true);
  slow_plan.delay = std::chrono::milliseconds(2500);
  server.push(slow_plan);
  server.push(matching("ZQ-FASTER", fenced(optimized), true));
  server.push(matching("ZQ-SLOWER", fenced(slower), true));
  const auto shape =
      std::vector<std::string>{"--llm", "openai:scripted", "--beam", "1", "--plans", "2", "--impls",
                               "1",     "--iterations",    "2"};

  pid_t pid = start(args(shape), "first");
  auto deadline = std::chrono::steady_clock::now() + std::chrono::seconds(120);
  while (requests_containing("This is iteration 2 of 2") < 1 &&
         std::chrono::steady_clock::now() < deadline) {
    std::this_thread::sleep_for(std::chrono::milliseconds(20));
  }
  ASSERT_GE(requests_containing("This is iteration 2 of 2"), 1) << err("first");
  std::this_thread::sleep_for(std::chrono::milliseconds(200));
  ::kill(pid, SIGKILL);
  finish(pid);
  const std::string first = out("first");
  ASSERT_EQ(first.rfind("run: ", 0), 0u) << first;
  const std::string run_id = first.substr(5, first.find('\n') - 5);
  const long asked_before = static_cast<long>(server.request_count());

  int code = run({AUTOCOMP_BINARY, "--autonomous", "--resume", run_id, "--db",
                  (dir / "store.db").string(), "--llm", "openai:scripted"},
                 "resume");
  ASSERT_EQ(code, 0) << out("resume") << err("resume");
  EXPECT_EQ(out("resume").rfind("run: " + run_id, 0), 0u);
  EXPECT_EQ(requests_containing("This is iteration 1 of 2"), 2) << "iteration 1 is not asked again";
  EXPECT_EQ(code_requests_containing("ZQ-FASTER"), 2);
  EXPECT_EQ(code_requests_containing("ZQ-SLOWER"), 2) << "iteration 2's implementations asked once";
  EXPECT_EQ(requests_containing(k_summary_phrase), 2) << "one lesson summary per iteration";
  EXPECT_EQ(requests_containing(k_reflect_phrase), 2)
      << "one reflection per iteration (the second plan repeats the first's kernel)";
  EXPECT_GT(search_requests_containing(k_lesson), 0) << "iteration 1's lesson reaches planning";
  EXPECT_GT(search_requests_containing("avoid: normalizing twice"), 0)
      << "iteration 1's reflection reaches planning";
  // Iteration 2 again: 2 plans + 2 implementations + its summary and reflection.
  EXPECT_LE(static_cast<long>(server.request_count()), asked_before + 6);
  auto store = open_store();
  EXPECT_EQ(evaluations_of(*store, naive), 1);
  EXPECT_EQ(evaluations_of(*store, optimized), 1);
  EXPECT_EQ(evaluations_of(*store, optimized, autocomp::backends::EvalCommand::verify), 1)
      << "the winner is verified again once, by the run that reports it";
  EXPECT_EQ(evaluations_of(*store, slower), 1);
  EXPECT_EQ(read(dir / "kernel.best.py"), optimized);
  auto beams = store->runs().get_beams(run_id);
  ASSERT_TRUE(beams.ok());
  EXPECT_EQ(beams->size(), 3u) << "beams of iterations 0, 1 and 2";
}

TEST_F(Autonomous, CallBudgetStopsTheRunCleanly) {
  server.push(matching(k_plan_phrase, "ZQ-FASTER: fuse the math.", true));
  server.push(matching("ZQ-FASTER", fenced(optimized), true));
  int code = run(args({"--llm", "openai:scripted", "--beam", "1", "--plans", "2", "--impls", "1",
                       "--iterations", "3", "--max-llm-calls", "1"}),
                 "budget");
  ASSERT_EQ(code, 0) << err("budget");
  EXPECT_NE(out("budget").find("budget_exhausted"), std::string::npos) << out("budget");
  EXPECT_EQ(server.request_count(), 1u);
  EXPECT_EQ(read(dir / "kernel.best.py"), naive) << "the best so far is the input";
  EXPECT_TRUE(fs::exists(dir / "kernel.autocomp-report" / "report.html"));
}

TEST_F(Autonomous, WithoutAnLlmAutotuningAloneImprovesAKernelWithDeclaredKnobs) {
  const fs::path seed = fs::path(AUTOCOMP_SOURCE_DIR) / "seeds" / "rmsnorm";
  write(dir / "kernel.py", read(seed / "tunable.py"));
  int code = run(args({"--beam", "2", "--iterations", "2"}), "nollm");
  EXPECT_EQ(code, 0) << err("nollm");
  const std::string text = err("nollm");
  EXPECT_NE(text.find("knob autotuning"), std::string::npos) << text;
  EXPECT_NE(text.find("--llm openai:"), std::string::npos) << text;
  EXPECT_NE(text.find("anthropic:"), std::string::npos);
  EXPECT_EQ(server.request_count(), 0u);

  // The winner sets a knob to a faster value than the declared default.
  const std::string best = read(dir / "kernel.best.py");
  EXPECT_NE(best, read(seed / "tunable.py"));
  auto store = open_store();
  auto runs = store->runs().list_runs(1);
  ASSERT_TRUE(runs.ok());
  ASSERT_EQ(runs->size(), 1u);
  const auto& run = runs->front();
  ASSERT_TRUE(run.best_latency_us && run.baseline_latency_us);
  // a clear gain (1.16x at the test's small shape on the calibrated trn2 costs)
  EXPECT_LT(*run.best_latency_us, *run.baseline_latency_us / 1.1);
}

TEST_F(Autonomous, AProblemsTargetIsTheHardwareTheKernelRunsOn) {
  write(dir / "problem.py", read(dir / "problem.py") + "\nTARGET = \"trn1\"\n");
  int code = run(args({"--beam", "1", "--iterations", "1"}), "trn1");
  ASSERT_EQ(code, 0) << err("trn1");
  auto store = open_store();
  auto runs = store->runs().list_runs(1);
  ASSERT_TRUE(runs.ok());
  ASSERT_EQ(runs->size(), 1u);
  EXPECT_EQ(runs->front().config.target, "trn1");
  auto evaluations =
      store->evaluations().evaluations_for_candidate(autocomp::core::source_key(naive));
  ASSERT_TRUE(evaluations.ok());
  ASSERT_FALSE(evaluations->empty());
  for (const auto& stored : *evaluations) {
    EXPECT_EQ(stored.key.target, "trn1");
    // What the harness says it ran on, not only what it was asked.
    EXPECT_EQ(stored.result.receipt.target, "trn1") << stored.result.raw_json;
  }
}

TEST_F(Autonomous, HarnessDirChoosesTheHarness) {
  int code =
      run(args({"--iterations", "1", "--harness-dir", (dir / "missing").string()}), "missing");
  EXPECT_EQ(code, 2);
  EXPECT_NE(err("missing").find((dir / "missing").string()), std::string::npos) << err("missing");

  const fs::path copy = dir / "harness-copy";
  fs::create_directories(copy);
  for (const char* part : {"harness", "nkisim"}) {
    fs::copy(fs::path(AUTOCOMP_SOURCE_DIR) / "backends" / part, copy / part,
             fs::copy_options::recursive);
  }
  code = run(args({"--beam", "1", "--iterations", "1", "--harness-dir", copy.string()}), "copy");
  ASSERT_EQ(code, 0) << err("copy");
  auto store = open_store();
  EXPECT_GE(evaluations_of(*store, naive), 1);
}

}  // namespace
