#include "search/engine/gain.hpp"

#include <algorithm>
#include <cstdio>

namespace autocomp::search::engine {

bool deterministic(const backends::EvalResult& eval) {
  return eval.device == "sim" || eval.device == "fake";
}

double measured_spread_pct(const backends::EvalResult& eval) {
  if (deterministic(eval) || !eval.latency || eval.latency->median_us <= 0) {
    return 0;
  }
  const auto& latency = *eval.latency;
  double low = latency.min_us;
  double high = latency.max_us;
  if (!latency.samples_us.empty()) {
    const auto [lo, hi] = std::minmax_element(latency.samples_us.begin(), latency.samples_us.end());
    low = *lo;
    high = *hi;
  }
  return high > low ? 100.0 * (high - low) / latency.median_us : 0.0;
}

double noise_pct(const Candidate& parent, const Candidate& child) {
  return std::max(measured_spread_pct(parent.eval), measured_spread_pct(child.eval));
}

double required_gain_pct(const Candidate& parent, const Candidate& child,
                         const SearchConfig& config) {
  if (config.min_gain) {
    return *config.min_gain;
  }
  return noise_pct(parent, child);
}

std::string change_words(const Candidate& parent, const Candidate& child) {
  const double before = parent.latency_us();
  const double after = child.latency_us();
  if (before <= 0 || after <= 0) {
    return "correct";
  }
  const double pct = (after - before) / before * 100.0;
  const double noise = noise_pct(parent, child);
  char buffer[128];
  if (noise > 0 && std::abs(pct) < noise) {
    std::snprintf(buffer, sizeof(buffer), "within noise (latency %+.1f%%, measured spread %.1f%%)",
                  pct, noise);
  } else if (after == before) {
    std::snprintf(buffer, sizeof(buffer), "unchanged (identical latency)");
  } else {
    std::snprintf(buffer, sizeof(buffer), "%s (latency %+.2f%%)",
                  after < before ? "faster" : "slower", pct);
  }
  return buffer;
}

}  // namespace autocomp::search::engine
