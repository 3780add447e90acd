#include "backends/harness_bundle.hpp"

#include <unistd.h>

#include <algorithm>
#include <charconv>
#include <cstdio>
#include <cstdlib>
#include <fstream>
#include <sstream>
#include <system_error>

#include "backends/harness_output.hpp"
#include "backends/kernel_modules.hpp"
#include "core/hash.hpp"
#include "core/process.hpp"

namespace autocomp::backends {
namespace fs = std::filesystem;

namespace {

bool has_entry(const fs::path& root) {
  std::error_code ec;
  return fs::is_regular_file(root / "harness" / "autocomp_harness.py", ec);
}

fs::path executable_dir() {
  std::error_code ec;
  fs::path self = fs::read_symlink("/proc/self/exe", ec);
  return ec ? fs::path{} : self.parent_path();
}

}  // namespace

core::Result<fs::path> locate_harness_dir(const std::string& configured) {
  std::vector<fs::path> candidates;
  if (!configured.empty()) {
    candidates.emplace_back(configured);
  } else {
    if (const char* env = std::getenv("AUTOCOMP_HARNESS_DIR"); env != nullptr && *env != '\0') {
      candidates.emplace_back(env);
    }
#ifdef AUTOCOMP_SOURCE_DIR
    candidates.push_back(fs::path(AUTOCOMP_SOURCE_DIR) / "backends");
#endif
    if (auto bin = executable_dir(); !bin.empty()) {
      candidates.push_back(bin.parent_path() / "share" / "autocomp-mcp" / "backends");
    }
  }
  std::string looked;
  for (const auto& candidate : candidates) {
    if (has_entry(candidate)) {
      std::error_code ec;
      auto absolute = fs::absolute(candidate, ec);
      return ec ? candidate : absolute.lexically_normal();
    }
    looked += (looked.empty() ? "" : ", ") + candidate.string();
  }
  return core::make_failure(core::FailureKind::unavailable, "harness",
                            "harness/autocomp_harness.py not found (looked in: " + looked +
                                "); set AUTOCOMP_HARNESS_DIR to the folder holding harness/ and "
                                "nkisim/");
}

core::Result<HarnessBundle> load_harness_bundle(const fs::path& root) {
  if (!has_entry(root)) {
    return core::make_failure(core::FailureKind::unavailable, "harness",
                              "no harness/autocomp_harness.py under " + root.string());
  }
  HarnessBundle bundle;
  bundle.root = root;
  for (const char* part : {"harness", "nkisim"}) {
    std::error_code ec;
    if (!fs::is_directory(root / part, ec)) {
      continue;
    }
    for (fs::recursive_directory_iterator it(root / part, ec), end; !ec && it != end;
         it.increment(ec)) {
      // Python sources and their data (the simulator's cost tables are JSON).
      const auto extension = it->path().extension();
      if (it->is_regular_file(ec) && (extension == ".py" || extension == ".json")) {
        bundle.files.push_back(it->path().lexically_relative(root).generic_string());
      }
    }
  }
  std::sort(bundle.files.begin(), bundle.files.end());
  std::string digest_input;
  for (const auto& file : bundle.files) {
    std::ifstream in(root / file, std::ios::binary);
    std::ostringstream content;
    content << in.rdbuf();
    if (!in && !in.eof()) {
      return core::make_failure(core::FailureKind::io_error, "harness",
                                "cannot read " + (root / file).string());
    }
    std::string text = content.str();
    bundle.contents.push_back(text);
    // Length-prefixed fields so that no two different bundles hash the same input.
    digest_input += std::to_string(file.size()) + ":" + file + ";" + std::to_string(text.size()) +
                    ":" + text + ";";
  }
  bundle.hash = core::sha256_hex(digest_input);
  return bundle;
}

std::string resolve_python(const std::string& configured) {
  if (!configured.empty()) {
    return configured;
  }
  if (const char* env = std::getenv("AUTOCOMP_PYTHON"); env != nullptr && *env != '\0') {
    return env;
  }
  if (::access("/usr/bin/python3", X_OK) == 0) {
    return "/usr/bin/python3";
  }
  return "python3";
}

std::vector<std::string> harness_arguments(const EvalRequest& request,
                                           const HarnessInvocation& invocation) {
  std::vector<std::string> args{std::string(to_string(request.command)),
                                "--kernel",
                                invocation.kernel_path,
                                "--problem",
                                invocation.problem_path,
                                "--target",
                                request.target,
                                "--device",
                                invocation.device,
                                "--warmup",
                                std::to_string(request.warmup),
                                "--iters",
                                std::to_string(request.iters)};
  if (!request.seeds.empty()) {
    std::string seeds;
    for (int seed : request.seeds) {
      seeds += (seeds.empty() ? "" : ",") + std::to_string(seed);
    }
    args.insert(args.end(), {"--seeds", seeds});
  }
  if (!request.kernel_name.empty()) {
    args.insert(args.end(), {"--kernel-name", request.kernel_name});
  }
  if (!invocation.workdir.empty()) {
    args.insert(args.end(), {"--workdir", invocation.workdir});
  }
  if (invocation.timeout_s > 0) {
    char text[32];
    std::snprintf(text, sizeof text, "%.3f", invocation.timeout_s);
    args.insert(args.end(), {"--timeout", text});
  }
  if (invocation.device == "fake" && invocation.fake_ms > 0) {
    args.insert(args.end(), {"--fake-ms", std::to_string(invocation.fake_ms)});
  }
  if (invocation.device == "sim-perturbed" && invocation.device_seed >= 0) {
    args.insert(args.end(), {"--device-seed", std::to_string(invocation.device_seed)});
  }
  if (!invocation.cost_table_path.empty()) {
    args.insert(args.end(), {"--cost-table", invocation.cost_table_path});
  }
  return args;
}

double harness_timeout_seconds(std::chrono::milliseconds wall_timeout) {
  double wall = static_cast<double>(wall_timeout.count()) / 1000.0;
  if (wall <= 0) {
    return 0;
  }
  double margin = std::max(0.3, std::min(2.0, wall * 0.1));
  return std::max(0.1, wall - margin);
}

std::string safe_file_name(const std::string& wanted, const std::string& fallback) {
  std::string base = fs::path(wanted).filename().string();
  if (base.empty() || base.size() > 100 || base.front() == '.' || base.size() < 4 ||
      base.substr(base.size() - 3) != ".py") {
    return fallback;
  }
  for (char c : base) {
    bool plain = (c >= 'a' && c <= 'z') || (c >= 'A' && c <= 'Z') || (c >= '0' && c <= '9') ||
                 c == '_' || c == '-' || c == '.';
    if (!plain) {
      return fallback;
    }
  }
  return base;
}

WorkFileNames work_file_names(const EvalRequest& request) {
  WorkFileNames names{safe_file_name(request.kernel_filename, "kernel.py"),
                      safe_file_name(request.problem_filename, "problem.py")};
  if (names.problem == names.kernel) {
    names.problem = names.kernel == "problem.py" ? "problem_file.py" : "problem.py";
  }
  if (safe_kernel_folder(request.kernel_folder)) {
    names.kernel = request.kernel_folder + "/" + names.kernel;
  }
  return names;
}

std::string cost_table_file_name(const EvalRequest& request) {
  return request.cost_table_json.empty() ? std::string() : std::string("cost_table.json");
}

core::Status check_kernel_modules(const EvalRequest& request, const WorkFileNames& files) {
  for (const auto& module : request.kernel_modules) {
    if (!safe_module_path(module.path) || module.path == files.kernel ||
        module.path == files.problem) {
      return core::make_failure(core::FailureKind::invalid_argument, "kernel_modules",
                                "cannot place the kernel's module '" + module.path +
                                    "' beside it (a relative path of plain names ending in .py, "
                                    "other than the kernel and problem files)");
    }
  }
  return core::ok_status();
}

std::vector<std::string> evaluation_arguments(const EvalRequest& request, const std::string& dir,
                                              const WorkFileNames& files, const std::string& device,
                                              int fake_ms, const std::string& default_target,
                                              int device_seed) {
  EvalRequest effective = request;
  if (effective.target.empty()) {
    effective.target = default_target;
  }
  HarnessInvocation invocation;
  invocation.device = device;
  invocation.fake_ms = fake_ms;
  invocation.device_seed = device_seed;
  invocation.kernel_path = dir + "/" + files.kernel;
  invocation.problem_path = dir + "/" + files.problem;
  invocation.workdir = dir;
  invocation.timeout_s = harness_timeout_seconds(request.timeout);
  if (const std::string table = cost_table_file_name(request); !table.empty()) {
    invocation.cost_table_path = dir + "/" + table;
  }
  return harness_arguments(effective, invocation);
}

std::string DeviceChoice::identity_query() const {
  std::string out = "?device=" + device;
  if (device == "sim-perturbed") {
    out += "&seed=" + std::to_string(seed);
  }
  return out;
}

core::Result<DeviceChoice> device_choice(const std::string& spec_text,
                                         const std::map<std::string, std::string>& params,
                                         const std::string& default_device) {
  auto bad = [&spec_text](const std::string& why) {
    return core::make_failure(core::FailureKind::invalid_argument, "backend",
                              "invalid backend spec '" + spec_text + "': " + why);
  };
  DeviceChoice choice;
  auto device = params.find("device");
  choice.device = device == params.end() ? default_device : device->second;
  if (choice.device != "sim" && choice.device != "neuron" && choice.device != "fake" &&
      choice.device != "sim-perturbed") {
    return bad("unknown device '" + choice.device +
               "' (neuron, sim, fake, or sim-perturbed: a fake device for tests)");
  }
  auto seed = params.find("seed");
  if (choice.device != "sim-perturbed") {
    if (seed != params.end()) {
      return bad("seed is an option of device=sim-perturbed only");
    }
    return choice;
  }
  choice.seed = 0;
  if (seed != params.end()) {
    const std::string& text = seed->second;
    int value = 0;
    auto [end, ec] = std::from_chars(text.data(), text.data() + text.size(), value);
    if (text.empty() || ec != std::errc() || end != text.data() + text.size() || value < 0) {
      return bad("seed must be a non-negative integer, got '" + text + "'");
    }
    choice.seed = value;
  }
  return choice;
}

std::string timeout_command_seconds(std::chrono::milliseconds wall) {
  char text[32];
  std::snprintf(text, sizeof text, "%.3f", static_cast<double>(wall.count()) / 1000.0);
  return text;
}

bool stopped_by_timeout_command(int exit_status) {
  return exit_status == 124 || exit_status == 137;
}

std::string probe_harness_version(const std::string& python, const HarnessBundle& bundle,
                                  const std::string& device) {
  core::ProcessSpec spec;
  spec.argv = {python, "-I", "-B", bundle.entry().string(), "version", "--device", device};
  spec.timeout = std::chrono::seconds(60);
  spec.minimal_environment = true;
  std::string declared = "unknown";
  if (auto run = core::run_process(spec); run.ok()) {
    if (auto version = parse_version_output(run->stdout_text, run->stderr_text); version.ok()) {
      declared = version->harness_version;
    }
  }
  return declared + "+" + bundle.short_hash();
}

}  // namespace autocomp::backends
