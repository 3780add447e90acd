#include "search/engine/confirmation.hpp"

#include <spdlog/spdlog.h>

#include <algorithm>
#include <chrono>
#include <cmath>
#include <cstdio>
#include <numeric>

#include "backends/cacheable.hpp"

namespace autocomp::search::engine {

namespace {

// Ranks from 1, ties sharing the average of their places.
std::vector<double> ranks_of(const std::vector<double>& values) {
  std::vector<std::size_t> order(values.size());
  std::iota(order.begin(), order.end(), 0);
  std::stable_sort(order.begin(), order.end(),
                   [&values](std::size_t a, std::size_t b) { return values[a] < values[b]; });
  std::vector<double> ranks(values.size());
  for (std::size_t i = 0; i < order.size();) {
    std::size_t j = i;
    while (j + 1 < order.size() && values[order[j + 1]] == values[order[i]]) {
      ++j;
    }
    const double rank = (static_cast<double>(i + j) / 2.0) + 1.0;
    for (std::size_t k = i; k <= j; ++k) {
      ranks[order[k]] = rank;
    }
    i = j + 1;
  }
  return ranks;
}

std::string fixed(double value, int decimals) {
  char buffer[64];
  std::snprintf(buffer, sizeof buffer, "%.*f", decimals, value);
  return buffer;
}

std::string significant(double value) {
  char buffer[64];
  std::snprintf(buffer, sizeof buffer, "%.3g", value);
  return buffer;
}

}  // namespace

std::optional<double> spearman(const std::vector<LatencyPair>& pairs) {
  if (pairs.size() < 2) {
    return std::nullopt;
  }
  std::vector<double> simulated;
  std::vector<double> measured;
  for (const auto& pair : pairs) {
    simulated.push_back(pair.simulated_us);
    measured.push_back(pair.measured_us);
  }
  // Pearson's correlation of the ranks (exact with ties).
  const std::vector<double> a = ranks_of(simulated);
  const std::vector<double> b = ranks_of(measured);
  const double n = static_cast<double>(a.size());
  const double mean = (n + 1) / 2;
  double cov = 0;
  double var_a = 0;
  double var_b = 0;
  for (std::size_t i = 0; i < a.size(); ++i) {
    cov += (a[i] - mean) * (b[i] - mean);
    var_a += (a[i] - mean) * (a[i] - mean);
    var_b += (b[i] - mean) * (b[i] - mean);
  }
  if (var_a <= 0 || var_b <= 0) {
    return std::nullopt;
  }
  return cov / std::sqrt(var_a * var_b);
}

double median_of(std::vector<double> values) {
  if (values.empty()) {
    return 0;
  }
  std::sort(values.begin(), values.end());
  const std::size_t mid = values.size() / 2;
  return values.size() % 2 == 1 ? values[mid] : (values[mid - 1] + values[mid]) / 2;
}

Agreement agreement_of(const std::vector<LatencyPair>& pairs, const std::string& device_spec) {
  std::vector<LatencyPair> usable;
  std::vector<double> ratios;
  for (const auto& pair : pairs) {
    if (pair.simulated_us > 0 && pair.measured_us > 0) {
      usable.push_back(pair);
      ratios.push_back(pair.measured_us / pair.simulated_us);
    }
  }
  Agreement out;
  out.pairs = usable.size();
  if (usable.empty()) {
    return out;
  }
  out.rank_correlation = spearman(usable);
  out.ratio_min = *std::min_element(ratios.begin(), ratios.end());
  out.ratio_max = *std::max_element(ratios.begin(), ratios.end());
  out.ratio_median = median_of(ratios);
  std::vector<std::string> why;
  if (out.pairs >= k_min_pairs_for_correlation && out.rank_correlation &&
      *out.rank_correlation < k_min_rank_correlation) {
    why.push_back("the simulator ranks kernels unlike the device (rank correlation " +
                  fixed(*out.rank_correlation, 2) + " over " + std::to_string(out.pairs) +
                  " pairs)");
  }
  if (out.ratio_spread() > k_max_ratio_spread) {
    why.push_back("the device/simulator ratio varies " + fixed(out.ratio_spread(), 2) + "x" + " (" +
                  significant(out.ratio_min) + " to " + significant(out.ratio_max) + ")");
  }
  if (!why.empty()) {
    out.drifted = true;
    std::string text = why.front();
    for (std::size_t i = 1; i < why.size(); ++i) {
      text += "; " + why[i];
    }
    out.warning = text + ": recalibrate with `autocomp-mcp calibrate --backend '" +
                  (device_spec.empty() ? std::string("SPEC") : device_spec) +
                  "'` and search on sim?calibration=latest";
  }
  return out;
}

Confirmation::Confirmation(Options options, const SearchConfig& config, const StopControl& stop)
    : m_options(std::move(options)),
      m_config(config),
      m_stop(stop),
      m_service(m_options.device, m_options.cache) {
  if (m_options.cache) {
    if (auto key = m_options.cache->put_workload(m_config.problem_source, ""); key.ok()) {
      m_problem_key = key.value();
    }
  }
}

double Confirmation::device_seconds() const {
  std::lock_guard lock(m_mutex);
  return m_device_s;
}

long Confirmation::measured() const {
  std::lock_guard lock(m_mutex);
  return m_measured;
}

Agreement Confirmation::agreement() const {
  std::vector<LatencyPair> pairs;
  {
    std::lock_guard lock(m_mutex);
    for (const auto& [key, pair] : m_pairs) {
      pairs.push_back(pair);
    }
  }
  return agreement_of(pairs, m_options.device_spec);
}

double Confirmation::median_ratio() const {
  std::vector<double> ratios;
  std::lock_guard lock(m_mutex);
  for (const auto& [key, pair] : m_pairs) {
    if (pair.simulated_us > 0 && pair.measured_us > 0) {
      ratios.push_back(pair.measured_us / pair.simulated_us);
    }
  }
  return median_of(std::move(ratios));
}

std::string Confirmation::summary() const {
  const Agreement agreement = this->agreement();
  std::string text = "confirmed on " + m_options.device_spec + ": " + std::to_string(measured()) +
                     " measured in " + fixed(device_seconds(), 1) + " device s";
  if (agreement.pairs > 0) {
    text += ", " + std::to_string(agreement.pairs) + " pairs, device/sim ratio " +
            significant(agreement.ratio_min) + "/" + significant(agreement.ratio_median) + "/" +
            significant(agreement.ratio_max) + " (min/median/max)";
    if (agreement.rank_correlation) {
      text += ", rank correlation " + fixed(*agreement.rank_correlation, 2);
    }
  }
  if (agreement.drifted) {
    text += "; " + agreement.warning;
  }
  return text;
}

bool Confirmation::budget_spent() {
  if (!m_config.max_device_s || device_seconds() < *m_config.max_device_s) {
    return false;
  }
  if (!m_budget_noted) {
    m_budget_noted = true;
    spdlog::info("run {}: device budget of {:g} s spent; the search goes on on the simulator",
                 m_options.run_id, *m_config.max_device_s);
  }
  return true;
}

void Confirmation::restore() {
  if (!m_options.pairs) {
    return;
  }
  auto stored = m_options.pairs->pairs_for_run(m_options.run_id);
  if (!stored.ok()) {
    spdlog::warn("could not load the run's device pairs: {}", stored.failure().describe());
    return;
  }
  std::lock_guard lock(m_mutex);
  for (const auto& pair : stored.value()) {
    m_pairs.emplace_back(pair.kernel_digest, LatencyPair{pair.simulated_us, pair.measured_us});
  }
}

void Confirmation::place(Candidate& candidate) const {
  if (!candidate.correct() || candidate.device_measured) {
    return;
  }
  {
    std::lock_guard lock(m_mutex);
    for (auto it = m_pairs.rbegin(); it != m_pairs.rend(); ++it) {
      if (it->first == candidate.key) {
        candidate.device_us = it->second.measured_us;
        candidate.device_measured = true;
        return;
      }
    }
  }
  const double ratio = median_ratio();
  if (ratio > 0) {
    candidate.device_us = candidate.evaluated_us() * ratio;
  }
}

void Confirmation::measure(std::vector<Candidate*> chosen) {
  if (chosen.empty() || budget_spent() || m_stop.stopping()) {
    return;
  }
  const auto started = std::chrono::steady_clock::now();
  if (!m_site) {
    m_site = m_service.site_for(m_options.request, m_stop.token());
  }
  std::vector<backends::EvalRequest> requests;
  std::vector<std::optional<backends::EvalResult>> results(chosen.size());
  std::vector<std::size_t> misses;
  for (std::size_t i = 0; i < chosen.size(); ++i) {
    backends::EvalRequest request = m_options.request;
    request.kernel_source = chosen[i]->source;
    if (auto found = m_service.lookup(request, *m_site); found.ok() && found.value()) {
      results[i] = found.value()->result;
    } else {
      misses.push_back(i);
      requests.push_back(std::move(request));
    }
  }
  if (!requests.empty()) {
    auto ran = m_service.run(requests, *m_site, m_stop.token());
    for (std::size_t j = 0; j < misses.size(); ++j) {
      if (ran[j].ran) {
        results[misses[j]] = std::move(ran[j].result);
      }
    }
  }
  const double spent =
      std::chrono::duration<double>(std::chrono::steady_clock::now() - started).count();
  {
    std::lock_guard lock(m_mutex);
    m_device_s += spent;
    m_measured += static_cast<long>(requests.size());
  }

  for (std::size_t i = 0; i < chosen.size(); ++i) {
    Candidate& candidate = *chosen[i];
    if (!results[i]) {
      continue;  // cancelled: stays estimated
    }
    const backends::EvalResult& result = *results[i];
    if (result.ok() && result.correct && result.latency) {
      const LatencyPair pair{candidate.evaluated_us(), result.latency->median_us};
      candidate.device_us = pair.measured_us;
      candidate.device_measured = true;
      {
        std::lock_guard lock(m_mutex);
        m_pairs.emplace_back(candidate.key, pair);
      }
      if (m_options.pairs) {
        store::DevicePair row;
        row.kernel_digest = candidate.key;
        row.kernel_source = candidate.source;
        row.kernel_name = m_config.kernel_name;
        row.problem_source = m_config.problem_source;
        row.problem_key = m_problem_key;
        row.target = m_config.target;
        row.device_spec = m_options.device->identity();
        row.sim_spec = m_options.sim_identity;
        row.measured_us = pair.measured_us;
        row.simulated_us = pair.simulated_us;
        row.run_id = m_options.run_id;
        if (auto stored = m_options.pairs->record_pair(row); !stored.ok()) {
          spdlog::warn("could not store a device pair: {}", stored.failure().describe());
        }
      }
    } else if (result.failure && backends::cacheable(result)) {
      // The kernel's own failure on the device: it must not win on the simulator's word.
      candidate.eval.failure =
          core::make_failure(result.failure->kind, "confirm",
                             "on the confirming device: " + result.failure->describe());
      candidate.device_us.reset();
    } else if (!result.ok() || !result.correct) {
      const std::string why = result.failure ? result.failure->describe() : "no latency";
      spdlog::warn("run {}: kernel {} could not be confirmed ({}); it ranks by its estimate",
                   m_options.run_id, candidate.key.substr(0, 12), why);
    }
  }
}

void Confirmation::confirm_input(Candidate& root) {
  if (!root.correct()) {
    return;
  }
  place(root);
  if (!root.device_measured) {
    measure({&root});
  }
}

void Confirmation::confirm(std::vector<Candidate>& children) {
  std::vector<Candidate*> eligible;
  for (auto& child : children) {
    if (!child.key.empty() && !child.duplicate && child.correct()) {
      place(child);  // a kernel measured before (by key) keeps that figure
      if (!child.device_measured) {
        eligible.push_back(&child);
      }
    }
  }
  std::stable_sort(eligible.begin(), eligible.end(), [](const Candidate* a, const Candidate* b) {
    return a->evaluated_us() < b->evaluated_us();
  });
  const auto k = static_cast<std::size_t>(std::max(0, m_config.confirm_top_k));
  if (eligible.size() > k) {
    eligible.resize(k);
  }
  measure(eligible);
  // The rest (and duplicates, which share an original's evaluation) on the device's scale, with
  // the ratio the new pairs give.
  for (auto& child : children) {
    if (!child.device_measured) {
      child.device_us.reset();
      place(child);
    }
  }
}

}  // namespace autocomp::search::engine
