// Complete evaluation keys (the input signature), stored receipts and read-only stores.
#include <gtest/gtest.h>
#include <sqlite3.h>
#include <unistd.h>

#include <filesystem>
#include <nlohmann/json.hpp>
#include <string>

#include "core/hash.hpp"
#include "search/store/schema.hpp"
#include "search/store/store.hpp"

namespace autocomp::search::store {
namespace {

namespace fs = std::filesystem;
using backends::EvalCommand;
using backends::EvalResult;

class TempDir {
 public:
  TempDir() {
    std::string pattern = (fs::temp_directory_path() / "eval_trust_store_XXXXXX").string();
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

void raw_exec(const fs::path& path, const std::string& sql) {
  sqlite3* db = nullptr;
  ASSERT_EQ(sqlite3_open(path.string().c_str(), &db), SQLITE_OK);
  char* error = nullptr;
  const int rc = sqlite3_exec(db, sql.c_str(), nullptr, nullptr, &error);
  std::string message = error != nullptr ? error : "";
  sqlite3_free(error);
  sqlite3_close(db);
  ASSERT_EQ(rc, SQLITE_OK) << message;
}

const char* const k_problem = "def inputs(seed):\n  return {}\n";
const char* const k_kernel = "def kernel(a):\n  return a\n";

EvalResult measured(double median_us) {
  EvalResult result;
  result.verified = true;
  result.correct = true;
  result.latency = backends::LatencyStats{median_us, median_us, median_us, {median_us}};
  result.device = "sim";
  result.target = "trn2";
  result.backend_identity = "sim";
  result.host = "localhost";
  result.harness_version = "1.1.0";
  result.raw_json = "{\"status\":\"ok\"}";
  return result;
}

// The fixture's kernel and problem, evaluated with `command` on the simulator, where the problem
// produces inputs of `signature`.
backends::EvalRequest request_for(EvalCommand command = EvalCommand::evaluate) {
  backends::EvalRequest request;
  request.command = command;
  request.kernel_source = k_kernel;
  request.problem_source = k_problem;
  request.target = "trn2";
  return request;
}

EvalSite site_with(const std::string& signature) {
  return EvalSite{"sim", "sim", "1.1.0", signature};
}

core::Result<std::optional<StoredEvaluation>> lookup(Store& store, const std::string& signature,
                                                     EvalCommand command = EvalCommand::evaluate) {
  return store.evaluations().lookup(request_for(command), site_with(signature));
}

std::unique_ptr<Store> open_with_rows(const fs::path& path) {
  auto opened = Store::open(path.string());
  EXPECT_TRUE(opened.ok()) << opened.failure().describe();
  auto store = std::move(opened).value();
  EXPECT_TRUE(store->evaluations().put_workload(k_problem, "/p/problem.py").ok());
  EXPECT_TRUE(store->evaluations().put_candidate(k_kernel, "user").ok());
  return store;
}

TEST(EvalKeySignature, AResultMeasuredAtOneShapeNeverAnswersAnother) {
  TempDir dir;
  auto store = open_with_rows(dir.path() / "a.db");
  ASSERT_TRUE(store->evaluations()
                  .record(request_for(), site_with("a:float32[128,512]"), measured(40))
                  .ok());

  for (auto command : {EvalCommand::evaluate, EvalCommand::verify, EvalCommand::benchmark}) {
    auto covering = lookup(*store, "a:float32[64,512]", command);
    ASSERT_TRUE(covering.ok());
    EXPECT_FALSE(covering.value().has_value()) << to_string(command);
  }

  auto same = lookup(*store, "a:float32[128,512]");
  ASSERT_TRUE(same.ok());
  ASSERT_TRUE(same.value().has_value());
  EXPECT_EQ(same.value()->key.input_signature, "a:float32[128,512]");
  EXPECT_DOUBLE_EQ(same.value()->result.latency->median_us, 40);
}

TEST(EvalKeySignature, RowsFromBeforeSignaturesAreKeptButNeverServed) {
  TempDir dir;
  const fs::path path = dir.path() / "old.db";
  // A version-3 database with one evaluation, as an older autocomp-mcp left it.
  std::string sql;
  for (const auto& step : migrations()) {
    if (step.version <= 3) {
      sql += std::string(step.sql);
    }
  }
  const std::string candidate = core::source_key(k_kernel);
  const std::string problem = core::source_key(k_problem);
  sql += "INSERT INTO workloads VALUES ('" + problem + "', 'src', '', 1);";
  sql += "INSERT INTO candidates VALUES ('" + candidate + "', 'src', 'user', 1);";
  sql +=
      "INSERT INTO evaluations (candidate_key, problem_key, target, backend_identity, device, "
      "harness_version, command, kernel_name, seeds, warmup, iters, cacheable, status, verified, "
      "correct, seed_checks, latency_min_us, latency_median_us, latency_max_us, has_profile, "
      "metrics, roofline, bottleneck, result_device, result_target, result_backend, "
      "result_harness, host, steps, raw_json, created_at) VALUES ('" +
      candidate + "', '" + problem +
      "', 'trn2', 'sim', 'sim', '1.1.0', 'evaluate', '', '', 2, 10, 1, 'ok', 1, 1, '[]', 9, 9, "
      "9, 0, '{}', '{}', '', 'sim', 'trn2', 'sim', '1.1.0', 'localhost', '[]', '{}', 1);";
  sql += "PRAGMA user_version = 3;";
  raw_exec(path, sql);

  auto opened = Store::open(path.string());
  ASSERT_TRUE(opened.ok()) << opened.failure().describe();
  auto& store = *opened.value();
  for (const std::string signature : {"", "a:float32[128,512]"}) {
    auto found = lookup(store, signature);
    ASSERT_TRUE(found.ok());
    EXPECT_FALSE(found.value().has_value()) << "signature '" << signature << "'";
  }
  auto kept = store.evaluations().get_evaluation(1);
  ASSERT_TRUE(kept.ok());
  ASSERT_TRUE(kept.value().has_value());
  EXPECT_DOUBLE_EQ(kept.value()->result.latency->median_us, 9);
}

TEST(StoredReceipt, TheWholeReceiptIsStoredAndReadBack) {
  TempDir dir;
  auto store = open_with_rows(dir.path() / "r.db");
  EvalResult result = measured(12);
  result.backend_identity = "ssh://u@trn:22?device=neuron";
  result.host = "trn";
  result.input_signature = "a:float32[128,512]";
  result.receipt.device = "neuron";
  result.receipt.target = "trn2";
  result.receipt.job = "4711";
  result.receipt.node = "trn-node-3";
  result.receipt.harness_version = "1.1.0";
  result.receipt.sdk = {{"neuronx-cc", "2.33.1"}};
  result.receipt.neff_hash = "abc123";
  result.receipt.profile_format = "explorer-json";
  result.receipt.profile_schema = "2";
  result.receipt.seeds = {0, 1, 2};
  result.receipt.warmup = 2;
  result.receipt.iters = 10;
  auto id = store->evaluations().record(request_for(), site_with("a:float32[128,512]"), result);
  ASSERT_TRUE(id.ok());

  auto stored = store->evaluations().get_evaluation(id.value());
  ASSERT_TRUE(stored.ok() && stored.value().has_value());
  const backends::Receipt& receipt = stored.value()->result.receipt;
  // Backend and host come from the backend when the harness left them empty.
  EXPECT_EQ(receipt.backend, "ssh://u@trn:22?device=neuron");
  EXPECT_EQ(receipt.host, "trn");
  EXPECT_EQ(receipt.job, "4711");
  EXPECT_EQ(receipt.node, "trn-node-3");
  EXPECT_EQ(receipt.sdk.at("neuronx-cc"), "2.33.1");
  EXPECT_EQ(receipt.neff_hash, "abc123");
  EXPECT_EQ(receipt.profile_format, "explorer-json");
  EXPECT_EQ(receipt.profile_schema, "2");
  EXPECT_EQ(receipt.seeds, (std::vector<int>{0, 1, 2}));
  EXPECT_EQ(receipt.iters, 10);
  EXPECT_EQ(receipt.input_signature, "a:float32[128,512]");
  EXPECT_EQ(stored.value()->result.input_signature, "a:float32[128,512]");

  auto as_json = nlohmann::json::parse(receipt_to_json(stored.value()->result));
  EXPECT_EQ(as_json["job"], "4711");
  EXPECT_EQ(as_json["backend"], "ssh://u@trn:22?device=neuron");
}

TEST(ReadOnlyStore, ReadsWorkAndWritesSayTheStoreIsReadOnly) {
  TempDir dir;
  const fs::path path = dir.path() / "ro.db";
  std::string run_id;
  {
    auto store = open_with_rows(path);
    RunConfig config;
    config.kernel_path = "/k.py";
    config.problem_path = "/p/problem.py";
    config.problem_key = core::source_key(k_problem);
    config.target = "trn2";
    config.backend = "sim";
    run_id = store->runs().create_run(config).value();
    Lesson lesson;
    lesson.target = "trn2";
    lesson.text = "fuse the loads";
    ASSERT_TRUE(store->memory().add_lesson(lesson).ok());
  }
  StoreOptions options;
  options.read_only = true;
  auto opened = Store::open(path.string(), options);
  ASSERT_TRUE(opened.ok()) << opened.failure().describe();
  auto& store = *opened.value();
  EXPECT_TRUE(store.read_only());

  auto runs = store.runs().list_runs();
  ASSERT_TRUE(runs.ok()) << runs.failure().describe();
  ASSERT_EQ(runs.value().size(), 1u);
  EXPECT_EQ(runs.value().front().id, run_id);
  auto lessons = store.memory().lessons("trn2");
  ASSERT_TRUE(lessons.ok());
  EXPECT_EQ(lessons.value().size(), 1u);

  auto write = store.evaluations().put_candidate("def other():\n  pass\n", "user");
  ASSERT_FALSE(write.ok());
  EXPECT_NE(write.failure().message.find("read-only"), std::string::npos)
      << write.failure().message;
  // Nothing was changed by the refused write.
  auto again = Store::open(path.string(), options);
  ASSERT_TRUE(again.ok());
  auto candidate =
      again.value()->evaluations().get_candidate(core::source_key("def other():\n  pass\n"));
  ASSERT_TRUE(candidate.ok());
  EXPECT_FALSE(candidate.value().has_value());
}

TEST(ReadOnlyStore, AMissingFileIsAClearFailure) {
  TempDir dir;
  StoreOptions options;
  options.read_only = true;
  auto opened = Store::open((dir.path() / "absent.db").string(), options);
  ASSERT_FALSE(opened.ok());
  EXPECT_NE(opened.failure().message.find("read-only"), std::string::npos);
  EXPECT_FALSE(fs::exists(dir.path() / "absent.db"));
}

}  // namespace
}  // namespace autocomp::search::store
