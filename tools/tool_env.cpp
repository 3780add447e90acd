#include "tools/tool_env.hpp"

#include <spdlog/spdlog.h>
#include <unistd.h>

#include <filesystem>

#include "backends/backend.hpp"
#include "search/calibration/calibrate.hpp"
#include "search/launch/launcher.hpp"

namespace autocomp::tools {

namespace {

// Whether SQLite could write the database at `path`: the file and its folder (for the -wal and
// -shm files) accept writes. A read-only file system says no even to root.
bool writable(const std::string& path) {
  const std::filesystem::path file(path);
  const std::filesystem::path folder =
      file.has_parent_path() ? file.parent_path() : std::filesystem::path(".");
  return ::access(file.c_str(), W_OK) == 0 && ::access(folder.c_str(), W_OK) == 0;
}

}  // namespace

ToolEnv::ToolEnv(ProductToolsOptions options) : m_options(std::move(options)) {}

core::Result<search::store::Store*> ToolEnv::store() {
  auto shared = shared_store();
  if (!shared.ok()) {
    return shared.failure();
  }
  return shared.value().get();
}

core::Result<std::shared_ptr<search::store::Store>> ToolEnv::shared_store() {
  std::lock_guard lock(m_mutex);
  if (!m_store) {
    const std::string path =
        m_options.db_path.empty() ? search::store::Store::default_path() : m_options.db_path;
    auto opened = search::store::Store::open(path);
    if (!opened.ok()) {
      if (opened.failure().kind != core::FailureKind::io_error || writable(path)) {
        return opened.failure();  // not a matter of permissions or media: say why, change nothing
      }
      // Read-only media: open it for reading so that runs, lessons and resources stay readable.
      search::store::StoreOptions read_only;
      read_only.read_only = true;
      auto reading = search::store::Store::open(path, read_only);
      if (!reading.ok()) {
        return opened.failure();
      }
      spdlog::warn("{}; opened it read-only: tools that record results will fail",
                   opened.failure().describe());
      m_store = std::move(reading).value();
      return m_store;
    }
    m_store = std::move(opened).value();
    // Runs left `running` by a server that died are marked interrupted (resumable).
    (void)m_store->runs().interrupt_orphaned_runs();
  }
  return m_store;
}

std::string ToolEnv::default_backend_spec() const {
  if (m_options.backend_specs.empty()) {
    return "sim";
  }
  std::string joined;
  for (const auto& spec : m_options.backend_specs) {
    joined += (joined.empty() ? "" : ",") + spec;
  }
  return joined;
}

core::Result<std::shared_ptr<backends::Backend>> ToolEnv::backend(const std::string& spec,
                                                                  const std::string& target) {
  const std::string text = spec.empty() ? default_backend_spec() : spec;
  // A calibrated spec is resolved for the evaluation's target, so it is kept per target.
  const bool per_target = !target.empty() && text.find("calibration=") != std::string::npos;
  const std::string key = per_target ? text + "\n" + target : text;
  {
    std::lock_guard lock(m_mutex);
    if (auto found = m_backends.find(key); found != m_backends.end()) {
      found->second.last_used = ++m_backend_clock;
      return found->second.backend;
    }
  }
  // Built without the lock: a spec may read a hosts file or load the harness bundle, and other
  // calls must not wait for that.
  backends::BackendOptions backend_options;
  backend_options.harness_dir = m_options.harness_dir;
  if (per_target) {
    backend_options.default_target = target;
  } else if (!m_options.target.empty()) {
    backend_options.default_target = m_options.target;
  }
  backend_options.resolve_calibration =
      [this](const std::string& name,
             const std::string& wanted_target) -> core::Result<backends::CalibrationTable> {
    auto db = shared_store();
    if (!db.ok()) {
      return db.failure();
    }
    return search::calibration::calibration_resolver(db.value())(name, wanted_target);
  };
  auto made = backends::make_backend(text, backend_options);
  if (!made.ok()) {
    return made.failure();
  }
  std::lock_guard lock(m_mutex);
  auto it = m_backends.emplace(key, CachedBackend{made.value(), 0}).first;
  it->second.last_used = ++m_backend_clock;
  // Over the cap: let go of the least recently used backends nobody else holds.
  while (m_backends.size() > k_backend_cache) {
    auto oldest = m_backends.end();
    for (auto candidate = m_backends.begin(); candidate != m_backends.end(); ++candidate) {
      if (candidate != it && candidate->second.backend.use_count() == 1 &&
          (oldest == m_backends.end() || candidate->second.last_used < oldest->second.last_used)) {
        oldest = candidate;
      }
    }
    if (oldest == m_backends.end()) {
      break;  // all in use: kept until they are released
    }
    m_backends.erase(oldest);
  }
  return it->second.backend;
}

std::size_t ToolEnv::cached_backends() {
  std::lock_guard lock(m_mutex);
  return m_backends.size();
}

std::string ToolEnv::target_for(const std::string& argument,
                                const std::string& problem_source) const {
  return search::launch::resolve_target(argument, problem_source, m_options.target);
}

}  // namespace autocomp::tools
