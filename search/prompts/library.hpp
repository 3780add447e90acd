#pragma once

#include <map>
#include <string>
#include <string_view>

#include "core/result.hpp"

namespace autocomp::search::prompts {

// The folder holding prompt templates, menus and ISA notes, resolved in this order:
// $AUTOCOMP_PROMPTS_DIR, the source tree's prompts/ (AUTOCOMP_SOURCE_DIR), then
// <install prefix>/share/autocomp-mcp/prompts (found next to the running binary, or /usr/local).
// The first existing folder wins; a failure lists every place that was tried.
core::Result<std::string> resolve_prompts_dir();

// Read access to one prompts folder. Files are read from disk on every call so that a user can
// edit them during a run without rebuilding or restarting.
class PromptLibrary {
 public:
  explicit PromptLibrary(std::string dir) : m_dir(std::move(dir)) {}
  // Resolves the folder with resolve_prompts_dir() when `dir` is empty.
  static core::Result<PromptLibrary> open(const std::string& dir = "");

  const std::string& dir() const { return m_dir; }
  // `relative` is a path inside the folder, e.g. "templates/plan.md". A missing file is an
  // io_error naming the full path.
  core::Result<std::string> read(const std::string& relative) const;
  bool exists(const std::string& relative) const;

 private:
  std::string m_dir;
};

// Replaces every {{name}} in `text` with values.at(name). Whitespace inside the braces is allowed
// ("{{ name }}"). A section {{#name}}...{{/name}} is kept when values[name] is non-empty and
// dropped otherwise (sections do not nest). A placeholder without a value is an invalid_argument
// failure naming it and `origin`, so that a typo in an edited template is reported rather than sent
// to a model. Runs of three or more newlines left by empty sections collapse to one blank line.
core::Result<std::string> render_template(std::string_view text,
                                          const std::map<std::string, std::string>& values,
                                          std::string_view origin = "template");

}  // namespace autocomp::search::prompts
