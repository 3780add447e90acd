#pragma once

// Test doubles for the engine's unit tests: a fake Backend that reads the outcome of a kernel from
// marker comments in its source, and helpers to script a FakeProvider.

#include <atomic>
#include <chrono>
#include <map>
#include <mutex>
#include <nlohmann/json.hpp>
#include <regex>
#include <string>
#include <thread>

#include "backends/backend.hpp"
#include "core/hash.hpp"
#include "search/engine/beam_search.hpp"
#include "search/engine/prompts.hpp"
#include "search/engine/run_store.hpp"
#include "search/llm/fake_provider.hpp"
#include "search/store/store.hpp"

namespace autocomp::search::engine::testing {

// A kernel whose evaluation the fake backend decides from markers:
//   "# latency: 80"      correct, median 80 us
//   "# compile_error"    compile_error at line 3
//   "# runtime_error"    runtime_error
//   "# wrong"            mismatch
//   "# fails_reverify"   as its latency marker says when evaluated, but a mismatch when verified
//                        again (the search's re-verification of its winner)
//   "# hot: ENGINE US INSTR"  (with a latency) a profile: ENGINE busy US us over INSTR
//                        instructions, all on line 2 ("x = work(x)"), kept in raw_json as
//                        the harness reports it, so the store reads it back
//   "# wait: ENGINE ON PCT"   (with a latency) ENGINE idle PCT% waiting on ON
// Signature requests answer the problem's "# shape: TEXT" marker (default "x:float32[4]"), and
// evaluations of a problem with that marker report it as their measured inputs;
// verify requests (re-verifications) are counted apart from evaluations.
inline std::string kernel(const std::string& name, const std::string& marker) {
  return "def " + name + "(x):\n    # " + marker + "\n    return x\n";
}

class FakeBackend : public backends::Backend {
 public:
  explicit FakeBackend(int slots = 2, std::chrono::milliseconds delay = {})
      : m_slots(slots), m_delay(delay) {}

  std::string identity() const override { return "fake"; }
  std::string device() const override { return "fake"; }
  std::string harness_version() const override { return "test"; }
  int slots() const override { return m_slots; }

  std::vector<backends::EvalResult> evaluate(const std::vector<backends::EvalRequest>& batch,
                                             const core::CancelToken& cancel,
                                             const backends::ProgressFn&) override {
    {
      std::lock_guard lock(m_mutex);
      ++m_batches;
      m_largest_batch = std::max(m_largest_batch, batch.size());
    }
    std::vector<backends::EvalResult> results;
    for (const auto& request : batch) {
      if (request.command == backends::EvalCommand::signature) {
        backends::EvalResult result;
        result.device = "fake";
        static const std::regex shape(R"(# shape: (\S+))");
        std::smatch found;
        result.input_signature = std::regex_search(request.problem_source, found, shape)
                                     ? found[1].str()
                                     : std::string("x:float32[4]");
        std::lock_guard lock(m_mutex);
        ++m_signatures;
        m_lanes.push_back(request.lane);
        results.push_back(result);
        continue;
      }
      if (m_delay.count() > 0) {
        auto until = std::chrono::steady_clock::now() + m_delay;
        while (std::chrono::steady_clock::now() < until && !cancel.cancelled()) {
          std::this_thread::sleep_for(std::chrono::milliseconds(2));
        }
      }
      backends::EvalResult result;
      result.device = "fake";
      if (cancel.cancelled()) {
        result.failure = core::make_failure(core::FailureKind::cancelled, "evaluate", "cancelled");
        results.push_back(result);
        continue;
      }
      const bool reverify = request.command == backends::EvalCommand::verify;
      {
        std::lock_guard lock(m_mutex);
        ++(reverify ? m_verifications : m_evaluations)[core::source_key(request.kernel_source)];
        m_lanes.push_back(request.lane);
      }
      const std::string& source = request.kernel_source;
      std::smatch match;
      static const std::regex latency(R"(# latency: ([0-9.]+))");
      if (source.find("# compile_error") != std::string::npos) {
        result.failure = core::Failure{core::FailureKind::compile_error, "verify",
                                       "tile exceeds 128 partitions", 3};
      } else if (source.find("# runtime_error") != std::string::npos) {
        result.failure =
            core::Failure{core::FailureKind::runtime_error, "verify", "index out of bounds", 2};
      } else if (source.find("# wrong") != std::string::npos ||
                 (reverify && source.find("# fails_reverify") != std::string::npos)) {
        result.verified = true;
        result.failure =
            core::make_failure(core::FailureKind::mismatch, "verify", "seed 0 differs");
      } else if (std::regex_search(source, match, latency)) {
        result.verified = true;
        result.correct = true;
        double us = std::stod(match[1]);
        result.latency = backends::LatencyStats{us, us, us, {us}};
        result.metrics["total_time"] = us * 1e-6;
        result.bottleneck = "memory-bound";
        add_profile(source, us, result);
        // As a harness reports the inputs it measured (only when the problem names them).
        static const std::regex measured_shape(R"(# shape: (\S+))");
        std::smatch shape;
        if (std::regex_search(request.problem_source, shape, measured_shape)) {
          result.input_signature = shape[1].str();
        }
      } else {
        result.failure = core::make_failure(core::FailureKind::compile_error, "load", "no marker");
      }
      results.push_back(result);
    }
    return results;
  }

  // The "# hot:" and "# wait:" markers as a harness profile section.
  static void add_profile(const std::string& source, double latency_us,
                          backends::EvalResult& result) {
    static const std::regex hot(R"(# hot: (\w+) ([0-9.]+) ([0-9]+))");
    static const std::regex wait(R"(# wait: (\w+) (\w+) ([0-9.]+))");
    std::smatch found;
    nlohmann::json profile = nlohmann::json::object();
    if (std::regex_search(source, found, hot)) {
      backends::Hotspot spot;
      spot.line = 2;
      spot.text = "x = work(x)";  // the same statement in every kernel
      spot.engine = found[1].str();
      spot.time_us = std::stod(found[2]);
      spot.instructions = std::stol(found[3]);
      spot.share_pct = 100 * spot.time_us / latency_us;
      result
          .metrics[spot.engine == "dma" ? "dma_active_time" : spot.engine + "_engine_active_time"] =
          spot.time_us * 1e-6;
      profile["hotspots"] = {{{"line", spot.line},
                              {"text", spot.text},
                              {"engine", spot.engine},
                              {"share_pct", spot.share_pct},
                              {"time_us", spot.time_us},
                              {"instructions", spot.instructions}}};
      result.hotspots.push_back(spot);
    }
    if (std::regex_search(source, found, wait)) {
      backends::EngineWait idle{found[1].str(), found[2].str(), std::stod(found[3]), 2};
      profile["waits"] = {{{"engine", idle.engine},
                           {"waiting_on", idle.waiting_on},
                           {"idle_pct", idle.idle_pct},
                           {"line", idle.line}}};
      result.waits.push_back(idle);
    }
    if (!profile.empty()) {
      result.raw_json =
          nlohmann::json{{"schema", "autocomp-harness/1"}, {"status", "ok"}, {"profile", profile}}
              .dump();
    }
  }

  long evaluations_of(const std::string& source) const {
    std::lock_guard lock(m_mutex);
    auto it = m_evaluations.find(core::source_key(source));
    return it == m_evaluations.end() ? 0 : it->second;
  }
  long verifications_of(const std::string& source) const {
    std::lock_guard lock(m_mutex);
    auto it = m_verifications.find(core::source_key(source));
    return it == m_verifications.end() ? 0 : it->second;
  }
  long signatures() const {
    std::lock_guard lock(m_mutex);
    return m_signatures;
  }
  std::vector<backends::Lane> lanes() const {
    std::lock_guard lock(m_mutex);
    return m_lanes;
  }
  long total_evaluations() const {
    std::lock_guard lock(m_mutex);
    long total = 0;
    for (const auto& [key, count] : m_evaluations) {
      total += count;
    }
    return total;
  }
  std::size_t largest_batch() const {
    std::lock_guard lock(m_mutex);
    return m_largest_batch;
  }

 private:
  int m_slots;
  std::chrono::milliseconds m_delay;
  mutable std::mutex m_mutex;
  std::map<std::string, long> m_evaluations;
  std::map<std::string, long> m_verifications;
  long m_signatures = 0;
  std::vector<backends::Lane> m_lanes;
  long m_batches = 0;
  std::size_t m_largest_batch = 0;
};

// The kernel a request was about: the last fenced block of its user message.
inline std::string kernel_in(const llm::CompletionRequest& request) {
  const std::string& text = request.messages.back().content;
  auto open = text.rfind("```python\n");
  if (open == std::string::npos) {
    return "";
  }
  open += 10;
  auto close = text.find("```", open);
  return text.substr(open, close - open);
}

inline std::string fenced(const std::string& source) {
  return "```python\n" + source + "```\n";
}

// A responder for FakeProvider: plans are "speed it up"; the implementation of a parent and the
// repair of a failed kernel come from tables keyed by source (a missing entry answers with text
// holding no code).
struct Script {
  std::map<std::string, std::string> implement;  // parent source -> child source
  std::map<std::string, std::string> repair;     // failed source -> repaired source
  std::string plan = "Speed it up by fusing the loops.";
  std::chrono::milliseconds delay{0};

  llm::FakeProvider::Responder responder() const {
    Script copy = *this;
    return [copy](const llm::CompletionRequest& request) -> core::Result<llm::Completion> {
      if (copy.delay.count() > 0) {
        std::this_thread::sleep_for(copy.delay);
      }
      llm::Completion completion;
      if (request.purpose == "plan") {
        completion.text = copy.plan;
      } else {
        const auto& table = request.purpose == "repair" ? copy.repair : copy.implement;
        auto it = table.find(kernel_in(request));
        completion.text = it == table.end() ? "I cannot help." : fenced(it->second);
      }
      completion.provider = "fake";
      return completion;
    };
  }
};

inline SearchConfig small_config(const std::string& root) {
  SearchConfig config;
  config.kernel_source = root;
  config.problem_source = "def inputs(seed):\n    return {}\n";
  config.beam = 1;
  config.plans = 1;
  config.impls = 1;
  config.iterations = 1;
  config.seed = 7;
  // The learning loop adds LLM calls; tests of it turn it on (engine_memory_test).
  config.memory = false;
  config.reflexions = 0;
  return config;
}

struct Rig {
  std::shared_ptr<FakeBackend> backend = std::make_shared<FakeBackend>();
  // A real store, in memory; resuming tests share `db` between rigs.
  std::shared_ptr<store::Store> db{store::Store::open(":memory:").value()};
  std::shared_ptr<llm::FakeProvider> provider = std::make_shared<llm::FakeProvider>("fake", 4);

  SearchServices services() const {
    SearchServices services;
    services.backend = backend;
    services.store = parts_of(db);
    services.facts = RunFacts{"kernel.py", "problem.py", "fake", {"fake"}};
    services.providers = {provider};
    services.prompts = std::shared_ptr<const PromptFactory>(
        make_template_prompt_factory(std::string(AUTOCOMP_SOURCE_DIR) + "/prompts"));
    return services;
  }

  // The target's lessons, newest first.
  std::vector<std::string> lessons(const std::string& target) const {
    std::vector<std::string> out;
    const std::vector<store::Lesson> stored = db->memory().lessons(target, 16).value();
    for (const auto& lesson : stored) {
      out.push_back(lesson.text);
    }
    return out;
  }
  // The run's reflexions, oldest first.
  std::vector<store::Reflexion> reflexions(const std::string& run_id) const {
    auto recent = db->memory().recent_reflexions(run_id, 10).value();
    return {recent.rbegin(), recent.rend()};
  }
  std::vector<store::Beam> beams(const std::string& run_id) const {
    return db->runs().get_beams(run_id).value();
  }
  store::RunStatus status(const std::string& run_id) const {
    return db->runs().get_run(run_id).value()->status;
  }
};

}  // namespace autocomp::search::engine::testing
