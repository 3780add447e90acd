#pragma once

#include <cstddef>
#include <string>

#include "backends/backend.hpp"
#include "core/result.hpp"

namespace autocomp::backends {

// How much of the harness's stderr a failure message quotes (the end, where a traceback is).
inline constexpr std::size_t k_stderr_tail_bytes = 2048;

// Turns the harness's output (PROTOCOL.md) into a result. The last non-empty stdout line must be
// the JSON object; sections and metrics may be missing. When there is no such line, or it is not
// a JSON object of the expected schema, the result carries a harness_error whose message says
// what was wrong, `process_end` (e.g. "exit code 1"), and the last k_stderr_tail_bytes of
// stderr. Fills the protocol fields only; identity, host and steps are the caller's.
EvalResult parse_harness_output(const std::string& stdout_text, const std::string& stderr_text,
                                const std::string& process_end = "");

struct HarnessVersion {
  std::string schema;
  std::string harness_version;
};

// Parses the output of `autocomp_harness.py version`: the last non-empty stdout line is
// {"schema": ..., "harness_version": ...}. A failure (harness_error) otherwise.
core::Result<HarnessVersion> parse_version_output(const std::string& stdout_text,
                                                  const std::string& stderr_text);

// The neuron-ls JSON (`neuron-ls -j`) gives devices with a NeuronCore count each; returns the
// total number of NeuronCores, or a failure when the text has no recognisable device list.
core::Result<int> count_neuron_cores(const std::string& neuron_ls_json);

}  // namespace autocomp::backends
