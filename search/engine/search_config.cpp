#include "search/engine/search_config.hpp"

#include "core/targets.hpp"

namespace autocomp::search::engine {

namespace {

core::Failure bad(const std::string& message) {
  return core::make_failure(core::FailureKind::invalid_argument, "config", message);
}

}  // namespace

core::Status validate(const SearchConfig& config) {
  if (config.kernel_source.empty()) {
    return bad("the kernel source is empty");
  }
  if (config.problem_source.empty()) {
    return bad("the problem source is empty");
  }
  if (config.beam < 1 || config.plans < 1 || config.impls < 1) {
    return bad("beam, plans and impls must each be at least 1");
  }
  if (config.iterations < 0) {
    return bad("iterations must not be negative");
  }
  if (config.dropout < 0 || config.dropout > 1) {
    return bad("dropout must lie between 0 and 1");
  }
  if (config.repair_tries < 0) {
    return bad("repair tries must not be negative");
  }
  if (config.early_slack < 1) {
    return bad("the early slack must be at least 1");
  }
  if (config.lesson_limit < 0 || config.reflexions < 0) {
    return bad("lesson_limit and reflexions must not be negative");
  }
  if (config.divergence != 0 && !(config.divergence > 1)) {
    return bad(
        "divergence must be 0 (off) or greater than 1 (1.5 drops members 50% slower than the "
        "best)");
  }
  if (config.min_gain && !(*config.min_gain >= 0 && *config.min_gain < 100)) {
    return bad("min_gain is a percentage of the parent's latency: at least 0 and below 100");
  }
  if (!core::is_known_target(config.target)) {
    return bad("target must be " + core::known_targets_text() + ", not '" + config.target + "'");
  }
  if (auto refused = core::namespace_problem(config.target, config.kernel_source)) {
    return bad("the kernel: " + *refused);
  }
  if (config.proposers.empty()) {
    return bad("at least one proposer is needed");
  }
  if (config.warmup < 0 || config.iters < 1) {
    return bad("warmup must be >= 0 and iters >= 1");
  }
  if (config.confirm_top_k < 1) {
    return bad("confirm_top_k must be at least 1");
  }
  if (config.max_device_s && !(*config.max_device_s > 0)) {
    return bad("max_device_seconds must be positive");
  }
  return core::ok_status();
}

}  // namespace autocomp::search::engine
