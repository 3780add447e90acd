#pragma once

#include <algorithm>
#include <array>
#include <optional>
#include <regex>
#include <string>
#include <string_view>
#include <vector>

namespace autocomp::core {

// The hardware targets the product accepts, oldest first. Every tool schema, option check and
// problem-file reading takes its list from here, so a new generation is added in one place
// (plus its prompts/arch and prompts/menus files and its simulator constants).
inline constexpr std::array<std::string_view, 3> k_known_targets = {"trn1", "trn2", "trn3"};

// The target used when neither the call, the problem file nor --target names one.
inline constexpr std::string_view k_default_target = "trn2";

inline bool is_known_target(std::string_view target) {
  return std::find(k_known_targets.begin(), k_known_targets.end(), target) != k_known_targets.end();
}

// The known targets as strings (for JSON schema enums).
inline std::vector<std::string> known_target_names() {
  return {k_known_targets.begin(), k_known_targets.end()};
}

// "trn1, trn2 or trn3", for messages and help texts.
inline std::string known_targets_text(std::string_view last_separator = " or ") {
  std::string text;
  for (std::size_t i = 0; i < k_known_targets.size(); ++i) {
    if (i > 0) {
      text += i + 1 == k_known_targets.size() ? std::string(last_separator) : std::string(", ");
    }
    text += k_known_targets[i];
  }
  return text;
}

// Why `target` cannot run a kernel with this source, or nothing: trn3 needs the `nki` namespace
// (NKI 0.3+). The harness applies the same rule on every device (harnesslib/sdkformats.py), so
// the candidates a search's model writes fail as compile errors; this copy refuses a user's
// kernel before any work starts (the evaluation tools, the search config). (The harness's other
// rule, trn1 needing `neuronxcc.nki`, holds on hardware only: the simulator models trn1 for
// either namespace.)
inline std::optional<std::string> namespace_problem(std::string_view target,
                                                    const std::string& kernel_source) {
  // The harness's reading of the imports (sdkformats.detect_namespace): `import neuronxcc.nki`,
  // `from neuronxcc import nki`, `from neuronxcc.nki.language import ...`.
  static const std::regex k_legacy_import(
      R"((^|\n)[ \t]*(import[ \t]+neuronxcc\.nki\b|from[ \t]+neuronxcc(\.\w+)*[ \t]+import\b))");
  if (target == "trn3" && std::regex_search(kernel_source, k_legacy_import)) {
    return std::string(
        "trn3 needs the `nki` namespace (NKI 0.3+, Neuron SDK 2.29+); `neuronxcc.nki` kernels "
        "run on trn1 and trn2 only: import nki, nki.isa and nki.language instead");
  }
  return std::nullopt;
}

}  // namespace autocomp::core
