// The three evaluation tools against the real local simulator backend and a real SQLite store.
#include <gtest/gtest.h>
#include <unistd.h>

#include <algorithm>
#include <chrono>
#include <filesystem>
#include <fstream>
#include <mutex>
#include <string>

#include "search/store/store.hpp"
#include "server/tool.hpp"
#include "support/add_workload.hpp"
#include "tools/product_tools.hpp"

namespace autocomp::tools {
namespace {

namespace fs = std::filesystem;
using nlohmann::json;

constexpr const char* k_wrong_kernel = R"(import neuronxcc.nki as nki
import neuronxcc.nki.language as nl

@nki.jit
def add_kernel(a, b):
    out = nl.ndarray(a.shape, dtype=a.dtype, buffer=nl.shared_hbm)
    x = nl.load(a)
    y = nl.load(b)
    nl.store(out, value=nl.subtract(x, y))
    return out
)";

constexpr const char* k_broken_kernel = R"(import neuronxcc.nki as nki
import neuronxcc.nki.language as nl

@nki.jit
def add_kernel(a, b):
    out = nl.ndarray((256, 512), dtype=a.dtype, buffer=nl.sbuf)
    return out
)";

class EvaluationToolsTest : public ::testing::Test {
 protected:
  void SetUp() override {
    m_dir = fs::temp_directory_path() / ("evaluation_tools_test_" + std::to_string(::getpid()));
    fs::create_directories(m_dir);
    write("problem.py", testing::k_add_problem);
    ProductToolsOptions options;
    options.db_path = (m_dir / "store.db").string();
    register_product_tools(m_registries, options);
  }
  void TearDown() override { fs::remove_all(m_dir); }

  void write(const std::string& name, const std::string& text) {
    std::ofstream(m_dir / name, std::ios::binary | std::ios::trunc) << text;
  }

  server::ToolResult call(const std::string& tool, json arguments) {
    const server::ToolDef* def = m_registries.tools.find(tool);
    EXPECT_NE(def, nullptr) << tool;
    server::ToolContext context;
    context.working_dir_sink = [this] { return m_dir.string(); };
    context.progress_sink = [this](double, std::optional<double>, const std::string& message) {
      std::lock_guard lock(m_mutex);
      m_progress.push_back(message);
    };
    return def->handler(arguments, context);
  }

  json kernel_args(const std::string& kernel) {
    return {{"kernel", kernel}, {"problem", "problem.py"}};
  }

  fs::path m_dir;
  server::Registries m_registries;
  std::mutex m_mutex;
  std::vector<std::string> m_progress;
};

TEST_F(EvaluationToolsTest, ProductToolsAreRegisteredWithDescriptionsAndSchemas) {
  for (const char* name : {"verify_kernel", "benchmark_kernel", "profile_kernel"}) {
    const server::ToolDef* tool = m_registries.tools.find(name);
    ASSERT_NE(tool, nullptr) << name;
    EXPECT_FALSE(tool->description.empty());
    EXPECT_EQ(tool->input_schema.at("required"), json::array({"kernel", "problem"}));
    EXPECT_TRUE(tool->output_schema.is_object());
  }
}

TEST_F(EvaluationToolsTest, VerifyThenBenchmarkAndProfileComeFromOneEvaluation) {
  write("add.py", testing::k_add_fast_kernel);
  auto verified = call("verify_kernel", kernel_args("add.py"));
  ASSERT_FALSE(verified.is_error) << verified.structured.dump();
  EXPECT_TRUE(verified.structured.at("correct").get<bool>());
  EXPECT_EQ(verified.structured.at("seeds_passed"), "2/2");
  EXPECT_FALSE(verified.structured.at("cached").get<bool>());
  EXPECT_EQ(verified.structured.at("measured").get<std::string>().rfind("sim trn2", 0), 0u);
  EXPECT_NE(verified.text.find("verify add.py: correct on 2/2 seeds"), std::string::npos)
      << verified.text;
  EXPECT_FALSE(m_progress.empty());

  auto benchmarked = call("benchmark_kernel", kernel_args("add.py"));
  ASSERT_FALSE(benchmarked.is_error) << benchmarked.structured.dump();
  EXPECT_TRUE(benchmarked.structured.at("cached").get<bool>());
  const json& latency = benchmarked.structured.at("latency_us");
  EXPECT_GT(latency.at("median").get<double>(), 0.0);
  EXPECT_LE(latency.at("min").get<double>(), latency.at("max").get<double>());
  EXPECT_FALSE(latency.contains("samples")) << "brief by default";
  EXPECT_FALSE(benchmarked.structured.at("diverged").get<bool>());
  json full_args = kernel_args("add.py");
  full_args["detail"] = "full";
  auto full = call("benchmark_kernel", full_args);
  ASSERT_FALSE(full.is_error) << full.structured.dump();
  EXPECT_EQ(full.structured.at("latency_us").at("samples").size(), 10u);
  EXPECT_EQ(full.structured.at("full").at("seeds").size(), 2u);

  auto profiled = call("profile_kernel", kernel_args("add.py"));
  ASSERT_FALSE(profiled.is_error) << profiled.structured.dump();
  EXPECT_TRUE(profiled.structured.at("cached").get<bool>());
  EXPECT_GT(profiled.structured.at("metrics").at("total_time").get<double>(), 0.0);
  EXPECT_TRUE(profiled.structured.at("metrics").contains("hbm_read_bytes"));
  EXPECT_FALSE(profiled.structured.at("roofline").empty());
  const std::string bottleneck = profiled.structured.at("bottleneck");
  EXPECT_TRUE(bottleneck == "compute-bound" || bottleneck == "memory-bound" ||
              bottleneck == "underutilized")
      << bottleneck;

  auto fresh =
      call("verify_kernel", json{{"kernel", "add.py"}, {"problem", "problem.py"}, {"fresh", true}});
  EXPECT_FALSE(fresh.structured.at("cached").get<bool>());
  EXPECT_NE(fresh.structured.at("evaluation_id"), verified.structured.at("evaluation_id"));
}

// A kernel that imports modules beside it: they travel with the request, and an edited helper
// is evaluated anew, never served the stored result of the old one.
TEST_F(EvaluationToolsTest, KernelsImportingLocalModulesAreEvaluatedWithThem) {
  write("add_ops.py", R"(import neuronxcc.nki.language as nl

def combine(x, y):
    return nl.add(x, y)
)");
  write("add_local.py", R"(import neuronxcc.nki as nki
import neuronxcc.nki.language as nl
from add_ops import combine

@nki.jit
def add_kernel(a, b):
    out = nl.ndarray(a.shape, dtype=a.dtype, buffer=nl.shared_hbm)
    nl.store(out, value=combine(nl.load(a), nl.load(b)))
    return out
)");
  auto verified = call("verify_kernel", kernel_args("add_local.py"));
  ASSERT_FALSE(verified.is_error) << verified.structured.dump();
  EXPECT_TRUE(verified.structured.at("correct").get<bool>()) << verified.structured.dump();
  EXPECT_FALSE(verified.structured.at("cached").get<bool>());

  write("add_ops.py", R"(import neuronxcc.nki.language as nl

def combine(x, y):
    return nl.subtract(x, y)
)");
  auto edited = call("verify_kernel", kernel_args("add_local.py"));
  ASSERT_FALSE(edited.is_error) << edited.structured.dump();
  EXPECT_FALSE(edited.structured.at("cached").get<bool>()) << "the helper changed";
  EXPECT_FALSE(edited.structured.at("correct").get<bool>()) << edited.structured.dump();
}

TEST_F(EvaluationToolsTest, WrongAndBrokenKernelsAreReportedWithKindAndLine) {
  write("wrong.py", k_wrong_kernel);
  auto wrong = call("verify_kernel", kernel_args("wrong.py"));
  ASSERT_FALSE(wrong.is_error);
  EXPECT_FALSE(wrong.structured.at("correct").get<bool>());
  EXPECT_EQ(wrong.structured.at("failure").at("kind"), "mismatch");
  auto wrong_bench = call("benchmark_kernel", kernel_args("wrong.py"));
  EXPECT_TRUE(wrong_bench.is_error);
  EXPECT_NE(wrong_bench.structured.at("error").get<std::string>().find("verify_kernel"),
            std::string::npos);

  write("broken.py", k_broken_kernel);
  auto broken = call("verify_kernel", kernel_args("broken.py"));
  ASSERT_FALSE(broken.is_error);
  EXPECT_FALSE(broken.structured.at("correct").get<bool>());
  EXPECT_EQ(broken.structured.at("failure").at("kind"), "compile_error");
  EXPECT_EQ(broken.structured.at("failure").at("line"), 6);
  EXPECT_NE(broken.text.find("next: fix the kernel"), std::string::npos) << broken.text;

  // A broken problem file is not the kernel's fault, and the advice says so.
  write("bad_problem.py", "def inputs(seed):\n    raise ValueError('no inputs here')\n");
  auto bad = call("verify_kernel", json{{"kernel", "broken.py"}, {"problem", "bad_problem.py"}});
  ASSERT_FALSE(bad.is_error);
  EXPECT_EQ(bad.structured.at("failure").at("kind"), "problem_error");
  EXPECT_NE(bad.text.find("next: fix the problem file"), std::string::npos) << bad.text;
  EXPECT_EQ(bad.text.find("fix the kernel"), std::string::npos) << bad.text;
}

TEST_F(EvaluationToolsTest, RegressionAgainstTheBestVersionOfAFileIsFlaggedAsDiverged) {
  write("kernel.py", testing::k_add_fast_kernel);
  auto good = call("benchmark_kernel", kernel_args("kernel.py"));
  ASSERT_FALSE(good.is_error) << good.structured.dump();
  write("kernel.py", testing::k_add_slow_kernel);
  auto slow = call("benchmark_kernel", kernel_args("kernel.py"));
  ASSERT_FALSE(slow.is_error) << slow.structured.dump();
  EXPECT_GT(slow.structured.at("latency_us").at("median").get<double>(),
            1.5 * good.structured.at("latency_us").at("median").get<double>());
  EXPECT_TRUE(slow.structured.at("diverged").get<bool>());
  EXPECT_EQ(slow.structured.at("best_known").at("candidate"), good.structured.at("candidate"));
  EXPECT_NE(slow.structured.at("advice").get<std::string>().find("revert_to_best"),
            std::string::npos);
}

TEST_F(EvaluationToolsTest, BadPathsAndBackendsGiveActionableErrors) {
  auto missing = call("verify_kernel", kernel_args("nope.py"));
  EXPECT_TRUE(missing.is_error);
  EXPECT_NE(missing.structured.at("error").get<std::string>().find("no such file"),
            std::string::npos);
  write("add.py", testing::k_add_fast_kernel);
  auto bad_backend =
      call("verify_kernel",
           json{{"kernel", "add.py"}, {"problem", "problem.py"}, {"backend", "warp://x"}});
  EXPECT_TRUE(bad_backend.is_error);
  EXPECT_NE(bad_backend.structured.at("error").get<std::string>().find("unknown backend"),
            std::string::npos);
}

TEST_F(EvaluationToolsTest, EvaluationAndCandidateResourcesServeTheFullRecord) {
  write("add.py", testing::k_add_fast_kernel);
  auto verified = call("verify_kernel", kernel_args("add.py"));
  ASSERT_FALSE(verified.is_error);
  const std::string uri = verified.structured.at("details");
  auto match = m_registries.resources.match(uri);
  ASSERT_TRUE(match.has_value()) << uri;
  auto contents = match->read(uri, match->variables);
  ASSERT_TRUE(contents.ok()) << contents.failure().describe();
  const json body = json::parse(contents.value().at(0).at("text").get<std::string>());
  EXPECT_EQ(body.at("latency_us").at("samples").size(), 10u);
  EXPECT_TRUE(body.at("metrics").contains("total_time"));

  const std::string candidate_uri =
      "autocomp://candidates/" + verified.structured.at("candidate").get<std::string>();
  auto candidate = m_registries.resources.match(candidate_uri);
  ASSERT_TRUE(candidate.has_value());
  auto source = candidate->read(candidate_uri, candidate->variables);
  ASSERT_TRUE(source.ok());
  EXPECT_NE(source.value().at(0).at("text").get<std::string>().find("def add_kernel"),
            std::string::npos);

  auto unknown = m_registries.resources.match("autocomp://evaluations/999999");
  ASSERT_TRUE(unknown.has_value());
  auto missing = unknown->read("autocomp://evaluations/999999", unknown->variables);
  ASSERT_FALSE(missing.ok());
  EXPECT_EQ(missing.failure().kind, core::FailureKind::unavailable);
}

}  // namespace
}  // namespace autocomp::tools

namespace autocomp::tools {
namespace {

TEST_F(EvaluationToolsTest, RevertToBestRestoresTheFastestCorrectVersionAndKeepsABackup) {
  write("kernel.py", testing::k_add_fast_kernel);
  ASSERT_FALSE(call("benchmark_kernel", kernel_args("kernel.py")).is_error);
  write("kernel.py", testing::k_add_slow_kernel);
  ASSERT_FALSE(call("benchmark_kernel", kernel_args("kernel.py")).is_error);
  write("kernel.py", k_wrong_kernel);  // the agent's latest edit, never evaluated

  auto dry = call("revert_to_best", json{{"kernel", "kernel.py"}, {"dry_run", true}});
  ASSERT_FALSE(dry.is_error) << dry.structured.dump();
  EXPECT_FALSE(dry.structured.at("restored").get<bool>());

  auto reverted = call("revert_to_best", json{{"kernel", "kernel.py"}});
  ASSERT_FALSE(reverted.is_error) << reverted.structured.dump();
  EXPECT_TRUE(reverted.structured.at("restored").get<bool>());
  std::ifstream restored(m_dir / "kernel.py");
  const std::string text((std::istreambuf_iterator<char>(restored)), {});
  EXPECT_EQ(text, testing::k_add_fast_kernel);
  std::ifstream backup(reverted.structured.at("backup").get<std::string>());
  const std::string saved((std::istreambuf_iterator<char>(backup)), {});
  EXPECT_EQ(saved, k_wrong_kernel);

  // The text is for a person: what was restored and where the old content went, not JSON.
  EXPECT_NE(reverted.text.find("restored candidate"), std::string::npos) << reverted.text;
  EXPECT_NE(reverted.text.find(reverted.structured.at("backup").get<std::string>()),
            std::string::npos)
      << reverted.text;
  EXPECT_NE(reverted.text.front(), '{') << reverted.text;

  auto again = call("revert_to_best", json{{"kernel", "kernel.py"}, {"problem", "problem.py"}});
  ASSERT_FALSE(again.is_error);
  EXPECT_FALSE(again.structured.at("restored").get<bool>());
  EXPECT_NE(again.text.find("already holds the best known version"), std::string::npos)
      << again.text;

  auto unknown = call("revert_to_best", json{{"kernel", "never_seen.py"}});
  EXPECT_TRUE(unknown.is_error);
  EXPECT_NE(unknown.structured.at("error").get<std::string>().find("verify_kernel"),
            std::string::npos);
}

}  // namespace
}  // namespace autocomp::tools

namespace autocomp::tools {
namespace {

TEST_F(EvaluationToolsTest, LessonsCanBeListedAndClearedPerTarget) {
  {
    auto store = search::store::Store::open((m_dir / "store.db").string());
    ASSERT_TRUE(store.ok());
    search::store::Lesson lesson;
    lesson.target = "trn2";
    lesson.text = "Load whole 128-row tiles: one large DMA beats many narrow ones.";
    lesson.kind = "improvement";
    lesson.speedup = 1.8;
    ASSERT_TRUE(store.value()->memory().add_lesson(lesson).ok());
    lesson.target = "trn1";
    lesson.text = "Keep the weight in SBUF across the row loop.";
    ASSERT_TRUE(store.value()->memory().add_lesson(lesson).ok());
  }
  auto all = call("list_lessons", json::object());
  ASSERT_FALSE(all.is_error);
  EXPECT_EQ(all.structured.at("lessons").size(), 2u);
  auto trn2 = call("list_lessons", json{{"target", "trn2"}});
  ASSERT_EQ(trn2.structured.at("lessons").size(), 1u);
  EXPECT_EQ(trn2.structured.at("lessons").at(0).at("speedup"), 1.8);
  // One line per lesson in the text, with its target, kind and evidence; JSON only in structure.
  EXPECT_NE(trn2.text.find("[trn2, improvement] Load whole 128-row tiles"), std::string::npos)
      << trn2.text;
  EXPECT_NE(trn2.text.find("(1.8x)"), std::string::npos) << trn2.text;
  EXPECT_EQ(trn2.text.find('{'), std::string::npos) << trn2.text;

  EXPECT_TRUE(call("clear_lessons", json{{"confirm", false}}).is_error);
  auto cleared = call("clear_lessons", json{{"target", "trn2"}, {"confirm", true}});
  ASSERT_FALSE(cleared.is_error);
  EXPECT_EQ(cleared.structured.at("removed"), 1);
  auto left = call("list_lessons", json::object());
  ASSERT_EQ(left.structured.at("lessons").size(), 1u);
  EXPECT_EQ(left.structured.at("lessons").at(0).at("target"), "trn1");
}

}  // namespace
}  // namespace autocomp::tools

namespace autocomp::tools {
namespace {

// One column per instruction in short affine loops: the compiler groups such narrow
// instructions into wide ones, and the profile names that effect, fresh and from the store.
constexpr const char* k_column_add_kernel = R"(import neuronxcc.nki as nki
import neuronxcc.nki.language as nl

@nki.jit
def add_kernel(a, b):
    out = nl.ndarray(a.shape, dtype=a.dtype, buffer=nl.shared_hbm)
    x = nl.load(a)
    y = nl.load(b)
    res = nl.ndarray((128, 512), dtype=a.dtype, buffer=nl.sbuf)
    ip = nl.arange(128)[:, None]
    for block in nl.affine_range(8):
        for i in nl.affine_range(64):
            j = block * 64 + i
            res[ip, j] = nl.add(x[ip, j], y[ip, j])
    nl.store(out, value=res)
    return out
)";

TEST_F(EvaluationToolsTest, AProfileNamesTheCompilerEffectsItsFiguresRelyOn) {
  write("columns.py", k_column_add_kernel);
  auto fresh = call("profile_kernel", kernel_args("columns.py"));
  ASSERT_FALSE(fresh.is_error) << fresh.structured.dump();
  ASSERT_TRUE(fresh.structured.contains("compiler_effects")) << fresh.structured.dump();
  const std::string effect = fresh.structured.at("compiler_effects").at(0).get<std::string>();
  EXPECT_NE(effect.find("grouped into"), std::string::npos) << effect;
  EXPECT_NE(fresh.text.find("compiler (modelled): "), std::string::npos) << fresh.text;
  // the limiting engine is in the whole record (the brief answer names it only when it says
  // more than the bottleneck class)
  auto full = call("profile_kernel",
                   json{{"kernel", "columns.py"}, {"problem", "problem.py"}, {"detail", "full"}});
  ASSERT_FALSE(full.is_error) << full.structured.dump();
  EXPECT_FALSE(full.structured.at("full").value("bottleneck_engine", "").empty())
      << full.structured.dump();
  EXPECT_GE(full.structured.at("full").at("compiler_effects").size(),
            fresh.structured.at("compiler_effects").size());

  auto stored = call("profile_kernel", kernel_args("columns.py"));
  ASSERT_FALSE(stored.is_error) << stored.structured.dump();
  EXPECT_TRUE(stored.structured.at("cached").get<bool>());
  EXPECT_EQ(stored.structured.at("compiler_effects"), fresh.structured.at("compiler_effects"));
  EXPECT_EQ(stored.structured.value("bottleneck_engine", ""),
            fresh.structured.value("bottleneck_engine", ""));
}

TEST_F(EvaluationToolsTest, AProfileAnsweredFromTheStoreKeepsHotLinesWaitsAndFloors) {
  write("add.py", testing::k_add_fast_kernel);
  auto fresh = call("profile_kernel", json{{"kernel", "add.py"}, {"problem", "problem.py"}});
  ASSERT_FALSE(fresh.is_error) << fresh.structured.dump();
  ASSERT_FALSE(fresh.structured.at("cached").get<bool>());
  ASSERT_TRUE(fresh.structured.contains("hotspots")) << fresh.structured.dump();

  auto stored = call("profile_kernel", kernel_args("add.py"));
  ASSERT_FALSE(stored.is_error) << stored.structured.dump();
  EXPECT_TRUE(stored.structured.at("cached").get<bool>());
  ASSERT_TRUE(stored.structured.contains("hotspots")) << stored.text;
  EXPECT_EQ(stored.structured.at("hotspots"), fresh.structured.at("hotspots"));
  EXPECT_EQ(stored.text.find("not reported"), std::string::npos) << stored.text;
  EXPECT_GT(stored.structured.at("hotspots").at(0).at("us_per_instr").get<double>(), 0.0);

  // Floors: busy time per engine and DMA, the DMA floor and how near the kernel is.
  const json& floors = stored.structured.at("floors");
  EXPECT_GT(floors.at("busy_us").at("dma").get<double>(), 0.0);
  EXPECT_GT(floors.at("dma_floor_us").get<double>(), 0.0);
  EXPECT_GT(floors.at("floor_pct").get<double>(), 0.0);
  EXPECT_LE(floors.at("floor_pct").get<double>(), 100.5);
  EXPECT_EQ(floors, fresh.structured.at("floors"));
  EXPECT_NE(stored.text.find("DMA floor:"), std::string::npos) << stored.text;
  EXPECT_NE(stored.text.find("floor reached: "), std::string::npos) << stored.text;
}

TEST_F(EvaluationToolsTest, EveryToolStatesAllHintsAnOutputSchemaAndDescribesEveryParameter) {
  for (const auto& tool : m_registries.tools.all()) {
    for (const char* hint :
         {"readOnlyHint", "destructiveHint", "idempotentHint", "openWorldHint"}) {
      EXPECT_TRUE(tool.annotations.contains(hint) && tool.annotations.at(hint).is_boolean())
          << tool.name << " lacks " << hint;
    }
    EXPECT_TRUE(tool.output_schema.is_object()) << tool.name;
    const json properties = tool.input_schema.value("properties", json::object());
    for (const auto& [name, property] : properties.items()) {
      EXPECT_FALSE(property.value("description", std::string()).empty())
          << tool.name << "." << name << " has no description";
    }
  }
  const server::ToolDef* reflexion = m_registries.tools.find("record_reflexion");
  ASSERT_NE(reflexion, nullptr);
  EXPECT_FALSE(reflexion->annotations.at("destructiveHint").get<bool>());
  EXPECT_FALSE(reflexion->annotations.at("readOnlyHint").get<bool>());
  EXPECT_TRUE(
      m_registries.tools.find("clear_lessons")->annotations.at("destructiveHint").get<bool>());
}

TEST_F(EvaluationToolsTest, ResultsLinkTheirEvaluationAndRecentRunsAreListed) {
  write("add.py", testing::k_add_fast_kernel);
  auto verified = call("verify_kernel", kernel_args("add.py"));
  ASSERT_FALSE(verified.is_error);
  ASSERT_EQ(verified.extra_content.size(), 1u);
  const json& link = verified.extra_content.at(0);
  EXPECT_EQ(link.at("type"), "resource_link");
  EXPECT_EQ(link.at("uri"), verified.structured.at("details"));
  EXPECT_TRUE(m_registries.resources.match(link.at("uri")).has_value());

  const auto listed = m_registries.resources.resources();
  ASSERT_FALSE(listed.empty());
  EXPECT_EQ(listed.at(0).uri, "autocomp://runs");
  auto runs = listed.at(0).read("autocomp://runs", {});
  ASSERT_TRUE(runs.ok()) << runs.failure().describe();
  EXPECT_TRUE(json::parse(runs.value().at(0).at("text").get<std::string>()).contains("runs"));
}

TEST_F(EvaluationToolsTest, ALongEvaluationSendsProgressAtLeastOncePerInterval) {
  server::Registries registries;
  ProductToolsOptions options;
  options.db_path = (m_dir / "slow.db").string();
  options.progress_interval = std::chrono::milliseconds(200);
  register_product_tools(registries, options);
  write("add.py", testing::k_add_fast_kernel);
  std::vector<std::chrono::steady_clock::time_point> times;
  std::vector<std::string> messages;
  server::ToolContext context;
  context.working_dir_sink = [this] { return m_dir.string(); };
  context.progress_sink = [&](double, std::optional<double>, const std::string& message) {
    std::lock_guard lock(m_mutex);
    times.push_back(std::chrono::steady_clock::now());
    messages.push_back(message);
  };
  const auto start = std::chrono::steady_clock::now();
  auto result = registries.tools.find("verify_kernel")
                    ->handler(json{{"kernel", "add.py"},
                                   {"problem", "problem.py"},
                                   {"seeds", {0}},
                                   {"warmup", 0},
                                   {"iters", 2},
                                   {"backend", "local?device=fake&fake_ms=300"}},
                              context);
  const auto took = std::chrono::steady_clock::now() - start;
  ASSERT_FALSE(result.is_error) << result.text;
  ASSERT_GT(took, std::chrono::milliseconds(1000));
  std::lock_guard lock(m_mutex);
  ASSERT_GE(times.size(), 4u);
  const auto still = std::count_if(messages.begin(), messages.end(), [](const std::string& m) {
    return m.find("still running") != std::string::npos;
  });
  EXPECT_GE(still, 3) << "heartbeats during " << std::chrono::duration<double>(took).count()
                      << " s";
  // No silence much longer than the interval (scheduling slack allowed).
  for (std::size_t i = 1; i < times.size(); ++i) {
    EXPECT_LT(times[i] - times[i - 1], std::chrono::milliseconds(700))
        << "gap before " << messages[i];
  }
}

}  // namespace
}  // namespace autocomp::tools
