#pragma once

#include <cstdint>
#include <string>
#include <vector>

#include "core/result.hpp"
#include "search/store/types.hpp"

namespace autocomp::search::store {

// Optimization memory: lessons per target shared by every run, and reflexions per run or kernel
// file. Same contract as EvaluationCache.
class Memory {
 public:
  virtual ~Memory() = default;

  // Lessons are bounded per target by StoreOptions::lesson_limit. Adding a text already stored
  // for the target refreshes it (newer time, stronger evidence kept) instead of duplicating. When
  // over the bound, lessons are evicted, never the one just added, in order of least value:
  // value = max(speedup, 1/speedup) (unknown counts as 1), ties broken by age (oldest first).
  virtual core::Result<std::int64_t> add_lesson(const Lesson& lesson) = 0;
  // Merging: removes the lessons `retired` (ids) and adds `lessons` (as add_lesson does, first
  // listed loads first), in one transaction. Returns how many were removed.
  virtual core::Result<int> replace_lessons(const std::vector<std::int64_t>& retired,
                                            const std::vector<Lesson>& lessons) = 0;
  // Newest first; empty target = all targets.
  virtual core::Result<std::vector<Lesson>> lessons(const std::string& target, int limit = 16) = 0;
  // Returns how many were removed; empty target = all targets.
  virtual core::Result<int> clear_lessons(const std::string& target) = 0;

  virtual core::Result<std::int64_t> add_reflexion(const Reflexion& reflexion) = 0;
  // Newest first.
  virtual core::Result<std::vector<Reflexion>> recent_reflexions(const std::string& scope,
                                                                 int limit = 5) = 0;
};

}  // namespace autocomp::search::store
