#include "search/engine/input_signature.hpp"

#include <spdlog/spdlog.h>

#include <algorithm>
#include <chrono>
#include <list>
#include <map>
#include <mutex>
#include <optional>

#include "core/hash.hpp"

namespace autocomp::search::engine {

namespace {

// Enough for every problem a server sees in a day; the oldest answers go first beyond it.
constexpr std::size_t k_remembered_limit = 256;
constexpr auto k_probe_timeout = std::chrono::seconds(120);

bool remembered_failure(core::FailureKind kind) {
  switch (kind) {
    case core::FailureKind::problem_error:
    case core::FailureKind::compile_error:
    case core::FailureKind::runtime_error:
    case core::FailureKind::invalid_argument:
    case core::FailureKind::harness_error:
      return true;  // the same harness says the same thing about the same problem
    default:
      return false;
  }
}

class Memo {
 public:
  std::optional<std::string> find(const std::string& key) {
    std::lock_guard lock(m_mutex);
    auto it = m_answers.find(key);
    if (it == m_answers.end()) {
      return std::nullopt;
    }
    m_order.splice(m_order.begin(), m_order, it->second.second);
    return it->second.first;
  }
  void put(const std::string& key, const std::string& signature) {
    std::lock_guard lock(m_mutex);
    if (auto it = m_answers.find(key); it != m_answers.end()) {
      it->second.first = signature;
      return;
    }
    m_order.push_front(key);
    m_answers.emplace(key, std::make_pair(signature, m_order.begin()));
    while (m_answers.size() > k_remembered_limit) {
      m_answers.erase(m_order.back());
      m_order.pop_back();
    }
  }
  std::size_t size() {
    std::lock_guard lock(m_mutex);
    return m_answers.size();
  }

 private:
  std::mutex m_mutex;
  std::list<std::string> m_order;  // most recently used first
  std::map<std::string, std::pair<std::string, std::list<std::string>::iterator>> m_answers;
};

Memo& memo() {
  static Memo instance;
  return instance;
}

}  // namespace

std::string input_signature(backends::Backend& backend, const backends::EvalRequest& like,
                            const core::CancelToken& cancel) {
  std::string seeds;
  for (int seed : like.seeds) {
    seeds += std::to_string(seed) + ",";
  }
  const std::string key =
      core::sha256_hex(core::source_key(like.problem_source) + "\n" + like.problem_filename + "\n" +
                       backend.identity() + "\n" + backend.device() + "\n" +
                       backend.harness_version() + "\n" + like.target + "\n" + seeds);
  if (auto known = memo().find(key)) {
    return *known;
  }

  backends::EvalRequest request;
  request.command = backends::EvalCommand::signature;
  request.problem_source = like.problem_source;
  request.problem_filename = like.problem_filename;
  request.kernel_filename = like.kernel_filename;
  request.target = like.target;
  request.seeds = like.seeds;
  request.lane = like.lane;
  request.timeout = std::min<std::chrono::milliseconds>(like.timeout, k_probe_timeout);
  std::vector<backends::EvalResult> results;
  try {
    results = backend.evaluate({request}, cancel, {});
  } catch (const std::exception& error) {
    spdlog::warn("input signature probe failed: {}", error.what());
    return "";
  }
  if (results.size() != 1) {
    return "";
  }
  const backends::EvalResult& result = results.front();
  if (result.failure) {
    if (remembered_failure(result.failure->kind)) {
      memo().put(key, "");
    }
    spdlog::debug("no input signature: {}", result.failure->describe());
    return "";
  }
  memo().put(key, result.input_signature);
  return result.input_signature;
}

std::size_t remembered_signatures() {
  return memo().size();
}

}  // namespace autocomp::search::engine
