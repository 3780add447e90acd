// Kills a writing process with SIGKILL at random moments, many times, and checks that the database
// stays intact and that every write the writer saw committed is there, whole.

#include <gtest/gtest.h>
#include <signal.h>
#include <sqlite3.h>
#include <sys/wait.h>
#include <unistd.h>

#include <chrono>
#include <cstdlib>
#include <filesystem>
#include <map>
#include <random>
#include <set>
#include <sstream>
#include <string>
#include <thread>
#include <vector>

#include "search/store/store.hpp"

namespace autocomp::search::store {
namespace {

namespace fs = std::filesystem;

constexpr int k_beam_size = 5;

class TempDir {
 public:
  TempDir() {
    std::string pattern = (fs::temp_directory_path() / "store_crash_XXXXXX").string();
    if (mkdtemp(pattern.data()) == nullptr) {
      throw std::runtime_error("mkdtemp failed");
    }
    m_path = pattern;
  }
  ~TempDir() {
    std::error_code ignored;
    fs::remove_all(m_path, ignored);
  }
  const fs::path& path() const { return m_path; }

 private:
  fs::path m_path;
};

void report(int fd, const std::string& line) {
  const std::string text = line + "\n";
  if (write(fd, text.data(), text.size()) != static_cast<ssize_t>(text.size())) {
    _exit(3);
  }
}

constexpr const char* k_problem_source = "def inputs(seed):\n  return {}\n";

// The writer: every kind of write the engine does, each reported on the pipe only after the store
// returned success (that is, after COMMIT).
[[noreturn]] void writer(const std::string& db_path, int round, int fd) {
  auto opened = Store::open(db_path);
  if (!opened) {
    _exit(2);
  }
  Store& store = *opened.value();
  const auto problem = store.evaluations().put_workload(k_problem_source, "/p.py");
  if (!problem) {
    _exit(2);
  }
  const auto run = store.runs().create_run(RunConfig{});
  if (!run) {
    _exit(2);
  }
  report(fd, "run " + run.value());
  for (int i = 0;; ++i) {
    const std::string source =
        "def kernel(a):  # round " + std::to_string(round) + " item " + std::to_string(i) + "\n";
    auto key = store.evaluations().put_candidate(source, "crash-test");
    if (!key) {
      _exit(2);
    }
    backends::EvalRequest request;
    request.kernel_source = source;
    request.problem_source = k_problem_source;
    request.target = "trn2";
    const EvalSite site{"sim", "sim", "1", ""};
    backends::EvalResult result;
    result.verified = true;
    result.correct = true;
    result.latency =
        backends::LatencyStats{1.0 + i, 2.0 + i, 3.0 + i, std::vector<double>(50, 2.0)};
    result.raw_json = std::string(512, 'j');
    auto eval_id = store.evaluations().record(request, site, result);
    if (!eval_id) {
      _exit(2);
    }
    report(fd, "eval " + std::to_string(eval_id.value()) + " " + key.value());

    RunCandidate candidate;
    candidate.run_id = run.value();
    candidate.iteration = i / k_beam_size;
    candidate.candidate_key = key.value();
    candidate.plan_text = "plan " + std::to_string(i);
    candidate.evaluation_id = eval_id.value();
    if (!store.runs().add_run_candidate(candidate)) {
      _exit(2);
    }
    report(fd, "candidate " + key.value());

    LlmCall call;
    call.run_id = run.value();
    call.request_hash = "hash " + std::to_string(i);
    call.response = "response " + std::to_string(i);
    call.usage.input_tokens = 10;
    if (!store.llm_calls().put_llm_call(call)) {
      _exit(2);
    }
    report(fd, "llm " + call.request_hash);

    if (i % k_beam_size == k_beam_size - 1) {
      std::vector<std::string> beam;
      for (int b = 0; b < k_beam_size; ++b) {
        beam.push_back(key.value());
      }
      if (!store.runs().record_beam(run.value(), i / k_beam_size, beam)) {
        _exit(2);
      }
      report(fd, "beam " + std::to_string(i / k_beam_size));
    }
  }
}

std::string integrity_of(const fs::path& path) {
  sqlite3* db = nullptr;
  if (sqlite3_open(path.string().c_str(), &db) != SQLITE_OK) {
    sqlite3_close(db);
    return "cannot open";
  }
  sqlite3_stmt* stmt = nullptr;
  std::string out;
  if (sqlite3_prepare_v2(db, "PRAGMA integrity_check", -1, &stmt, nullptr) == SQLITE_OK) {
    while (sqlite3_step(stmt) == SQLITE_ROW) {
      out += reinterpret_cast<const char*>(sqlite3_column_text(stmt, 0));
    }
  } else {
    out = sqlite3_errmsg(db);
  }
  sqlite3_finalize(stmt);
  sqlite3_close(db);
  return out;
}

std::string read_all(int fd) {
  std::string out;
  char buffer[4096];
  for (;;) {
    const ssize_t n = read(fd, buffer, sizeof buffer);
    if (n <= 0) {
      break;
    }
    out.append(buffer, static_cast<std::size_t>(n));
  }
  return out;
}

TEST(StoreCrash, KillNineNeverCorruptsOrLosesACommittedWrite) {
  TempDir dir;
  const fs::path db_path = dir.path() / "crash.db";
  const unsigned seed = static_cast<unsigned>(std::random_device{}());
  SCOPED_TRACE("random seed " + std::to_string(seed));
  std::mt19937 random(seed);
  std::uniform_int_distribution<int> delay_us(0, 100000);
  constexpr int k_rounds = 40;
  int total_committed = 0;

  for (int round = 0; round < k_rounds; ++round) {
    int fds[2];
    ASSERT_EQ(pipe(fds), 0);
    const pid_t child = fork();
    ASSERT_GE(child, 0);
    if (child == 0) {
      close(fds[0]);
      writer(db_path.string(), round, fds[1]);
    }
    close(fds[1]);
    std::this_thread::sleep_for(std::chrono::microseconds(delay_us(random)));
    kill(child, SIGKILL);
    int status = 0;
    waitpid(child, &status, 0);
    ASSERT_TRUE(WIFSIGNALED(status))
        << "writer ended by itself in round " << round << " (exit " << WEXITSTATUS(status) << ")";
    const std::string reported = read_all(fds[0]);
    close(fds[0]);

    ASSERT_EQ(integrity_of(db_path), "ok") << "round " << round;
    auto opened = Store::open(db_path.string());
    ASSERT_TRUE(opened.ok()) << opened.failure().describe();
    Store& store = *opened.value();

    std::string run_id;
    std::set<int> beams;
    std::istringstream lines(reported);
    std::string kind;
    while (lines >> kind) {
      ++total_committed;
      if (kind == "run") {
        lines >> run_id;
        auto run = store.runs().get_run(run_id);
        ASSERT_TRUE(run.ok() && run.value().has_value()) << "run " << run_id << " lost";
      } else if (kind == "eval") {
        std::int64_t id = 0;
        std::string key;
        lines >> id >> key;
        auto evaluation = store.evaluations().get_evaluation(id);
        ASSERT_TRUE(evaluation.ok() && evaluation.value().has_value()) << "evaluation lost";
        EXPECT_EQ(evaluation.value()->key.candidate_key, key);
        EXPECT_EQ(evaluation.value()->result.latency->samples_us.size(), 50u);
        auto candidate = store.evaluations().get_candidate(key);
        ASSERT_TRUE(candidate.ok() && candidate.value().has_value()) << "candidate lost";
      } else if (kind == "candidate") {
        std::string key;
        lines >> key;
        auto candidate = store.runs().get_run_candidate(run_id, key);
        ASSERT_TRUE(candidate.ok() && candidate.value().has_value()) << "run candidate lost";
      } else if (kind == "llm") {
        std::string word;
        std::string number;
        lines >> word >> number;
        auto call = store.llm_calls().find_llm_response(run_id, word + " " + number);
        ASSERT_TRUE(call.ok() && call.value().has_value()) << "LLM call lost";
        EXPECT_EQ(call.value()->response, "response " + number);
      } else if (kind == "beam") {
        int iteration = 0;
        lines >> iteration;
        beams.insert(iteration);
      } else {
        FAIL() << "unexpected report " << kind;
      }
    }
    if (!run_id.empty()) {
      // Every reported beam is there, and no beam is ever half-written.
      auto stored = store.runs().get_beams(run_id);
      ASSERT_TRUE(stored.ok());
      std::set<int> present;
      for (const auto& beam : stored.value()) {
        EXPECT_EQ(beam.members.size(), static_cast<std::size_t>(k_beam_size));
        present.insert(beam.iteration);
      }
      for (int iteration : beams) {
        EXPECT_TRUE(present.count(iteration)) << "beam " << iteration << " lost";
      }
    }
  }
  // The writers got far enough to make the test meaningful.
  EXPECT_GT(total_committed, k_rounds * 5);
  RecordProperty("committed_writes_checked", total_committed);
  std::printf("checked %d committed writes over %d kills\n", total_committed, k_rounds);
}

}  // namespace
}  // namespace autocomp::search::store
