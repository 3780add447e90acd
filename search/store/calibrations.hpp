#pragma once

#include <cstdint>
#include <optional>
#include <string>
#include <vector>

#include "core/result.hpp"

namespace autocomp::search::store {

// A calibration profile: the simulator's cost table fitted to one device's measurements
// (docs/calibration.md). The table and the fit are kept as the texts the fit produced.
struct CalibrationProfile {
  std::int64_t id = 0;
  std::string name;         // [A-Za-z0-9._-]+, unique
  std::string target;       // trn1 | trn2 | trn3
  std::string device_spec;  // the backend identity the probes ran on
  std::string versions;     // JSON object: harness, simulator and SDK/compiler versions reported
  std::string table_json;   // the --cost-table file: {"target", "name", "values": {...}}
  std::string fit_json;     // fit_device.py's answer: parameters and residuals per probe
  std::string source;       // "probes" or "history"
  std::int64_t created_at_ms = 0;
};

// One probe's latency measured for a calibration that has not been stored yet (so that an
// interrupted calibrate resumes without measuring it again).
struct CalibrationMeasurement {
  std::string probe_id;
  std::string probe_digest;  // sha256 of the probe's kernel and problem: a changed probe re-runs
  double latency_us = 0;
  std::string receipt;  // the receipt line of the measurement
};

// A kernel measured on a device together with the simulator's estimate of it.
struct DevicePair {
  std::int64_t id = 0;
  std::string kernel_digest;  // candidate key (sha256 of the normalized source)
  std::string kernel_source;
  std::string kernel_name;  // function evaluated, "" = the file's only/entry kernel
  std::string problem_source;
  std::string problem_key;
  std::string target;
  std::string device_spec;  // the measuring backend's identity
  std::string sim_spec;     // the simulating backend's identity (names a calibration if any)
  double measured_us = 0;
  double simulated_us = 0;
  std::string run_id;  // the search that measured it, "" for a tool call
  std::int64_t created_at_ms = 0;
};

// Calibration profiles, pending measurements and device pairs. Same contract as EvaluationCache.
class Calibrations {
 public:
  virtual ~Calibrations() = default;

  // Stores `profile` (replacing one of the same name) and, in the same transaction, retires the
  // pending measurements of (name, device_spec, target). Returns the profile's id.
  virtual core::Result<std::int64_t> put_profile(const CalibrationProfile& profile) = 0;
  virtual core::Result<std::optional<CalibrationProfile>> get_profile(const std::string& name) = 0;
  // The newest profile for `target`.
  virtual core::Result<std::optional<CalibrationProfile>> latest_profile(
      const std::string& target) = 0;
  // Newest first.
  virtual core::Result<std::vector<CalibrationProfile>> list_profiles() = 0;

  // Records one probe's measurement for the calibration `name` on (device_spec, target); the same
  // probe and digest again replaces it.
  virtual core::Status record_measurement(const std::string& name, const std::string& device_spec,
                                          const std::string& target,
                                          const CalibrationMeasurement& measurement) = 0;
  // The measurements recorded for (name, device_spec, target) since its profile was last stored.
  virtual core::Result<std::vector<CalibrationMeasurement>> pending_measurements(
      const std::string& name, const std::string& device_spec, const std::string& target) = 0;

  virtual core::Result<std::int64_t> record_pair(const DevicePair& pair) = 0;
  // Oldest first; an empty target or device_spec matches every one.
  virtual core::Result<std::vector<DevicePair>> pairs(const std::string& target,
                                                      const std::string& device_spec) = 0;
  virtual core::Result<std::vector<DevicePair>> pairs_for_run(const std::string& run_id) = 0;
};

}  // namespace autocomp::search::store
