#pragma once

#include <atomic>
#include <condition_variable>
#include <deque>
#include <future>
#include <map>
#include <memory>
#include <mutex>
#include <string>
#include <thread>
#include <vector>

#include "backends/backend.hpp"
#include "search/engine/evaluation_service.hpp"
#include "search/engine/search_config.hpp"
#include "search/engine/stop_control.hpp"
#include "search/store/evaluation_cache.hpp"
#include "search/store/types.hpp"

namespace autocomp::search::engine {

// Sends children to the backend in batches and serves repeats without evaluating them again:
// the evaluation service (the cache-through path the tools use too) answers repeats, and a kernel
// already queued or running is shared by everyone who asks for it. Results whose failure is not a
// property of the kernel (timeout, transport, cancellation, ...) are not cached.
class Evaluator {
 public:
  // A kernel's result, the store's reference to it ("" when it was not stored), and whether it
  // came from the cache.
  struct Evaluated {
    backends::EvalResult result;
    std::string ref;
    bool cached = false;
  };

  Evaluator(std::shared_ptr<backends::Backend> backend,
            std::shared_ptr<store::EvaluationCache> cache, const SearchConfig& config,
            StopControl& stop);
  ~Evaluator();
  Evaluator(const Evaluator&) = delete;
  Evaluator& operator=(const Evaluator&) = delete;

  // Queues a kernel and returns its result to come. A kernel already queued or running shares
  // that request's future; a stopped run gets a ready future with a cancelled failure. Futures
  // are fulfilled by the evaluator's threads, which call nothing else.
  std::shared_future<Evaluated> submit(const std::string& key, const std::string& source);
  // submit(...).get(): evaluates one kernel and waits for it (the input kernel).
  backends::EvalResult evaluate_now(const std::string& key, const std::string& source,
                                    std::string* ref = nullptr);

  // Verifies `source` again in a fresh harness process on all the problem's seeds, never from the
  // cache, whatever the run's stop state (a stopped run still re-verifies its winner); the result
  // is recorded in the run log and `ref` set to it.
  backends::EvalResult reverify(const std::string& source, std::string* ref = nullptr);

  long backend_evaluations() const { return m_backend_evaluations.load(); }
  long cache_hits() const { return m_cache_hits.load(); }
  backends::EvalRequest request_for(const std::string& source) const;

  // backends::cacheable: the one rule the store and the tools follow too.
  static bool cacheable(const backends::EvalResult& result);

 private:
  struct Pending {
    std::string source;
    std::promise<Evaluated> promise;
    std::shared_future<Evaluated> future;
  };

  void dispatch();
  void finish(const std::string& key, Evaluated evaluated);

  EvaluationService m_service;
  backends::EvalRequest m_template;
  store::EvalSite m_site;
  StopControl& m_stop;
  std::size_t m_batch_size = 1;

  std::mutex m_mutex;
  std::condition_variable m_ready;
  std::deque<std::string> m_queue;           // keys waiting for a dispatcher
  std::map<std::string, Pending> m_pending;  // queued or running, by key
  bool m_closing = false;
  std::vector<std::thread> m_dispatchers;

  std::atomic<long> m_backend_evaluations{0};
  std::atomic<long> m_cache_hits{0};
};

}  // namespace autocomp::search::engine
