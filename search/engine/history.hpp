#pragma once

#include <map>
#include <optional>
#include <string>
#include <vector>

#include "search/engine/after_batch.hpp"
#include "search/engine/prompts.hpp"

namespace autocomp::search::engine {

// What the prompts of the next iteration say about the run so far: the plans tried per parent
// with their outcomes, and the last iteration's failures. Kept in memory from each batch; read
// from the store only when a run resumes. It holds the run's kernels as the journal does (one per
// key, its first origin, in recording order), so a resumed run builds the same history and asks
// the same questions.
class PromptMemory : public AfterBatch {
 public:
  PromptMemory(const Candidate& baseline, int recent_failure_limit);

  // A resumed run: its stored candidates (load_candidates), and the last finished iteration,
  // whose failures the next prompts show (none when the run starts over).
  void restore(const std::vector<Candidate>& stored, std::optional<int> last_iteration);
  void apply(const Batch& batch) override;

  PromptHistory history(int iteration) const;
  const std::vector<std::string>& recent_failures() const { return m_recent_failures; }

 private:
  void remember(const Candidate& candidate);

  Candidate m_baseline;
  int m_recent_failure_limit = 0;
  std::vector<Candidate> m_known;
  std::map<std::string, std::size_t> m_index;  // key -> position in m_known
  std::vector<std::string> m_recent_failures;
};

// The failures among an iteration's candidates in origin order, at most `limit`, in words.
std::vector<std::string> failures_of(std::vector<Candidate> candidates, int iteration, int limit);

}  // namespace autocomp::search::engine
