#pragma once

#include <map>
#include <optional>
#include <string>
#include <string_view>
#include <vector>

#include "core/result.hpp"
#include "search/prompts/library.hpp"

namespace autocomp::search::prompts {

// What the simulator knows about one NKI call (prompts/generated/facts.json "instructions").
struct InstructionFact {
  std::string signature;         // "nisa.bn_stats(dst, data, mask, dtype)" (nki, NKI 0.3+)
  std::string legacy_signature;  // "y = nisa.bn_stats(data, mask, dtype)" (neuronxcc.nki)
  std::string summary;           // one line
  std::string engine;            // "VectorE", ...; empty when it depends on arguments
};

// The hardware numbers and instruction signatures the prompts state, generated from the simulator
// by backends/nkisim/export_facts.py into prompts/generated/facts.json, so that prompts and
// simulator never disagree.
class HardwareFacts {
 public:
  static constexpr std::string_view k_file = "generated/facts.json";

  static core::Result<HardwareFacts> parse(std::string_view json_text, std::string_view origin);
  static core::Result<HardwareFacts> load(const PromptLibrary& library);

  // Placeholder values for arch/ and isa/ notes: every number of the target ("hbm_gbps_per_core",
  // "pass_cost_vs_vector_GpSimdE", ...), every shared limit ("bn_stats_fmax") and operator list
  // ("activation_functions"), formatted for
  // prose. Unknown target: an invalid_argument failure.
  core::Result<std::map<std::string, std::string>> values(const std::string& target) const;
  const InstructionFact* instruction(const std::string& name) const;
  const std::map<std::string, InstructionFact>& instructions() const { return m_instructions; }

 private:
  std::map<std::string, std::map<std::string, std::string>> m_targets;
  std::map<std::string, std::string> m_limits;
  std::map<std::string, InstructionFact> m_instructions;
};

}  // namespace autocomp::search::prompts
