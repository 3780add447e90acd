#include "app/calibrate.hpp"

#include <unistd.h>

#include <iostream>
#include <nlohmann/json.hpp>
#include <optional>
#include <string>
#include <vector>

#include "backends/backend.hpp"
#include "core/targets.hpp"
#include "search/calibration/calibrate.hpp"
#include "search/store/store.hpp"

namespace autocomp::app {
namespace {

using nlohmann::json;

constexpr const char* k_usage = R"(usage: autocomp-mcp calibrate --backend SPEC [options]

Runs the simulator's probe kernels on a device, fits the simulator's cost table to what it
measured and stores the result as a named calibration profile. Use it afterwards with
--backend 'sim?calibration=NAME' (or 'sim?calibration=latest'). Interrupted, it resumes: probes
already measured are not run again.

  --backend SPEC     the device: ssh://host?device=neuron, slurm:?partition=P, ... (a fake one
                     for trying it out: 'local?device=sim-perturbed&seed=N')
  --target T         trn1, trn2 or trn3 (default trn2)
  --name NAME        the profile's name (default: the target and the backend)
  --db PATH          results database (default: the usual store)
  --from-history     refit from the kernels already measured on the device (benchmark_kernel,
                     confirmed searches) instead of running probes
  --harness-dir DIR  evaluation harness folder
  --json             print the profile as JSON
)";

struct Options {
  std::string backend;
  std::string target = std::string(core::k_default_target);
  std::string name;
  std::string db;
  std::string harness_dir;
  bool from_history = false;
  bool json_output = false;
};

// nullopt: parsed; "" : help; else the error.
std::optional<std::string> parse(const std::vector<std::string>& args, Options& options) {
  for (std::size_t i = 2; i < args.size(); ++i) {
    const std::string& arg = args[i];
    auto value = [&](std::string& out) -> bool {
      if (i + 1 >= args.size()) {
        return false;
      }
      out = args[++i];
      return true;
    };
    if (arg == "--help" || arg == "-h") {
      return std::string();
    } else if (arg == "--from-history") {
      options.from_history = true;
    } else if (arg == "--json") {
      options.json_output = true;
    } else if (arg == "--backend") {
      if (!value(options.backend)) {
        return "--backend needs a SPEC";
      }
    } else if (arg == "--target") {
      if (!value(options.target)) {
        return "--target needs a target";
      }
    } else if (arg == "--name") {
      if (!value(options.name)) {
        return "--name needs a NAME";
      }
    } else if (arg == "--db") {
      if (!value(options.db)) {
        return "--db needs a PATH";
      }
    } else if (arg == "--harness-dir") {
      if (!value(options.harness_dir)) {
        return "--harness-dir needs a DIR";
      }
    } else {
      return "unknown option '" + arg + "' (see calibrate --help)";
    }
  }
  if (options.backend.empty()) {
    return std::string("--backend SPEC is required (the device to calibrate to)");
  }
  if (!core::is_known_target(options.target)) {
    return "unknown target '" + options.target + "'";
  }
  return std::nullopt;
}

json report_json(const search::calibration::CalibrateReport& report) {
  json parameters = json::array();
  for (const auto& p : report.fit.parameters) {
    parameters.push_back({{"name", p.name},
                          {"shipped", p.shipped},
                          {"fitted", p.fitted},
                          {"change_pct", p.change_pct},
                          {"identified", p.identified}});
  }
  json residuals = json::array();
  for (const auto& r : report.fit.residuals) {
    residuals.push_back({{"id", r.id},
                         {"measured_us", r.measured_us},
                         {"before_us", r.before_us},
                         {"after_us", r.after_us},
                         {"error_pct_before", r.error_pct_before},
                         {"error_pct_after", r.error_pct_after}});
  }
  return {{"name", report.profile.name},
          {"target", report.profile.target},
          {"device", report.profile.device_spec},
          {"source", report.profile.source},
          {"versions", json::parse(report.profile.versions, nullptr, false)},
          {"table", json::parse(report.profile.table_json, nullptr, false)},
          {"parameters", parameters},
          {"residuals", residuals},
          {"measured", report.measured},
          {"resumed", report.resumed},
          {"pairs", report.pairs},
          {"device_seconds", report.device_seconds},
          {"fit_cpu_s", report.fit.cpu_s}};
}

}  // namespace

int calibrate_main(int argc, char** argv) {
  const std::vector<std::string> args(argv, argv + argc);
  Options options;
  if (auto error = parse(args, options)) {
    if (error->empty()) {
      std::cout << k_usage;
      return 0;
    }
    std::cerr << "autocomp-mcp calibrate: " << *error << "\n";
    return 2;
  }
  const std::string path = options.db.empty() ? search::store::Store::default_path() : options.db;
  auto opened = search::store::Store::open(path);
  if (!opened.ok()) {
    std::cerr << "autocomp-mcp calibrate: " << opened.failure().describe() << "\n";
    return 1;
  }
  std::shared_ptr<search::store::Store> db = std::move(opened).value();

  backends::BackendOptions backend_options;
  backend_options.harness_dir = options.harness_dir;
  backend_options.default_target = options.target;
  backend_options.resolve_calibration = search::calibration::calibration_resolver(db);
  auto device = backends::make_backend(options.backend, backend_options);
  if (!device.ok()) {
    std::cerr << "autocomp-mcp calibrate: " << device.failure().message << "\n";
    return 2;
  }

  search::calibration::CalibrateRequest request;
  request.name = options.name;
  request.target = options.target;
  request.from_history = options.from_history;
  request.harness_dir = options.harness_dir;
  const bool tty = ::isatty(STDERR_FILENO) != 0;
  auto progress = [tty](int done, int total, const std::string& message) {
    constexpr int k_width = 30;
    const int filled = total > 0 ? done * k_width / total : k_width;
    std::string bar = "[" + std::string(static_cast<std::size_t>(filled), '#') +
                      std::string(static_cast<std::size_t>(k_width - filled), '.') + "] " +
                      std::to_string(done) + "/" + std::to_string(total) + " " + message;
    if (tty) {
      std::cerr << "\r\033[K" << bar << (done == total ? "\n" : "") << std::flush;
    } else {
      std::cerr << bar << "\n";
    }
  };
  const core::CancelToken cancel;
  if (!options.from_history) {
    std::cerr << "calibrating the simulator to " << device.value()->identity() << " ("
              << options.target << ")\n";
  }
  auto report = search::calibration::calibrate(request, device.value(), db, cancel, progress);
  if (!report.ok()) {
    std::cerr << "autocomp-mcp calibrate: " << report.failure().message << "\n";
    return report.failure().kind == core::FailureKind::invalid_argument ? 2 : 1;
  }
  if (options.json_output) {
    std::cout << report_json(report.value()).dump(2) << "\n";
  } else {
    std::cout << search::calibration::format_report(report.value());
  }
  return 0;
}

}  // namespace autocomp::app
