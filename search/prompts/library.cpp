#include "search/prompts/library.hpp"

#include <cstdlib>
#include <filesystem>
#include <fstream>
#include <sstream>
#include <vector>

namespace autocomp::search::prompts {

namespace fs = std::filesystem;

namespace {

bool is_dir(const fs::path& path) {
  std::error_code error;
  return fs::is_directory(path, error);
}

}  // namespace

core::Result<std::string> resolve_prompts_dir() {
  if (const char* env = std::getenv("AUTOCOMP_PROMPTS_DIR"); env != nullptr && *env != '\0') {
    if (is_dir(env)) {
      return std::string(env);
    }
    // An explicit setting that points nowhere is a mistake worth reporting, not skipping.
    return core::make_failure(core::FailureKind::io_error, "prompts",
                              std::string("AUTOCOMP_PROMPTS_DIR=") + env + " is not a folder");
  }
  std::vector<fs::path> candidates;
#ifdef AUTOCOMP_SOURCE_DIR
  candidates.emplace_back(fs::path(AUTOCOMP_SOURCE_DIR) / "prompts");
#endif
  std::error_code error;
  const auto exe = fs::read_symlink("/proc/self/exe", error);
  if (!error) {
    candidates.push_back(exe.parent_path().parent_path() / "share" / "autocomp-mcp" / "prompts");
  }
  candidates.emplace_back("/usr/local/share/autocomp-mcp/prompts");
  candidates.emplace_back("/usr/share/autocomp-mcp/prompts");
  std::string tried;
  for (const auto& candidate : candidates) {
    if (is_dir(candidate)) {
      return candidate.string();
    }
    tried += (tried.empty() ? "" : ", ") + candidate.string();
  }
  return core::make_failure(core::FailureKind::io_error, "prompts",
                            "no prompts folder found (set AUTOCOMP_PROMPTS_DIR); tried " + tried);
}

core::Result<PromptLibrary> PromptLibrary::open(const std::string& dir) {
  if (!dir.empty()) {
    if (!is_dir(dir)) {
      return core::make_failure(core::FailureKind::io_error, "prompts",
                                "prompts folder " + dir + " does not exist");
    }
    return PromptLibrary(dir);
  }
  auto resolved = resolve_prompts_dir();
  if (!resolved.ok()) {
    return resolved.failure();
  }
  return PromptLibrary(resolved.value());
}

bool PromptLibrary::exists(const std::string& relative) const {
  std::error_code error;
  return fs::is_regular_file(fs::path(m_dir) / relative, error);
}

core::Result<std::string> PromptLibrary::read(const std::string& relative) const {
  const auto path = fs::path(m_dir) / relative;
  std::ifstream in(path, std::ios::binary);
  if (!in) {
    return core::make_failure(core::FailureKind::io_error, "prompts",
                              "cannot read prompt file " + path.string());
  }
  std::ostringstream text;
  text << in.rdbuf();
  std::string content = text.str();
  // Files edited on Windows keep working: prompts are assembled with LF only.
  std::string normalized;
  normalized.reserve(content.size());
  for (std::size_t i = 0; i < content.size(); ++i) {
    if (content[i] == '\r' && i + 1 < content.size() && content[i + 1] == '\n') {
      continue;
    }
    normalized += content[i];
  }
  return normalized;
}

namespace {

core::Failure template_failure(std::string_view origin, const std::string& why) {
  return core::make_failure(core::FailureKind::invalid_argument, "prompts",
                            std::string(origin) + ": " + why);
}

std::string_view trim_name(std::string_view name) {
  while (!name.empty() && name.front() == ' ') {
    name.remove_prefix(1);
  }
  while (!name.empty() && name.back() == ' ') {
    name.remove_suffix(1);
  }
  return name;
}

// Keeps or drops each {{#name}}...{{/name}} section depending on whether values[name] is empty.
core::Result<std::string> expand_sections(std::string_view text,
                                          const std::map<std::string, std::string>& values,
                                          std::string_view origin) {
  std::string out;
  std::size_t pos = 0;
  while (pos < text.size()) {
    const auto open = text.find("{{#", pos);
    if (open == std::string_view::npos) {
      out.append(text.substr(pos));
      break;
    }
    const auto open_end = text.find("}}", open + 3);
    if (open_end == std::string_view::npos) {
      return template_failure(origin, "unterminated '{{#'");
    }
    const auto name = std::string(trim_name(text.substr(open + 3, open_end - open - 3)));
    const auto closing = "{{/" + name + "}}";
    const auto close = text.find(closing, open_end + 2);
    if (close == std::string_view::npos) {
      return template_failure(origin, "section {{#" + name + "}} has no " + closing);
    }
    const auto it = values.find(name);
    if (it == values.end()) {
      return template_failure(origin, "unknown section {{#" + name + "}}");
    }
    out.append(text.substr(pos, open - pos));
    if (!it->second.empty()) {
      out.append(text.substr(open_end + 2, close - open_end - 2));
    }
    pos = close + closing.size();
  }
  return out;
}

}  // namespace

core::Result<std::string> render_template(std::string_view source,
                                          const std::map<std::string, std::string>& values,
                                          std::string_view origin) {
  auto expanded = expand_sections(source, values, origin);
  if (!expanded.ok()) {
    return expanded.failure();
  }
  const std::string_view text = expanded.value();
  std::string out;
  out.reserve(text.size() * 2);
  std::size_t pos = 0;
  while (pos < text.size()) {
    const auto open = text.find("{{", pos);
    if (open == std::string_view::npos) {
      out.append(text.substr(pos));
      break;
    }
    const auto close = text.find("}}", open + 2);
    if (close == std::string_view::npos) {
      return template_failure(origin, "unterminated '{{'");
    }
    out.append(text.substr(pos, open - pos));
    const auto name = trim_name(text.substr(open + 2, close - open - 2));
    const auto it = values.find(std::string(name));
    if (it == values.end()) {
      return template_failure(origin, "unknown placeholder {{" + std::string(name) + "}}");
    }
    // Values are inserted verbatim and never rescanned, so code holding "{{" is safe.
    out += it->second;
    pos = close + 2;
  }
  // Collapse the blank lines left behind by empty sections.
  std::string collapsed;
  collapsed.reserve(out.size());
  int newlines = 0;
  for (char c : out) {
    if (c == '\n') {
      if (++newlines > 2) {
        continue;
      }
    } else {
      newlines = 0;
    }
    collapsed += c;
  }
  while (!collapsed.empty() && (collapsed.back() == '\n' || collapsed.back() == ' ')) {
    collapsed.pop_back();
  }
  collapsed += '\n';
  return collapsed;
}

}  // namespace autocomp::search::prompts
