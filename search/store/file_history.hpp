#pragma once

#include <optional>
#include <string>
#include <vector>

#include "core/result.hpp"
#include "search/store/types.hpp"

namespace autocomp::search::store {

// What each kernel file held when a tool looked at it, and the best version of a file
// (revert_to_best). Same contract as EvaluationCache.
class FileHistory {
 public:
  virtual ~FileHistory() = default;

  // Records that the file at `abs_path` held `candidate_key` (the candidate and workload must be
  // stored). Recording the same version again refreshes it.
  virtual core::Status record_file_version(const std::string& abs_path,
                                           const std::string& candidate_key,
                                           const std::string& problem_key,
                                           const std::string& target) = 0;
  // Newest first.
  virtual core::Result<std::vector<FileVersion>> file_versions(const std::string& abs_path,
                                                               int limit = 100) = 0;
  // Best among the versions recorded for the path with this problem and target, judged by the
  // stored evaluations of each version; with an empty backend_identity, on the backend of the
  // newest qualifying evaluation (simulated and measured latencies are never compared).
  virtual core::Result<std::optional<BestVersion>> best_for_file(
      const std::string& abs_path, const std::string& problem_key, const std::string& target,
      const std::string& backend_identity = "") = 0;
};

}  // namespace autocomp::search::store
