#include "search/engine/evaluator.hpp"

#include <spdlog/spdlog.h>

#include <future>

#include "backends/cacheable.hpp"

namespace autocomp::search::engine {

namespace {

backends::EvalResult cancelled_result(const std::string& reason) {
  backends::EvalResult result;
  result.failure = core::make_failure(core::FailureKind::cancelled, "evaluate",
                                      "not evaluated: the run is stopping (" + reason + ")");
  return result;
}

// Two dispatchers: one batch can form while the previous one runs.
constexpr int k_dispatchers = 2;

}  // namespace

Evaluator::Evaluator(std::shared_ptr<backends::Backend> backend,
                     std::shared_ptr<store::EvaluationCache> cache, const SearchConfig& config,
                     StopControl& stop)
    : m_service(std::move(backend), std::move(cache)), m_stop(stop) {
  m_template.command = backends::EvalCommand::evaluate;
  m_template.kernel_filename = config.kernel_filename;
  m_template.kernel_modules = config.kernel_modules;
  m_template.kernel_folder = config.kernel_folder;
  m_template.problem_source = config.problem_source;
  m_template.problem_filename = config.problem_filename;
  m_template.kernel_name = config.kernel_name;
  m_template.target = config.target;
  m_template.seeds = config.eval_seeds;
  m_template.warmup = config.warmup;
  m_template.iters = config.iters;
  m_template.timeout = config.eval_timeout;
  // A search is background work: interactive tool calls go first (Lane).
  m_template.lane = backends::Lane::background;

  m_site = m_service.site_for(m_template, m_stop.token());
  m_batch_size = static_cast<std::size_t>(std::max(1, m_service.backend().slots()));

  for (int i = 0; i < k_dispatchers; ++i) {
    m_dispatchers.emplace_back([this] { dispatch(); });
  }
}

Evaluator::~Evaluator() {
  {
    std::lock_guard lock(m_mutex);
    m_closing = true;
  }
  m_ready.notify_all();
  for (auto& thread : m_dispatchers) {
    thread.join();
  }
}

backends::EvalRequest Evaluator::request_for(const std::string& source) const {
  backends::EvalRequest request = m_template;
  request.kernel_source = source;
  return request;
}

bool Evaluator::cacheable(const backends::EvalResult& result) {
  return backends::cacheable(result);
}

std::shared_future<Evaluator::Evaluated> Evaluator::submit(const std::string& key,
                                                           const std::string& source) {
  {
    std::lock_guard lock(m_mutex);
    if (!m_stop.token().cancelled()) {
      auto it = m_pending.find(key);
      if (it != m_pending.end()) {
        return it->second.future;
      }
      Pending pending;
      pending.source = source;
      pending.future = pending.promise.get_future().share();
      auto future = pending.future;
      m_pending.emplace(key, std::move(pending));
      m_queue.push_back(key);
      m_ready.notify_one();
      return future;
    }
  }
  std::promise<Evaluated> stopped;
  stopped.set_value(Evaluated{cancelled_result(m_stop.reason()), "", false});
  return stopped.get_future().share();
}

backends::EvalResult Evaluator::evaluate_now(const std::string& key, const std::string& source,
                                             std::string* ref) {
  const std::shared_future<Evaluated> future = submit(key, source);
  const Evaluated& evaluated = future.get();
  if (ref != nullptr) {
    *ref = evaluated.ref;
  }
  return evaluated.result;
}

backends::EvalResult Evaluator::reverify(const std::string& source, std::string* ref) {
  backends::EvalRequest request = request_for(source);
  request.command = backends::EvalCommand::verify;
  auto ran = m_service.run({request}, m_site, core::CancelToken{});
  backends::EvalResult result = std::move(ran.front().result);
  if (const auto& stored = ran.front().stored) {
    if (stored->ok() && ref != nullptr) {
      *ref = std::to_string(stored->value());
    } else if (!stored->ok()) {
      spdlog::warn("could not store a re-verification: {}", stored->failure().describe());
    }
  }
  return result;
}

void Evaluator::finish(const std::string& key, Evaluated evaluated) {
  std::promise<Evaluated> promise;
  {
    std::lock_guard lock(m_mutex);
    auto it = m_pending.find(key);
    if (it == m_pending.end()) {
      return;
    }
    promise = std::move(it->second.promise);
    m_pending.erase(it);
  }
  promise.set_value(std::move(evaluated));
}

void Evaluator::dispatch() {
  for (;;) {
    std::vector<std::pair<std::string, std::string>> batch;  // key, source
    {
      std::unique_lock lock(m_mutex);
      m_ready.wait(lock, [this] { return m_closing || !m_queue.empty(); });
      if (m_queue.empty()) {
        return;
      }
      while (!m_queue.empty() && batch.size() < m_batch_size) {
        const std::string key = m_queue.front();
        m_queue.pop_front();
        batch.emplace_back(key, m_pending[key].source);
      }
    }

    std::vector<std::pair<std::string, std::string>> misses;
    for (auto& [key, source] : batch) {
      if (m_stop.token().cancelled()) {
        finish(key, Evaluated{cancelled_result(m_stop.reason()), "", false});
        continue;
      }
      std::optional<store::StoredEvaluation> cached;
      if (auto found = m_service.lookup(request_for(source), m_site); found) {
        cached = std::move(found).value();
      } else {
        spdlog::warn("evaluation cache lookup failed: {}", found.failure().describe());
      }
      if (cached) {
        ++m_cache_hits;
        finish(key, Evaluated{cached->result, std::to_string(cached->id), true});
      } else {
        misses.emplace_back(key, source);
      }
    }
    if (misses.empty()) {
      continue;
    }

    std::vector<backends::EvalRequest> requests;
    requests.reserve(misses.size());
    for (const auto& [key, source] : misses) {
      requests.push_back(request_for(source));
    }
    auto ran = m_service.run(requests, m_site, m_stop.token());
    for (std::size_t i = 0; i < misses.size(); ++i) {
      if (ran[i].ran) {
        ++m_backend_evaluations;
      }
      std::string ref;
      if (const auto& stored = ran[i].stored) {
        if (stored->ok()) {
          ref = std::to_string(stored->value());
        } else {
          spdlog::warn("could not store an evaluation: {}", stored->failure().describe());
        }
      }
      finish(misses[i].first, Evaluated{ran[i].result, ref, false});
    }
  }
}

}  // namespace autocomp::search::engine
