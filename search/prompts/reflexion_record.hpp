#pragma once

// A reflexion's fields as a value type of their own, so that the store can keep reflexions
// without depending on the prompt builder.

#include <optional>
#include <string>

namespace autocomp::search::prompts {

// A reflexion: what one attempt taught, in the fields templates/reflect.md asks for.
struct ReflexionRecord {
  std::optional<bool> diagnosis_right;  // was the plan's reading of the bottleneck right
  std::optional<bool> fix_worked;       // did the change make the kernel faster and keep it correct
  std::string expected;
  std::string actual;
  std::string lessons;
  std::string avoid;
  std::string try_next;
  std::string raw_text;  // the reply as received

  // True when at least one field other than raw_text is set.
  bool structured() const;
};

}  // namespace autocomp::search::prompts
