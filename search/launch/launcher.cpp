#include "search/launch/launcher.hpp"

#include <filesystem>
#include <regex>

#include "backends/kernel_modules.hpp"
#include "core/targets.hpp"
#include "search/calibration/calibrate.hpp"
#include "search/launch/proposers.hpp"
#include "search/store/store.hpp"

namespace autocomp::search::launch {

namespace {

namespace fs = std::filesystem;

core::Failure usage(const std::string& message) {
  return core::make_failure(core::FailureKind::invalid_argument, "search", message);
}

std::string filename_of(const std::string& path, const std::string& fallback) {
  const std::string name = fs::path(path).filename().string();
  return name.empty() ? fallback : name;
}

}  // namespace

BackendSource fresh_backends(std::string harness_dir, std::shared_ptr<store::Store> db) {
  return [harness_dir = std::move(harness_dir), db = std::move(db)](
             const std::string& spec,
             const std::string& target) -> core::Result<std::shared_ptr<backends::Backend>> {
    backends::BackendOptions options;
    options.harness_dir = harness_dir;
    options.default_target = target;
    if (db) {
      options.resolve_calibration = calibration::calibration_resolver(db);
    }
    return backends::make_backend(spec, options);
  };
}

std::string resolve_target(const std::string& explicit_target, const std::string& problem_source,
                           const std::string& fallback) {
  if (!explicit_target.empty()) {
    return explicit_target;
  }
  // A TARGET line naming an unknown target is ignored here; the harness reports it.
  static const std::regex k_target_line(R"re((^|\n)TARGET\s*=\s*["']([A-Za-z0-9_]+)["'])re");
  std::smatch match;
  if (std::regex_search(problem_source, match, k_target_line) &&
      core::is_known_target(match[2].str())) {
    return match[2].str();
  }
  return fallback.empty() ? std::string(core::k_default_target) : fallback;
}

core::Result<Launch> prepare(const LaunchRequest& request, std::shared_ptr<store::Store> db,
                             const BackendSource& backends) {
  if (!db) {
    return usage("a search needs the store");
  }
  Launch launch;
  launch.budgets = request.budgets;
  launch.services.facts.llm_specs =
      request.recorded_llm_specs.empty() ? request.llm_specs : request.recorded_llm_specs;

  // Providers first: a bad spec or a missing key is reported before any other work.
  for (const auto& spec : request.llm_specs) {
    auto provider = llm::make_provider(spec, llm::ProviderOptions{});
    if (!provider.ok()) {
      return provider.failure();
    }
    launch.services.providers.push_back(provider.value());
  }
  for (const auto& provider : request.extra_providers) {
    launch.services.providers.push_back(provider);
  }

  std::string target;
  std::string backend_spec = request.backend_spec;
  std::string confirm_spec;  // the confirming device of a hardware-confirmed search
  if (!request.resume_run_id.empty()) {
    auto run = db->runs().get_run(request.resume_run_id);
    if (!run.ok()) {
      return run.failure();
    }
    if (!run.value()) {
      return usage("no run '" + request.resume_run_id + "' in " + db->path() +
                   " (list_runs shows the known runs)");
    }
    const store::Run& stored = *run.value();
    launch.resume_run_id = stored.id;
    launch.services.facts.kernel_path =
        request.kernel_path.empty() ? stored.config.kernel_path : request.kernel_path;
    launch.services.facts.problem_path =
        request.problem_path.empty() ? stored.config.problem_path : request.problem_path;
    target = stored.config.target;
    if (auto settings = engine::config_of(stored, db->evaluations()); settings.ok()) {
      confirm_spec = settings->confirm;
    }
    if (backend_spec.empty()) {
      backend_spec = stored.config.backend;
    }
  } else {
    engine::SearchConfig& config = launch.config;
    config = request.shape;
    config.kernel_source = request.kernel_source;
    config.kernel_filename = filename_of(request.kernel_path, config.kernel_filename);
    if (!request.kernel_path.empty()) {
      auto modules = backends::collect_kernel_modules(request.kernel_path, request.kernel_source,
                                                      request.problem_path);
      if (!modules.ok()) {
        return usage(request.kernel_path + ": " + modules.failure().message);
      }
      config.kernel_modules = std::move(modules.value().modules);
      config.kernel_folder = modules.value().kernel_folder;
    }
    config.problem_source = request.problem_source;
    config.problem_filename = filename_of(request.problem_path, config.problem_filename);
    config.target = resolve_target(request.target, request.problem_source, request.default_target);
    // Knob autotuning always adds cheap children; without a model it is the whole search.
    config.proposers = launch.services.providers.empty()
                           ? std::vector<std::string>{"autotune"}
                           : std::vector<std::string>{"llm", "autotune"};
    if (request.budgets) {
      config.budgets = *request.budgets;
    }
    if (auto valid = engine::validate(config); !valid.ok()) {
      return valid.failure();
    }
    launch.services.facts.kernel_path = request.kernel_path;
    launch.services.facts.problem_path = request.problem_path;
    target = config.target;
    confirm_spec = config.confirm;
  }
  if (backend_spec.empty()) {
    backend_spec = request.default_backend_spec.empty() ? "sim" : request.default_backend_spec;
  }

  const BackendSource& source = backends ? backends : fresh_backends(request.harness_dir, db);
  auto backend =
      source(backend_spec, target.empty() ? std::string(core::k_default_target) : target);
  if (!backend.ok()) {
    return backend.failure();
  }
  launch.backend_spec = backend_spec;
  launch.services.facts.backend = backend_spec;
  launch.services.backend = backend.value();
  if (!confirm_spec.empty()) {
    auto device =
        source(confirm_spec, target.empty() ? std::string(core::k_default_target) : target);
    if (!device.ok()) {
      return usage("confirm '" + confirm_spec + "': " + device.failure().message);
    }
    launch.services.confirm_backend = device.value();
  }
  launch.services.store = engine::parts_of(db);
  launch.services.make_proposer = [](const std::string& name) { return make_proposer(name); };
  return launch;
}

engine::SearchOutcome run(const Launch& launch, const core::CancelToken& cancel,
                          const engine::SearchHooks& hooks) {
  if (launch.resume_run_id.empty()) {
    return engine::run_search(launch.config, launch.services, cancel, hooks);
  }
  return engine::resume_search(launch.resume_run_id, launch.services, cancel, hooks,
                               launch.budgets);
}

}  // namespace autocomp::search::launch
