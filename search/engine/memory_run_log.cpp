#include "search/engine/memory_run_log.hpp"

#include <algorithm>

#include "core/hash.hpp"
#include "search/engine/evaluator.hpp"

namespace autocomp::search::engine {

namespace {
core::Failure unknown_run(const std::string& run_id) {
  return core::make_failure(core::FailureKind::invalid_argument, "store", "no run " + run_id);
}
}  // namespace

core::Result<std::string> MemoryRunLog::create_run(const std::string& config_text) {
  std::lock_guard lock(m_mutex);
  std::string id = "mem-" + std::to_string(m_next_id++);
  Run run;
  run.record = RunRecord{id, config_text, "running", ""};
  m_runs.emplace(id, std::move(run));
  return id;
}

core::Result<RunRecord> MemoryRunLog::load_run(const std::string& run_id) {
  std::lock_guard lock(m_mutex);
  auto it = m_runs.find(run_id);
  if (it == m_runs.end()) {
    return unknown_run(run_id);
  }
  return it->second.record;
}

core::Status MemoryRunLog::set_run_status(const std::string& run_id, const std::string& status,
                                          const std::string& stop_reason) {
  std::lock_guard lock(m_mutex);
  auto it = m_runs.find(run_id);
  if (it == m_runs.end()) {
    return unknown_run(run_id);
  }
  it->second.record.status = status;
  it->second.record.stop_reason = stop_reason;
  return core::ok_status();
}

std::optional<LlmCallRecord> MemoryRunLog::find_llm_call(const std::string& run_id,
                                                         const std::string& request_hash) {
  std::lock_guard lock(m_mutex);
  auto it = m_runs.find(run_id);
  if (it == m_runs.end()) {
    return std::nullopt;
  }
  auto call = it->second.calls.find(request_hash);
  if (call == it->second.calls.end()) {
    return std::nullopt;
  }
  return call->second;
}

core::Status MemoryRunLog::record_llm_call(const std::string& run_id, const LlmCallRecord& call) {
  std::lock_guard lock(m_mutex);
  auto it = m_runs.find(run_id);
  if (it == m_runs.end()) {
    return unknown_run(run_id);
  }
  it->second.calls[call.request_hash] = call;
  return core::ok_status();
}

LlmSpend MemoryRunLog::llm_spend(const std::string& run_id) {
  std::lock_guard lock(m_mutex);
  LlmSpend spend;
  auto it = m_runs.find(run_id);
  if (it != m_runs.end()) {
    for (const auto& [hash, call] : it->second.calls) {
      ++spend.calls;
      spend.tokens += call.usage.input_tokens + call.usage.output_tokens;
      spend.cost_usd += call.usage.cost_usd;
    }
  }
  return spend;
}

std::string MemoryRunLog::eval_key_text(const backends::EvalRequest& request,
                                        const EvalSite& site) {
  std::string seeds;
  for (int seed : request.seeds) {
    seeds += std::to_string(seed) + ",";
  }
  return core::source_key(request.kernel_source) + "|" + core::source_key(request.problem_source) +
         "|" + request.kernel_name + "|" + request.target + "|" + seeds + "|" +
         std::to_string(request.warmup) + "|" + std::to_string(request.iters) + "|" +
         std::string(backends::to_string(request.command)) + "|" + site.backend_identity + "|" +
         site.device + "|" + site.harness_version + "|" + site.input_signature;
}

std::optional<StoredResult> MemoryRunLog::find_evaluation(const backends::EvalRequest& request,
                                                          const EvalSite& site) {
  std::lock_guard lock(m_mutex);
  auto key = eval_key_text(request, site);
  auto it = m_evaluations.find(key);
  if (it == m_evaluations.end()) {
    return std::nullopt;
  }
  return StoredResult{it->second, key};
}

core::Result<std::string> MemoryRunLog::record_evaluation(const backends::EvalRequest& request,
                                                          const EvalSite& site,
                                                          const backends::EvalResult& result) {
  std::lock_guard lock(m_mutex);
  auto key = eval_key_text(request, site);
  ++m_recorded_evaluations;
  if (Evaluator::cacheable(result)) {
    m_evaluations[key] = result;
  }
  return key;
}

core::Status MemoryRunLog::record_candidate(const std::string& run_id, const Candidate& candidate) {
  std::lock_guard lock(m_mutex);
  auto it = m_runs.find(run_id);
  if (it == m_runs.end()) {
    return unknown_run(run_id);
  }
  it->second.candidates[candidate.origin.label()] = candidate;
  return core::ok_status();
}

std::vector<Candidate> MemoryRunLog::load_candidates(const std::string& run_id) {
  std::lock_guard lock(m_mutex);
  std::vector<Candidate> out;
  auto it = m_runs.find(run_id);
  if (it != m_runs.end()) {
    for (const auto& [label, candidate] : it->second.candidates) {
      out.push_back(candidate);
    }
  }
  return out;
}

core::Status MemoryRunLog::record_beam(const std::string& run_id, const BeamRecord& beam) {
  std::lock_guard lock(m_mutex);
  auto it = m_runs.find(run_id);
  if (it == m_runs.end()) {
    return unknown_run(run_id);
  }
  it->second.beams[beam.iteration] = beam;
  return core::ok_status();
}

std::vector<BeamRecord> MemoryRunLog::load_beams(const std::string& run_id) {
  std::lock_guard lock(m_mutex);
  std::vector<BeamRecord> out;
  auto it = m_runs.find(run_id);
  if (it != m_runs.end()) {
    for (const auto& [iteration, beam] : it->second.beams) {
      out.push_back(beam);
    }
  }
  return out;
}

core::Status MemoryRunLog::record_lesson(const std::string& target, const std::string& text,
                                         const std::string& /*kind*/, const std::string& /*run_id*/,
                                         double /*speedup*/) {
  constexpr std::size_t k_lesson_limit = 16;
  std::lock_guard lock(m_mutex);
  auto& lessons = m_lessons[target];
  if (std::find(lessons.begin(), lessons.end(), text) != lessons.end()) {
    return core::ok_status();
  }
  lessons.push_back(text);
  if (lessons.size() > k_lesson_limit) {
    lessons.erase(lessons.begin());
  }
  return core::ok_status();
}

std::vector<std::string> MemoryRunLog::load_lessons(const std::string& target, int limit) {
  std::lock_guard lock(m_mutex);
  auto it = m_lessons.find(target);
  if (it == m_lessons.end()) {
    return {};
  }
  std::vector<std::string> out(it->second.rbegin(), it->second.rend());  // newest first
  if (limit >= 0 && out.size() > static_cast<std::size_t>(limit)) {
    out.resize(static_cast<std::size_t>(limit));
  }
  return out;
}

core::Status MemoryRunLog::record_reflexion(const std::string& run_id,
                                            const std::string& candidate_key,
                                            const prompts::ReflexionRecord& record) {
  std::lock_guard lock(m_mutex);
  auto& list = m_reflexions[run_id];
  for (const auto& [key, stored] : list) {
    if (!candidate_key.empty() && key == candidate_key) {
      return core::ok_status();  // one reflexion per attempt, also when an iteration is replayed
    }
  }
  list.emplace_back(candidate_key, record);
  return core::ok_status();
}

std::vector<prompts::ReflexionRecord> MemoryRunLog::load_reflexions(const std::string& run_id,
                                                                    int limit) {
  std::lock_guard lock(m_mutex);
  std::vector<prompts::ReflexionRecord> out;
  auto it = m_reflexions.find(run_id);
  if (it == m_reflexions.end()) {
    return out;
  }
  for (const auto& entry : it->second) {
    out.push_back(entry.second);
  }
  if (limit >= 0 && out.size() > static_cast<std::size_t>(limit)) {
    out.erase(out.begin(), out.end() - limit);
  }
  return out;
}

std::size_t MemoryRunLog::llm_call_count(const std::string& run_id) const {
  std::lock_guard lock(m_mutex);
  auto it = m_runs.find(run_id);
  return it == m_runs.end() ? 0 : it->second.calls.size();
}

std::size_t MemoryRunLog::evaluation_count() const {
  std::lock_guard lock(m_mutex);
  return m_recorded_evaluations;
}

}  // namespace autocomp::search::engine
