#include "backends/local_backend.hpp"

#include <stdlib.h>

#include <algorithm>
#include <atomic>
#include <chrono>
#include <filesystem>
#include <fstream>
#include <mutex>
#include <optional>
#include <thread>

#include "backends/harness_bundle.hpp"
#include "backends/harness_output.hpp"
#include "core/process.hpp"
#include "core/slot_gate.hpp"

namespace autocomp::backends {
namespace fs = std::filesystem;

namespace {

constexpr auto k_kill_grace = std::chrono::milliseconds(1000);

double ms_since(std::chrono::steady_clock::time_point start) {
  return std::chrono::duration<double, std::milli>(std::chrono::steady_clock::now() - start)
      .count();
}

struct LocalConfig {
  std::string identity;
  std::string device;
  int fake_ms = 0;
  int device_seed = -1;  // device sim-perturbed only
  int slots = 1;
  std::string target;
  std::string python;
  HarnessBundle bundle;
  std::shared_ptr<const core::Clock> clock;     // of the harness's timeout; null: the steady clock
  std::shared_ptr<core::ProcessRunner> runner;  // starts the harness (never null)
};

core::Status write_file(const fs::path& path, const std::string& content) {
  std::ofstream out(path, std::ios::binary | std::ios::trunc);
  out << content;
  out.close();
  if (!out) {
    return core::make_failure(core::FailureKind::io_error, "write",
                              "cannot write " + path.string());
  }
  return core::ok_status();
}

class LocalBackend final : public Backend {
 public:
  // On the simulator and the fake device an evaluation is CPU work, so one extra slot is kept for
  // interactive requests; a NeuronCore cannot be shared, so on hardware they only go first.
  explicit LocalBackend(LocalConfig config)
      : m_config(std::move(config)), m_gate(m_config.slots, m_config.device == "neuron" ? 0 : 1) {}

  std::string identity() const override { return m_config.identity; }
  std::string device() const override { return m_config.device; }
  int slots() const override { return m_config.slots; }

  std::string harness_version() const override {
    std::call_once(m_version_once, [this] {
      m_version = probe_harness_version(m_config.python, m_config.bundle, m_config.device);
    });
    return m_version;
  }

  std::vector<EvalResult> evaluate(const std::vector<EvalRequest>& batch,
                                   const core::CancelToken& cancel,
                                   const ProgressFn& progress) override {
    std::vector<EvalResult> results(batch.size());
    if (batch.empty()) {
      return results;
    }
    std::string version = harness_version();
    std::atomic<std::size_t> next{0};
    std::atomic<std::size_t> done{0};
    auto worker = [&] {
      while (true) {
        std::size_t index = next.fetch_add(1);
        if (index >= batch.size()) {
          return;
        }
        EvalResult& result = results[index];
        const bool interactive = batch[index].lane == Lane::interactive;
        auto on_wait = [&](const std::string& message) {
          if (progress) {
            progress(done.load(), batch.size(), message);
          }
        };
        if (cancel.cancelled() || !m_gate.acquire(interactive, cancel, on_wait)) {
          result.failure = core::make_failure(core::FailureKind::cancelled, "run",
                                              "cancelled before it started");
        } else {
          result = run_one(batch[index], cancel);
          m_gate.release(interactive);
        }
        result.backend_identity = m_config.identity;
        result.host = "localhost";
        result.harness_version = version;
        if (result.device.empty()) {
          result.device = m_config.device;
        }
        result.receipt.backend = result.backend_identity;
        result.receipt.host = result.host;
        std::size_t finished = done.fetch_add(1) + 1;
        if (progress) {
          progress(finished, batch.size(),
                   result.ok() ? "evaluated" : std::string(to_string(result.failure->kind)));
        }
      }
    };
    std::size_t workers =
        std::min<std::size_t>(batch.size(), static_cast<std::size_t>(m_config.slots));
    std::vector<std::thread> threads;
    for (std::size_t i = 1; i < workers; ++i) {
      threads.emplace_back(worker);
    }
    worker();
    for (auto& thread : threads) {
      thread.join();
    }
    return results;
  }

 private:
  EvalResult run_one(const EvalRequest& request, const core::CancelToken& cancel) const {
    EvalResult result;
    std::vector<StepTiming> steps;

    // Step: write the sources into a fresh folder.
    auto step_start = std::chrono::steady_clock::now();
    std::string folder_template = (fs::temp_directory_path() / "autocomp-eval-XXXXXX").string();
    if (::mkdtemp(folder_template.data()) == nullptr) {
      result.failure = core::make_failure(
          core::FailureKind::io_error, "write",
          "cannot create a work folder in " + fs::temp_directory_path().string());
      return result;
    }
    fs::path work(folder_template);
    const WorkFileNames files = work_file_names(request);
    std::error_code folder_error;
    fs::create_directories((work / files.kernel).parent_path(), folder_error);
    auto written = write_file(work / files.kernel, request.kernel_source);
    if (written.ok()) {
      written = write_file(work / files.problem, request.problem_source);
    }
    if (written.ok() && !cost_table_file_name(request).empty()) {
      written = write_file(work / cost_table_file_name(request), request.cost_table_json);
    }
    if (written.ok()) {
      written = check_kernel_modules(request, files);
    }
    for (std::size_t i = 0; written.ok() && i < request.kernel_modules.size(); ++i) {
      const auto& module = request.kernel_modules[i];
      std::error_code ec;
      fs::create_directories((work / module.path).parent_path(), ec);
      written = write_file(work / module.path, module.source);
    }
    steps.push_back({"write", ms_since(step_start)});

    // Step: run the harness.
    if (written.ok()) {
      step_start = std::chrono::steady_clock::now();
      core::ProcessSpec spec;
      spec.argv = {m_config.python, "-I", "-B", m_config.bundle.entry().string()};
      auto args = evaluation_arguments(request, work.string(), files, m_config.device,
                                       m_config.fake_ms, m_config.target, m_config.device_seed);
      spec.argv.insert(spec.argv.end(), args.begin(), args.end());
      spec.cwd = work.string();
      spec.timeout = request.timeout;
      spec.kill_grace = k_kill_grace;
      spec.clock = m_config.clock;
      // Kernels are untrusted: a minimal environment, behind a supervisor (core/process.hpp),
      // and the work folder goes with them should this process die.
      spec.minimal_environment = true;
      spec.isolate = true;
      spec.remove_if_abandoned = work.string();
      auto run = m_config.runner->run(spec, cancel);
      steps.push_back({"run", ms_since(step_start)});

      // Step: parse its output.
      step_start = std::chrono::steady_clock::now();
      if (!run.ok()) {
        result.failure = run.failure();
        result.failure->stage = "run";
      } else if (run->timed_out) {
        result.failure = core::make_failure(core::FailureKind::timeout, "run",
                                            "the harness did not finish within " +
                                                std::to_string(request.timeout.count()) +
                                                " ms; it and every process it started were killed");
      } else if (run->cancelled) {
        result.failure =
            core::make_failure(core::FailureKind::cancelled, "run", "cancelled while running");
      } else {
        result = parse_harness_output(run->stdout_text, run->stderr_text, run->describe_end());
      }
      steps.push_back({"parse", ms_since(step_start)});
    } else {
      result.failure = written.failure();
    }

    // Step: remove the folder, whatever happened.
    step_start = std::chrono::steady_clock::now();
    std::error_code ec;
    fs::remove_all(work, ec);
    steps.push_back({"cleanup", ms_since(step_start)});

    // Backend steps first, then the harness's own.
    steps.insert(steps.end(), result.steps.begin(), result.steps.end());
    result.steps = std::move(steps);
    return result;
  }

  LocalConfig m_config;
  core::SlotGate m_gate;
  mutable std::once_flag m_version_once;
  mutable std::string m_version;
};

}  // namespace

core::Result<std::shared_ptr<Backend>> make_local_backend(const std::vector<BackendSpec>& specs,
                                                          const BackendOptions& options) {
  if (specs.size() != 1) {
    return core::make_failure(core::FailureKind::invalid_argument, "backend",
                              "a local backend cannot be pooled with other specs");
  }
  const BackendSpec& spec = specs.front();
  static const std::vector<std::string> k_known{"device", "fake_ms", "slots",
                                                "target", "python",  "seed"};
  for (const auto& [name, value] : spec.params) {
    if (std::find(k_known.begin(), k_known.end(), name) == k_known.end()) {
      std::string known;
      for (const auto& option : k_known) {
        known += (known.empty() ? "" : ", ") + option;
      }
      return core::make_failure(core::FailureKind::invalid_argument, "backend",
                                "invalid backend spec '" + spec.text + "': unknown option '" +
                                    name + "' (known options: " + known + ")");
    }
  }
  LocalConfig config;
  auto device = device_choice(spec.text, spec.params,
                              options.default_device.empty() ? "sim" : options.default_device);
  if (!device.ok()) {
    return device.failure();
  }
  config.device = device->device;
  config.device_seed = device->seed;
  auto fake_ms = spec.int_param("fake_ms");
  auto slots = spec.int_param("slots");
  if (!fake_ms.ok()) {
    return fake_ms.failure();
  }
  if (!slots.ok()) {
    return slots.failure();
  }
  config.fake_ms = fake_ms->value_or(0);
  config.slots = slots->value_or(std::max(1, options.local_slots));
  config.target = spec.param("target").value_or(options.default_target);
  config.python = resolve_python(spec.param("python").value_or(options.python));
  config.clock = options.clock;
  config.runner = core::runner_or_system(options.process_runner);

  // Identity names what produces the numbers; slots and target do not change them.
  if (spec.scheme == "sim" && config.device == "sim") {
    config.identity = "sim";
  } else {
    config.identity = "local" + DeviceChoice{config.device, config.device_seed}.identity_query();
    if (config.device == "fake" && config.fake_ms > 0) {
      config.identity += "&fake_ms=" + std::to_string(config.fake_ms);
    }
  }

  auto root = locate_harness_dir(options.harness_dir);
  if (!root.ok()) {
    return root.failure();
  }
  auto bundle = load_harness_bundle(*root);
  if (!bundle.ok()) {
    return bundle.failure();
  }
  config.bundle = std::move(bundle).value();
  return std::shared_ptr<Backend>(std::make_shared<LocalBackend>(std::move(config)));
}

}  // namespace autocomp::backends
