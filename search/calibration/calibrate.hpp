#pragma once

#include <functional>
#include <memory>
#include <string>
#include <vector>

#include "backends/backend.hpp"
#include "core/cancel.hpp"
#include "core/process_runner.hpp"
#include "core/result.hpp"
#include "search/store/store.hpp"

// Device calibration (docs/calibration.md): runs the probe suite of the simulator's package on a
// device through the one evaluation path, records each measurement as it arrives (an interrupted
// calibration resumes without measuring a probe twice), fits the cost table with the package's
// fit_device.py and stores the result as a named profile.
namespace autocomp::search::calibration {

// One probe of the suite (nkisim/calibration/device/probes.json), paths made absolute.
struct Probe {
  std::string id;
  std::string kernel_path;
  std::string problem_path;
  std::string kernel_name;  // "" = the file's kernel
  std::string what;
  std::vector<std::string> informs;
};

// The probes of `manifest_path` that apply to `target`. Fails (invalid_argument) on an unreadable
// or malformed manifest.
core::Result<std::vector<Probe>> load_probe_suite(const std::string& manifest_path,
                                                  const std::string& target);

// One fitted parameter and one probe's residual, as fit_device.py reports them.
struct FittedParameter {
  std::string name;
  double shipped = 0;
  double fitted = 0;
  double change_pct = 0;
  bool identified = false;
};
struct ProbeResidual {
  std::string id;
  double measured_us = 0;
  double before_us = 0;
  double after_us = 0;
  double error_pct_before = 0;
  double error_pct_after = 0;
};
struct Fit {
  std::string table_json;  // the --cost-table file: {"target", "name", "values"}
  std::string fit_json;    // the fit's answer as it printed it
  std::vector<FittedParameter> parameters;
  std::vector<ProbeResidual> residuals;
  double cpu_s = 0;
};
// Reads a stored fit's answer (CalibrationProfile::fit_json).
core::Result<Fit> parse_fit(const std::string& fit_json, const std::string& name,
                            const std::string& target);

struct CalibrateRequest {
  std::string name;    // "" = a name made of the target and the backend identity
  std::string target;  // e.g. trn1
  bool from_history = false;
  std::string harness_dir;  // the folder holding harness/ and nkisim/ ("" = the usual places)
  std::string python;       // runs the fit; "" = resolve_python's choice
  int warmup = 2;
  int iters = 10;
  std::shared_ptr<core::ProcessRunner> runner;  // runs the fit; null: real processes
};

struct CalibrateReport {
  store::CalibrationProfile profile;
  Fit fit;
  int measured = 0;           // probes measured by this call
  int resumed = 0;            // probes whose measurement was already recorded
  int pairs = 0;              // device pairs used (from_history)
  double device_seconds = 0;  // wall time of this call's measurements
};

// (done, total, message) as each probe finishes.
using ProgressFn = std::function<void(int done, int total, const std::string& message)>;

// A profile name a spec can carry ("sim?calibration=NAME"): [A-Za-z0-9._-], 1-64 characters,
// not "latest".
bool valid_profile_name(const std::string& name);
// The default name: "<target>-<identity with every other character made '-'>".
std::string default_profile_name(const std::string& target, const std::string& identity);

// Calibrates the simulator to `device` (a backend that measures: not the plain simulator). With
// from_history, fits the device pairs recorded for (target, device identity) instead of probes.
core::Result<CalibrateReport> calibrate(const CalibrateRequest& request,
                                        std::shared_ptr<backends::Backend> device,
                                        std::shared_ptr<store::Store> db,
                                        const core::CancelToken& cancel,
                                        const ProgressFn& progress = {});

// The table of a profile for a spec's "calibration=NAME|latest" (backends::CalibrationResolver
// over `db`): fails naming the profiles that exist when none matches.
backends::CalibrationResolver calibration_resolver(std::shared_ptr<store::Store> db);

// A text table: each parameter with its shipped and fitted values and change, then each probe's
// measured latency and error before and after the fit.
std::string format_report(const CalibrateReport& report);

}  // namespace autocomp::search::calibration
