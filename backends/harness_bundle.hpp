#pragma once

#include <chrono>
#include <filesystem>
#include <map>
#include <string>
#include <vector>

#include "backends/backend.hpp"
#include "core/result.hpp"

namespace autocomp::backends {

// The Python files a backend runs: `<root>/harness/autocomp_harness.py` plus the simulator package
// under `<root>/nkisim/`. Loaded once per backend; the hash identifies the bundle for uploads.
struct HarnessBundle {
  std::filesystem::path root;
  std::vector<std::string> files;     // .py files relative to root, '/'-separated, sorted
  std::vector<std::string> contents;  // index-aligned with files, as read when loaded
  std::string hash;                   // sha256 over every file's path and content, in that order

  std::filesystem::path entry() const { return root / "harness" / "autocomp_harness.py"; }
  std::string short_hash() const { return hash.substr(0, 12); }
};

// The folder holding harness/ and nkisim/: `configured` when not empty, else
// $AUTOCOMP_HARNESS_DIR, else the source tree's backends/, else
// <prefix>/share/autocomp-mcp/backends next to the running binary. Fails (unavailable) naming every
// place looked at.
core::Result<std::filesystem::path> locate_harness_dir(const std::string& configured);

// Reads and hashes the bundle under `root` (the contents are kept, so that what is uploaded is
// what was hashed even if the files change later); fails when the entry script is missing.
core::Result<HarnessBundle> load_harness_bundle(const std::filesystem::path& root);

// `configured` when not empty, else $AUTOCOMP_PYTHON, else /usr/bin/python3 when it exists, else
// "python3" (looked up on PATH).
std::string resolve_python(const std::string& configured);

// How one evaluation is run: everything after `python ENTRY`.
struct HarnessInvocation {
  std::string device;  // sim | sim-perturbed | neuron | fake
  int fake_ms = 0;     // only for device fake; 0 leaves the harness default
  std::string kernel_path;
  std::string problem_path;
  std::string workdir;
  // The harness's own --timeout in seconds (it then reports a timeout failure itself); 0: none.
  double timeout_s = 0;
  int device_seed = -1;         // only for device sim-perturbed: --device-seed
  std::string cost_table_path;  // --cost-table when not empty
};

// The harness's own timeout for a request: a little under the wall timeout the backend enforces
// by killing the process group, so that a clean timeout result usually wins the race.
double harness_timeout_seconds(std::chrono::milliseconds wall_timeout);
std::vector<std::string> harness_arguments(const EvalRequest& request,
                                           const HarnessInvocation& invocation);

// The version a backend reports for this bundle: the harness's declared version (asked with
// `python ENTRY version --device DEVICE` on this machine; "unknown" when that fails) plus the
// bundle hash, so that the version changes with any code change, declared or not.
std::string probe_harness_version(const std::string& python, const HarnessBundle& bundle,
                                  const std::string& device);

// A file name safe to create inside a work folder: the base name of `wanted` when it is a plain
// name ending in .py, else `fallback`.
std::string safe_file_name(const std::string& wanted, const std::string& fallback);

// The names of an evaluation's two files in its work folder: the request's names made safe
// (safe_file_name, defaults kernel.py and problem.py), never the same name twice.
struct WorkFileNames {
  std::string kernel;
  std::string problem;
};
// The name of the request's cost table file in its work folder ("cost_table.json": kernel,
// problem and modules all end in .py), or "" when the request carries none.
std::string cost_table_file_name(const EvalRequest& request);
// The kernel goes below request.kernel_folder when that is a safe_kernel_folder.
WorkFileNames work_file_names(const EvalRequest& request);

// invalid_argument unless every module of `request` has a safe_module_path (kernel_modules.hpp)
// other than the kernel's and the problem's names in `files`: backends check before writing.
core::Status check_kernel_modules(const EvalRequest& request, const WorkFileNames& files);

// What every backend passes to the harness for `request` run in the folder `dir` that holds
// `files`, on `device` (`fake_ms` for the fake device): harness_arguments() with the request's
// target, or `default_target` when it names none, and the harness's own timeout
// (harness_timeout_seconds of the request's).
std::vector<std::string> evaluation_arguments(const EvalRequest& request, const std::string& dir,
                                              const WorkFileNames& files, const std::string& device,
                                              int fake_ms, const std::string& default_target,
                                              int device_seed = -1);

// The device options a spec gives: "device" (one of `allowed`, default `default_device`) and,
// for sim-perturbed, "seed" (a non-negative integer, default 0). Fails naming the spec.
struct DeviceChoice {
  std::string device;
  int seed = -1;  // >= 0 only for sim-perturbed
  // "?device=D" plus "&seed=N" for sim-perturbed: the part of an identity the device decides.
  std::string identity_query() const;
};
core::Result<DeviceChoice> device_choice(const std::string& spec_text,
                                         const std::map<std::string, std::string>& params,
                                         const std::string& default_device);

// A wall limit as timeout(1) takes it: seconds with three decimals ("12.500").
std::string timeout_command_seconds(std::chrono::milliseconds wall);

// Whether timeout(1) ended a run at its limit: 124 after its signal, 137 after the SIGKILL of -k.
bool stopped_by_timeout_command(int exit_status);

}  // namespace autocomp::backends
