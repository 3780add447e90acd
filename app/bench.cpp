#include "app/bench.hpp"

#include <spdlog/sinks/stdout_color_sinks.h>
#include <spdlog/spdlog.h>
#include <unistd.h>

#include <algorithm>
#include <cstdio>
#include <cstdlib>
#include <filesystem>
#include <fstream>
#include <iostream>
#include <map>
#include <optional>
#include <sstream>

#include "core/targets.hpp"
#include "server/protocol.hpp"
#include "tools/product_tools.hpp"

namespace autocomp::app {

namespace fs = std::filesystem;
using nlohmann::json;

namespace {

constexpr const char* k_usage = R"(autocomp-mcp bench SUITE [OPTIONS]

Runs every (kernel, problem) pair of SUITE through verify_kernel, benchmark_kernel and
profile_kernel (the same in-process tool calls as `autocomp-mcp call`) and prints a table:
correct, latency, bottleneck and percent of peak under the accelopt rule and the product's
own roofline. Evaluations are stored in the results database by content, so running the
same suite again skips the pairs already evaluated (they come back as cached).

SUITE is one of:
  an NKIBench summary.json, or a folder holding one (pairs from its cases' "impls")
  a manifest: a JSON list, or {"pairs": [...]}, of {"name", "kernel", "problem"}
  a workload folder (problem.py beside kernel files) or a folder of them (e.g. seeds/)

Options:
  --target trn1|trn2|trn3  target (default: each problem's TARGET, else trn2)
  --backend SPEC           evaluation backend (default sim)
  --db PATH                results database (default: the tools' default location)
  --harness-dir DIR        evaluation harness folder
  --json PATH              write the result rows as JSON
  --markdown PATH          write the table as Markdown (it is always printed on stdout)
  --compare OTHER.json     show the rows of an earlier --json beside this run's
  --only SUBSTRING         run only pairs whose name contains SUBSTRING (repeatable)
  --log-level LEVEL        stderr log level (default warn)
  --timeout S              time limit of each evaluation in seconds (default: the tools' 600;
                           a full-size NKIBench matmul on the simulator needs more)
)";

struct BenchOptions {
  std::string suite;
  tools::ProductToolsOptions product;
  std::string json_path;
  std::string markdown_path;
  std::string compare_path;
  std::vector<std::string> only;
  std::string log_level = "warn";
  double timeout_s = 0;  // per evaluation; 0: the tools' default
};

std::optional<json> read_json_file(const fs::path& path, std::string& error) {
  std::ifstream in(path);
  if (!in) {
    error = "cannot read " + path.string();
    return std::nullopt;
  }
  json value = json::parse(in, nullptr, false);
  if (value.is_discarded()) {
    error = path.string() + " is not valid JSON";
    return std::nullopt;
  }
  return value;
}

std::string absolute_in(const fs::path& base, const std::string& path) {
  fs::path p(path);
  return (p.is_absolute() ? p : (base / p)).lexically_normal().string();
}

bool is_nkibench_summary(const json& value) {
  if (!value.is_object() || value.empty() || value.contains("pairs")) {
    return false;
  }
  return std::all_of(value.begin(), value.end(), [](const json& entry) {
    return entry.is_object() && entry.contains("cases") && entry["cases"].is_object();
  });
}

SuiteParse from_nkibench(const json& summary, const fs::path& base) {
  SuiteParse out;
  for (const auto& [workload, entry] : summary.items()) {
    for (const auto& [case_id, one_case] : entry["cases"].items()) {
      const json impls = one_case.is_object() ? one_case.value("impls", json::array()) : json();
      if (!impls.is_array()) {
        out.error = "summary case " + workload + "/" + case_id + " has no \"impls\" list";
        return out;
      }
      std::size_t index = 0;
      for (const auto& impl : impls) {
        if (!impl.is_object() || !impl.contains("task") || !impl.contains("kernel") ||
            !impl["task"].is_string() || !impl["kernel"].is_string()) {
          out.error = "summary case " + workload + "/" + case_id +
                      ": every impl needs \"task\" (the reference) and \"kernel\" paths";
          return out;
        }
        std::string name = workload + "/" + case_id;
        if (impls.size() > 1) {
          name += "/" + std::to_string(index);
        }
        out.pairs.push_back({name, absolute_in(base, impl["kernel"].get<std::string>()),
                             absolute_in(base, impl["task"].get<std::string>())});
        ++index;
      }
    }
  }
  return out;
}

SuiteParse from_manifest(const json& manifest, const fs::path& base) {
  SuiteParse out;
  const json list = manifest.is_object() ? manifest.value("pairs", json()) : manifest;
  if (!list.is_array()) {
    out.error =
        "a manifest is a JSON list, or {\"pairs\": [...]}, of {\"name\", \"kernel\", "
        "\"problem\"}, or an NKIBench summary.json";
    return out;
  }
  for (const auto& entry : list) {
    if (!entry.is_object() || !entry.contains("kernel") || !entry.contains("problem") ||
        !entry["kernel"].is_string() || !entry["problem"].is_string()) {
      out.error =
          "every manifest entry needs \"kernel\" and \"problem\" paths (and may have "
          "\"name\"): " +
          entry.dump();
      return out;
    }
    const std::string kernel = absolute_in(base, entry["kernel"].get<std::string>());
    std::string name = entry.value("name", fs::path(kernel).stem().string());
    out.pairs.push_back({name, kernel, absolute_in(base, entry["problem"].get<std::string>())});
  }
  return out;
}

// A workload folder: problem.py and every other *.py beside it is a kernel.
void workload_pairs(const fs::path& folder, const std::string& prefix,
                    std::vector<BenchPair>& pairs) {
  const fs::path problem = folder / "problem.py";
  std::vector<fs::path> kernels;
  for (const auto& entry : fs::directory_iterator(folder)) {
    const fs::path& path = entry.path();
    if (entry.is_regular_file() && path.extension() == ".py" && path.filename() != "problem.py" &&
        path.filename().string().rfind("__", 0) != 0) {
      kernels.push_back(path);
    }
  }
  std::sort(kernels.begin(), kernels.end());
  for (const auto& kernel : kernels) {
    pairs.push_back({prefix + kernel.stem().string(), kernel.string(), problem.string()});
  }
}

}  // namespace

SuiteParse read_suite(const std::string& suite) {
  SuiteParse out;
  std::error_code ec;
  const fs::path path = fs::absolute(suite, ec).lexically_normal();
  if (ec || !fs::exists(path)) {
    out.error = "suite not found: " + suite;
    return out;
  }
  if (fs::is_directory(path)) {
    if (fs::exists(path / "summary.json")) {
      return read_suite((path / "summary.json").string());
    }
    if (fs::exists(path / "problem.py")) {
      workload_pairs(path, path.filename().string() + "/", out.pairs);
    } else {
      std::vector<fs::path> folders;
      for (const auto& entry : fs::directory_iterator(path)) {
        if (entry.is_directory() && fs::exists(entry.path() / "problem.py")) {
          folders.push_back(entry.path());
        }
      }
      std::sort(folders.begin(), folders.end());
      for (const auto& folder : folders) {
        workload_pairs(folder, folder.filename().string() + "/", out.pairs);
      }
    }
    if (out.pairs.empty()) {
      out.error = "folder " + path.string() +
                  " holds no summary.json, no problem.py with kernels beside it, and no "
                  "subfolders that do";
    }
  } else {
    auto value = read_json_file(path, out.error);
    if (!value) {
      return out;
    }
    out = is_nkibench_summary(*value) ? from_nkibench(*value, path.parent_path())
                                      : from_manifest(*value, path.parent_path());
    if (out.error.empty() && out.pairs.empty()) {
      out.error = path.string() + " lists no pairs";
    }
  }
  std::sort(out.pairs.begin(), out.pairs.end(),
            [](const BenchPair& a, const BenchPair& b) { return a.name < b.name; });
  return out;
}

namespace {

std::string number_text(const json& value, int decimals) {
  if (!value.is_number()) {
    return "-";
  }
  char buffer[64];
  std::snprintf(buffer, sizeof buffer, "%.*f", decimals, value.get<double>());
  return buffer;
}

std::string cell(std::string text) {
  for (auto& c : text) {
    if (c == '|' || c == '\n' || c == '\r') {
      c = c == '|' ? '/' : ' ';
    }
  }
  constexpr std::size_t k_max = 160;
  if (text.size() > k_max) {
    text = text.substr(0, k_max - 3) + "...";
  }
  return text;
}

std::string correct_text(const json& row) {
  if (!row.contains("correct") || row["correct"].is_null()) {
    return "error";
  }
  return row["correct"].get<bool>() ? "yes" : "no";
}

}  // namespace

std::string bench_markdown(const json& rows, const json* other) {
  std::ostringstream out;
  if (other == nullptr) {
    out << "| pair | kernel | correct | latency (us) | bottleneck | % of peak (accelopt) "
           "| % of peak (roofline) | note |\n";
    out << "|---|---|---|---:|---|---:|---:|---|\n";
    for (const auto& row : rows) {
      out << "| " << cell(row.value("name", "")) << " | "
          << cell(fs::path(row.value("kernel", "")).filename().string()) << " | "
          << correct_text(row) << " | " << number_text(row.value("latency_us", json()), 2) << " | "
          << cell(row.value("bottleneck", "-")) << " | "
          << number_text(row.value("pct_of_peak_accelopt", json()), 1) << " | "
          << number_text(row.value("pct_of_peak_roofline", json()), 1) << " | "
          << cell(row.value("error", "")) << " |\n";
    }
    return out.str();
  }
  std::map<std::string, json> before;
  for (const auto& row : *other) {
    before[row.value("name", "")] = row;
  }
  out << "| pair | correct (other / this) | latency us (other / this) | speedup | "
         "% of peak accelopt (other / this) | % of peak roofline (other / this) |\n";
  out << "|---|---|---:|---:|---:|---:|\n";
  std::map<std::string, bool> seen;
  auto line = [&](const std::string& name, const json& a, const json& b) {
    const json la = a.value("latency_us", json());
    const json lb = b.value("latency_us", json());
    std::string speedup = "-";
    if (la.is_number() && lb.is_number() && lb.get<double>() > 0) {
      speedup = number_text(la.get<double>() / lb.get<double>(), 2) + "x";
    }
    out << "| " << cell(name) << " | " << (a.empty() ? "-" : correct_text(a)) << " / "
        << (b.empty() ? "-" : correct_text(b)) << " | " << number_text(la, 2) << " / "
        << number_text(lb, 2) << " | " << speedup << " | "
        << number_text(a.value("pct_of_peak_accelopt", json()), 1) << " / "
        << number_text(b.value("pct_of_peak_accelopt", json()), 1) << " | "
        << number_text(a.value("pct_of_peak_roofline", json()), 1) << " / "
        << number_text(b.value("pct_of_peak_roofline", json()), 1) << " |\n";
  };
  for (const auto& row : rows) {
    const std::string name = row.value("name", "");
    seen[name] = true;
    auto found = before.find(name);
    line(name, found == before.end() ? json::object() : found->second, row);
  }
  for (const auto& [name, row] : before) {
    if (!seen.count(name)) {
      line(name, row, json::object());
    }
  }
  return out.str();
}

namespace {

std::optional<std::string> parse_args(int argc, char** argv, BenchOptions& options) {
  for (int i = 2; i < argc; ++i) {
    const std::string arg = argv[i];
    auto value = [&](std::string& out) -> bool {
      if (i + 1 >= argc) {
        return false;
      }
      out = argv[++i];
      return true;
    };
    std::string text;
    if (arg == "--help" || arg == "-h") {
      return std::string();
    } else if (arg == "--target") {
      if (!value(options.product.target) || !core::is_known_target(options.product.target)) {
        return "--target must be " + core::known_targets_text();
      }
    } else if (arg == "--backend") {
      if (!value(text)) {
        return std::string("--backend needs a SPEC");
      }
      options.product.backend_specs.push_back(text);
    } else if (arg == "--db") {
      if (!value(options.product.db_path)) {
        return std::string("--db needs a PATH");
      }
    } else if (arg == "--harness-dir") {
      if (!value(options.product.harness_dir)) {
        return std::string("--harness-dir needs a DIR");
      }
    } else if (arg == "--json") {
      if (!value(options.json_path)) {
        return std::string("--json needs a PATH");
      }
    } else if (arg == "--markdown") {
      if (!value(options.markdown_path)) {
        return std::string("--markdown needs a PATH");
      }
    } else if (arg == "--compare") {
      if (!value(options.compare_path)) {
        return std::string("--compare needs a PATH");
      }
    } else if (arg == "--only") {
      if (!value(text)) {
        return std::string("--only needs a SUBSTRING");
      }
      options.only.push_back(text);
    } else if (arg == "--timeout") {
      std::string seconds_text;
      if (!value(seconds_text)) {
        return std::string("--timeout needs S (seconds)");
      }
      char* end = nullptr;
      const double seconds = std::strtod(seconds_text.c_str(), &end);
      if (end == seconds_text.c_str() || *end != '\0' || !(seconds >= 1 && seconds <= 86400)) {
        return "--timeout must be a number of seconds from 1 to 86400 (got '" + seconds_text + "')";
      }
      options.timeout_s = seconds;
    } else if (arg == "--log-level") {
      if (!value(options.log_level)) {
        return std::string("--log-level needs a LEVEL");
      }
    } else if (arg.rfind("--", 0) == 0) {
      return "unknown option '" + arg + "' (see autocomp-mcp bench --help)";
    } else if (options.suite.empty()) {
      options.suite = arg;
    } else {
      return "bench takes one SUITE (got '" + options.suite + "' and '" + arg + "')";
    }
  }
  if (options.suite.empty()) {
    return std::string("bench needs a SUITE (see autocomp-mcp bench --help)");
  }
  return std::nullopt;
}

// The message of a tool answer that did not produce its figures.
std::string answer_error(const json& answer) {
  const json structured = answer.value("structuredContent", json::object());
  for (const char* key : {"failure", "error"}) {
    if (structured.contains(key)) {
      const json& found = structured[key];
      if (found.is_object() && found.contains("message") && found["message"].is_string()) {
        const std::string kind = found.value("kind", "");
        return (kind.empty() ? "" : kind + ": ") + found["message"].get<std::string>();
      }
      if (found.is_string()) {
        return found.get<std::string>();
      }
    }
  }
  const json content = answer.value("content", json::array());
  if (content.is_array() && !content.empty() && content[0].contains("text")) {
    return content[0]["text"].get<std::string>();
  }
  return "the tool reported an error";
}

class ProgressBar {
 public:
  explicit ProgressBar(std::size_t total) : m_total(total), m_tty(::isatty(2) != 0) {}

  void show(std::size_t done, const std::string& what) const {
    constexpr std::size_t k_width = 30;
    const std::size_t filled = m_total ? done * k_width / m_total : k_width;
    std::string bar(filled, '#');
    bar.resize(k_width, '.');
    std::cerr << (m_tty ? "\r\033[K" : "") << "[" << bar << "] " << done << "/" << m_total << " "
              << what << (m_tty ? "" : "\n") << std::flush;
  }

  void finish() const {
    if (m_tty) {
      std::cerr << "\n";
    }
  }

 private:
  std::size_t m_total;
  bool m_tty;
};

json run_pair(server::Server& server, const BenchPair& pair, const BenchOptions& options) {
  json row = {{"name", pair.name}, {"kernel", pair.kernel}, {"problem", pair.problem}};
  json args = {{"kernel", pair.kernel}, {"problem", pair.problem}};
  if (!options.product.target.empty()) {
    args["target"] = options.product.target;
  }
  if (options.timeout_s > 0) {
    args["timeout_s"] = options.timeout_s;
  }
  server::ToolContext context;
  auto call = [&](const char* tool) -> std::optional<json> {
    auto answer = server.call_tool(tool, args, context);
    if (!answer) {
      row["error"] = std::string("tool ") + tool + " is not registered";
      return std::nullopt;
    }
    if (answer->value("isError", false)) {
      row["error"] = answer_error(*answer);
      return std::nullopt;
    }
    return answer->value("structuredContent", json::object());
  };
  auto verified = call("verify_kernel");
  if (!verified) {
    row["correct"] = nullptr;
    return row;
  }
  row["correct"] = verified->value("correct", false);
  row["measured"] = verified->value("measured", "");
  row["cached"] = verified->value("cached", false);
  if (!row["correct"].get<bool>()) {
    const json failure = verified->value("failure", json::object());
    const bool has_failure = failure.is_object() && failure.contains("message");
    row["error"] = has_failure ? failure.value("kind", "") + ": " + failure.value("message", "")
                               : verified->value("summary", "incorrect");
    if (has_failure && failure.value("kind", "") != "mismatch") {
      row["correct"] = nullptr;  // never compared: the kernel did not compile or run
      row["failure_kind"] = failure.value("kind", "");
    }
    return row;
  }
  if (auto bench = call("benchmark_kernel")) {
    const json latency = bench->value("latency_us", json::object());
    row["latency_us"] = latency.value("min", json());
    row["latency_median_us"] = latency.value("median", json());
  } else {
    return row;
  }
  if (auto profile = call("profile_kernel")) {
    row["bottleneck"] = profile->value("bottleneck", "");
    const json peak = profile->value("percent_of_peak", json::object());
    for (const char* rule : {"accelopt", "roofline", "floor"}) {
      if (peak.contains(rule) && peak[rule].is_object() && peak[rule].contains("percent")) {
        row[std::string("pct_of_peak_") + rule] = peak[rule]["percent"];
        if (peak[rule].contains("theoretical_us")) {
          row[std::string("theoretical_us_") + rule] = peak[rule]["theoretical_us"];
        }
      }
    }
  }
  return row;
}

bool write_file(const std::string& path, const std::string& text) {
  std::ofstream out(path, std::ios::trunc);
  out << text;
  return static_cast<bool>(out);
}

}  // namespace

int bench_main(int argc, char** argv) {
  BenchOptions options;
  if (auto error = parse_args(argc, argv, options)) {
    if (error->empty()) {
      std::cout << k_usage;
      return 0;
    }
    std::cerr << "autocomp-mcp bench: " << *error << "\n";
    return 2;
  }
  auto logger = spdlog::stderr_color_mt("autocomp");
  logger->set_pattern("[%H:%M:%S.%e] [%^%l%$] %v");
  spdlog::set_default_logger(logger);
  spdlog::set_level(spdlog::level::from_str(options.log_level));

  SuiteParse suite = read_suite(options.suite);
  if (!suite.error.empty()) {
    std::cerr << "autocomp-mcp bench: " << suite.error << "\n";
    return 2;
  }
  if (!options.only.empty()) {
    std::erase_if(suite.pairs, [&](const BenchPair& pair) {
      return std::none_of(options.only.begin(), options.only.end(), [&](const std::string& s) {
        return pair.name.find(s) != std::string::npos;
      });
    });
  }
  json other;
  if (!options.compare_path.empty()) {
    std::string error;
    auto loaded = read_json_file(options.compare_path, error);
    if (!loaded) {
      std::cerr << "autocomp-mcp bench: --compare: " << error << "\n";
      return 2;
    }
    other = loaded->is_object() ? loaded->value("rows", json()) : *loaded;
    if (!other.is_array()) {
      std::cerr << "autocomp-mcp bench: --compare needs a file written by bench --json\n";
      return 2;
    }
  }

  server::Registries registries;
  try {
    tools::register_product_tools(registries, options.product);
  } catch (const std::exception& error) {
    std::cerr << "autocomp-mcp bench: cannot set up the tools: " << error.what() << "\n";
    return 2;
  }
  server::ServerOptions server_options;
  server_options.version = AUTOCOMP_VERSION;
  for (const auto& spec : options.product.backend_specs) {
    server_options.trusted_endpoints.push_back(spec);
  }
  server::Server server(registries, server_options);

  json rows = json::array();
  json document = {
      {"suite", options.suite},
      {"target", options.product.target.empty() ? json() : json(options.product.target)},
      {"backend", options.product.backend_specs.empty()
                      ? json("sim")
                      : json(options.product.backend_specs.front())},
      {"rows", json::array()}};
  ProgressBar progress(suite.pairs.size());
  int failed = 0;
  for (std::size_t i = 0; i < suite.pairs.size(); ++i) {
    progress.show(i, suite.pairs[i].name);
    json row = run_pair(server, suite.pairs[i], options);
    if (row.contains("error") && row["correct"].is_null() && !row.contains("failure_kind")) {
      ++failed;  // the tools could not evaluate the pair at all
    }
    rows.push_back(std::move(row));
    if (!options.json_path.empty()) {  // kept after every pair: an interrupted run shows them
      document["rows"] = rows;
      write_file(options.json_path, document.dump(2) + "\n");
    }
  }
  progress.show(suite.pairs.size(), "done");
  progress.finish();

  const std::string table = bench_markdown(rows, other.is_array() ? &other : nullptr);
  std::cout << table;
  if (!options.markdown_path.empty() && !write_file(options.markdown_path, table)) {
    std::cerr << "autocomp-mcp bench: cannot write " << options.markdown_path << "\n";
    return 2;
  }
  if (!options.json_path.empty()) {
    document["rows"] = rows;
    if (!write_file(options.json_path, document.dump(2) + "\n")) {
      std::cerr << "autocomp-mcp bench: cannot write " << options.json_path << "\n";
      return 2;
    }
  }
  return failed == 0 ? 0 : 1;
}

}  // namespace autocomp::app
