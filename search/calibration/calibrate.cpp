#include "search/calibration/calibrate.hpp"

#include <stdlib.h>

#include <chrono>
#include <cmath>
#include <cstdio>
#include <filesystem>
#include <fstream>
#include <map>
#include <nlohmann/json.hpp>
#include <sstream>

#include "backends/harness_bundle.hpp"
#include "core/hash.hpp"
#include "search/engine/evaluation_service.hpp"

namespace autocomp::search::calibration {
namespace {

namespace fs = std::filesystem;
using nlohmann::json;

core::Failure bad(const std::string& message) {
  return core::make_failure(core::FailureKind::invalid_argument, "calibrate", message);
}

core::Result<std::string> read_text(const fs::path& path) {
  std::ifstream in(path, std::ios::binary);
  if (!in) {
    return core::make_failure(core::FailureKind::io_error, "calibrate",
                              "cannot read " + path.string());
  }
  std::ostringstream text;
  text << in.rdbuf();
  return text.str();
}

core::Status write_text(const fs::path& path, const std::string& text) {
  std::ofstream out(path, std::ios::binary | std::ios::trunc);
  out << text;
  out.close();
  if (!out) {
    return core::make_failure(core::FailureKind::io_error, "calibrate",
                              "cannot write " + path.string());
  }
  return core::ok_status();
}

// A temporary folder removed when it goes out of scope.
class TempFolder {
 public:
  TempFolder() {
    std::string pattern = (fs::temp_directory_path() / "autocomp-calibrate-XXXXXX").string();
    if (::mkdtemp(pattern.data()) != nullptr) {
      m_path = pattern;
    }
  }
  ~TempFolder() {
    if (!m_path.empty()) {
      std::error_code ec;
      fs::remove_all(m_path, ec);
    }
  }
  TempFolder(const TempFolder&) = delete;
  TempFolder& operator=(const TempFolder&) = delete;
  const fs::path& path() const { return m_path; }

 private:
  fs::path m_path;
};

double number_or(const json& object, const char* key, double fallback) {
  auto it = object.find(key);
  return it != object.end() && it->is_number() ? it->get<double>() : fallback;
}

std::string string_or(const json& object, const char* key) {
  auto it = object.find(key);
  return it != object.end() && it->is_string() ? it->get<std::string>() : std::string();
}

// What a measurement says about the software it ran on: harness, simulator and SDK versions.
std::string versions_json(const backends::EvalResult& result) {
  json out = json::object();
  if (!result.harness_version.empty()) {
    out["harness"] = result.harness_version;
  }
  if (!result.receipt.simulator_version.empty()) {
    out["simulator"] = result.receipt.simulator_version;
  }
  if (!result.receipt.sdk.empty()) {
    out["sdk"] = result.receipt.sdk;
  }
  if (!result.receipt.neff_hash.empty() || result.device == "neuron") {
    out["device"] = result.device;
  }
  return out.dump();
}

struct FitInput {
  std::string id;
  std::string kernel;
  std::string problem;
  std::string kernel_name;
  double latency_us = 0;
};

// Runs fit_device.py on `inputs` and reads its answer.
core::Result<Fit> run_fit(const CalibrateRequest& request, const fs::path& nkisim,
                          const std::vector<FitInput>& inputs, const fs::path& folder,
                          const std::string& name, const core::CancelToken& cancel) {
  json measurements = json::array();
  for (const auto& input : inputs) {
    measurements.push_back(
        {{"id", input.id},
         {"kernel", input.kernel},
         {"problem", input.problem},
         {"kernel_name", input.kernel_name.empty() ? json(nullptr) : json(input.kernel_name)},
         {"latency_us", input.latency_us}});
  }
  const fs::path file = folder / "measurements.json";
  if (auto written = write_text(
          file, json{{"target", request.target}, {"measurements", measurements}}.dump(1));
      !written.ok()) {
    return written.failure();
  }
  core::ProcessSpec spec;
  spec.argv = {backends::resolve_python(request.python),
               "-I",
               "-B",
               (nkisim / "calibration" / "device" / "fit_device.py").string(),
               "--measurements",
               file.string(),
               "--target",
               request.target};
  spec.cwd = folder.string();
  spec.timeout = std::chrono::minutes(10);
  auto ran = core::runner_or_system(request.runner)->run(spec, cancel);
  if (!ran.ok()) {
    return ran.failure();
  }
  if (ran->cancelled) {
    return core::make_failure(core::FailureKind::cancelled, "fit", "the fit was cancelled");
  }
  // The answer is the last non-empty stdout line (one JSON object).
  std::string text = ran->stdout_text;
  while (!text.empty() && (text.back() == '\n' || text.back() == ' ')) {
    text.pop_back();
  }
  if (auto newline = text.rfind('\n'); newline != std::string::npos) {
    text = text.substr(newline + 1);
  }
  json answer = json::parse(text, nullptr, false);
  if (!answer.is_object()) {
    return core::make_failure(core::FailureKind::harness_error, "fit",
                              "fit_device.py gave no answer (" + ran->describe_end() +
                                  "): " + ran->stderr_text.substr(0, 2000));
  }
  if (answer.contains("error")) {
    return core::make_failure(core::FailureKind::invalid_argument, "fit",
                              "the fit refused the measurements: " + string_or(answer, "error"));
  }
  if (!ran->succeeded()) {
    return core::make_failure(core::FailureKind::harness_error, "fit",
                              "fit_device.py failed (" + ran->describe_end() + ")");
  }
  return parse_fit(answer.dump(), name, request.target);
}

}  // namespace

core::Result<std::vector<Probe>> load_probe_suite(const std::string& manifest_path,
                                                  const std::string& target) {
  auto text = read_text(manifest_path);
  if (!text.ok()) {
    return bad("no probe suite: " + text.failure().message);
  }
  json manifest = json::parse(text.value(), nullptr, false);
  if (!manifest.is_object() || !manifest.contains("probes") || !manifest["probes"].is_array()) {
    return bad(manifest_path + " is not a probe suite (an object with a \"probes\" list)");
  }
  const fs::path base = fs::path(manifest_path).parent_path();
  std::vector<Probe> probes;
  for (const auto& entry : manifest["probes"]) {
    if (!entry.is_object()) {
      return bad(manifest_path + ": a probe is not an object");
    }
    Probe probe;
    probe.id = string_or(entry, "id");
    const std::string kernel = string_or(entry, "kernel");
    const std::string problem = string_or(entry, "problem");
    if (probe.id.empty() || kernel.empty() || problem.empty()) {
      return bad(manifest_path + ": every probe needs an id, a kernel and a problem");
    }
    bool applies = true;
    if (auto targets = entry.find("targets"); targets != entry.end() && targets->is_array()) {
      applies = false;
      for (const auto& t : *targets) {
        applies = applies || (t.is_string() && t.get<std::string>() == target);
      }
    }
    if (!applies) {
      continue;
    }
    probe.kernel_path = (base / kernel).lexically_normal().string();
    probe.problem_path = (base / problem).lexically_normal().string();
    probe.kernel_name = string_or(entry, "kernel_name");
    probe.what = string_or(entry, "what");
    if (auto informs = entry.find("informs"); informs != entry.end() && informs->is_array()) {
      for (const auto& field : *informs) {
        if (field.is_string()) {
          probe.informs.push_back(field.get<std::string>());
        }
      }
    }
    probes.push_back(std::move(probe));
  }
  if (probes.empty()) {
    return bad(manifest_path + " has no probe for target " + target);
  }
  return probes;
}

core::Result<Fit> parse_fit(const std::string& fit_json, const std::string& name,
                            const std::string& target) {
  json answer = json::parse(fit_json, nullptr, false);
  if (!answer.is_object() || !answer.contains("values") || !answer["values"].is_object()) {
    return core::make_failure(core::FailureKind::harness_error, "fit",
                              "the fit's answer has no \"values\" table");
  }
  Fit fit;
  fit.fit_json = fit_json;
  fit.table_json = json{{"target", target}, {"name", name}, {"values", answer["values"]}}.dump();
  fit.cpu_s = number_or(answer, "cpu_s", 0);
  if (auto parameters = answer.find("parameters");
      parameters != answer.end() && parameters->is_array()) {
    for (const auto& row : *parameters) {
      if (!row.is_object()) {
        continue;
      }
      FittedParameter parameter;
      parameter.name = string_or(row, "name");
      parameter.shipped = number_or(row, "shipped", 0);
      parameter.fitted = number_or(row, "fitted", 0);
      parameter.change_pct = number_or(row, "change_pct", 0);
      auto identified = row.find("identified");
      parameter.identified =
          identified != row.end() && identified->is_boolean() && identified->get<bool>();
      fit.parameters.push_back(std::move(parameter));
    }
  }
  if (auto residuals = answer.find("residuals");
      residuals != answer.end() && residuals->is_array()) {
    for (const auto& row : *residuals) {
      if (!row.is_object()) {
        continue;
      }
      fit.residuals.push_back({string_or(row, "id"), number_or(row, "measured_us", 0),
                               number_or(row, "before_us", 0), number_or(row, "after_us", 0),
                               number_or(row, "error_pct_before", 0),
                               number_or(row, "error_pct_after", 0)});
    }
  }
  return fit;
}

bool valid_profile_name(const std::string& name) {
  if (name.empty() || name.size() > 64 || name == "latest") {
    return false;
  }
  for (char c : name) {
    bool plain = (c >= 'a' && c <= 'z') || (c >= 'A' && c <= 'Z') || (c >= '0' && c <= '9') ||
                 c == '_' || c == '-' || c == '.';
    if (!plain) {
      return false;
    }
  }
  return true;
}

std::string default_profile_name(const std::string& target, const std::string& identity) {
  std::string name = target + "-";
  for (char c : identity) {
    bool plain = (c >= 'a' && c <= 'z') || (c >= 'A' && c <= 'Z') || (c >= '0' && c <= '9') ||
                 c == '_' || c == '.';
    if (plain) {
      name.push_back(c);
    } else if (name.back() != '-') {
      name.push_back('-');
    }
  }
  while (name.size() > 1 && name.back() == '-') {
    name.pop_back();
  }
  return name.substr(0, 64);
}

core::Result<CalibrateReport> calibrate(const CalibrateRequest& request,
                                        std::shared_ptr<backends::Backend> device,
                                        std::shared_ptr<store::Store> db,
                                        const core::CancelToken& cancel,
                                        const ProgressFn& progress) {
  if (!device || !db) {
    return bad("calibrate needs a backend and the store");
  }
  if (request.target.empty()) {
    return bad("calibrate needs a target (--target trn1|trn2|trn3)");
  }
  const std::string identity = device->identity();
  if (device->device() == "sim" && !request.from_history) {
    return bad("'" + identity +
               "' is the simulator itself: calibrate measures a device (e.g. "
               "ssh://host?device=neuron, or local?device=sim-perturbed&seed=N for a fake one)");
  }
  const std::string name =
      request.name.empty() ? default_profile_name(request.target, identity) : request.name;
  if (!valid_profile_name(name)) {
    return bad(
        "a calibration name is 1-64 letters, digits, '.', '_' or '-' (and not 'latest'), "
        "got '" +
        name + "'");
  }
  auto root = backends::locate_harness_dir(request.harness_dir);
  if (!root.ok()) {
    return root.failure();
  }
  const fs::path nkisim = root.value() / "nkisim";
  TempFolder folder;
  if (folder.path().empty()) {
    return core::make_failure(core::FailureKind::io_error, "calibrate",
                              "cannot create a temporary folder");
  }

  CalibrateReport report;
  std::vector<FitInput> inputs;
  std::string versions = "{}";
  if (request.from_history) {
    auto pairs = db->calibrations().pairs(request.target, identity);
    if (!pairs.ok()) {
      return pairs.failure();
    }
    if (pairs->empty()) {
      return bad("no device measurements are recorded for " + identity + " on " + request.target +
                 ": benchmark kernels on it, run a confirmed search, or calibrate with probes");
    }
    // The newest pair of each kernel (and function) stands for it.
    std::map<std::string, const store::DevicePair*> newest;
    for (const auto& pair : pairs.value()) {
      newest[pair.kernel_digest + "/" + pair.kernel_name + "/" + pair.problem_key] = &pair;
    }
    int index = 0;
    for (const auto& [key, pair] : newest) {
      const fs::path kernel = folder.path() / ("pair" + std::to_string(index) + "_kernel.py");
      const fs::path problem = folder.path() / ("pair" + std::to_string(index) + "_problem.py");
      ++index;
      if (auto w = write_text(kernel, pair->kernel_source); !w.ok()) {
        return w.failure();
      }
      if (auto w = write_text(problem, pair->problem_source); !w.ok()) {
        return w.failure();
      }
      inputs.push_back({"pair-" + std::to_string(pair->id), kernel.string(), problem.string(),
                        pair->kernel_name, pair->measured_us});
    }
    report.pairs = static_cast<int>(inputs.size());
  } else {
    auto probes = load_probe_suite((nkisim / "calibration" / "device" / "probes.json").string(),
                                   request.target);
    if (!probes.ok()) {
      return probes.failure();
    }
    auto pending = db->calibrations().pending_measurements(name, identity, request.target);
    if (!pending.ok()) {
      return pending.failure();
    }
    const engine::EvaluationService service(device, store::share(db, db->evaluations()));
    const int total = static_cast<int>(probes->size());
    int done = 0;
    for (const auto& probe : probes.value()) {
      auto kernel = read_text(probe.kernel_path);
      auto problem = read_text(probe.problem_path);
      if (!kernel.ok() || !problem.ok()) {
        return bad("probe " + probe.id + ": " +
                   (kernel.ok() ? problem.failure() : kernel.failure()).message);
      }
      const std::string digest =
          core::sha256_hex(kernel.value() + '\0' + problem.value() + '\0' + probe.kernel_name)
              .substr(0, 32);
      std::optional<double> latency;
      for (const auto& row : pending.value()) {
        if (row.probe_id == probe.id && row.probe_digest == digest) {
          latency = row.latency_us;
        }
      }
      if (latency) {
        ++report.resumed;
      } else {
        if (cancel.cancelled()) {
          return core::make_failure(core::FailureKind::cancelled, "calibrate",
                                    "cancelled; the probes measured so far are kept");
        }
        backends::EvalRequest eval;
        eval.command = backends::EvalCommand::benchmark;
        eval.kernel_source = kernel.value();
        eval.kernel_filename = fs::path(probe.kernel_path).filename().string();
        eval.problem_source = problem.value();
        eval.problem_filename = fs::path(probe.problem_path).filename().string();
        eval.kernel_name = probe.kernel_name;
        eval.target = request.target;
        eval.warmup = request.warmup;
        eval.iters = request.iters;
        const auto started = std::chrono::steady_clock::now();
        const store::EvalSite site = service.site_for(eval, cancel);
        auto outcome = service.evaluate(eval, site, cancel, /*fresh=*/true);
        report.device_seconds +=
            std::chrono::duration<double>(std::chrono::steady_clock::now() - started).count();
        if (!outcome.ok()) {
          return outcome.failure();
        }
        const auto& result = outcome->result;
        if (!result.ok() || !result.latency) {
          return core::make_failure(
              result.failure ? result.failure->kind : core::FailureKind::harness_error, "calibrate",
              "probe " + probe.id + " failed on " + identity + ": " +
                  (result.failure ? result.failure->message : std::string("no latency")));
        }
        latency = result.latency->median_us;
        versions = versions_json(result);
        auto recorded = db->calibrations().record_measurement(
            name, identity, request.target, {probe.id, digest, *latency, result.receipt.summary()});
        if (!recorded.ok()) {
          return recorded.failure();
        }
        ++report.measured;
      }
      inputs.push_back(
          {probe.id, probe.kernel_path, probe.problem_path, probe.kernel_name, *latency});
      ++done;
      if (progress) {
        char text[96];
        std::snprintf(text, sizeof text, "%.2f us", *latency);
        progress(done, total, probe.id + " " + text);
      }
    }
  }

  auto fit = run_fit(request, nkisim, inputs, folder.path(), name, cancel);
  if (!fit.ok()) {
    return fit.failure();
  }
  report.fit = std::move(fit).value();
  report.profile.name = name;
  report.profile.target = request.target;
  report.profile.device_spec = identity;
  report.profile.versions = versions;
  report.profile.table_json = report.fit.table_json;
  report.profile.fit_json = report.fit.fit_json;
  report.profile.source = request.from_history ? "history" : "probes";
  auto id = db->calibrations().put_profile(report.profile);
  if (!id.ok()) {
    return id.failure();
  }
  report.profile.id = id.value();
  return report;
}

backends::CalibrationResolver calibration_resolver(std::shared_ptr<store::Store> db) {
  return [db](const std::string& name,
              const std::string& target) -> core::Result<backends::CalibrationTable> {
    auto found = name == "latest" ? db->calibrations().latest_profile(target)
                                  : db->calibrations().get_profile(name);
    if (!found.ok()) {
      return found.failure();
    }
    if (!found->has_value()) {
      auto all = db->calibrations().list_profiles();
      std::string names;
      if (all.ok()) {
        for (const auto& profile : all.value()) {
          names += (names.empty() ? "" : ", ") + profile.name + " (" + profile.target + ")";
        }
      }
      const std::string what = name == "latest" ? "no calibration profile for target " + target
                                                : "no calibration profile named '" + name + "'";
      return core::make_failure(
          core::FailureKind::invalid_argument, "backend",
          what + "; " +
              (names.empty() ? std::string("none exist yet: run `autocomp-mcp calibrate "
                                           "--backend SPEC --target T` first")
                             : "the profiles are: " + names));
    }
    const auto& profile = **found;
    return backends::CalibrationTable{profile.name, profile.target, profile.table_json};
  };
}

std::string format_report(const CalibrateReport& report) {
  std::string out;
  char line[256];
  std::snprintf(line, sizeof line, "calibration %s (%s, measured on %s)\n",
                report.profile.name.c_str(), report.profile.target.c_str(),
                report.profile.device_spec.c_str());
  out += line;
  std::snprintf(line, sizeof line, "%-34s %14s %14s %9s\n", "parameter", "shipped", "fitted",
                "change");
  out += line;
  for (const auto& p : report.fit.parameters) {
    std::snprintf(line, sizeof line, "%-34s %14.6g %14.6g %+8.1f%%%s\n", p.name.c_str(), p.shipped,
                  p.fitted, p.change_pct, p.identified ? "" : "  (weakly identified)");
    out += line;
  }
  std::snprintf(line, sizeof line, "\n%-28s %12s %12s %12s %10s %10s\n", "probe", "measured us",
                "shipped us", "fitted us", "err before", "err after");
  out += line;
  for (const auto& r : report.fit.residuals) {
    std::snprintf(line, sizeof line, "%-28s %12.3f %12.3f %12.3f %+9.1f%% %+9.1f%%\n", r.id.c_str(),
                  r.measured_us, r.before_us, r.after_us, r.error_pct_before, r.error_pct_after);
    out += line;
  }
  std::snprintf(line, sizeof line,
                "\n%d probe(s) measured now, %d resumed from earlier, %d device pair(s); "
                "use it with --backend 'sim?calibration=%s'\n",
                report.measured, report.resumed, report.pairs, report.profile.name.c_str());
  out += line;
  return out;
}

}  // namespace autocomp::search::calibration
