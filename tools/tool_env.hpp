#pragma once

#include <cstdint>
#include <map>
#include <memory>
#include <mutex>
#include <string>

#include "backends/backend.hpp"
#include "core/result.hpp"
#include "search/store/store.hpp"
#include "tools/product_tools.hpp"
#include "tools/search_jobs.hpp"

namespace autocomp::tools {

// What every product tool shares for the life of the server: the options from the command line,
// the store (opened on first use, so the handshake never waits for it) and one backend per spec
// (so SSH sessions and harness-version probes are reused across calls). Thread-safe.
class ToolEnv {
 public:
  explicit ToolEnv(ProductToolsOptions options);

  const ProductToolsOptions& options() const { return m_options; }

  // The store; the failure (e.g. a database written by a newer version) is returned again on
  // every call until the cause is fixed, so no call proceeds without recording its results. A
  // database that exists but cannot be opened for writing (read-only media) is opened read-only:
  // reading tools work, and writing ones fail with a message that says so.
  core::Result<search::store::Store*> store();
  // The same store, shared with components that keep it (the search engine's run log).
  core::Result<std::shared_ptr<search::store::Store>> shared_store();

  // The backend for `spec` ("" = the server's --backend, else "sim"). Backends are kept for reuse,
  // at most k_backend_cache of them: beyond that the least recently used one that nobody holds
  // is let go (a backend in use is never evicted). Building one (e.g. reading a hosts file)
  // happens outside the lock.
  // `target` (when not empty) is the evaluation's: "calibration=latest" finds that target's
  // newest profile.
  core::Result<std::shared_ptr<backends::Backend>> backend(const std::string& spec,
                                                           const std::string& target = "");
  std::string default_backend_spec() const;
  // How many backends are kept (for tests).
  std::size_t cached_backends();
  static constexpr std::size_t k_backend_cache = 8;

  // A known target (core/targets.hpp): the explicit argument, else the problem file's TARGET, else
  // --target, else trn2.
  std::string target_for(const std::string& argument, const std::string& problem_source) const;

  // The searches this server runs in the background.
  SearchJobs& jobs() { return *m_jobs; }

 private:
  ProductToolsOptions m_options;
  std::mutex m_mutex;
  std::shared_ptr<search::store::Store> m_store;
  struct CachedBackend {
    std::shared_ptr<backends::Backend> backend;
    std::uint64_t last_used = 0;
  };
  std::map<std::string, CachedBackend> m_backends;
  std::uint64_t m_backend_clock = 0;
  // Last member: destroyed first, so running searches stop before the store closes.
  std::unique_ptr<SearchJobs> m_jobs = std::make_unique<SearchJobs>();
};

}  // namespace autocomp::tools
