#include "search/prompts/prompt_builder.hpp"

#include <algorithm>
#include <cctype>
#include <cmath>
#include <cstdio>
#include <regex>
#include <set>

#include "core/text.hpp"
#include "search/prompts/code_extract.hpp"
#include "search/prompts/facts.hpp"
#include "search/prompts/menu.hpp"
#include "search/prompts/profile_text.hpp"

namespace autocomp::search::prompts {

namespace {

// The roofline's floors are this kernel's own work on one resource; the modelled floor of the
// profile lines is the workload's (every byte once, at the best rate). Said beside each so a
// model does not read two floors for one thing.
std::string roofline_note(const std::string& name) {
  if (name == "floor_dma_us") {
    return " (the bytes this kernel moves, at the rate its average run reaches; not the "
           "modelled floor)";
  }
  if (name.rfind("floor_", 0) == 0) {
    return " (this kernel's own work on that engine alone)";
  }
  return "";
}

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

// Lessons as a bullet list, each bounded by whole sentences (never cut mid-sentence).
std::string lesson_list(const std::vector<std::string>& items, std::size_t max_chars_each) {
  std::string out;
  for (const auto& item : items) {
    out += "- " + cut_at_sentence(trim_trailing(item), max_chars_each) + "\n";
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
  if (instruction == "nisa.bn_aggr") {
    return "nisa.bn_stats";  // one note covers the pair
  }
  return instruction;
}

std::string latency_line(const KernelSnapshot& kernel, const std::optional<double>& baseline) {
  if (!kernel.latency_us) {
    return "Latency: not measured yet.";
  }
  std::string line = "Measured latency: " + format_us(*kernel.latency_us) + ".";
  if (baseline && *baseline > 0 && *kernel.latency_us > 0) {
    const double speedup = *baseline / *kernel.latency_us;
    line += " Starting latency (the kernel the search began from): " + format_us(*baseline) + ".";
    line += speedup > 0.9995 && speedup < 1.0005
                ? " This is the starting kernel (speedup so far: 1x)."
                : " Speedup so far: " + format_number(speedup) + "x.";
  }
  return line;
}

// The metrics both kernels report, "name: before -> after", largest relative change first.
std::string metric_changes(const KernelSnapshot& before, const KernelSnapshot& after,
                           std::size_t max_rows) {
  std::vector<std::pair<double, std::string>> rows;
  for (const auto& [name, old_value] : before.metrics) {
    auto it = after.metrics.find(name);
    if (it == after.metrics.end()) {
      continue;
    }
    const double scale = std::max(std::abs(old_value), std::abs(it->second));
    const double change = scale > 0 ? std::abs(it->second - old_value) / scale : 0.0;
    rows.emplace_back(
        change, "- " + name + ": " + format_number(old_value) + " -> " + format_number(it->second));
  }
  std::stable_sort(rows.begin(), rows.end(),
                   [](const auto& a, const auto& b) { return a.first > b.first; });
  std::string out;
  for (std::size_t i = 0; i < rows.size() && i < max_rows; ++i) {
    out += rows[i].second + "\n";
  }
  return trim_trailing(out);
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
  std::vector<std::string> instructions;  // detected in the kernel
};

// The NKI calls a plan names: "nisa.x" / "nl.x" / "nki.isa.x" spelled out, or a bare instruction
// name with an underscore ("bn_stats", "activation_reduce") that the facts know. In order of first
// mention.
std::vector<std::string> named_instructions(const std::string& text, const HardwareFacts& facts) {
  std::vector<std::pair<std::size_t, std::string>> found;
  static const std::regex k_qualified(
      R"(\b(nisa|nl|nki\.isa|nki\.language)\.([A-Za-z_][A-Za-z0-9_]*))");
  for (auto it = std::sregex_iterator(text.begin(), text.end(), k_qualified);
       it != std::sregex_iterator(); ++it) {
    const std::string module = (*it)[1].str();
    const std::string prefix = (module == "nisa" || module == "nki.isa") ? "nisa." : "nl.";
    // An nl name counts only when called ("nl.copy("): as a value ("op=nl.copy") it is an
    // activation function, not the nl function the note describes.
    if (prefix == "nl.") {
      auto after = static_cast<std::size_t>(it->position() + it->length());
      while (after < text.size() && text[after] == ' ') {
        ++after;
      }
      if (after >= text.size() || text[after] != '(') {
        continue;
      }
    }
    found.emplace_back(static_cast<std::size_t>(it->position()), prefix + (*it)[2].str());
  }
  for (const auto& [name, fact] : facts.instructions()) {
    const auto dot = name.find('.');
    const std::string bare = name.substr(dot + 1);
    if (bare.find('_') == std::string::npos) {
      continue;
    }
    std::size_t pos = 0;
    while ((pos = text.find(bare, pos)) != std::string::npos) {
      const auto end = pos + bare.size();
      const auto word = [&text](std::size_t i) {
        const char c = text[i];
        return std::isalnum(static_cast<unsigned char>(c)) != 0 || c == '_' || c == '.';
      };
      if ((pos == 0 || !word(pos - 1)) && (end >= text.size() || !word(end) || text[end] == '.')) {
        found.emplace_back(pos, name);
        break;
      }
      pos = end;
    }
  }
  std::stable_sort(found.begin(), found.end(),
                   [](const auto& a, const auto& b) { return a.first < b.first; });
  std::vector<std::string> out;
  std::set<std::string> seen;
  for (const auto& [pos, name] : found) {
    if (seen.insert(name).second) {
      out.push_back(name);
    }
  }
  return out;
}

// Whether the kernel imports NKI from neuronxcc (before NKI 0.3), where the ISA calls return
// their result instead of writing a `dst` argument.
bool imports_neuronxcc(const std::string& source) {
  static const std::regex k_import(R"((^|\n)\s*(from|import)\s+neuronxcc\.nki\b)");
  return std::regex_search(source, k_import);
}

// One line per instruction: its signature in the kernel's namespace and its engine, as the
// simulator has them.
std::string signature_lines(const HardwareFacts& facts, const std::vector<std::string>& names,
                            bool legacy) {
  std::string out;
  for (const auto& name : names) {
    const auto* fact = facts.instruction(name);
    if (fact == nullptr || fact->signature.empty()) {
      continue;
    }
    const bool returns = legacy && !fact->legacy_signature.empty();
    out += "- Signature: `" + (returns ? fact->legacy_signature : fact->signature) + "`";
    if (!fact->engine.empty()) {
      out += " (" + fact->engine + ")";
    }
    out += "\n";
  }
  return out;
}

// Notes for the calls the kernel uses and the calls `plan` names, each note once (calls that
// share a note, like bn_stats and bn_aggr, get it once with both signatures). Notes are templates
// over the target's hardware facts.
core::Result<Notes> instruction_notes(const PromptLibrary& library, const HardwareFacts& facts,
                                      const std::map<std::string, std::string>& values,
                                      const std::string& source, const std::string& plan = "") {
  Notes notes;
  const bool legacy = imports_neuronxcc(source);
  notes.instructions = detect_instructions(source);
  std::vector<std::string> all = notes.instructions;
  for (auto& name : named_instructions(plan, facts)) {
    if (std::find(all.begin(), all.end(), name) == all.end()) {
      all.push_back(std::move(name));
    }
  }
  // note name -> the instructions it covers, in first-seen order
  std::vector<std::pair<std::string, std::vector<std::string>>> groups;
  for (const auto& instruction : all) {
    const auto name = note_name(instruction);
    auto it = std::find_if(groups.begin(), groups.end(),
                           [&name](const auto& group) { return group.first == name; });
    if (it == groups.end()) {
      groups.push_back({name, {instruction}});
    } else {
      it->second.push_back(instruction);
    }
  }
  std::set<std::string> texts;
  for (const auto& [name, members] : groups) {
    const auto file = "isa/" + name + ".md";
    std::string text;
    if (library.exists(file)) {
      auto raw = library.read(file);
      if (!raw.ok()) {
        return raw.failure();
      }
      auto rendered = render_template(raw.value(), values, library.dir() + "/" + file);
      if (!rendered.ok()) {
        return rendered.failure();
      }
      text = trim_trailing(rendered.value());
    } else if (const auto* fact = facts.instruction(members.front()); fact != nullptr) {
      text = "## " + members.front();
      if (!fact->summary.empty()) {
        text += "\n- Semantics: " + fact->summary;
      }
    } else {
      continue;
    }
    if (!texts.insert(text).second) {
      continue;  // two names for one text
    }
    const auto signatures = signature_lines(facts, members, legacy);
    notes.text += text + (signatures.empty() ? "" : "\n" + trim_trailing(signatures)) + "\n\n";
  }
  if (!notes.text.empty()) {
    // Which module the ISA calls come from; a kernel must not mix the two namespaces.
    notes.text =
        std::string(legacy ? "The kernel uses the `neuronxcc.nki` namespace: import the ISA "
                             "as `import neuronxcc.nki.isa as nisa`"
                           : "The kernel uses the `nki` namespace: import the ISA as "
                             "`import nki.isa as nisa`") +
        " (parameters shown with `=` are optional).\n\n" + notes.text;
  }
  notes.text = trim_trailing(notes.text);
  return notes;
}

// Signatures (at most `max_lines`) of the calls that `menu_text` names and the kernel does not
// use yet, so a plan can name real instructions and arguments; empty when there are none.
std::string extra_signatures(const HardwareFacts& facts, const std::vector<std::string>& used,
                             const std::string& menu_text, const std::string& source,
                             std::size_t max_lines = 8) {
  std::vector<std::string> names;
  for (const auto& name : named_instructions(menu_text, facts)) {
    if (facts.instruction(name) != nullptr && names.size() < max_lines &&
        std::find(used.begin(), used.end(), name) == used.end()) {
      names.push_back(name);
    }
  }
  const auto lines = signature_lines(facts, names, imports_neuronxcc(source));
  if (lines.empty()) {
    return {};
  }
  return "\n\n## Calls the strategies below need (signatures)\n" + trim_trailing(lines);
}

// The hardware facts of a target, and its architecture text rendered with them.
struct TargetText {
  HardwareFacts facts;
  std::map<std::string, std::string> values;
  std::string architecture;
};

core::Result<TargetText> target_text(const PromptLibrary& library, const std::string& target) {
  auto facts = HardwareFacts::load(library);
  if (!facts.ok()) {
    return facts.failure();
  }
  auto values = facts->values(target);
  if (!values.ok()) {
    return values.failure();
  }
  const std::string file = "arch/" + target + ".md";
  auto raw = library.read(file);
  if (!raw.ok()) {
    return raw.failure();
  }
  auto architecture = render_template(raw.value(), values.value(), library.dir() + "/" + file);
  if (!architecture.ok()) {
    return architecture.failure();
  }
  return TargetText{std::move(facts).value(), std::move(values).value(),
                    trim_trailing(std::move(architecture).value())};
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

// The menu items that fit this kernel, in menu order: items it cannot use as written (matmul
// strategies for a kernel without matmul) and items its tried plans already named are left out
// before dropout, so dropout picks among the relevant ones. `anchors` gets the ids that fit the
// kernel's profile (score above the no-signal level), best first; when none does, every
// relevant id, best first.
std::vector<MenuItem> relevant_items(const std::vector<MenuItem>& items,
                                     const PlanPromptInput& input,
                                     std::vector<std::string>& anchors) {
  MenuContext context;
  context.rtol = input.rtol;
  context.programs = input.programs;
  context.bottleneck = input.kernel.bottleneck;
  context.metrics = input.kernel.metrics;
  context.roofline = input.kernel.roofline;
  context.kernel_source = input.kernel.source;
  std::string tried;
  for (const auto& plan : input.tried_plans) {
    tried += plan + "\n";
  }
  context.tried = mentioned_items(items, tried);
  std::set<std::string> fitting;
  std::vector<std::string> any_fit;
  anchors.clear();
  for (const auto& ranked : rank_menu(items, context)) {
    if (ranked.score >= 0) {
      fitting.insert(ranked.item.id);
      any_fit.push_back(ranked.item.id);
      if (ranked.score > 1) {
        anchors.push_back(ranked.item.id);
      }
    }
  }
  if (anchors.empty()) {
    anchors = std::move(any_fit);
  }
  std::vector<MenuItem> out;
  for (const auto& item : items) {
    if (fitting.count(item.id) != 0) {
      out.push_back(item);
    }
  }
  return out;
}

}  // namespace

core::Result<PlanPrompt> PromptBuilder::plan(const PlanPromptInput& input) const {
  auto menu = load_menu(m_library, input.target);
  if (!menu.ok()) {
    return menu.failure();
  }
  auto target = target_text(m_library, input.target);
  if (!target.ok()) {
    return target.failure();
  }
  auto rules = m_library.read("templates/nki_rules.md");
  if (!rules.ok()) {
    return rules.failure();
  }

  SeededRng rng(input.seed);
  std::vector<std::string> anchors;
  const auto relevant = relevant_items(menu->items, input, anchors);
  auto kept = apply_dropout(relevant, input.dropout, rng);
  if (input.plan_index >= 0 && !anchors.empty()) {
    // Plan k of a parent keeps the k-th best-fitting item (cycling), so every request has an
    // item the profile calls for and sibling requests lead with different ones.
    const auto& anchor = anchors[static_cast<std::size_t>(input.plan_index) % anchors.size()];
    std::vector<MenuItem> with_anchor;  // in menu order
    for (const auto& item : relevant) {
      const bool keep =
          item.id == anchor || std::any_of(kept.begin(), kept.end(),
                                           [&item](const MenuItem& k) { return k.id == item.id; });
      if (keep) {
        with_anchor.push_back(item);
      }
    }
    kept = std::move(with_anchor);
  }
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
  const auto applied = applied_items(kept, input.kernel.source);
  for (const auto& item : kept) {
    prompt.menu_ids.push_back(item.id);
    std::string text = item.text;
    if (auto found = applied.find(item.id); found != applied.end()) {
      // The mark goes on the item's own line, before the text's line break.
      const auto end = text.find_last_not_of("\r\n");
      const std::string tail = end == std::string::npos ? text : text.substr(end + 1);
      text = text.substr(0, end == std::string::npos ? 0 : end + 1) +
             " (ALREADY APPLIED: " + found->second + ")" + tail;
    }
    menu_text += "- [" + item.id + "] " + text + "\n";
  }
  auto variant =
      m_library.read("templates/variant_" + std::string(to_string(prompt.variant)) + ".md");
  if (!variant.ok()) {
    return variant.failure();
  }

  auto notes = instruction_notes(m_library, target->facts, target->values, input.kernel.source);
  if (!notes.ok()) {
    return notes.failure();
  }
  prompt.instructions = notes->instructions;
  const auto menu_signatures =
      extra_signatures(target->facts, notes->instructions, menu_text, input.kernel.source);

  std::string profile;
  if (!input.kernel.bottleneck.empty()) {
    profile += "Bottleneck: " + input.kernel.bottleneck + "\n";
  }
  for (const auto& line : profile_lines(input.kernel.hotspots, input.kernel.waits,
                                        input.kernel.floors, input.kernel.source)) {
    profile += line + "\n";
  }
  if (!input.kernel.roofline.empty()) {
    profile += "Roofline:\n";
    for (const auto& [name, value] : input.kernel.roofline) {
      profile += "- " + name + ": " + format_number(value) + roofline_note(name) + "\n";
    }
  }
  if (!input.kernel.metrics.empty()) {
    profile += "Profile metrics (neuron-profile summary names; times in seconds):\n";
    std::size_t shown = 0;
    std::string omitted;
    for (const auto& [name, value] : input.kernel.metrics) {
      if (shown++ >= m_options.max_metrics) {
        omitted += (omitted.empty() ? "" : ", ") + name;
        continue;
      }
      profile += "- " + name + ": " + format_number(value) + "\n";
    }
    if (!omitted.empty()) {
      profile += "- (not shown: " + omitted + ")\n";
    }
  }

  std::vector<std::string> reflexion_items = input.reflexions;
  auto user = render("templates/plan.md",
                     {{"target", input.target},
                      {"architecture", target->architecture},
                      {"instruction_notes", notes->text + menu_signatures},
                      {"problem_notes", trim_trailing(input.problem_notes)},
                      {"latency_line", latency_line(input.kernel, input.baseline_latency_us)},
                      {"code", trim_trailing(input.kernel.source)},
                      {"profile", trim_trailing(profile)},
                      {"failures", bullet_list(input.recent_failures, 600)},
                      {"lessons", lesson_list(input.lessons, 600)},
                      {"reflexions", bullet_list(reflexion_items, 800)},
                      {"tried_plans", bullet_list(input.tried_plans, 600)},
                      {"recent_results", bullet_list(input.recent_results, 700)},
                      {"sibling_plans", bullet_list(input.sibling_plans, 700)},
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
  auto target = target_text(m_library, input.target);
  if (!target.ok()) {
    return target.failure();
  }
  auto rules = m_library.read("templates/nki_rules.md");
  if (!rules.ok()) {
    return rules.failure();
  }
  const auto name = function_name_of(input.kernel);
  auto notes =
      instruction_notes(m_library, target->facts, target->values, input.kernel.source, input.plan);
  if (!notes.ok()) {
    return notes.failure();
  }
  const auto lesson_count = std::min(input.lessons.size(), m_options.max_implement_lessons);
  const std::vector<std::string> lessons(input.lessons.begin(),
                                         input.lessons.begin() + static_cast<long>(lesson_count));
  auto user =
      render("templates/implement.md", {{"target", input.target},
                                        {"architecture", target->architecture},
                                        {"instruction_notes", notes->text},
                                        {"problem_notes", trim_trailing(input.problem_notes)},
                                        {"lessons", lesson_list(lessons, 400)},
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
  auto target = target_text(m_library, input.target);
  if (!target.ok()) {
    return target.failure();
  }
  auto notes =
      instruction_notes(m_library, target->facts, target->values, input.source, input.plan);
  if (!notes.ok()) {
    return notes.failure();
  }
  auto user = render(
      "templates/repair.md",
      {{"target", input.target},
       {"instruction_notes", notes->text},
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
    // Head and tail of long plans: the end says why it should help and what could go wrong.
    attempts += "Plan: " + truncate_middle(trim_trailing(attempt.plan), 1600) + "\n";
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
    attempts += "Outcome: " + truncate_middle(trim_trailing(attempt.outcome), 600) + "\n\n";
  }
  std::string existing;
  for (std::size_t i = 0; i < input.existing_lessons.size(); ++i) {
    existing += "- ";
    if (i < input.existing_ids.size()) {
      existing += "L" + std::to_string(input.existing_ids[i]) + ": ";
    }
    existing += cut_at_sentence(trim_trailing(input.existing_lessons[i]), 600);
    if (i < input.existing_evidence.size() && !input.existing_evidence[i].empty()) {
      existing += " (evidence: " + input.existing_evidence[i] + ")";
    }
    existing += "\n";
  }
  auto user = render("templates/summarize_lessons.md",
                     {{"target", input.target},
                      {"problem_notes", trim_trailing(input.problem_notes)},
                      {"attempts", trim_trailing(attempts)},
                      {"existing_lessons", trim_trailing(existing)},
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
  auto user = render("templates/reflect.md",
                     {{"target", input.target},
                      {"plan", trim_trailing(input.plan)},
                      {"parent_summary", kernel_summary(input.parent)},
                      {"parent_code", trim_trailing(input.parent.source)},
                      {"child_summary", kernel_summary(input.child)},
                      {"child_code", trim_trailing(input.child.source)},
                      {"metrics", metric_changes(input.parent, input.child, m_options.max_metrics)},
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

namespace {

std::set<std::string> lesson_words(const std::string& text) {
  std::set<std::string> words;
  std::string word;
  for (const char c : text + " ") {
    if (std::isalnum(static_cast<unsigned char>(c)) != 0 || c == '_' || c == '.') {
      word += static_cast<char>(std::tolower(static_cast<unsigned char>(c)));
    } else {
      while (!word.empty() && word.back() == '.') {
        word.pop_back();
      }
      if (word.size() >= 3) {
        words.insert(word);
      }
      word.clear();
    }
  }
  return words;
}

double similarity(const std::set<std::string>& a, const std::set<std::string>& b) {
  if (a.empty() || b.empty()) {
    return a == b ? 1.0 : 0.0;
  }
  std::size_t common = 0;
  for (const auto& word : a) {
    common += b.count(word);
  }
  return static_cast<double>(common) / static_cast<double>(a.size() + b.size() - common);
}

// "[workload] text" -> {workload, text}; unscoped lessons give an empty workload.
std::pair<std::string, std::string> split_scope(const std::string& lesson) {
  if (lesson.size() > 2 && lesson.front() == '[') {
    const auto close = lesson.find("] ");
    if (close != std::string::npos && close > 1 && lesson.find_first_of(" \n", 1) > close) {
      return {lesson.substr(1, close - 1), lesson.substr(close + 2)};
    }
  }
  return {"", lesson};
}

}  // namespace

std::vector<std::string> merge_lessons(const std::vector<std::string>& lessons, double threshold) {
  std::vector<std::string> kept;
  std::vector<std::set<std::string>> kept_words;
  for (const auto& lesson : lessons) {
    auto words = lesson_words(split_scope(lesson).second);
    const bool repeat = std::any_of(kept_words.begin(), kept_words.end(), [&](const auto& other) {
      return similarity(words, other) >= threshold;
    });
    if (!repeat) {
      kept.push_back(lesson);
      kept_words.push_back(std::move(words));
    }
  }
  return kept;
}

std::vector<std::string> new_lessons(std::string_view reply,
                                     const std::vector<std::string>& existing,
                                     std::size_t max_lessons) {
  auto all = existing;
  const auto parsed = parse_lessons(reply, max_lessons);
  all.insert(all.end(), parsed.begin(), parsed.end());
  const auto merged = merge_lessons(all);
  std::set<std::string> old(existing.begin(), existing.end());
  std::vector<std::string> out;
  for (const auto& lesson : merged) {
    if (old.count(lesson) == 0 && std::find(out.begin(), out.end(), lesson) == out.end()) {
      out.push_back(lesson);
    }
  }
  return out;
}

std::string cut_at_sentence(const std::string& text, std::size_t max_chars) {
  if (text.size() <= max_chars) {
    return text;
  }
  // Sentence ends: ". ", "! ", "? " (and "; " as a clause end when no sentence end fits).
  std::size_t best = std::string::npos;
  std::size_t first_end = std::string::npos;
  for (std::size_t i = 0; i + 1 < text.size(); ++i) {
    const char c = text[i];
    if ((c == '.' || c == '!' || c == '?') && text[i + 1] == ' ') {
      if (first_end == std::string::npos) {
        first_end = i + 1;
      }
      if (i + 1 <= max_chars) {
        best = i + 1;
      }
    }
  }
  if (best != std::string::npos) {
    return text.substr(0, best);
  }
  return first_end == std::string::npos ? text : text.substr(0, first_end);
}

double lesson_similarity(const std::string& a, const std::string& b) {
  return similarity(lesson_words(split_scope(a).second), lesson_words(split_scope(b).second));
}

std::vector<MergedLesson> parse_merged_lessons(std::string_view reply, std::size_t max_lessons) {
  static const std::regex k_ids(R"(^\(?\[?((?:L[0-9]+[ ,;]*)+)\]?\)?[:.]?\s*)");
  static const std::regex k_id(R"(L([0-9]+))");
  std::vector<MergedLesson> out;
  for (const auto& line : parse_lessons(reply, max_lessons)) {
    MergedLesson lesson;
    std::smatch found;
    std::string text = line;
    if (std::regex_search(line, found, k_ids) && found.position(0) == 0 && found.length(0) > 0) {
      const std::string ids = found[1].str();
      for (auto it = std::sregex_iterator(ids.begin(), ids.end(), k_id);
           it != std::sregex_iterator(); ++it) {
        lesson.from.push_back(std::stoll((*it)[1].str()));
      }
      text = line.substr(static_cast<std::size_t>(found.length(0)));
    }
    lesson.text = cut_at_sentence(text, 400);
    if (!lesson.text.empty()) {
      out.push_back(std::move(lesson));
    }
  }
  return out;
}

std::string scope_lesson(const std::string& lesson, const std::string& workload) {
  if (workload.empty() || !split_scope(lesson).first.empty()) {
    return lesson;
  }
  return "[" + workload + "] " + lesson;
}

std::vector<std::string> lessons_for(const std::vector<std::string>& lessons,
                                     const std::string& workload) {
  std::vector<std::string> out;
  for (const auto& lesson : merge_lessons(lessons)) {
    auto [scope, text] = split_scope(lesson);
    if (scope.empty()) {
      out.push_back(lesson);
    } else if (scope == workload) {
      out.push_back(text);
    } else {
      out.push_back("(from another workload: " + scope + ") " + text);
    }
  }
  return out;
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

bool is_markup(char c) {
  return c == '*' || c == '_' || c == '`' || c == '#';
}

// A reply line without list bullets, heading marks and surrounding blanks; emphasis inside the
// text (and so code and math like `-mean*rstd`) is kept.
std::string strip_line(std::string_view text) {
  const auto first = text.find_first_not_of(" \t");
  if (first == std::string_view::npos) {
    return {};
  }
  text.remove_prefix(first);
  if (text.rfind("- ", 0) == 0 || text.rfind("* ", 0) == 0) {
    text.remove_prefix(2);
  }
  while (!text.empty() && text.front() == '#') {
    text.remove_prefix(1);
  }
  const auto start = text.find_first_not_of(" \t");
  if (start == std::string_view::npos) {
    return {};
  }
  const auto last = text.find_last_not_of(" \t");
  return std::string(text.substr(start, last - start + 1));
}

// A field name as written ("**try next**", "`lessons`") in canonical form ("try_next").
std::string field_name(std::string_view text) {
  while (!text.empty() && (is_markup(text.front()) || text.front() == ' ')) {
    text.remove_prefix(1);
  }
  while (!text.empty() && (is_markup(text.back()) || text.back() == ' ')) {
    text.remove_suffix(1);
  }
  std::string name = lower_ascii(text);
  for (auto& c : name) {
    if (c == ' ' || c == '-') {
      c = '_';
    }
  }
  return name;
}

// A field value: the emphasis that closed the field name ("**lessons:** text") and a matching
// emphasis around the whole value are removed; everything inside is kept.
std::string field_value(std::string_view text) {
  // "** text" after "**name:": the stars close the name's emphasis
  const auto stars = text.find_first_not_of('*');
  if (stars != std::string_view::npos && stars > 0 && text[stars] == ' ') {
    text.remove_prefix(stars);
  }
  while (!text.empty() && text.front() == ' ') {
    text.remove_prefix(1);
  }
  while (!text.empty() && (text.back() == ' ' || text.back() == '\t')) {
    text.remove_suffix(1);
  }
  std::size_t closing = 0;
  while (closing < text.size() && text[text.size() - 1 - closing] == '*') {
    ++closing;
  }
  // a trailing run of stars closes an emphasis only when nothing inside opened one
  if (closing > 0 &&
      std::string_view(text.substr(0, text.size() - closing)).find('*') == std::string_view::npos) {
    text.remove_suffix(closing);
  }
  while (!text.empty() && text.back() == ' ') {
    text.remove_suffix(1);
  }
  return std::string(text);
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
    const std::string line = strip_line(raw_line);
    const auto colon = line.find(':');
    std::string name;
    if (colon != std::string::npos && colon <= 28) {
      name = field_name(std::string_view(line).substr(0, colon));
    }
    const std::string value =
        colon == std::string::npos ? "" : field_value(std::string_view(line).substr(colon + 1));
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
