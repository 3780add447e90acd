#include "tools/tool_env.hpp"

#include <regex>

#include "backends/backend.hpp"

namespace autocomp::tools {

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
      return opened.failure();
    }
    m_store = std::move(opened).value();
    // Runs left `running` by a server that died are marked interrupted (resumable).
    (void)m_store->interrupt_orphaned_runs();
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

core::Result<std::shared_ptr<backends::Backend>> ToolEnv::backend(const std::string& spec) {
  const std::string key = spec.empty() ? default_backend_spec() : spec;
  std::lock_guard lock(m_mutex);
  if (auto found = m_backends.find(key); found != m_backends.end()) {
    return found->second;
  }
  backends::BackendOptions backend_options;
  backend_options.harness_dir = m_options.harness_dir;
  if (!m_options.target.empty()) {
    backend_options.default_target = m_options.target;
  }
  auto made = backends::make_backend(key, backend_options);
  if (!made.ok()) {
    return made.failure();
  }
  m_backends.emplace(key, made.value());
  return made.value();
}

std::string ToolEnv::target_for(const std::string& argument,
                                const std::string& problem_source) const {
  if (!argument.empty()) {
    return argument;
  }
  static const std::regex k_target_line(R"re((^|\n)TARGET\s*=\s*["'](trn1|trn2)["'])re");
  std::smatch match;
  if (std::regex_search(problem_source, match, k_target_line)) {
    return match[2].str();
  }
  return m_options.target.empty() ? "trn2" : m_options.target;
}

}  // namespace autocomp::tools
