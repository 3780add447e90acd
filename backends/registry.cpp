#include <array>
#include <optional>

#include "backends/backend.hpp"
#include "backends/calibrated_backend.hpp"
#include "backends/hosts_file.hpp"
#include "backends/local_backend.hpp"
#include "backends/slurm_backend.hpp"
#include "backends/spec.hpp"
#include "backends/ssh_backend.hpp"

namespace autocomp::backends {
namespace {

using Factory = core::Result<std::shared_ptr<Backend>> (*)(const std::vector<BackendSpec>&,
                                                           const BackendOptions&);

struct BackendEntry {
  std::string_view scheme;
  Factory factory;
  std::string_view summary;
};

// The one table of backends. A new backend is a source file with a factory plus a row here.
constexpr std::array<BackendEntry, 5> k_backends{{
    {"sim", make_local_backend, "the NKI simulator on this machine (default)"},
    {"local", make_local_backend, "the harness on this machine: local?device=sim|fake|neuron"},
    {"ssh", make_ssh_backend, "Trainium hosts over SSH: ssh://[user@]host[:port][?options]"},
    {"slurm", make_slurm_backend, "Slurm jobs from this machine: slurm:?partition=P[&options]"},
    {"slurm+ssh", make_slurm_backend,
     "Slurm jobs from a remote head node: slurm+ssh://[user@]head[:port]?partition=P"},
}};

}  // namespace

std::string_view to_string(EvalCommand command) {
  switch (command) {
    case EvalCommand::verify:
      return "verify";
    case EvalCommand::benchmark:
      return "benchmark";
    case EvalCommand::profile:
      return "profile";
    case EvalCommand::evaluate:
      return "evaluate";
    case EvalCommand::signature:
      return "signature";
  }
  return "evaluate";
}

std::string_view to_string(Lane lane) {
  return lane == Lane::background ? "background" : "interactive";
}

namespace {

std::string seed_ranges(const std::vector<int>& seeds) {
  std::string out;
  std::size_t i = 0;
  while (i < seeds.size()) {
    std::size_t j = i;
    while (j + 1 < seeds.size() && seeds[j + 1] == seeds[j] + 1) {
      ++j;
    }
    if (!out.empty()) {
      out += ",";
    }
    out += std::to_string(seeds[i]);
    if (j > i) {
      out += "-" + std::to_string(seeds[j]);
    }
    i = j + 1;
  }
  return out;
}

}  // namespace

std::string Receipt::summary() const {
  std::string out = device.empty() ? "?" : device;
  if (!target.empty()) {
    out += " " + target;
  }
  if (!simulator_version.empty()) {
    out += " nkisim " + simulator_version;
  }
  for (const char* component : {"nki", "neuronx-cc", "compiler"}) {
    if (auto it = sdk.find(component); it != sdk.end()) {
      out += " " + it->first + " " + it->second;
      break;
    }
  }
  if (!seeds.empty()) {
    out += " seeds " + seed_ranges(seeds);
  }
  if (iters > 0) {
    out += " x" + std::to_string(iters);
  }
  // The simulator's costs: a calibration profile's name, else the shipped table (a result from
  // before the harness reported its table priced with the shipped one too).
  if (cost_table.empty() ? device == "sim" : cost_table != "hidden") {
    out += cost_table.empty() || cost_table == "shipped" ? " shipped costs"
                                                         : " calibration " + cost_table;
  }
  if (!job.empty()) {
    out += " job " + job;
  }
  std::string where = !node.empty() ? node : host;
  if (!where.empty()) {
    out += " on " + where;
  }
  if (!harness_version.empty()) {
    out += " (harness " + harness_version + ")";
  }
  return out;
}

core::Result<std::shared_ptr<Backend>> make_backend(const std::string& spec_text,
                                                    const BackendOptions& options) {
  auto pieces = split_specs(spec_text.empty() ? "sim" : spec_text);
  if (pieces.empty()) {
    pieces.emplace_back("sim");
  }
  std::vector<BackendSpec> specs;
  auto add = [&specs](BackendSpec spec) -> std::optional<core::Failure> {
    if (!specs.empty() && spec.scheme != specs.front().scheme) {
      return core::make_failure(core::FailureKind::invalid_argument, "backend",
                                "cannot pool '" + specs.front().text + "' with '" + spec.text +
                                    "': only specs of the same kind form a pool");
    }
    specs.push_back(std::move(spec));
    return std::nullopt;
  };
  for (const auto& piece : pieces) {
    if (piece.rfind(k_hosts_file_prefix, 0) == 0) {
      auto hosts = read_hosts_file(piece.substr(k_hosts_file_prefix.size()));
      if (!hosts.ok()) {
        return hosts.failure();
      }
      for (auto& spec : hosts.value()) {
        if (auto failure = add(std::move(spec))) {
          return *failure;
        }
      }
      continue;
    }
    auto parsed = parse_spec(piece);
    if (!parsed.ok()) {
      return parsed.failure();
    }
    if (auto failure = add(std::move(parsed).value())) {
      return *failure;
    }
  }
  // "calibration=NAME|latest" is the same for every spec of a pool and is taken off before the
  // backend sees the spec: the table travels with each request (calibrated_backend.hpp).
  std::optional<std::string> calibration = specs.front().param("calibration");
  for (auto& spec : specs) {
    if (spec.param("calibration") != calibration) {
      return core::make_failure(core::FailureKind::invalid_argument, "backend",
                                "every spec of a pool must name the same calibration ('" +
                                    specs.front().text + "', '" + spec.text + "')");
    }
    spec.params.erase("calibration");
  }
  for (const auto& entry : k_backends) {
    if (entry.scheme == specs.front().scheme) {
      auto made = entry.factory(specs, options);
      if (!made.ok() || !calibration) {
        return made;
      }
      if (made.value()->device() != "sim") {
        return core::make_failure(core::FailureKind::invalid_argument, "backend",
                                  "invalid backend spec '" + specs.front().text +
                                      "': a calibration prices the simulator, but this backend "
                                      "runs on device '" +
                                      made.value()->device() + "'");
      }
      if (!options.resolve_calibration) {
        return core::make_failure(core::FailureKind::invalid_argument, "backend",
                                  "invalid backend spec '" + specs.front().text +
                                      "': calibration profiles are read from the store, which "
                                      "is not open here");
      }
      const std::string target = specs.front().param("target").value_or(options.default_target);
      auto table = options.resolve_calibration(*calibration, target);
      if (!table.ok()) {
        return table.failure();
      }
      return make_calibrated_backend(std::move(made).value(), std::move(table).value());
    }
  }
  std::string known;
  for (const auto& entry : k_backends) {
    known += (known.empty() ? "" : ", ") + std::string(entry.scheme);
  }
  return core::make_failure(core::FailureKind::invalid_argument, "backend",
                            "unknown backend '" + specs.front().scheme + "' in '" +
                                specs.front().text + "' (known: " + known +
                                "; or hosts:PATH for a hosts file of ssh:// hosts)");
}

}  // namespace autocomp::backends
