#pragma once

#include <chrono>
#include <functional>
#include <map>
#include <memory>
#include <optional>
#include <string>
#include <vector>

#include "core/cancel.hpp"
#include "core/clock.hpp"
#include "core/failure.hpp"
#include "core/process_runner.hpp"
#include "core/result.hpp"

namespace autocomp::backends {

// The harness subcommands (backends/harness/PROTOCOL.md). `signature` runs only the problem's
// inputs(first seed) and answers EvalResult::input_signature (no kernel is run).
enum class EvalCommand { verify, benchmark, profile, evaluate, signature };
std::string_view to_string(EvalCommand command);

// Who waits for an evaluation. Interactive requests (a tool call an agent is blocked on) must not
// queue behind a background search's batch: backends keep capacity for them or serve them first.
enum class Lane { interactive, background };
std::string_view to_string(Lane lane);

// A local Python module a kernel file imports (`import common`, `from .utils import f`): `path` is
// relative to the kernel file's folder, '/'-separated, ends in ".py" (a package's
// "pkg/__init__.py" included). Backends write it beside the kernel; the sandbox shows it read-only.
struct KernelModule {
  std::string path;
  std::string source;
};

// One evaluation to run. Sources travel by value so that a remote backend can upload them and so
// that the request fully determines the result (the store keys evaluations by it).
struct EvalRequest {
  EvalCommand command = EvalCommand::evaluate;
  std::string kernel_source;
  std::string kernel_filename =
      "kernel.py";  // base name used on the target (error messages cite it)
  std::vector<KernelModule> kernel_modules;  // the kernel's local imports, never the problem
  // The kernel's folder relative to its modules' root when package-relative imports reach above
  // it (`from ..util import f` in "rmsnorm/kernel.py": "rmsnorm"); "" = the root itself.
  std::string kernel_folder;
  std::string problem_source;
  std::string problem_filename = "problem.py";
  std::string kernel_name;  // optional: function to evaluate when the kernel file has several
  std::string target = "trn2";
  std::vector<int> seeds;  // empty: the problem's SEEDS or the harness default
  int warmup = 2;
  int iters = 10;
  std::chrono::milliseconds timeout{std::chrono::minutes(5)};
  Lane lane = Lane::interactive;
  // A calibration profile's cost table as the harness reads it with --cost-table
  // (docs/calibration.md): written into the work folder beside the kernel. Empty: shipped costs.
  std::string cost_table_json;
};

struct SeedCheck {
  int seed = 0;
  bool ok = false;
  double max_abs_err = 0;
  double rel_l2_err = 0;
  std::string message;
};

struct LatencyStats {
  double min_us = 0;
  double median_us = 0;
  double max_us = 0;
  std::vector<double> samples_us;
};

// Wall time of one named step (connect, upload, run, fetch, cleanup, or harness-side stages).
struct StepTiming {
  std::string step;
  double ms = 0;
};

// How a result was measured (design.md §8, PROTOCOL.md "receipt"). The harness fills what it
// knows; the backend adds where it ran (identity, host, Slurm job and node). Compact in tool
// answers (Receipt::summary), whole in the stored record (raw_json keeps everything).
struct Receipt {
  std::string device;   // sim | sim-perturbed | neuron | fake
  std::string target;   // trn1 | trn2 | ...
  std::string backend;  // backend identity, e.g. "sim", "ssh://u@h:22?device=neuron"
  std::string host;     // where the harness ran
  std::string job;      // scheduler job id (Slurm), empty otherwise
  std::string node;     // scheduler node name (Slurm), empty otherwise
  std::string harness_version;
  std::string simulator_version;           // nkisim version on device sim
  std::map<std::string, std::string> sdk;  // Neuron SDK component -> version (hardware only)
  std::string neff_hash;                   // hardware only
  std::string profile_format;  // e.g. "nkisim", "summary-json", "explorer-json", "parquet-digest"
  std::string profile_schema;  // the profile schema version read, when known
  std::vector<int> seeds;
  int warmup = 0;
  int iters = 0;
  std::string input_signature;  // canonical "name:dtype[d0,d1];..." of the inputs measured
  // The costs the simulator priced with: a calibration profile's name, "shipped" or "hidden" (the
  // fake device sim-perturbed); empty on hardware.
  std::string cost_table;
  std::string cost_table_digest;  // 16 hex digits of the effective table, when reported

  // One short line for tool answers, e.g. "sim trn2 nkisim 0.2.0 seeds 0-4 x10 on localhost".
  std::string summary() const;
};

// Where the time goes in the kernel source (profile_kernel): one row per (line, engine).
struct Hotspot {
  int line = 0;           // kernel source line; 0 when unknown
  std::string text;       // that line's source text (trimmed), when known
  std::string engine;     // tensor | vector | scalar | gpsimd | dma
  double share_pct = 0;   // share of the makespan
  double time_us = 0;     // summed busy time of its instructions
  long instructions = 0;  // instruction count
};

// An engine that sat idle waiting on another one (e.g. VectorE waiting on DMA at line 31).
struct EngineWait {
  std::string engine;      // the waiting engine
  std::string waiting_on;  // the engine (or "dma") whose result it waited for
  double idle_pct = 0;     // share of the makespan spent waiting so
  int line = 0;            // the kernel line of the instruction waited for, when known
};

// The outcome of one request. `failure` is set when the evaluation failed at any stage (including
// a wrong result: kind mismatch); the sections that did run are still filled in.
struct EvalResult {
  std::optional<core::Failure> failure;
  bool verified = false;  // a verify section was present
  bool correct = false;
  std::vector<SeedCheck> seeds;
  std::optional<LatencyStats> latency;
  std::map<std::string, double> metrics;   // neuron-profile summary names
  std::map<std::string, double> roofline;  // PROTOCOL.md roofline names
  std::string bottleneck;                  // compute-bound | memory-bound | underutilized | ""
  std::string bottleneck_engine;           // the limiting engine, e.g. "VectorE-bound" (sim)
  // What the simulator modelled of the compiler for this kernel, one sentence each (e.g. "line
  // 88: 65,536 instructions grouped into 1,024 ..."), so a reader knows what a figure relies on.
  std::vector<std::string> compiler_effects;
  std::string device;  // sim | neuron | fake
  std::string target;
  std::string backend_identity;  // e.g. "sim" or "ssh://user@host:22?device=neuron"
  std::string host;              // where it ran ("localhost" for the local backend)
  std::string harness_version;
  Receipt receipt;                // how it was measured
  std::string input_signature;    // the inputs the problem produced (same as receipt's)
  std::vector<Hotspot> hotspots;  // profile: busiest source lines first
  std::vector<EngineWait> waits;  // profile: engines idle on others, largest first
  std::vector<StepTiming> steps;
  std::string raw_json;  // the harness's JSON line as received (for resources and debugging)

  bool ok() const { return !failure.has_value(); }
};

// Called as work completes: (requests finished, requests total, short message). May be called
// from worker threads; implementations of the callback must be thread-safe.
using ProgressFn = std::function<void(std::size_t done, std::size_t total, const std::string&)>;

// Turns evaluation requests into results. A batch goes in, index-aligned results come out; every
// request gets a result (a failure value when it could not run). Never throws for evaluation or
// transport problems. Implementations are thread-safe: several batches may run at once.
class Backend {
 public:
  virtual ~Backend() = default;

  // Stable identity used in cache keys, e.g. "sim" or "ssh://user@host:22?device=neuron".
  virtual std::string identity() const = 0;
  // The device the harness is asked to use: "sim", "neuron" or "fake".
  virtual std::string device() const = 0;
  // The harness version this backend runs (part of every cache key).
  virtual std::string harness_version() const = 0;
  // How many evaluations can run at once.
  virtual int slots() const = 0;

  virtual std::vector<EvalResult> evaluate(const std::vector<EvalRequest>& batch,
                                           const core::CancelToken& cancel,
                                           const ProgressFn& progress) = 0;
};

// A calibration profile's cost table, found by name for a spec's "calibration=NAME|latest".
struct CalibrationTable {
  std::string name;    // the profile's name (never "latest")
  std::string target;  // the target it was fitted on
  std::string json;    // the --cost-table file's content
};
// Finds the profile `name` ("latest": the newest for `target`); fails (invalid_argument) naming
// the profiles that exist when there is none such.
using CalibrationResolver = std::function<core::Result<CalibrationTable>(
    const std::string& name, const std::string& target)>;

// Options shared by every backend; a spec string can override some per backend.
struct BackendOptions {
  std::string harness_dir;  // folder holding harness/ and nkisim/; empty: the installed/source copy
  std::string python;  // empty: $AUTOCOMP_PYTHON, else /usr/bin/python3 if present, else python3
  std::string default_target = "trn2";
  std::string default_device;  // empty: backend default ("sim" locally, "neuron" over ssh)
  int local_slots = 1;
  bool accept_new_host_keys = false;
  // The clock of timeouts, polls and the SSH pool's back-off; null: the steady clock. Tests pass
  // a core::ManualClock so that these cost no real time.
  std::shared_ptr<const core::Clock> clock;
  // Starts the harness processes of local backends; null: real processes. Tests pass a fake
  // (tests/support/fake_process_runner.hpp) to script what the harness answers.
  std::shared_ptr<core::ProcessRunner> process_runner;
  // Resolves "calibration=NAME" in a spec (the store knows the profiles; backends do not). Null:
  // a spec naming a calibration fails.
  CalibrationResolver resolve_calibration;
};

// Builds a backend from its spec: "sim" (the default, local simulator), "local?device=fake",
// "local?device=sim-perturbed&seed=N" (a fake device: the simulator with hidden seeded costs),
// any spec with "calibration=NAME|latest" (the simulator prices with that profile's table),
// "ssh://[user@]host[:port][?device=neuron|sim&slots=N&target=trn2&key=PATH]". Several
// comma-separated ssh:// specs form one pool; "hosts:PATH" stands for the ssh:// specs of a hosts
// file (backends/hosts_file.hpp). Returns a failure for an unknown or malformed spec or an
// unreadable hosts file.
core::Result<std::shared_ptr<Backend>> make_backend(const std::string& spec,
                                                    const BackendOptions& options);

}  // namespace autocomp::backends
