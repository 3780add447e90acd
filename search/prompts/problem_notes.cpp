#include "search/prompts/problem_notes.hpp"

#include <algorithm>
#include <cstdlib>
#include <regex>
#include <set>

#include "core/text.hpp"

namespace autocomp::search::prompts {

namespace {

std::string trim(std::string_view text) {
  const auto first = text.find_first_not_of(" \t\r\n");
  if (first == std::string_view::npos) {
    return {};
  }
  const auto last = text.find_last_not_of(" \t\r\n");
  return std::string(text.substr(first, last - first + 1));
}

std::vector<std::string> split(std::string_view text, char separator) {
  std::vector<std::string> parts;
  std::size_t pos = 0;
  while (pos <= text.size()) {
    auto end = text.find(separator, pos);
    if (end == std::string_view::npos) {
      end = text.size();
    }
    parts.emplace_back(text.substr(pos, end - pos));
    pos = end + 1;
  }
  return parts;
}

// The first paragraph of the module docstring, on one line.
std::string docstring_summary(const std::string& source) {
  static const std::regex k_doc(R"(^\s*(?:"""|''')([\s\S]*?)(?:"""|'''))");
  std::smatch match;
  if (!std::regex_search(source, match, k_doc)) {
    return {};
  }
  std::string text = match[1].str();
  if (auto blank = text.find("\n\n"); blank != std::string::npos) {
    text = text.substr(0, blank);
  }
  for (auto& c : text) {
    if (c == '\n') {
      c = ' ';
    }
  }
  return trim(text);
}

// The right-hand side of a module-level assignment `NAME = value`, without a trailing comment.
std::string module_value(const std::string& source, const std::string& name) {
  const std::regex pattern("(^|\\n)" + name + R"(\s*=\s*([^\n#]+))");
  std::smatch match;
  if (!std::regex_search(source, match, pattern)) {
    return {};
  }
  return trim(match[2].str());
}

// The source of a module-level function, up to the next module-level statement.
std::string function_source(const std::string& source, const std::string& name) {
  const std::string head = "def " + name + "(";
  std::size_t start = source.rfind("\n" + head);
  start =
      start == std::string::npos ? (source.rfind(head, 0) == 0 ? 0 : std::string::npos) : start + 1;
  if (start == std::string::npos) {
    return {};
  }
  std::size_t end = source.size();
  std::size_t pos = source.find('\n', start);
  while (pos != std::string::npos && pos + 1 < source.size()) {
    const char next = source[pos + 1];
    if (next != ' ' && next != '\t' && next != '\n' && next != '#' && next != ')') {
      end = pos + 1;
      break;
    }
    pos = source.find('\n', pos + 1);
  }
  return trim(std::string_view(source).substr(start, end - start));
}

// Module-level assignments of plain literals (numbers, strings, tuples of numbers) whose names
// `code` uses as whole words, as "NAME = value" lines in source order. Names the notes state
// otherwise (KERNEL, RTOL, ATOL, GRID) are left out.
std::string used_constants(const std::string& source, const std::string& code) {
  static const std::regex k_assignment(R"((^|\n)([A-Za-z_][A-Za-z0-9_]*)[ \t]*=[ \t]*([^\n#]+))");
  static const std::regex k_literal(R"([-+0-9eE.*/() ,]+|"[^"\\]*"|'[^'\\]*'|True|False)");
  std::string out;
  std::set<std::string> seen;
  for (auto it = std::sregex_iterator(source.begin(), source.end(), k_assignment);
       it != std::sregex_iterator(); ++it) {
    const std::string name = (*it)[2].str();
    const std::string value = trim((*it)[3].str());
    if (name == "KERNEL" || name == "RTOL" || name == "ATOL" || name == "GRID" ||
        !std::regex_match(value, k_literal) ||
        value.find_first_of("0123456789\"'TF") == std::string::npos) {
      continue;
    }
    const std::regex word("(^|[^A-Za-z0-9_])" + name + "($|[^A-Za-z0-9_])");
    if (std::regex_search(code, word) && seen.insert(name).second) {
      out += name + " = " + value + "\n";
    }
  }
  return out;
}

std::string bounded(const std::string& code, std::size_t max_chars) {
  if (code.size() <= max_chars) {
    return code;
  }
  return core::utf8_prefix(code, max_chars) + "\n# [... " +
         std::to_string(code.size() - max_chars) + " more characters]";
}

// The parameter names of a module-level function, in order ("def forward(a, b):" -> a, b).
std::vector<std::string> parameter_names(const std::string& source, const std::string& name) {
  const std::string code = function_source(source, name);
  const auto open = code.find('(');
  const auto close = code.find(')', open == std::string::npos ? 0 : open);
  std::vector<std::string> names;
  if (open == std::string::npos || close == std::string::npos) {
    return names;
  }
  for (const auto& part : split(std::string_view(code).substr(open + 1, close - open - 1), ',')) {
    std::string param = trim(part);
    param = trim(param.substr(0, param.find_first_of(":=")));
    if (!param.empty() && param.front() != '*') {
      names.push_back(param);
    }
  }
  return names;
}

// A reference module (NKIBench's format): get_inputs() and forward(...), bound by position.
bool is_reference_module(const std::string& source) {
  return !function_source(source, "get_inputs").empty() &&
         !function_source(source, "forward").empty();
}

// The inputs in the order a reference module binds them: forward's parameters when they name
// them, else input0, input1, ... by their number (a name sort would put input10 before input2).
void order_by_position(std::vector<InputSpec>& inputs, const std::vector<std::string>& params) {
  auto rank = [&](const InputSpec& spec) -> long long {
    for (std::size_t i = 0; i < params.size(); ++i) {
      if (params[i] == spec.name) {
        return static_cast<long long>(i);
      }
    }
    if (spec.name.rfind("input", 0) == 0 && spec.name.size() > 5 && spec.name.size() < 12 &&
        spec.name.find_first_not_of("0123456789", 5) == std::string::npos) {
      return std::stoll(spec.name.substr(5));
    }
    return 1LL << 40;
  };
  std::stable_sort(inputs.begin(), inputs.end(),
                   [&](const InputSpec& a, const InputSpec& b) { return rank(a) < rank(b); });
}

}  // namespace

std::vector<InputSpec> parse_input_signature(std::string_view signature) {
  std::vector<InputSpec> inputs;
  for (const auto& entry : split(signature, ';')) {
    const auto colon = entry.find(':');
    const auto open = entry.find('[', colon == std::string::npos ? 0 : colon);
    const auto close = entry.rfind(']');
    if (colon == std::string::npos || open == std::string::npos || close == std::string::npos ||
        close < open) {
      continue;
    }
    InputSpec spec;
    spec.name = trim(std::string_view(entry).substr(0, colon));
    spec.dtype = trim(std::string_view(entry).substr(colon + 1, open - colon - 1));
    bool valid = !spec.name.empty() && !spec.dtype.empty();
    const auto dims = std::string_view(entry).substr(open + 1, close - open - 1);
    if (!trim(dims).empty()) {
      for (const auto& dim : split(dims, ',')) {
        const auto text = trim(dim);
        if (text.empty() || text.find_first_not_of("0123456789") != std::string::npos) {
          valid = false;
          break;
        }
        spec.shape.push_back(std::stoll(text));
      }
    }
    if (valid) {
      inputs.push_back(std::move(spec));
    }
  }
  return inputs;
}

ProblemLaunch problem_launch(std::string_view problem_source) {
  const std::string source(problem_source);
  ProblemLaunch launch;
  if (const auto rtol = module_value(source, "RTOL"); !rtol.empty()) {
    char* end = nullptr;
    const double value = std::strtod(rtol.c_str(), &end);
    if (end != rtol.c_str() && (*end == '\0' || *end == ' ')) {
      launch.rtol = value;
    }
  }
  if (const auto grid = module_value(source, "GRID"); !grid.empty()) {
    static const std::regex k_number(R"(\d+)");
    long long programs = 1;
    for (auto it = std::sregex_iterator(grid.begin(), grid.end(), k_number);
         it != std::sregex_iterator(); ++it) {
      programs *= std::max(1LL, std::stoll(it->str().substr(0, 9)));
    }
    launch.programs = programs;
  }
  return launch;
}

std::string describe_problem(std::string_view problem_source, std::string_view input_signature,
                             std::size_t max_code_chars) {
  const std::string source(problem_source);
  std::string out;
  if (auto kernel = module_value(source, "KERNEL"); !kernel.empty()) {
    if (kernel.size() >= 2 && (kernel.front() == '"' || kernel.front() == '\'')) {
      kernel = kernel.substr(1, kernel.size() - 2);
    }
    out += "Kernel function: " + kernel + "\n";
  }
  if (auto summary = docstring_summary(source); !summary.empty()) {
    out += "Description: " + summary + "\n";
  }
  const bool reference_module = is_reference_module(source);
  auto inputs = parse_input_signature(input_signature);
  const bool by_position =
      reference_module || trim(module_value(source, "BIND")).find("position") != std::string::npos;
  if (by_position) {
    order_by_position(inputs, parameter_names(source, "forward"));
  }
  if (!inputs.empty()) {
    out += by_position
               ? "Inputs (as measured, in the order the kernel's parameters receive them; "
                 "in HBM):\n"
               : "Inputs (as measured, bound to the kernel's parameters by name; in HBM):\n";
    for (const auto& input : inputs) {
      std::string shape;
      for (const auto dim : input.shape) {
        shape += (shape.empty() ? "" : ", ") + std::to_string(dim);
      }
      out += "- " + input.name + ": " + input.dtype + " [" + shape + "]\n";
    }
  } else if (auto maker = function_source(source, reference_module ? "get_inputs" : "inputs");
             !maker.empty()) {
    out += "Inputs (made by the problem's " +
           std::string(reference_module ? "get_inputs" : "inputs") + "()):\n```python\n" +
           bounded(maker, max_code_chars / 2) + "\n```\n";
  }
  const auto rtol = module_value(source, "RTOL");
  const auto atol = module_value(source, "ATOL");
  const auto tolerance = module_value(source, "TOLERANCE");
  if (reference_module ? tolerance.find("elementwise") == std::string::npos
                       : tolerance.find("rel_l2") != std::string::npos) {
    const auto rel_l2 = module_value(source, "REL_L2");
    out +=
        "Tolerance: each output passes when ||out - ref||_2 < rel_l2 * ||ref||_2 (relative L2 "
        "error over the whole output) with rel_l2 = " +
        (rel_l2.empty() ? std::string("2e-5") : rel_l2) +
        "; a lower-precision dtype (bf16) must keep within it.\n";
  } else if (!rtol.empty() || !atol.empty()) {
    out +=
        "Tolerance: every output element must satisfy |out - ref| <= atol + rtol * |ref| with "
        "rtol = " +
        (rtol.empty() ? std::string("default") : rtol) +
        ", atol = " + (atol.empty() ? std::string("default") : atol) + ".\n";
  }
  const std::string reference_name = reference_module ? "forward" : "reference";
  const std::string transform =
      reference_module ? function_source(source, "transform_to_nki_inputs") : std::string();
  std::string users = function_source(source, reference_name) + "\n" + transform;
  if (inputs.empty()) {
    users += "\n" + function_source(source, reference_module ? "get_inputs" : "inputs");
  }
  if (auto constants = used_constants(source, users); !constants.empty()) {
    out += "Module constants the reference or inputs use:\n```python\n" + constants + "```\n";
  }
  if (auto reference = function_source(source, reference_name); !reference.empty()) {
    out += "Reference (numpy" +
           std::string(reference_module ? ", on the inputs get_inputs() makes" : "") +
           "; the kernel must compute the same):\n```python\n" +
           bounded(reference, max_code_chars) + "\n```\n";
  }
  if (!transform.empty()) {
    out +=
        "The kernel's arguments are transform_to_nki_inputs(get_inputs()) (its outputs are "
        "reshaped to the reference's shape):\n```python\n" +
        bounded(transform, max_code_chars / 2) + "\n```\n";
  }
  return trim(out);
}

}  // namespace autocomp::search::prompts
