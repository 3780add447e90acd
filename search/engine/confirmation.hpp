#pragma once

#include <memory>
#include <mutex>
#include <optional>
#include <string>
#include <vector>

#include "backends/backend.hpp"
#include "search/engine/candidate.hpp"
#include "search/engine/evaluation_service.hpp"
#include "search/engine/search_config.hpp"
#include "search/engine/stop_control.hpp"
#include "search/store/calibrations.hpp"
#include "search/store/evaluation_cache.hpp"

// The hardware-confirmed search: the simulator screens every child of an iteration, the best
// `confirm_top_k` correct ones (by simulated latency) are measured on a confirming backend (a
// device), and the beam ranks by device latency wherever one exists. A child that was not measured
// ranks by its simulated latency scaled by the median device/sim ratio of the run's pairs when it
// was screened, so every figure the search compares is on the device's scale (without any pair
// yet: the simulated latency itself). The input kernel is measured first, so there is one. Every
// (simulated, measured) pair is stored as a device pair with the run id; the rank correlation and
// ratio spread of the pairs tell whether the simulator still ranks like the device.
namespace autocomp::search::engine {

// One kernel's simulated and measured latency.
struct LatencyPair {
  double simulated_us = 0;
  double measured_us = 0;
};

// Below this rank correlation (with at least k_min_pairs_for_correlation pairs) or above this
// ratio spread (max/min of measured/simulated) the simulator no longer ranks like the device.
inline constexpr double k_min_rank_correlation = 0.5;
inline constexpr std::size_t k_min_pairs_for_correlation = 4;
inline constexpr double k_max_ratio_spread = 1.5;

// Spearman's rank correlation of the simulated and measured latencies (ties take their average
// rank); nullopt with fewer than two pairs or when either side is constant.
std::optional<double> spearman(const std::vector<LatencyPair>& pairs);

// The median of `values` (the mean of the middle two for an even count); 0 for none.
double median_of(std::vector<double> values);

// How well the simulator agreed with the device over a set of pairs.
struct Agreement {
  std::size_t pairs = 0;
  std::optional<double> rank_correlation;
  double ratio_min = 0;  // measured / simulated
  double ratio_median = 0;
  double ratio_max = 0;
  bool drifted = false;
  std::string warning;  // why `drifted`, in words; "" otherwise

  double ratio_spread() const { return ratio_min > 0 ? ratio_max / ratio_min : 0; }
};

// The agreement of `pairs` (pairs without a positive latency on both sides are skipped).
// `device_spec` names the backend the suggestion to recalibrate points at.
Agreement agreement_of(const std::vector<LatencyPair>& pairs, const std::string& device_spec);

// Runs a search's confirmations. Used from the runner's thread only, between batches.
class Confirmation {
 public:
  struct Options {
    std::shared_ptr<backends::Backend> device;  // the confirming backend
    std::string device_spec;                    // the spec it was made from (for advice)
    std::shared_ptr<store::EvaluationCache> cache;
    std::shared_ptr<store::Calibrations> pairs;  // where pairs are stored; null: kept here only
    std::string run_id;
    std::string sim_identity;       // the screening backend's identity
    backends::EvalRequest request;  // the search's evaluation request (source filled per kernel)
  };

  Confirmation(Options options, const SearchConfig& config, const StopControl& stop);

  // Measures the input kernel on the device (its figure becomes the baseline's).
  void confirm_input(Candidate& root);
  // Measures the top-k correct originals of a batch by simulated latency and puts every correct
  // child on the device's scale. A child the device finds wrong (a failure of the kernel, not of
  // the transport) is marked failed, so it never enters the beam.
  void confirm(std::vector<Candidate>& children);
  // Puts a kernel on the device's scale: its stored measurement of this run, else its estimate.
  void place(Candidate& candidate) const;
  // Takes back the run's stored pairs (a resumed run).
  void restore();

  double device_seconds() const;  // wall seconds spent waiting for the confirming backend
  long measured() const;          // kernels measured on it by this process
  Agreement agreement() const;
  // A sentence for the run's status message: device seconds, measurements, the agreement.
  std::string summary() const;

 private:
  // Measures `chosen` on the device (store first, then one batch) unless the device budget is
  // spent, records the pairs and sets each kernel's device figure.
  void measure(std::vector<Candidate*> chosen);
  bool budget_spent();
  double median_ratio() const;

  Options m_options;
  const SearchConfig& m_config;
  const StopControl& m_stop;
  EvaluationService m_service;
  std::optional<store::EvalSite> m_site;
  std::string m_problem_key;
  bool m_budget_noted = false;

  mutable std::mutex m_mutex;  // guards the figures below (read by progress and status)
  std::vector<std::pair<std::string, LatencyPair>> m_pairs;  // by kernel key, oldest first
  double m_device_s = 0;
  long m_measured = 0;
};

}  // namespace autocomp::search::engine
