#include "backends/harness_output.hpp"

#include <nlohmann/json.hpp>

#include "core/process.hpp"

namespace autocomp::backends {
namespace {

using nlohmann::json;

std::string last_nonempty_line(const std::string& text) {
  std::size_t end = text.size();
  while (end > 0) {
    std::size_t start = text.rfind('\n', end - 1);
    std::size_t begin = start == std::string::npos ? 0 : start + 1;
    std::string line = text.substr(begin, end - begin);
    while (!line.empty() && (line.back() == '\r' || line.back() == ' ' || line.back() == '\t')) {
      line.pop_back();
    }
    if (!line.empty()) {
      return line;
    }
    if (start == std::string::npos) {
      break;
    }
    end = start;
  }
  return {};
}

core::Failure harness_failure(const std::string& what, const std::string& stderr_text,
                              const std::string& process_end) {
  std::string message = what;
  if (!process_end.empty()) {
    message += " (harness " + process_end + ")";
  }
  std::string tail = core::tail_text(stderr_text, k_stderr_tail_bytes);
  if (tail.empty()) {
    message += "; stderr was empty";
  } else {
    message += "; stderr tail:\n" + tail;
  }
  return core::make_failure(core::FailureKind::harness_error, "harness", std::move(message));
}

double number_or(const json& object, const char* key, double fallback) {
  if (!object.is_object()) {
    return fallback;
  }
  auto it = object.find(key);
  if (it == object.end() || !it->is_number()) {
    return fallback;
  }
  return it->get<double>();
}

std::string string_or(const json& object, const char* key, std::string fallback = {}) {
  if (!object.is_object()) {
    return fallback;
  }
  auto it = object.find(key);
  if (it == object.end() || !it->is_string()) {
    return fallback;
  }
  return it->get<std::string>();
}

const json* member(const json& object, const char* key) {
  if (!object.is_object()) {
    return nullptr;
  }
  auto it = object.find(key);
  if (it == object.end() || it->is_null()) {
    return nullptr;
  }
  return &*it;
}

void read_number_map(const json* object, std::map<std::string, double>& out) {
  if (object == nullptr || !object->is_object()) {
    return;
  }
  for (const auto& [name, value] : object->items()) {
    if (value.is_number()) {
      out[name] = value.get<double>();
    } else if (value.is_boolean()) {
      out[name] = value.get<bool>() ? 1.0 : 0.0;
    }
  }
}

std::vector<int> int_list(const json* array) {
  std::vector<int> out;
  if (array == nullptr || !array->is_array()) {
    return out;
  }
  for (const auto& value : *array) {
    if (value.is_number_integer()) {
      out.push_back(value.get<int>());
    }
  }
  return out;
}

int int_or(const json& object, const char* key, int fallback) {
  if (!object.is_object()) {
    return fallback;
  }
  auto it = object.find(key);
  if (it == object.end() || !it->is_number_integer()) {
    return fallback;
  }
  return it->get<int>();
}

// PROTOCOL.md "receipt": every field optional.
void read_receipt(const json& object, Receipt& receipt) {
  receipt.device = string_or(object, "device", receipt.device);
  receipt.target = string_or(object, "target", receipt.target);
  receipt.harness_version = string_or(object, "harness_version", receipt.harness_version);
  receipt.simulator_version = string_or(object, "simulator_version");
  receipt.neff_hash = string_or(object, "neff_hash");
  receipt.profile_format = string_or(object, "profile_format");
  receipt.profile_schema = string_or(object, "profile_schema");
  receipt.input_signature = string_or(object, "input_signature");
  receipt.job = string_or(object, "job");
  receipt.node = string_or(object, "node");
  receipt.warmup = int_or(object, "warmup", 0);
  receipt.iters = int_or(object, "iters", 0);
  receipt.seeds = int_list(member(object, "seeds"));
  if (const json* sdk = member(object, "sdk"); sdk != nullptr && sdk->is_object()) {
    for (const auto& [name, value] : sdk->items()) {
      if (value.is_string()) {
        receipt.sdk[name] = value.get<std::string>();
      }
    }
  }
}

void read_hotspots(const json* rows, std::vector<Hotspot>& out) {
  if (rows == nullptr || !rows->is_array()) {
    return;
  }
  for (const auto& row : *rows) {
    if (!row.is_object()) {
      continue;
    }
    Hotspot spot;
    spot.line = int_or(row, "line", 0);
    spot.text = string_or(row, "text");
    spot.engine = string_or(row, "engine");
    spot.share_pct = number_or(row, "share_pct", 0);
    spot.time_us = number_or(row, "time_us", 0);
    spot.instructions = static_cast<long>(number_or(row, "instructions", 0));
    out.push_back(std::move(spot));
  }
}

void read_waits(const json* rows, std::vector<EngineWait>& out) {
  if (rows == nullptr || !rows->is_array()) {
    return;
  }
  for (const auto& row : *rows) {
    if (!row.is_object()) {
      continue;
    }
    EngineWait wait;
    wait.engine = string_or(row, "engine");
    wait.waiting_on = string_or(row, "waiting_on");
    wait.idle_pct = number_or(row, "idle_pct", 0);
    wait.line = int_or(row, "line", 0);
    out.push_back(std::move(wait));
  }
}

core::Result<json> parse_last_object(const std::string& stdout_text, const std::string& stderr_text,
                                     const std::string& process_end) {
  std::string line = last_nonempty_line(stdout_text);
  if (line.empty()) {
    return harness_failure("the harness printed no result line", stderr_text, process_end);
  }
  json document = json::parse(line, nullptr, /*allow_exceptions=*/false);
  if (document.is_discarded() || !document.is_object()) {
    std::string shown = line.size() > 200 ? line.substr(0, 200) + "..." : line;
    return harness_failure("the harness's last stdout line is not a JSON object: " + shown,
                           stderr_text, process_end);
  }
  return document;
}

}  // namespace

EvalResult parse_harness_output(const std::string& stdout_text, const std::string& stderr_text,
                                const std::string& process_end) {
  EvalResult result;
  auto parsed = parse_last_object(stdout_text, stderr_text, process_end);
  if (!parsed.ok()) {
    result.failure = parsed.failure();
    return result;
  }
  const json& document = parsed.value();
  result.raw_json = last_nonempty_line(stdout_text);

  std::string schema = string_or(document, "schema");
  if (schema.rfind("autocomp-harness/", 0) != 0) {
    result.failure = harness_failure("the harness's result has an unknown schema '" + schema + "'",
                                     stderr_text, process_end);
    return result;
  }
  result.harness_version = string_or(document, "harness_version");
  result.device = string_or(document, "device");
  result.target = string_or(document, "target");
  result.receipt.device = result.device;
  result.receipt.target = result.target;
  result.receipt.harness_version = result.harness_version;
  if (const json* receipt = member(document, "receipt"); receipt && receipt->is_object()) {
    read_receipt(*receipt, result.receipt);
  }
  if (const json* costs = member(document, "cost_table"); costs && costs->is_object()) {
    result.receipt.cost_table = string_or(*costs, "name");
    result.receipt.cost_table_digest = string_or(*costs, "digest");
  }
  if (const json* problem = member(document, "problem"); problem && problem->is_object()) {
    result.input_signature = string_or(*problem, "signature");
  }
  if (result.input_signature.empty()) {
    result.input_signature = result.receipt.input_signature;
  } else if (result.receipt.input_signature.empty()) {
    result.receipt.input_signature = result.input_signature;
  }

  if (const json* verify = member(document, "verify")) {
    result.verified = true;
    if (auto it = verify->find("correct"); it != verify->end() && it->is_boolean()) {
      result.correct = it->get<bool>();
    }
    if (const json* seeds = member(*verify, "seeds"); seeds != nullptr && seeds->is_array()) {
      for (const auto& entry : *seeds) {
        if (!entry.is_object()) {
          continue;
        }
        SeedCheck check;
        check.seed = static_cast<int>(number_or(entry, "seed", 0));
        if (auto it = entry.find("ok"); it != entry.end() && it->is_boolean()) {
          check.ok = it->get<bool>();
        }
        check.max_abs_err = number_or(entry, "max_abs_err", 0);
        check.rel_l2_err = number_or(entry, "rel_l2_err", 0);
        check.message = string_or(entry, "message");
        result.seeds.push_back(std::move(check));
      }
    }
  }

  if (const json* benchmark = member(document, "benchmark")) {
    if (const json* latency = member(*benchmark, "latency_us"); latency && latency->is_object()) {
      LatencyStats stats;
      if (const json* samples = member(*latency, "samples"); samples && samples->is_array()) {
        for (const auto& sample : *samples) {
          if (sample.is_number()) {
            stats.samples_us.push_back(sample.get<double>());
          }
        }
      }
      stats.min_us = number_or(*latency, "min", 0);
      stats.median_us = number_or(*latency, "median", 0);
      stats.max_us = number_or(*latency, "max", 0);
      result.latency = std::move(stats);
    }
  }

  if (const json* profile = member(document, "profile")) {
    read_number_map(member(*profile, "metrics"), result.metrics);
    read_number_map(member(*profile, "roofline"), result.roofline);
    result.bottleneck = string_or(*profile, "bottleneck");
    result.bottleneck_engine = string_or(*profile, "bottleneck_engine");
    if (const json* effects = member(*profile, "compiler_effects");
        effects && effects->is_array()) {
      for (const auto& effect : *effects) {
        if (effect.is_string()) {
          result.compiler_effects.push_back(effect.get<std::string>());
        }
      }
    }
    read_hotspots(member(*profile, "hotspots"), result.hotspots);
    read_waits(member(*profile, "waits"), result.waits);
    // The physical cores of a logical core (LNC): each core's end as a metric, so the figures
    // are stored and shown with the others ("core0_end_us", ..., "lnc").
    if (const json* ends = member(*profile, "core_end_us"); ends && ends->is_array()) {
      std::size_t core = 0;
      for (const auto& end : *ends) {
        if (end.is_number() && core < 8) {
          result.metrics["core" + std::to_string(core++) + "_end_us"] = end.get<double>();
        }
      }
      if (auto lnc = profile->find("lnc"); lnc != profile->end() && lnc->is_number()) {
        result.metrics["lnc"] = lnc->get<double>();
      }
    }
  }

  if (const json* timings = member(document, "timings_ms"); timings && timings->is_object()) {
    for (const auto& [name, value] : timings->items()) {
      if (value.is_number()) {
        result.steps.push_back(StepTiming{"harness." + name, value.get<double>()});
      }
    }
  }

  std::string status = string_or(document, "status");
  const json* failure = member(document, "failure");
  if (status == "ok" && failure == nullptr) {
    return result;
  }
  if (status != "failed" && status != "ok") {
    result.failure = harness_failure("the harness's result has an unknown status '" + status + "'",
                                     stderr_text, process_end);
    return result;
  }
  if (failure == nullptr || !failure->is_object()) {
    result.failure =
        harness_failure("the harness reported a failure without details", stderr_text, process_end);
    return result;
  }
  core::Failure value;
  std::string kind_name = string_or(*failure, "kind");
  auto kind = core::failure_kind_from_string(kind_name);
  value.kind = kind.value_or(core::FailureKind::harness_error);
  value.stage = string_or(*failure, "stage");
  value.message = string_or(*failure, "message");
  if (!kind) {
    value.message = "unknown failure kind '" + kind_name + "': " + value.message;
  }
  if (auto it = failure->find("line"); it != failure->end() && it->is_number_integer()) {
    value.line = it->get<int>();
  }
  result.failure = std::move(value);
  return result;
}

core::Result<HarnessVersion> parse_version_output(const std::string& stdout_text,
                                                  const std::string& stderr_text) {
  auto parsed = parse_last_object(stdout_text, stderr_text, "");
  if (!parsed.ok()) {
    return parsed.failure();
  }
  HarnessVersion version{string_or(parsed.value(), "schema"),
                         string_or(parsed.value(), "harness_version")};
  if (version.harness_version.empty()) {
    return harness_failure("the harness's version output has no harness_version", stderr_text, "");
  }
  return version;
}

core::Result<int> count_neuron_cores(const std::string& neuron_ls_json) {
  json document = json::parse(neuron_ls_json, nullptr, /*allow_exceptions=*/false);
  auto failure = [](const std::string& why) {
    return core::make_failure(core::FailureKind::unavailable, "connect",
                              "cannot read neuron-ls output: " + why);
  };
  if (document.is_discarded()) {
    return failure("not JSON");
  }
  // Either a list of devices or an object holding one under a known key.
  const json* devices = &document;
  if (document.is_object()) {
    devices = nullptr;
    for (const char* key : {"neuron_devices", "devices", "neuron_device"}) {
      if (auto it = document.find(key); it != document.end() && it->is_array()) {
        devices = &*it;
        break;
      }
    }
  }
  if (devices == nullptr || !devices->is_array()) {
    return failure("no device list");
  }
  int cores = 0;
  for (const auto& device : *devices) {
    if (!device.is_object()) {
      continue;
    }
    int count = 0;
    for (const char* key : {"nc_count", "neuroncore_count", "neuron_cores", "core_count"}) {
      if (auto it = device.find(key); it != device.end() && it->is_number_integer()) {
        count = it->get<int>();
        break;
      }
    }
    cores += count;
  }
  if (cores <= 0) {
    return failure("no NeuronCores listed");
  }
  return cores;
}

}  // namespace autocomp::backends
