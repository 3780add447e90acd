#include "search/engine/evaluation_service.hpp"

#include "search/engine/input_signature.hpp"

namespace autocomp::search::engine {

namespace {

core::Failure cancelled_call() {
  return core::make_failure(core::FailureKind::cancelled, "evaluate", "the call was cancelled");
}

}  // namespace

EvaluationService::EvaluationService(std::shared_ptr<backends::Backend> backend,
                                     std::shared_ptr<store::EvaluationCache> cache,
                                     std::shared_ptr<store::FileHistory> files)
    : m_backend(std::move(backend)), m_cache(std::move(cache)), m_files(std::move(files)) {}

store::EvalSite EvaluationService::site_for(const backends::EvalRequest& request,
                                            const core::CancelToken& cancel) const {
  store::EvalSite site = store::site_of(*m_backend);
  site.input_signature = input_signature(*m_backend, request, cancel);
  return site;
}

core::Result<std::optional<store::StoredEvaluation>> EvaluationService::lookup(
    const backends::EvalRequest& request, const store::EvalSite& site) const {
  if (!m_cache) {
    return std::optional<store::StoredEvaluation>{};
  }
  return m_cache->lookup(request, site);
}

std::vector<EvaluationService::Ran> EvaluationService::run(
    const std::vector<backends::EvalRequest>& requests, const store::EvalSite& site,
    const core::CancelToken& cancel, const backends::ProgressFn& progress) const {
  std::vector<backends::EvalResult> results;
  try {
    results = m_backend->evaluate(requests, cancel, progress);
  } catch (const std::exception& error) {
    backends::EvalResult failed;
    failed.failure = core::make_failure(core::FailureKind::internal, "evaluate",
                                        std::string("the backend failed: ") + error.what());
    results.assign(requests.size(), failed);
  }
  std::vector<Ran> out(requests.size());
  for (std::size_t i = 0; i < requests.size(); ++i) {
    Ran& entry = out[i];
    if (i < results.size()) {
      entry.result = std::move(results[i]);
    } else {
      entry.missing = true;
      entry.result.failure = core::make_failure(core::FailureKind::cancelled, "evaluate",
                                                "the backend returned too few results");
    }
    entry.ran =
        !(entry.result.failure && entry.result.failure->kind == core::FailureKind::cancelled);
    if (entry.ran && m_cache) {
      entry.stored = m_cache->record(requests[i], site, entry.result);
    }
  }
  return out;
}

core::Result<EvaluationService::Outcome> EvaluationService::evaluate(
    const backends::EvalRequest& request, const store::EvalSite& site,
    const core::CancelToken& cancel, bool fresh, const backends::ProgressFn& progress) const {
  if (cancel.cancelled()) {
    return cancelled_call();
  }
  Outcome outcome;
  if (!fresh) {
    auto found = lookup(request, site);
    if (!found.ok()) {
      return found.failure();
    }
    if (auto stored = std::move(found).value()) {
      outcome.result = std::move(stored->result);
      outcome.id = stored->id;
      outcome.cached = true;
      return outcome;
    }
  }
  auto ran = run({request}, site, cancel, progress);
  if (cancel.cancelled()) {
    return cancelled_call();
  }
  Ran& entry = ran.front();
  if (entry.missing) {
    return core::make_failure(core::FailureKind::internal, "evaluate",
                              "the backend returned no result");
  }
  if (entry.stored) {
    if (!entry.stored->ok()) {
      return entry.stored->failure();
    }
    outcome.id = entry.stored->value();
  }
  outcome.result = std::move(entry.result);
  return outcome;
}

core::Result<std::optional<store::BestVersion>> EvaluationService::record_file(
    const std::string& abs_path, const std::string& candidate_key, const std::string& problem_key,
    const std::string& target) const {
  if (!m_files) {
    return std::optional<store::BestVersion>{};
  }
  if (auto recorded = m_files->record_file_version(abs_path, candidate_key, problem_key, target);
      !recorded.ok()) {
    return recorded.failure();
  }
  return m_files->best_for_file(abs_path, problem_key, target, "");
}

}  // namespace autocomp::search::engine
