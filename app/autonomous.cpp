#include "app/autonomous.hpp"

#include <spdlog/sinks/stdout_color_sinks.h>
#include <spdlog/spdlog.h>
#include <unistd.h>

#include <atomic>
#include <csignal>
#include <cstdio>
#include <filesystem>
#include <fstream>
#include <iostream>
#include <mutex>
#include <optional>
#include <random>
#include <sstream>
#include <string>
#include <thread>
#include <vector>

#include "search/engine/run_store.hpp"
#include "search/launch/launcher.hpp"
#include "search/report/report.hpp"
#include "search/store/store.hpp"

namespace autocomp::app {

namespace {

namespace fs = std::filesystem;
namespace engine = search::engine;
namespace launch = search::launch;
namespace report = search::report;
namespace store = search::store;

constexpr int k_exit_ok = 0;
constexpr int k_exit_failed = 1;
constexpr int k_exit_usage = 2;
constexpr int k_exit_interrupted = 130;

const char* const k_usage =
    "usage: autocomp-mcp --autonomous --kernel KERNEL.py --problem PROBLEM.py [options]\n"
    "       autocomp-mcp --autonomous --resume RUN_ID [options]\n"
    "\n"
    "Searches for a faster version of an NKI kernel with an LLM (plan, implement, evaluate,\n"
    "keep the best) and writes KERNEL.best.py and a report beside the kernel.\n"
    "\n"
    "  --kernel PATH         the kernel to optimize\n"
    "  --problem PATH        its problem file (inputs, reference, tolerances)\n"
    "  --backend SPEC        where kernels run: sim (default), local?device=..., ssh://host,\n"
    "                        hosts:PATH (a file of ssh:// hosts, one per line)\n"
    "  --target TARGET       trn1, trn2 or trn3 (default: the problem's TARGET, else trn2)\n"
    "  --harness-dir DIR     evaluation harness folder (default: the installed one)\n"
    "  --llm SPEC            openai:MODEL or anthropic:MODEL; repeat for an ensemble\n"
    "  --beam N --plans N --impls N --iterations N   search shape (6, 6, 2, 10)\n"
    "  --dropout P           probability of leaving out each menu item (0.7)\n"
    "  --seed N              random seed (default: a fresh one, printed)\n"
    "  --no-memory           neither write nor read the target's optimization lessons\n"
    "  --reflexions N        with --beam 1: reflect on each plan, show the last N (3; 0: off)\n"
    "  --divergence X        members X times slower than the best leave the beam (1.5)\n"
    "  --min-gain PCT        least latency gain (percent) for a child to enter the beam\n"
    "                        (default: 0 on the simulator, the measured spread on hardware)\n"
    "  --confirm SPEC        measure each iteration's best children on this backend (a device)\n"
    "                        and rank the beam by its latencies; the simulator screens the rest\n"
    "  --confirm-top-k N     children confirmed per iteration (2)\n"
    "  --max-device-seconds S   stop confirming (not the search) after S seconds on the device\n"
    "  --db PATH             the store (default: the user's autocomp store)\n"
    "  --resume RUN_ID       continue a stopped or killed run\n"
    "  --in-place            also overwrite KERNEL with the best version\n"
    "  --report-dir DIR      where the report folder goes (default: beside the kernel)\n"
    "  --max-llm-calls N --max-tokens N --max-cost USD --max-wall-s S   budgets\n";

const char* const k_no_llm_note =
    "autocomp-mcp --autonomous: no LLM is configured, so the search runs on knob autotuning\n"
    "alone: it tries the values the kernel declares with '# autocomp: knob NAME = [v1, v2]'\n"
    "comments (docs/knobs.md). For plan-then-implement search, configure a model with --llm:\n"
    "  export OPENAI_BASE_URL=https://api.openai.com/v1   # or a vLLM/Ollama/llama.cpp server\n"
    "  export OPENAI_API_KEY=...\n"
    "  autocomp-mcp --autonomous --kernel K.py --problem P.py --llm openai:gpt-4o\n"
    "or\n"
    "  export ANTHROPIC_API_KEY=...\n"
    "  autocomp-mcp --autonomous --kernel K.py --problem P.py --llm anthropic:claude-sonnet-4-5\n";

struct Options {
  std::string kernel_path;
  std::string problem_path;
  std::string backend;  // "" = a resumed run's own, else sim
  std::string harness_dir;
  std::optional<std::string> target;
  std::vector<std::string> llm_specs;
  std::optional<int> beam, plans, impls, iterations;
  std::optional<double> dropout;
  std::optional<std::uint64_t> seed;
  bool no_memory = false;
  std::optional<int> reflexions;
  std::optional<double> divergence;
  std::optional<double> min_gain;
  std::string confirm;
  std::optional<int> confirm_top_k;
  std::optional<double> max_device_s;
  std::string db_path;
  std::string resume_id;
  bool in_place = false;
  std::string report_dir;
  engine::Budgets budgets;
  bool budgets_given = false;
};

std::atomic<bool> g_interrupted{false};

extern "C" void on_interrupt(int /*signal*/) {
  g_interrupted.store(true);
}

core::Result<Options> parse(int argc, char** argv) {
  Options options;
  auto bad = [](const std::string& message) {
    return core::make_failure(core::FailureKind::invalid_argument, "usage", message);
  };
  for (int i = 1; i < argc; ++i) {
    const std::string arg = argv[i];
    if (arg == "--autonomous") {
      continue;
    }
    auto value = [&](std::string& out) -> bool {
      if (i + 1 >= argc) {
        return false;
      }
      out = argv[++i];
      return true;
    };
    std::string text;
    try {
      if (arg == "--in-place") {
        options.in_place = true;
        continue;
      }
      if (arg == "--no-memory") {
        options.no_memory = true;
        continue;
      }
      if (!value(text)) {
        return bad(arg == "--help" || arg == "-h" ? "" : "unknown option or missing value: " + arg);
      }
      if (arg == "--kernel") {
        options.kernel_path = text;
      } else if (arg == "--problem") {
        options.problem_path = text;
      } else if (arg == "--backend") {
        options.backend = text;
      } else if (arg == "--harness-dir") {
        options.harness_dir = text;
      } else if (arg == "--target") {
        options.target = text;
      } else if (arg == "--llm") {
        options.llm_specs.push_back(text);
      } else if (arg == "--beam") {
        options.beam = std::stoi(text);
      } else if (arg == "--plans") {
        options.plans = std::stoi(text);
      } else if (arg == "--impls") {
        options.impls = std::stoi(text);
      } else if (arg == "--iterations") {
        options.iterations = std::stoi(text);
      } else if (arg == "--dropout") {
        options.dropout = std::stod(text);
      } else if (arg == "--reflexions") {
        options.reflexions = std::stoi(text);
      } else if (arg == "--divergence") {
        options.divergence = std::stod(text);
      } else if (arg == "--min-gain") {
        options.min_gain = std::stod(text);
      } else if (arg == "--confirm") {
        options.confirm = text;
      } else if (arg == "--confirm-top-k") {
        options.confirm_top_k = std::stoi(text);
      } else if (arg == "--max-device-seconds") {
        options.max_device_s = std::stod(text);
      } else if (arg == "--seed") {
        options.seed = std::stoull(text);
      } else if (arg == "--db") {
        options.db_path = text;
      } else if (arg == "--resume") {
        options.resume_id = text;
      } else if (arg == "--report-dir") {
        options.report_dir = text;
      } else if (arg == "--max-llm-calls") {
        options.budgets.max_llm_calls = std::stol(text);
        options.budgets_given = true;
      } else if (arg == "--max-tokens") {
        options.budgets.max_tokens = std::stol(text);
        options.budgets_given = true;
      } else if (arg == "--max-cost") {
        options.budgets.max_cost_usd = std::stod(text);
        options.budgets_given = true;
      } else if (arg == "--max-wall-s") {
        options.budgets.max_wall_s = std::stod(text);
        options.budgets_given = true;
      } else {
        return bad("unknown option: " + arg);
      }
    } catch (const std::exception&) {
      return bad("not a number for " + arg + ": '" + text + "'");
    }
  }
  if (options.resume_id.empty() && (options.kernel_path.empty() || options.problem_path.empty())) {
    return bad("--kernel and --problem are required (or --resume RUN_ID)");
  }
  return options;
}

core::Result<std::string> read_file(const std::string& path) {
  std::ifstream in(path, std::ios::binary);
  if (!in) {
    return core::make_failure(core::FailureKind::io_error, "read", "cannot read " + path);
  }
  std::ostringstream text;
  text << in.rdbuf();
  return text.str();
}

core::Status write_file(const std::string& path, const std::string& content) {
  const std::string temporary = path + ".tmp";
  {
    std::ofstream out(temporary, std::ios::binary | std::ios::trunc);
    out << content;
    if (!out) {
      return core::make_failure(core::FailureKind::io_error, "write", "cannot write " + temporary);
    }
  }
  std::error_code error;
  fs::rename(temporary, path, error);
  if (error) {
    return core::make_failure(core::FailureKind::io_error, "write",
                              "cannot rename " + temporary + ": " + error.message());
  }
  return core::ok_status();
}

// "kernel.py" -> "kernel.best.py" beside it.
std::string sibling(const std::string& kernel_path, const std::string& suffix) {
  fs::path path(kernel_path);
  return (path.parent_path() / (path.stem().string() + suffix)).string();
}

// Prints progress to stdout: one redrawn line on a terminal, plain lines otherwise.
class ProgressPrinter {
 public:
  explicit ProgressPrinter(bool terminal) : m_terminal(terminal) {}

  void operator()(const engine::ProgressEvent& event) {
    std::lock_guard lock(m_mutex);
    std::ostringstream line;
    line.setf(std::ios::fixed);
    line.precision(2);
    line << "iteration " << event.iteration << "/" << event.iterations << " | evaluated "
         << event.candidates_evaluated << " (" << event.candidates_failed << " failed)"
         << " | best " << event.best_latency_us << " us | speedup " << event.speedup << "x"
         << " | llm " << event.llm_calls << " calls, " << event.tokens << " tok, $";
    line.precision(4);
    line << event.cost_usd;
    line.precision(0);
    line << " | " << event.elapsed_s << " s";
    if (m_terminal) {
      std::string text = line.str();
      std::cout << '\r' << text;
      if (text.size() < m_last_width) {
        std::cout << std::string(m_last_width - text.size(), ' ');
      }
      m_last_width = text.size();
      if (event.finished) {
        std::cout << '\n';
      }
      std::cout << std::flush;
    } else if (event.phase != "iteration") {
      std::cout << line.str() << '\n' << std::flush;
    }
  }

 private:
  bool m_terminal;
  std::mutex m_mutex;
  std::size_t m_last_width = 0;
};

void use_stderr_for_logs() {
  auto logger = spdlog::get("autonomous");
  if (!logger) {
    logger = spdlog::stderr_color_mt("autonomous");
  }
  spdlog::set_default_logger(logger);
  spdlog::set_level(spdlog::level::warn);
}

}  // namespace

int autonomous_main(int argc, char** argv) {
  use_stderr_for_logs();
  for (int i = 1; i < argc; ++i) {
    if (std::string(argv[i]) == "--help" || std::string(argv[i]) == "-h") {
      std::cout << k_usage;
      return k_exit_ok;
    }
  }
  auto parsed = parse(argc, argv);
  if (!parsed) {
    std::cerr << "autocomp-mcp --autonomous: " << parsed.failure().message << "\n\n" << k_usage;
    return k_exit_usage;
  }
  Options options = std::move(parsed.value());
  if (options.llm_specs.empty()) {
    std::cerr << k_no_llm_note;
  }

  const std::string db_path =
      options.db_path.empty() ? store::Store::default_path() : options.db_path;
  auto opened = store::Store::open(db_path);
  if (!opened) {
    std::cerr << "autocomp-mcp --autonomous: cannot open the store " << db_path << ": "
              << opened.failure().message << "\n";
    return k_exit_failed;
  }
  std::shared_ptr<store::Store> db(std::move(opened.value()));

  launch::LaunchRequest request;
  request.resume_run_id = options.resume_id;
  request.target = options.target.value_or("");
  request.backend_spec = options.backend;
  request.harness_dir = options.harness_dir;
  request.llm_specs = options.llm_specs;
  if (options.budgets_given) {
    request.budgets = options.budgets;
  }
  if (!options.resume_id.empty()) {
    if (options.no_memory || options.reflexions || options.divergence || options.min_gain ||
        options.beam || options.plans || options.impls || options.iterations || options.dropout ||
        !options.confirm.empty() || options.confirm_top_k || options.max_device_s) {
      std::cerr << "autocomp-mcp --autonomous: note: a resumed run keeps its stored settings; "
                   "search-shape and learning options are ignored with --resume (budgets apply)\n";
    }
    request.kernel_path =
        options.kernel_path.empty() ? "" : fs::absolute(options.kernel_path).string();
    request.problem_path =
        options.problem_path.empty() ? "" : fs::absolute(options.problem_path).string();
  } else {
    auto kernel = read_file(options.kernel_path);
    auto problem = read_file(options.problem_path);
    if (!kernel || !problem) {
      std::cerr << "autocomp-mcp --autonomous: "
                << (!kernel ? kernel.failure().message : problem.failure().message) << "\n";
      return k_exit_usage;
    }
    request.kernel_path = fs::absolute(options.kernel_path).string();
    request.problem_path = fs::absolute(options.problem_path).string();
    request.kernel_source = kernel.value();
    request.problem_source = problem.value();
    engine::SearchConfig& shape = request.shape;
    shape.beam = options.beam.value_or(shape.beam);
    shape.plans = options.plans.value_or(shape.plans);
    shape.impls = options.impls.value_or(shape.impls);
    shape.iterations = options.iterations.value_or(shape.iterations);
    shape.dropout = options.dropout.value_or(shape.dropout);
    shape.memory = !options.no_memory;
    shape.reflexions = options.reflexions.value_or(shape.reflexions);
    shape.divergence = options.divergence.value_or(shape.divergence);
    shape.min_gain = options.min_gain;
    shape.confirm = options.confirm;
    shape.confirm_top_k = options.confirm_top_k.value_or(shape.confirm_top_k);
    shape.max_device_s = options.max_device_s;
    shape.seed = options.seed ? *options.seed : std::random_device{}();
  }
  auto prepared = launch::prepare(request, db);
  if (!prepared) {
    std::cerr << "autocomp-mcp --autonomous: " << prepared.failure().message << "\n";
    return k_exit_usage;
  }
  const launch::Launch& ready = prepared.value();
  const engine::RunFacts& info = ready.services.facts;

  core::CancelToken cancel;
  g_interrupted.store(false);
  auto previous_int = std::signal(SIGINT, on_interrupt);
  auto previous_term = std::signal(SIGTERM, on_interrupt);
  std::atomic<bool> finished{false};
  std::thread interrupt_watch([&] {
    while (!finished.load()) {
      if (g_interrupted.load()) {
        cancel.cancel();
      }
      std::this_thread::sleep_for(std::chrono::milliseconds(50));
    }
  });

  ProgressPrinter printer(::isatty(STDOUT_FILENO) != 0);
  engine::SearchHooks hooks;
  hooks.started = [](const std::string& run_id) {
    std::cout << "run: " << run_id << '\n' << std::flush;
  };
  hooks.progress = [&printer](const engine::ProgressEvent& event) { printer(event); };

  engine::SearchOutcome outcome = launch::run(ready, cancel, hooks);
  finished.store(true);
  interrupt_watch.join();
  std::signal(SIGINT, previous_int);
  std::signal(SIGTERM, previous_term);

  if (outcome.status == "failed") {
    std::cerr << "autocomp-mcp --autonomous: the search failed: " << outcome.stop_reason << "\n";
    return k_exit_failed;
  }

  std::string best_path;
  if (outcome.best.correct() && !outcome.best.source.empty() && !info.kernel_path.empty()) {
    best_path = sibling(info.kernel_path, ".best.py");
    if (auto status = write_file(best_path, outcome.best.source); !status) {
      std::cerr << "autocomp-mcp --autonomous: " << status.failure().message << "\n";
      best_path.clear();
    }
    if (options.in_place && outcome.best.key != outcome.baseline.key) {
      if (auto status = write_file(info.kernel_path, outcome.best.source); !status) {
        std::cerr << "autocomp-mcp --autonomous: " << status.failure().message << "\n";
      }
    }
  }

  const std::string report_dir =
      options.report_dir.empty()
          ? sibling(info.kernel_path, ".autocomp-report")
          : (fs::path(options.report_dir) /
             (fs::path(info.kernel_path).stem().string() + ".autocomp-report"))
                .string();
  report::ReportInput report_input;
  report_input.outcome = &outcome;
  report_input.kernel_path = info.kernel_path;
  report_input.problem_path = info.problem_path;
  report_input.best_path = best_path;
  report_input.backend = info.backend;
  report_input.llm_specs = options.llm_specs;
  report_input.candidates = engine::load_candidates(engine::parts_of(db), outcome.run_id);
  if (auto lessons = db->memory().lessons(outcome.config.target, 200); lessons.ok()) {
    for (const auto& lesson : lessons.value()) {
      if (lesson.source_run == outcome.run_id) {
        report_input.lessons.push_back(lesson.text);
      }
    }
  }
  auto written = report::write_report(report_input, report_dir);

  std::cout.setf(std::ios::fixed);
  std::cout.precision(3);
  std::cout << "status: " << outcome.status
            << (outcome.stop_reason.empty() ? "" : " (" + outcome.stop_reason + ")") << '\n';
  std::cout << "best: " << outcome.best.latency_us() << " us, speedup " << outcome.speedup()
            << "x over " << outcome.baseline.latency_us() << " us\n";
  for (const auto& note : outcome.notes) {
    std::cout << "re-verification: " << note << '\n';
  }
  std::cout << "evaluations: " << outcome.backend_evaluations << " on " << info.backend << " ("
            << outcome.cache_hits << " from the store)\n";
  if (!outcome.confirmation.empty()) {
    std::cout << outcome.confirmation << '\n';
  }
  if (!best_path.empty()) {
    std::cout << "best kernel: " << best_path << (options.in_place ? " (and the input file)" : "")
              << '\n';
  }
  if (written) {
    std::cout << "report: " << (fs::path(report_dir) / "report.html").string() << '\n';
  } else {
    std::cerr << "autocomp-mcp --autonomous: " << written.failure().message << "\n";
  }
  if (outcome.status == "cancelled") {
    std::cout << "resume with: autocomp-mcp --autonomous --resume " << outcome.run_id
              << (options.db_path.empty() ? "" : " --db " + options.db_path) << " --llm ...\n";
    return k_exit_interrupted;
  }
  return k_exit_ok;
}

}  // namespace autocomp::app
