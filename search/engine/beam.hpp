#pragma once

#include <map>
#include <string>
#include <vector>

#include "search/engine/candidate.hpp"
#include "search/engine/search_config.hpp"
#include "search/engine/strategy.hpp"

namespace autocomp::search::engine {

// How much slower than its parent a child may be in `iteration` (1-based): early_slack during the
// first slack_iterations iterations, 1 afterwards.
double slack_for(int iteration, const SearchConfig& config);

// A child may enter the beam when it is correct, not a duplicate, and faster than its parent by
// more than the required gain (required_gain_pct, engine/gain.hpp; strictly faster when it is
// 0), or within the slack while the slack applies.
bool accepts(const Candidate& child, const Candidate& parent, int iteration,
             const SearchConfig& config);
// The same against a bare latency measured on a deterministic backend (config.min_gain or 0).
bool accepts(const Candidate& child, double parent_latency_us, int iteration,
             const SearchConfig& config);

// The next beam: the best `beam_size` of the old beam plus the accepted children, by latency.
// Ties keep the old member (and among children, the earlier origin). A key appears at most once.
// Divergence guard: when `divergence` > 1, a kernel more than `divergence` times slower than the
// best is left out, so the next step works from the best instead (counted in `*diverged`).
std::vector<Candidate> select_next_beam(const std::vector<Candidate>& old_beam,
                                        const std::vector<Candidate>& accepted, int beam_size,
                                        double divergence = 0, int* diverged = nullptr);

// Beam search (issue #5): a generation of at most `beam` kernels; a child passes the gate when
// accepts() says so against its own parent; the next generation is select_next_beam() of the old
// one and the children that passed, with the divergence guard. When the guard leaves places free,
// they are refilled from the batch's next-best correct children within the guard's bound (a
// child slower than its own parent included), so the next iteration runs at full width when
// such kernels exist.
class BeamStrategy : public SearchStrategy {
 public:
  explicit BeamStrategy(const SearchConfig& config) : m_config(config) {}

  void start(const Candidate& root) override;
  bool restore(const store::Beam& stored, const std::map<std::string, Candidate>& known) override;
  std::vector<Candidate> generate(int iteration) override;
  bool admits(const Candidate& child) const override;
  Selection notify(int iteration, const std::vector<Candidate>& children) override;
  std::vector<Candidate> generation() const override { return m_beam; }

 private:
  // Fills free places of `next` (best first) after the divergence guard.
  void refill(std::vector<Candidate>& next, const std::vector<Candidate>& children) const;

  const SearchConfig& m_config;
  std::vector<Candidate> m_beam;
  int m_iteration = 0;  // of the batch in flight
};

}  // namespace autocomp::search::engine
