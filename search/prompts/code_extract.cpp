#include "search/prompts/code_extract.hpp"

#include <algorithm>
#include <cctype>
#include <map>
#include <regex>
#include <set>

namespace autocomp::search::prompts {

namespace {

std::string normalize_newlines(std::string_view text) {
  std::string out;
  out.reserve(text.size());
  for (std::size_t i = 0; i < text.size(); ++i) {
    if (text[i] == '\r') {
      if (i + 1 < text.size() && text[i + 1] == '\n') {
        continue;
      }
      out += '\n';
      continue;
    }
    out += text[i];
  }
  return out;
}

// Removes <think>...</think> blocks; an unmatched closing tag drops everything before it, an
// unmatched opening tag everything after it.
std::string strip_reasoning(std::string text) {
  static const std::string k_open = "<think>";
  static const std::string k_close = "</think>";
  for (;;) {
    const auto open = text.find(k_open);
    const auto close = text.find(k_close);
    if (close != std::string::npos && (open == std::string::npos || close < open)) {
      text.erase(0, close + k_close.size());
      continue;
    }
    if (open == std::string::npos) {
      break;
    }
    if (close == std::string::npos) {
      text.erase(open);
      break;
    }
    text.erase(open, close + k_close.size() - open);
  }
  return text;
}

std::vector<std::string> split_lines(const std::string& text) {
  std::vector<std::string> lines;
  std::size_t pos = 0;
  while (pos <= text.size()) {
    auto end = text.find('\n', pos);
    if (end == std::string::npos) {
      lines.push_back(text.substr(pos));
      break;
    }
    lines.push_back(text.substr(pos, end - pos));
    pos = end + 1;
  }
  return lines;
}

std::string_view trim(std::string_view text) {
  while (!text.empty() && std::isspace(static_cast<unsigned char>(text.front()))) {
    text.remove_prefix(1);
  }
  while (!text.empty() && std::isspace(static_cast<unsigned char>(text.back()))) {
    text.remove_suffix(1);
  }
  return text;
}

std::size_t indentation(std::string_view line) {
  std::size_t n = 0;
  while (n < line.size() && (line[n] == ' ' || line[n] == '\t')) {
    ++n;
  }
  return n;
}

struct Block {
  std::string language;
  std::string code;
};

std::vector<Block> fenced_blocks(const std::vector<std::string>& lines) {
  std::vector<Block> blocks;
  std::size_t i = 0;
  while (i < lines.size()) {
    const auto stripped = trim(lines[i]);
    const bool fence =
        stripped.size() >= 3 && (stripped.substr(0, 3) == "```" || stripped.substr(0, 3) == "~~~");
    if (!fence) {
      ++i;
      continue;
    }
    const char fence_char = stripped[0];
    std::size_t fence_len = 0;
    while (fence_len < stripped.size() && stripped[fence_len] == fence_char) {
      ++fence_len;
    }
    Block block;
    block.language = std::string(trim(stripped.substr(fence_len)));
    std::transform(block.language.begin(), block.language.end(), block.language.begin(),
                   [](unsigned char c) { return static_cast<char>(std::tolower(c)); });
    ++i;
    std::vector<std::string> body;
    while (i < lines.size()) {
      const auto inner = trim(lines[i]);
      std::size_t run = 0;
      while (run < inner.size() && inner[run] == fence_char) {
        ++run;
      }
      if (run >= fence_len && run == inner.size()) {
        break;
      }
      body.push_back(lines[i]);
      ++i;
    }
    ++i;  // past the closing fence (or the end for an unterminated block)
    for (const auto& line : body) {
      block.code += line;
      block.code += '\n';
    }
    blocks.push_back(std::move(block));
  }
  return blocks;
}

bool defines_function(const std::string& code, std::string_view name) {
  if (name.empty()) {
    return code.find("def ") != std::string::npos;
  }
  const std::regex pattern("(^|\\n)[ \\t]*def[ \\t]+" + std::string(name) + "[ \\t]*\\(");
  return std::regex_search(code, pattern);
}

bool is_python_language(const std::string& language) {
  return language.empty() || language == "python" || language == "py" || language == "python3" ||
         language == "nki";
}

// Whether a line at column 0 reads like Python rather than prose.
bool looks_like_python(std::string_view line) {
  static const std::regex k_statement(
      R"(^(import\s|from\s+\S+\s+import\s|@|def\s|class\s|#|if\s|elif\s|else\s*:|for\s|while\s|with\s|try\s*:|except|finally\s*:|return\b|assert\s|raise\s|pass\b|[\)\]\}]))");
  static const std::regex k_assignment(R"(^[A-Za-z_][A-Za-z0-9_\.\[\], ]*(\+|-|\*|/)?=[^=])");
  static const std::regex k_call(R"(^[A-Za-z_][A-Za-z0-9_\.]*\()");
  const std::string text(line);
  return std::regex_search(text, k_statement) || std::regex_search(text, k_assignment) ||
         std::regex_search(text, k_call);
}

// The Python region of an unfenced reply: from the first line that starts code to the last line
// before prose resumes at column 0.
std::string unfenced_code(const std::vector<std::string>& lines) {
  std::size_t first = lines.size();
  for (std::size_t i = 0; i < lines.size(); ++i) {
    const auto& line = lines[i];
    if (indentation(line) == 0 && !trim(line).empty() && looks_like_python(line) &&
        trim(line).front() != '#') {
      first = i;
      break;
    }
  }
  if (first == lines.size()) {
    return {};
  }
  // Comment lines right above the first statement belong to the code.
  while (first > 0 && indentation(lines[first - 1]) == 0 && !trim(lines[first - 1]).empty() &&
         trim(lines[first - 1]).front() == '#') {
    --first;
  }
  std::size_t last = first;
  for (std::size_t i = first; i < lines.size(); ++i) {
    const auto& line = lines[i];
    if (trim(line).empty()) {
      continue;
    }
    if (indentation(line) > 0 || looks_like_python(line)) {
      last = i;
      continue;
    }
    break;
  }
  std::string code;
  for (std::size_t i = first; i <= last; ++i) {
    code += lines[i];
    code += '\n';
  }
  return code;
}

std::string dedent_and_finish(const std::string& code) {
  auto lines = split_lines(code);
  std::size_t common = std::string::npos;
  for (const auto& line : lines) {
    if (trim(line).empty()) {
      continue;
    }
    common = std::min(common, indentation(line));
  }
  if (common == std::string::npos) {
    common = 0;
  }
  std::string out;
  for (auto& line : lines) {
    // Trailing whitespace is never meaningful in Python and makes hashes unstable.
    while (!line.empty() && (line.back() == ' ' || line.back() == '\t')) {
      line.pop_back();
    }
    out += line.size() >= common ? line.substr(common) : std::string();
    out += '\n';
  }
  while (out.size() >= 2 && out[out.size() - 1] == '\n' && out[out.size() - 2] == '\n') {
    out.pop_back();
  }
  while (!out.empty() && out.front() == '\n') {
    out.erase(0, 1);
  }
  return out;
}

core::Failure extract_failure(std::string message) {
  return core::make_failure(core::FailureKind::invalid_argument, "extract", std::move(message));
}

}  // namespace

core::Result<std::string> extract_kernel_code(std::string_view reply,
                                              std::string_view function_name) {
  const auto text = strip_reasoning(normalize_newlines(reply));
  const auto lines = split_lines(text);
  const auto blocks = fenced_blocks(lines);

  std::vector<const Block*> candidates;
  for (const auto& block : blocks) {
    if (is_python_language(block.language)) {
      candidates.push_back(&block);
    }
  }
  if (candidates.empty()) {
    for (const auto& block : blocks) {
      candidates.push_back(&block);
    }
  }
  const Block* best = nullptr;
  for (const auto* block : candidates) {
    if (defines_function(block->code, function_name) &&
        (best == nullptr || block->code.size() > best->code.size())) {
      best = block;
    }
  }
  if (best != nullptr) {
    return dedent_and_finish(best->code);
  }
  if (!blocks.empty()) {
    // Fenced code that never defines the kernel: a fragment or the wrong function.
    bool any_def = false;
    for (const auto* block : candidates) {
      any_def = any_def || defines_function(block->code, {});
    }
    if (!function_name.empty() && any_def) {
      return extract_failure("the reply's code does not define the kernel function '" +
                             std::string(function_name) + "'");
    }
  }
  const auto code = unfenced_code(lines);
  if (!code.empty() && defines_function(code, function_name)) {
    return dedent_and_finish(code);
  }
  if (!function_name.empty() && !code.empty() && defines_function(code, {})) {
    return extract_failure("the reply's code does not define the kernel function '" +
                           std::string(function_name) + "'");
  }
  return extract_failure("no kernel code found in the reply (expected one ```python block)");
}

std::string extract_plan(std::string_view reply, std::size_t max_chars) {
  const auto text = strip_reasoning(normalize_newlines(reply));
  auto lines = split_lines(text);
  static const std::regex k_pleasantry(
      R"(^(sure|certainly|okay|ok|of course|absolutely|great|here is|here's|below is)\b.*)",
      std::regex::icase);
  std::size_t first = 0;
  while (first < lines.size()) {
    const std::string line(trim(lines[first]));
    if (line.empty()) {
      ++first;
      continue;
    }
    // A short introductory sentence ending in ':' or '.' carries no plan content.
    if (std::regex_match(line, k_pleasantry) && line.size() < 160 &&
        (line.back() == ':' || line.back() == '.' || line.back() == '!')) {
      ++first;
      continue;
    }
    break;
  }
  std::string plan;
  for (std::size_t i = first; i < lines.size(); ++i) {
    plan += lines[i];
    plan += '\n';
  }
  plan = std::string(trim(plan));
  if (plan.size() > max_chars) {
    auto cut = plan.rfind('\n', max_chars);
    if (cut == std::string::npos || cut < max_chars / 2) {
      cut = max_chars;
    }
    plan = plan.substr(0, cut) + "\n[plan truncated]";
  }
  return plan;
}

std::string detect_kernel_function(std::string_view source) {
  const auto lines = split_lines(normalize_newlines(source));
  static const std::regex k_def(R"(^def\s+([A-Za-z_][A-Za-z0-9_]*)\s*\()");
  std::string first_def;
  bool decorated = false;
  for (const auto& line : lines) {
    if (line.rfind('@', 0) == 0) {
      decorated = decorated || line.find("jit") != std::string::npos ||
                  line.find("baremetal") != std::string::npos ||
                  line.find("benchmark") != std::string::npos ||
                  line.find("profile") != std::string::npos;
      continue;
    }
    std::smatch match;
    if (std::regex_search(line, match, k_def)) {
      if (decorated) {
        return match[1];
      }
      if (first_def.empty()) {
        first_def = match[1];
      }
    }
    if (!trim(line).empty()) {
      decorated = false;
    }
  }
  return first_def;
}

std::string function_signature(std::string_view source, std::string_view function_name) {
  if (function_name.empty()) {
    return {};
  }
  const auto lines = split_lines(normalize_newlines(source));
  const std::regex def("^\\s*def\\s+" + std::string(function_name) + "\\s*\\(");
  for (std::size_t i = 0; i < lines.size(); ++i) {
    if (!std::regex_search(lines[i], def)) {
      continue;
    }
    std::string signature;
    int depth = 0;
    for (std::size_t j = i; j < lines.size(); ++j) {
      const auto part = trim(lines[j]);
      if (!signature.empty()) {
        signature += ' ';
      }
      signature += part;
      for (char c : part) {
        depth += (c == '(') - (c == ')');
      }
      if (depth <= 0 && !part.empty() && part.back() == ':') {
        break;
      }
    }
    return signature;
  }
  return {};
}

std::vector<std::string> detect_instructions(std::string_view source) {
  const auto text = normalize_newlines(source);
  std::map<std::string, std::string> aliases = {
      {"nl", "nl"},
      {"nisa", "nisa"},
      {"nki.language", "nl"},
      {"nki.isa", "nisa"},
      {"neuronxcc.nki.language", "nl"},
      {"neuronxcc.nki.isa", "nisa"},
  };
  auto module_kind = [](const std::string& module) -> std::string {
    if (module == "nki.language" || module == "neuronxcc.nki.language") {
      return "nl";
    }
    if (module == "nki.isa" || module == "neuronxcc.nki.isa") {
      return "nisa";
    }
    return {};
  };
  static const std::regex k_import_as(R"(^\s*import\s+([\w\.]+)\s+as\s+(\w+))");
  static const std::regex k_from_import(R"(^\s*from\s+([\w\.]+)\s+import\s+(.+))");
  static const std::regex k_name_as(R"(^\s*(\w+)(?:\s+as\s+(\w+))?\s*$)");
  std::string code;  // the source without comments
  for (const auto& line : split_lines(text)) {
    const auto hash = line.find('#');
    const auto kept = hash == std::string::npos ? line : line.substr(0, hash);
    code += kept;
    code += '\n';
    std::smatch match;
    if (std::regex_search(kept, match, k_import_as)) {
      const auto kind = module_kind(match[1]);
      if (!kind.empty()) {
        aliases[match[2]] = kind;
      }
    } else if (std::regex_search(kept, match, k_from_import)) {
      const std::string package = match[1];
      std::string names = match[2];
      names.erase(
          std::remove_if(names.begin(), names.end(), [](char c) { return c == '(' || c == ')'; }),
          names.end());
      std::size_t pos = 0;
      while (pos <= names.size()) {
        auto comma = names.find(',', pos);
        if (comma == std::string::npos) {
          comma = names.size();
        }
        const std::string item = names.substr(pos, comma - pos);
        std::smatch name_match;
        if (std::regex_match(item, name_match, k_name_as)) {
          const auto kind = module_kind(package + "." + name_match[1].str());
          if (!kind.empty()) {
            aliases[name_match[2].matched ? name_match[2].str() : name_match[1].str()] = kind;
          }
        }
        pos = comma + 1;
      }
    }
  }
  static const std::regex k_call(R"(([A-Za-z_][\w\.]*)\.([A-Za-z_]\w*)\s*\()");
  std::set<std::string> found;
  for (auto it = std::sregex_iterator(code.begin(), code.end(), k_call);
       it != std::sregex_iterator(); ++it) {
    const auto& match = *it;
    if (match.position(0) > 0) {
      const char before = code[static_cast<std::size_t>(match.position(0)) - 1];
      if (std::isalnum(static_cast<unsigned char>(before)) || before == '_' || before == '.') {
        continue;
      }
    }
    const auto alias = aliases.find(match[1]);
    if (alias != aliases.end()) {
      found.insert(alias->second + "." + match[2].str());
    }
  }
  return {found.begin(), found.end()};
}

}  // namespace autocomp::search::prompts
