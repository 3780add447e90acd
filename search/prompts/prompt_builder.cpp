#include "search/prompts/prompt_builder.hpp"

#include <algorithm>
#include <cctype>
#include <cstdio>
#include <set>

#include "core/text.hpp"
#include "search/prompts/code_extract.hpp"
#include "search/prompts/menu.hpp"

namespace autocomp::search::prompts {

namespace {

std::string format_number(double value) {
  char buffer[64];
  std::snprintf(buffer, sizeof(buffer), "%.4g", value);
  return buffer;
}

std::string format_us(double us) {
  if (us >= 1000) {
    return format_number(us / 1000) + " ms";
  }
  return format_number(us) + " us";
}

std::string truncate(const std::string& text, std::size_t max_chars) {
  if (text.size() <= max_chars) {
    return text;
  }
  return core::utf8_prefix(text, max_chars) + " [...]";
}

// Keeps the head and the tail of long tool output: compiler tracebacks put the cause at the end.
std::string truncate_middle(const std::string& text, std::size_t max_chars) {
  if (text.size() <= max_chars) {
    return text;
  }
  const std::size_t head = max_chars / 3;
  const std::size_t tail = max_chars - head;
  return core::utf8_prefix(text, head) + "\n[... " + std::to_string(text.size() - max_chars) +
         " characters omitted ...]\n" + core::utf8_suffix(text, tail);
}

std::string trim_trailing(std::string text) {
  while (!text.empty() && (text.back() == '\n' || text.back() == ' ' || text.back() == '\r')) {
    text.pop_back();
  }
  return text;
}

std::string bullet_list(const std::vector<std::string>& items, std::size_t max_chars_each) {
  std::string out;
  for (const auto& item : items) {
    std::string line = truncate(trim_trailing(item), max_chars_each);
    std::replace(line.begin(), line.end(), '\n', ' ');
    out += "- " + line + "\n";
  }
  return trim_trailing(out);
}

std::vector<std::string> split_lines(const std::string& text) {
  std::vector<std::string> lines;
  std::size_t pos = 0;
  while (pos < text.size()) {
    auto end = text.find('\n', pos);
    if (end == std::string::npos) {
      end = text.size();
    }
    lines.push_back(text.substr(pos, end - pos));
    pos = end + 1;
  }
  return lines;
}

// The note file for an NKI call: element-wise math and free-axis reductions share one note each.
std::string note_name(const std::string& instruction) {
  static const std::set<std::string> k_elementwise = {
      "nl.add",     "nl.subtract",   "nl.multiply", "nl.divide",   "nl.maximum",
      "nl.minimum", "nl.power",      "nl.exp",      "nl.log",      "nl.sqrt",
      "nl.rsqrt",   "nl.reciprocal", "nl.tanh",     "nl.sigmoid",  "nl.relu",
      "nl.gelu",    "nl.silu",       "nl.erf",      "nl.square",   "nl.abs",
      "nl.sign",    "nl.sin",        "nl.cos",      "nl.softplus", "nl.negative"};
  static const std::set<std::string> k_reduce = {"nl.sum", "nl.max",  "nl.min", "nl.mean",
                                                 "nl.var", "nl.prod", "nl.all"};
  if (k_elementwise.count(instruction) != 0) {
    return "nl.elementwise";
  }
  if (k_reduce.count(instruction) != 0) {
    return "nl.reduce";
  }
  return instruction;
}

std::string latency_line(const KernelSnapshot& kernel, const std::optional<double>& baseline) {
  if (!kernel.latency_us) {
    return "Latency: not measured yet.";
  }
  std::string line = "Measured latency: " + format_us(*kernel.latency_us);
  if (baseline && *baseline > 0 && *kernel.latency_us > 0) {
    line += " (the starting kernel took " + format_us(*baseline) + "; this one is " +
            format_number(*baseline / *kernel.latency_us) + "x as fast)";
  }
  return line + ".";
}

std::string kernel_summary(const KernelSnapshot& kernel) {
  std::string out = latency_line(kernel, std::nullopt);
  if (!kernel.bottleneck.empty()) {
    out += " Bottleneck: " + kernel.bottleneck + ".";
  }
  return out;
}

std::string function_name_of(const KernelSnapshot& kernel) {
  return kernel.function_name.empty() ? detect_kernel_function(kernel.source)
                                      : kernel.function_name;
}

std::string signature_of(const std::string& source, const std::string& name) {
  auto signature = function_signature(source, name);
  return signature.empty() ? "def " + name + "(...)" : signature;
}

std::string phase_advice(int iteration, int total) {
  if (total <= 1) {
    return "";
  }
  if (iteration * 3 <= total) {
    return "Early iterations are the time for larger structural changes (tiling, loop order, "
           "fusion, data layout).";
  }
  if (iteration * 3 > total * 2) {
    return "Late iterations are for refining what already works: tile sizes, overlap of transfers "
           "and compute, engine balance, small fusions.";
  }
  return "";
}

}  // namespace

std::string_view to_string(PlanVariant variant) {
  switch (variant) {
    case PlanVariant::pick:
      return "pick";
    case PlanVariant::inspired:
      return "inspired";
    case PlanVariant::unlike:
      return "unlike";
    case PlanVariant::free:
      return "free";
  }
  return "pick";
}

PromptBuilder::PromptBuilder(PromptLibrary library, PromptBuilderOptions options)
    : m_library(std::move(library)), m_options(options) {}

core::Result<PromptBuilder> PromptBuilder::open(const std::string& dir,
                                                PromptBuilderOptions options) {
  auto library = PromptLibrary::open(dir);
  if (!library.ok()) {
    return library.failure();
  }
  return PromptBuilder(std::move(library).value(), options);
}

core::Result<std::string> PromptBuilder::render(const std::string& relative,
                                                std::map<std::string, std::string> values) const {
  auto text = m_library.read(relative);
  if (!text.ok()) {
    return text.failure();
  }
  return render_template(text.value(), values, m_library.dir() + "/" + relative);
}

core::Result<std::string> PromptBuilder::system_text(const std::string& target) const {
  return render("templates/system.md", {{"target", target}});
}

namespace {

struct Notes {
  std::string text;
  std::vector<std::string> instructions;
};

Notes instruction_notes(const PromptLibrary& library, const std::string& source) {
  Notes notes;
  notes.instructions = detect_instructions(source);
  std::set<std::string> included;
  for (const auto& instruction : notes.instructions) {
    const auto name = note_name(instruction);
    if (!included.insert(name).second) {
      continue;
    }
    const auto file = "isa/" + name + ".md";
    if (!library.exists(file)) {
      continue;
    }
    auto text = library.read(file);
    if (text.ok()) {
      notes.text += trim_trailing(text.value()) + "\n\n";
    }
  }
  notes.text = trim_trailing(notes.text);
  return notes;
}

llm::CompletionRequest make_request(std::string system, std::string user, int max_tokens,
                                    double temperature, std::string purpose) {
  llm::CompletionRequest request;
  request.system = std::move(system);
  request.messages.push_back({"user", std::move(user)});
  request.max_tokens = max_tokens;
  request.temperature = temperature;
  request.purpose = std::move(purpose);
  return request;
}

}  // namespace

core::Result<PlanPrompt> PromptBuilder::plan(const PlanPromptInput& input) const {
  auto menu = load_menu(m_library, input.target);
  if (!menu.ok()) {
    return menu.failure();
  }
  auto architecture = m_library.read("arch/" + input.target + ".md");
  if (!architecture.ok()) {
    return architecture.failure();
  }
  auto rules = m_library.read("templates/nki_rules.md");
  if (!rules.ok()) {
    return rules.failure();
  }

  SeededRng rng(input.seed);
  const auto kept = apply_dropout(menu->items, input.dropout, rng);
  PlanPrompt prompt;
  const double draw = rng.uniform();
  if (kept.empty()) {
    prompt.variant = PlanVariant::free;
  } else if (draw < input.inspired_probability) {
    prompt.variant = PlanVariant::inspired;
  } else if (draw < input.inspired_probability + input.unlike_probability) {
    prompt.variant = PlanVariant::unlike;
  } else {
    prompt.variant = PlanVariant::pick;
  }
  std::string menu_text;
  for (const auto& item : kept) {
    prompt.menu_ids.push_back(item.id);
    menu_text += "- [" + item.id + "] " + item.text + "\n";
  }
  auto variant =
      m_library.read("templates/variant_" + std::string(to_string(prompt.variant)) + ".md");
  if (!variant.ok()) {
    return variant.failure();
  }

  const auto notes = instruction_notes(m_library, input.kernel.source);
  prompt.instructions = notes.instructions;

  std::string profile;
  if (!input.kernel.bottleneck.empty()) {
    profile += "Bottleneck: " + input.kernel.bottleneck + "\n";
  }
  if (!input.kernel.roofline.empty()) {
    profile += "Roofline:\n";
    for (const auto& [name, value] : input.kernel.roofline) {
      profile += "- " + name + ": " + format_number(value) + "\n";
    }
  }
  if (!input.kernel.metrics.empty()) {
    profile += "Profile metrics (neuron-profile summary names; times in seconds):\n";
    std::size_t shown = 0;
    for (const auto& [name, value] : input.kernel.metrics) {
      if (shown++ == m_options.max_metrics) {
        profile += "- (" + std::to_string(input.kernel.metrics.size() - m_options.max_metrics) +
                   " more omitted)\n";
        break;
      }
      profile += "- " + name + ": " + format_number(value) + "\n";
    }
  }

  std::vector<std::string> reflexion_items = input.reflexions;
  auto user = render("templates/plan.md",
                     {{"target", input.target},
                      {"architecture", trim_trailing(architecture.value())},
                      {"instruction_notes", notes.text},
                      {"problem_notes", trim_trailing(input.problem_notes)},
                      {"latency_line", latency_line(input.kernel, input.baseline_latency_us)},
                      {"code", trim_trailing(input.kernel.source)},
                      {"profile", trim_trailing(profile)},
                      {"failures", bullet_list(input.recent_failures, 600)},
                      {"lessons", bullet_list(input.lessons, 600)},
                      {"reflexions", bullet_list(reflexion_items, 800)},
                      {"tried_plans", bullet_list(input.tried_plans, 300)},
                      {"menu", trim_trailing(menu_text)},
                      {"variant_instruction", trim_trailing(variant.value())},
                      {"iteration", std::to_string(input.iteration)},
                      {"total_iterations", std::to_string(input.total_iterations)},
                      {"phase_advice", phase_advice(input.iteration, input.total_iterations)},
                      {"rules", trim_trailing(rules.value())}});
  if (!user.ok()) {
    return user.failure();
  }
  auto system = system_text(input.target);
  if (!system.ok()) {
    return system.failure();
  }
  prompt.request = make_request(std::move(system).value(), std::move(user).value(),
                                m_options.plan_max_tokens, m_options.plan_temperature, "plan");
  return prompt;
}

core::Result<llm::CompletionRequest> PromptBuilder::implement(
    const ImplementPromptInput& input) const {
  auto architecture = m_library.read("arch/" + input.target + ".md");
  if (!architecture.ok()) {
    return architecture.failure();
  }
  auto rules = m_library.read("templates/nki_rules.md");
  if (!rules.ok()) {
    return rules.failure();
  }
  const auto name = function_name_of(input.kernel);
  const auto notes = instruction_notes(m_library, input.kernel.source);
  auto user =
      render("templates/implement.md", {{"target", input.target},
                                        {"architecture", trim_trailing(architecture.value())},
                                        {"instruction_notes", notes.text},
                                        {"problem_notes", trim_trailing(input.problem_notes)},
                                        {"code", trim_trailing(input.kernel.source)},
                                        {"plan", trim_trailing(input.plan)},
                                        {"function_name", name},
                                        {"signature", signature_of(input.kernel.source, name)},
                                        {"knob_syntax", std::string(k_knob_syntax)},
                                        {"rules", trim_trailing(rules.value())}});
  if (!user.ok()) {
    return user.failure();
  }
  auto system = system_text(input.target);
  if (!system.ok()) {
    return system.failure();
  }
  return make_request(std::move(system).value(), std::move(user).value(), m_options.code_max_tokens,
                      m_options.code_temperature, "implement");
}

core::Result<llm::CompletionRequest> PromptBuilder::repair(const RepairPromptInput& input) const {
  auto rules = m_library.read("templates/nki_rules.md");
  if (!rules.ok()) {
    return rules.failure();
  }
  const auto name =
      input.function_name.empty() ? detect_kernel_function(input.source) : input.function_name;
  std::string context;
  std::string line_text;
  if (input.failure.line && *input.failure.line > 0) {
    const auto lines = split_lines(input.source);
    const int line = *input.failure.line;
    line_text = std::to_string(line);
    const int first = std::max(1, line - 3);
    const int last = std::min(static_cast<int>(lines.size()), line + 3);
    for (int i = first; i <= last; ++i) {
      char prefix[32];
      std::snprintf(prefix, sizeof(prefix), "%s%4d | ", i == line ? ">>" : "  ", i);
      context += prefix + truncate(lines[static_cast<std::size_t>(i - 1)], 400) + "\n";
    }
  }
  const auto notes = instruction_notes(m_library, input.source);
  auto user = render(
      "templates/repair.md",
      {{"target", input.target},
       {"instruction_notes", notes.text},
       {"code", trim_trailing(input.source)},
       {"error_kind", std::string(core::to_string(input.failure.kind))},
       {"error_stage", input.failure.stage.empty() ? "evaluation" : input.failure.stage},
       {"error_message", truncate(trim_trailing(input.failure.message), 2000)},
       {"error_line", line_text},
       {"error_context", trim_trailing(context)},
       {"details", truncate_middle(trim_trailing(input.details), m_options.max_details_chars)},
       {"plan", trim_trailing(input.plan)},
       {"attempt", std::to_string(input.attempt)},
       {"max_attempts", std::to_string(input.max_attempts)},
       {"function_name", name},
       {"signature", signature_of(input.source, name)},
       {"rules", trim_trailing(rules.value())}});
  if (!user.ok()) {
    return user.failure();
  }
  auto system = system_text(input.target);
  if (!system.ok()) {
    return system.failure();
  }
  return make_request(std::move(system).value(), std::move(user).value(), m_options.code_max_tokens,
                      m_options.code_temperature, "repair");
}

core::Result<llm::CompletionRequest> PromptBuilder::summarize_lessons(
    const SummarizeLessonsInput& input) const {
  std::string attempts;
  int index = 0;
  for (const auto& attempt : input.attempts) {
    attempts += "## Attempt " + std::to_string(++index) + "\n";
    attempts += "Plan: " + truncate(trim_trailing(attempt.plan), 1200) + "\n";
    if (attempt.parent_latency_us || attempt.latency_us) {
      attempts +=
          "Latency: " + (attempt.parent_latency_us ? format_us(*attempt.parent_latency_us) : "?") +
          " -> " + (attempt.latency_us ? format_us(*attempt.latency_us) : "?");
      if (attempt.parent_latency_us && attempt.latency_us && *attempt.latency_us > 0) {
        attempts +=
            " (" + format_number(*attempt.parent_latency_us / *attempt.latency_us) + "x speedup)";
      }
      attempts += "\n";
    }
    attempts += "Outcome: " + truncate(trim_trailing(attempt.outcome), 600) + "\n\n";
  }
  auto user = render("templates/summarize_lessons.md",
                     {{"target", input.target},
                      {"attempts", trim_trailing(attempts)},
                      {"existing_lessons", bullet_list(input.existing_lessons, 600)},
                      {"max_lessons", std::to_string(input.max_lessons)}});
  if (!user.ok()) {
    return user.failure();
  }
  auto system = system_text(input.target);
  if (!system.ok()) {
    return system.failure();
  }
  return make_request(std::move(system).value(), std::move(user).value(), m_options.note_max_tokens,
                      m_options.note_temperature, "summarize");
}

core::Result<llm::CompletionRequest> PromptBuilder::reflect(const ReflectInput& input) const {
  auto user = render("templates/reflect.md", {{"target", input.target},
                                              {"plan", trim_trailing(input.plan)},
                                              {"parent_summary", kernel_summary(input.parent)},
                                              {"parent_code", trim_trailing(input.parent.source)},
                                              {"child_summary", kernel_summary(input.child)},
                                              {"child_code", trim_trailing(input.child.source)},
                                              {"outcome", trim_trailing(input.outcome)}});
  if (!user.ok()) {
    return user.failure();
  }
  auto system = system_text(input.target);
  if (!system.ok()) {
    return system.failure();
  }
  return make_request(std::move(system).value(), std::move(user).value(), m_options.note_max_tokens,
                      m_options.note_temperature, "reflect");
}

std::vector<std::string> parse_lessons(std::string_view reply, std::size_t max_lessons) {
  std::vector<std::string> lessons;
  std::string text(reply);
  for (auto& line : split_lines(text)) {
    if (!line.empty() && line.back() == '\r') {
      line.pop_back();
    }
    std::size_t start = 0;
    while (start < line.size() && line[start] == ' ') {
      ++start;
    }
    std::string_view rest(line);
    rest.remove_prefix(start);
    std::size_t skip = 0;
    if (rest.rfind("- ", 0) == 0 || rest.rfind("* ", 0) == 0) {
      skip = 2;
    } else {
      std::size_t digits = 0;
      while (digits < rest.size() && rest[digits] >= '0' && rest[digits] <= '9') {
        ++digits;
      }
      if (digits > 0 && digits + 1 < rest.size() && (rest[digits] == '.' || rest[digits] == ')') &&
          rest[digits + 1] == ' ') {
        skip = digits + 2;
      }
    }
    if (skip == 0) {
      continue;
    }
    rest.remove_prefix(skip);
    while (!rest.empty() && rest.back() == ' ') {
      rest.remove_suffix(1);
    }
    if (!rest.empty()) {
      lessons.emplace_back(rest);
      if (lessons.size() == max_lessons) {
        break;
      }
    }
  }
  return lessons;
}

bool ReflexionRecord::structured() const {
  return diagnosis_right || fix_worked || !expected.empty() || !actual.empty() ||
         !lessons.empty() || !avoid.empty() || !try_next.empty();
}

namespace {

std::string lower_ascii(std::string_view text) {
  std::string out(text);
  for (auto& c : out) {
    c = static_cast<char>(std::tolower(static_cast<unsigned char>(c)));
  }
  return out;
}

std::string strip_markup(std::string_view text) {
  std::string out;
  for (char c : text) {
    if (c != '*' && c != '`' && c != '#') {
      out += c;
    }
  }
  const auto first = out.find_first_not_of(" \t-");
  if (first == std::string::npos) {
    return {};
  }
  const auto last = out.find_last_not_of(" \t");
  return out.substr(first, last - first + 1);
}

std::optional<bool> yes_no(const std::string& value) {
  const std::string word = lower_ascii(value.substr(0, value.find_first_of(" .,;:(")));
  if (word == "yes" || word == "true" || word == "y" || word == "right" || word == "correct") {
    return true;
  }
  if (word == "no" || word == "false" || word == "n" || word == "wrong" || word == "partly") {
    return false;
  }
  return std::nullopt;
}

}  // namespace

ReflexionRecord parse_reflexion(std::string_view reply) {
  ReflexionRecord record;
  record.raw_text = std::string(reply);
  std::string* open_field = nullptr;  // a text field that may continue on the next line
  for (auto& raw_line : split_lines(std::string(reply))) {
    if (!raw_line.empty() && raw_line.back() == '\r') {
      raw_line.pop_back();
    }
    const std::string line = strip_markup(raw_line);
    const auto colon = line.find(':');
    std::string name;
    if (colon != std::string::npos && colon <= 24) {
      name = lower_ascii(line.substr(0, colon));
      for (auto& c : name) {
        if (c == ' ' || c == '-') {
          c = '_';
        }
      }
    }
    const std::string value =
        colon == std::string::npos ? "" : strip_markup(line.substr(colon + 1));
    std::string* text_field = nullptr;
    if (name == "diagnosis_right" || name == "diagnosis") {
      record.diagnosis_right = yes_no(value);
      open_field = nullptr;
      continue;
    }
    if (name == "fix_worked" || name == "worked") {
      record.fix_worked = yes_no(value);
      open_field = nullptr;
      continue;
    }
    if (name == "expected") {
      text_field = &record.expected;
    } else if (name == "actual") {
      text_field = &record.actual;
    } else if (name == "lessons" || name == "lesson") {
      text_field = &record.lessons;
    } else if (name == "avoid") {
      text_field = &record.avoid;
    } else if (name == "try_next" || name == "try" || name == "next") {
      text_field = &record.try_next;
    }
    if (text_field != nullptr) {
      *text_field = value;
      open_field = text_field;
    } else if (open_field != nullptr && !line.empty()) {
      *open_field += (open_field->empty() ? "" : " ") + line;
    } else if (line.empty()) {
      open_field = nullptr;
    }
  }
  return record;
}

std::string describe_reflexion(const ReflexionRecord& record, std::size_t max_chars) {
  if (!record.structured()) {
    return {};
  }
  std::string text;
  auto add = [&text](const std::string& label, const std::string& value) {
    if (value.empty()) {
      return;
    }
    text += (text.empty() ? "" : "; ") + label + ": " + value;
  };
  if (record.fix_worked) {
    add("fix worked", *record.fix_worked ? "yes" : "no");
  }
  if (record.diagnosis_right) {
    add("diagnosis right", *record.diagnosis_right ? "yes" : "no");
  }
  add("expected", record.expected);
  add("actual", record.actual);
  add("lessons", record.lessons);
  add("avoid", record.avoid);
  add("try next", record.try_next);
  if (text.size() > max_chars) {
    text = core::utf8_prefix(text, max_chars) + "...";
  }
  return text;
}

}  // namespace autocomp::search::prompts
