#include "search/engine/history.hpp"

#include <algorithm>

#include "core/text.hpp"

namespace autocomp::search::engine {

namespace {

constexpr std::size_t k_failure_text_limit = 400;

bool was_cancelled(const backends::EvalResult& result) {
  return result.failure && result.failure->kind == core::FailureKind::cancelled;
}

std::string failure_text(const Candidate& candidate) {
  std::string text;
  if (candidate.eval.failure) {
    text = candidate.eval.failure->describe();
  } else {
    text = "incorrect result";
  }
  if (!candidate.plan.empty()) {
    std::string plan = core::utf8_prefix(candidate.plan, 160);
    std::replace(plan.begin(), plan.end(), '\n', ' ');
    text = "plan \"" + plan + "\": " + text;
  }
  if (text.size() > k_failure_text_limit) {
    text = core::utf8_prefix(text, k_failure_text_limit) + "...";
  }
  return text;
}

}  // namespace

std::vector<std::string> failures_of(std::vector<Candidate> candidates, int iteration, int limit) {
  std::sort(candidates.begin(), candidates.end(),
            [](const Candidate& a, const Candidate& b) { return a.origin < b.origin; });
  std::vector<std::string> out;
  for (const auto& candidate : candidates) {
    if (candidate.origin.iteration != iteration || candidate.duplicate || candidate.correct() ||
        was_cancelled(candidate.eval)) {
      continue;
    }
    out.push_back(failure_text(candidate));
  }
  if (static_cast<int>(out.size()) > limit) {
    out.erase(out.begin(), out.end() - limit);
  }
  return out;
}

PromptMemory::PromptMemory(const Candidate& baseline, int recent_failure_limit)
    : m_baseline(baseline), m_recent_failure_limit(recent_failure_limit) {
  remember(baseline);
}

void PromptMemory::remember(const Candidate& candidate) {
  if (candidate.key.empty()) {
    return;
  }
  // As the journal keeps a key: its first row's lineage; a later original (a resumed iteration)
  // brings its evaluation when it has a stored one. A row without a stored evaluation reads back
  // as load_candidates reads it.
  auto [it, inserted] = m_index.emplace(candidate.key, m_known.size());
  if (inserted) {
    Candidate kept = candidate;
    kept.duplicate = false;
    if (kept.eval_ref.empty()) {
      kept.eval = backends::EvalResult{};
      kept.eval.failure =
          core::make_failure(core::FailureKind::internal, "resume", "no stored evaluation");
    }
    m_known.push_back(std::move(kept));
  } else if (!candidate.duplicate && !candidate.eval_ref.empty()) {
    Candidate& kept = m_known[it->second];
    kept.eval = candidate.eval;
    kept.eval_ref = candidate.eval_ref;
  }
}

void PromptMemory::restore(const std::vector<Candidate>& stored,
                           std::optional<int> last_iteration) {
  m_known.clear();
  m_index.clear();
  for (const auto& candidate : stored) {
    if (!candidate.key.empty() && m_index.emplace(candidate.key, m_known.size()).second) {
      m_known.push_back(candidate);
    }
  }
  m_recent_failures.clear();
  if (last_iteration) {
    m_recent_failures = failures_of(stored, *last_iteration, m_recent_failure_limit);
  }
}

void PromptMemory::apply(const Batch& batch) {
  for (const auto& child : batch.children) {
    remember(child);
  }
  if (batch.finished) {
    m_recent_failures = failures_of(batch.children, batch.iteration, m_recent_failure_limit);
  }
}

PromptHistory PromptMemory::history(int iteration) const {
  return prompt_history(m_known, m_baseline, iteration);
}

}  // namespace autocomp::search::engine
