#pragma once

#include <cstdint>
#include <memory>
#include <optional>
#include <string>
#include <vector>

#include "backends/backend.hpp"
#include "core/cancel.hpp"
#include "core/result.hpp"
#include "search/store/evaluation_cache.hpp"
#include "search/store/file_history.hpp"
#include "search/store/types.hpp"

namespace autocomp::search::engine {

// The one cache-through path for evaluations, used by the evaluation tools (one kernel file at a
// time) and by the search's Evaluator (batches): the site a request is keyed at, the cache lookup
// (the store applies the one cacheable rule, backends/cacheable.hpp), the backend call, the
// recording of every result that ran, and the history of kernel files. Holds no state of its own
// besides its parts; thread-safe as far as they are. Without a cache nothing is looked up or
// recorded; without a file history record_file answers nothing.
class EvaluationService {
 public:
  // One evaluation: its result, the id it is stored under (0 when it was not stored), and whether
  // it came from the cache.
  struct Outcome {
    backends::EvalResult result;
    std::int64_t id = 0;
    bool cached = false;
  };
  // One result of run(): what the backend said and, when it ran, what recording it gave.
  struct Ran {
    backends::EvalResult result;
    // True unless the request was cancelled before it ran (a cancelled result is not recorded).
    bool ran = false;
    // True when the backend returned no result for the request (the result is then cancelled).
    bool missing = false;
    // The stored id, or why recording failed; unset when not recorded (not run, or no cache).
    std::optional<core::Result<std::int64_t>> stored;
  };

  EvaluationService(std::shared_ptr<backends::Backend> backend,
                    std::shared_ptr<store::EvaluationCache> cache,
                    std::shared_ptr<store::FileHistory> files = nullptr);

  backends::Backend& backend() const { return *m_backend; }
  bool has_cache() const { return m_cache != nullptr; }

  // Where `request` is keyed: the backend's identity, device and harness version, and the input
  // signature its problem produces there (search/engine/input_signature.hpp).
  store::EvalSite site_for(const backends::EvalRequest& request,
                           const core::CancelToken& cancel) const;

  // The stored result that may answer `request` at `site`, if any (none without a cache).
  core::Result<std::optional<store::StoredEvaluation>> lookup(const backends::EvalRequest& request,
                                                              const store::EvalSite& site) const;

  // Runs `requests` on the backend as one batch and records each result that ran. Always returns
  // one entry per request: a backend that throws gives internal failures, missing results are
  // cancelled ones.
  std::vector<Ran> run(const std::vector<backends::EvalRequest>& requests,
                       const store::EvalSite& site, const core::CancelToken& cancel,
                       const backends::ProgressFn& progress = {}) const;

  // Cache-through for one request: the stored result unless `fresh`, else the backend's, recorded.
  // Failures are for the call (store trouble, cancellation, no result); a kernel that fails is a
  // successful outcome whose result carries the failure.
  core::Result<Outcome> evaluate(const backends::EvalRequest& request, const store::EvalSite& site,
                                 const core::CancelToken& cancel, bool fresh = false,
                                 const backends::ProgressFn& progress = {}) const;

  // Records that the kernel file at `abs_path` holds `candidate_key` (evaluated for this problem
  // and target) and answers the best correct version recorded for the path since.
  core::Result<std::optional<store::BestVersion>> record_file(const std::string& abs_path,
                                                              const std::string& candidate_key,
                                                              const std::string& problem_key,
                                                              const std::string& target) const;

 private:
  std::shared_ptr<backends::Backend> m_backend;
  std::shared_ptr<store::EvaluationCache> m_cache;
  std::shared_ptr<store::FileHistory> m_files;
};

}  // namespace autocomp::search::engine
