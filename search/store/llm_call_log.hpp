#pragma once

#include <cstdint>
#include <optional>
#include <string>
#include <vector>

#include "core/result.hpp"
#include "search/store/types.hpp"

namespace autocomp::search::store {

// Answered LLM calls, so that a resumed run replays a response instead of asking again, and so
// that a run's spending can be totalled. Same contract as EvaluationCache.
class LlmCallLog {
 public:
  virtual ~LlmCallLog() = default;

  virtual core::Result<std::optional<LlmCall>> find_llm_response(
      const std::string& run_id, const std::string& request_hash) = 0;
  // Recording the same (run, request hash) twice keeps the first; returns the stored call's id.
  virtual core::Result<std::int64_t> put_llm_call(const LlmCall& call) = 0;
  virtual core::Result<LlmTotals> llm_totals(const std::string& run_id) = 0;
  // In recording order.
  virtual core::Result<std::vector<LlmCall>> llm_calls(const std::string& run_id) = 0;
};

}  // namespace autocomp::search::store
