#pragma once

#include <cstdint>
#include <optional>
#include <string>
#include <string_view>
#include <vector>

#include "backends/backend.hpp"
#include "core/result.hpp"
#include "search/store/types.hpp"

namespace autocomp::search::store {

// The evaluation cache (design §5.3): the sources evaluated (content-addressed) and every result
// measured for them. Thread-safe; every write is committed before the method returns; failures
// are values (io_error for database trouble, invalid_argument for a bad argument).
class EvaluationCache {
 public:
  virtual ~EvaluationCache() = default;

  // The cache-through pair. lookup returns the newest stored result that may answer `request` at
  // `site` (cacheable, see backends/cacheable.hpp, and covering the request's command, see
  // docs/store.md); record keeps every result it is given, cacheable or not (history), together
  // with both sources, and returns the evaluation's id. Both key the request with make_eval_key.
  virtual core::Result<std::optional<StoredEvaluation>> lookup(const backends::EvalRequest& request,
                                                               const EvalSite& site) = 0;
  virtual core::Result<std::int64_t> record(const backends::EvalRequest& request,
                                            const EvalSite& site,
                                            const backends::EvalResult& result) = 0;

  virtual core::Result<std::optional<StoredEvaluation>> get_evaluation(std::int64_t id) = 0;
  // Newest first.
  virtual core::Result<std::vector<StoredEvaluation>> evaluations_for_candidate(
      const std::string& candidate_key, int limit = 100) = 0;

  // The sources. Putting an existing key is a no-op returning the key (a workload's path is
  // updated when a new non-empty one is given; a candidate keeps its first origin).
  virtual core::Result<std::string> put_workload(std::string_view problem_source,
                                                 std::string_view problem_path) = 0;
  virtual core::Result<std::optional<Workload>> get_workload(const std::string& problem_key) = 0;
  virtual core::Result<std::string> put_candidate(std::string_view source,
                                                  std::string_view origin) = 0;
  virtual core::Result<std::optional<Candidate>> get_candidate(const std::string& key) = 0;
};

}  // namespace autocomp::search::store
