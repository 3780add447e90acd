#pragma once

// A verified, correct candidate measured at `us` microseconds: for tests of the beam's
// acceptance and selection, which look only at a candidate's key, origin and latency.

#include <string>

#include "search/engine/beam.hpp"

namespace autocomp::search::engine::testing {

inline Candidate measured(const std::string& key, double us, Origin origin = {}) {
  Candidate candidate;
  candidate.key = key;
  candidate.origin = origin;
  candidate.eval.verified = true;
  candidate.eval.correct = true;
  candidate.eval.latency = backends::LatencyStats{us, us, us, {us}};
  return candidate;
}

}  // namespace autocomp::search::engine::testing
