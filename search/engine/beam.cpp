#include "search/engine/beam.hpp"

#include <spdlog/spdlog.h>

#include <algorithm>
#include <set>
#include <string>

#include "search/engine/gain.hpp"

namespace autocomp::search::engine {

double slack_for(int iteration, const SearchConfig& config) {
  return iteration <= config.slack_iterations ? std::max(1.0, config.early_slack) : 1.0;
}

namespace {

bool accepts_with_gain(const Candidate& child, double parent_latency_us, double gain_pct,
                       int iteration, const SearchConfig& config) {
  if (!child.correct() || child.duplicate) {
    return false;
  }
  const double slack = slack_for(iteration, config);
  if (slack > 1.0) {
    return child.latency_us() <= parent_latency_us * slack;
  }
  if (gain_pct > 0) {
    return child.latency_us() <= parent_latency_us * (1 - gain_pct / 100);
  }
  return child.latency_us() < parent_latency_us;
}

}  // namespace

bool accepts(const Candidate& child, const Candidate& parent, int iteration,
             const SearchConfig& config) {
  return accepts_with_gain(child, parent.latency_us(), required_gain_pct(parent, child, config),
                           iteration, config);
}

bool accepts(const Candidate& child, double parent_latency_us, int iteration,
             const SearchConfig& config) {
  return accepts_with_gain(child, parent_latency_us, config.min_gain.value_or(0), iteration,
                           config);
}

std::vector<Candidate> select_next_beam(const std::vector<Candidate>& old_beam,
                                        const std::vector<Candidate>& accepted, int beam_size,
                                        double divergence, int* diverged) {
  struct Entry {
    const Candidate* candidate;
    int rank;  // 0: old member, 1: child
    std::size_t order;
  };
  std::vector<Entry> pool;
  for (std::size_t i = 0; i < old_beam.size(); ++i) {
    pool.push_back({&old_beam[i], 0, i});
  }
  std::vector<const Candidate*> children;
  for (const auto& child : accepted) {
    children.push_back(&child);
  }
  std::sort(children.begin(), children.end(),
            [](const Candidate* a, const Candidate* b) { return a->origin < b->origin; });
  for (std::size_t i = 0; i < children.size(); ++i) {
    pool.push_back({children[i], 1, i});
  }
  std::stable_sort(pool.begin(), pool.end(), [](const Entry& a, const Entry& b) {
    if (a.candidate->latency_us() != b.candidate->latency_us()) {
      return a.candidate->latency_us() < b.candidate->latency_us();
    }
    if (a.rank != b.rank) {
      return a.rank < b.rank;
    }
    return a.order < b.order;
  });
  std::vector<Candidate> next;
  std::set<std::string> keys;
  int left_out = 0;
  for (const auto& entry : pool) {
    if (static_cast<int>(next.size()) >= beam_size) {
      break;
    }
    if (!keys.insert(entry.candidate->key).second) {
      continue;
    }
    if (divergence > 1 && !next.empty() &&
        entry.candidate->latency_us() > next.front().latency_us() * divergence) {
      ++left_out;  // sorted by latency: the best is next.front()
      continue;
    }
    next.push_back(*entry.candidate);
  }
  if (diverged != nullptr) {
    // Only the kernels that would have taken a free place count.
    const int free_places = beam_size - static_cast<int>(next.size());
    *diverged = std::min(left_out, free_places);
  }
  return next;
}

void BeamStrategy::start(const Candidate& root) {
  m_beam = {root};
  m_iteration = 0;
}

bool BeamStrategy::restore(const store::Beam& stored,
                           const std::map<std::string, Candidate>& known) {
  std::vector<Candidate> beam;
  for (const auto& key : stored.members) {
    auto it = known.find(key);
    if (it == known.end() || !it->second.correct()) {
      spdlog::warn("stored beam of iteration {} names an unknown kernel {}; restarting it",
                   stored.iteration, key);
      return false;
    }
    beam.push_back(it->second);
  }
  if (beam.empty()) {
    return false;
  }
  m_beam = std::move(beam);
  m_iteration = stored.iteration;
  return true;
}

std::vector<Candidate> BeamStrategy::generate(int iteration) {
  m_iteration = iteration;
  return m_beam;
}

bool BeamStrategy::admits(const Candidate& child) const {
  const auto member = static_cast<std::size_t>(child.origin.member);
  return member < m_beam.size() && accepts(child, m_beam[member], m_iteration, m_config);
}

void BeamStrategy::refill(std::vector<Candidate>& next,
                          const std::vector<Candidate>& children) const {
  if (next.empty()) {
    return;
  }
  const double bound = next.front().latency_us() * m_config.divergence;
  std::set<std::string> keys;
  for (const auto& member : next) {
    keys.insert(member.key);
  }
  std::vector<const Candidate*> spare;
  for (const auto& child : children) {
    if (child.correct() && !child.duplicate && !child.key.empty() && keys.count(child.key) == 0 &&
        child.latency_us() <= bound) {
      spare.push_back(&child);
    }
  }
  std::stable_sort(spare.begin(), spare.end(), [](const Candidate* a, const Candidate* b) {
    if (a->latency_us() != b->latency_us()) {
      return a->latency_us() < b->latency_us();
    }
    return a->origin < b->origin;
  });
  for (const Candidate* child : spare) {
    if (static_cast<int>(next.size()) >= m_config.beam) {
      break;
    }
    if (keys.insert(child->key).second) {
      next.push_back(*child);
    }
  }
}

Selection BeamStrategy::notify(int iteration, const std::vector<Candidate>& children) {
  m_iteration = iteration;
  std::vector<Candidate> accepted;
  for (const auto& child : children) {
    if (!child.key.empty() && admits(child)) {
      accepted.push_back(child);
    }
  }
  Selection selection;
  selection.accepted = static_cast<long>(accepted.size());
  int diverged = 0;
  selection.next =
      select_next_beam(m_beam, accepted, m_config.beam, m_config.divergence, &diverged);
  selection.diverged = diverged;
  if (diverged > 0) {
    refill(selection.next, children);
  }
  m_beam = selection.next;
  return selection;
}

}  // namespace autocomp::search::engine
