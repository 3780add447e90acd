#include "search/prompts/menu.hpp"

#include <algorithm>
#include <regex>
#include <set>

#include "search/prompts/facts.hpp"

namespace autocomp::search::prompts {

namespace {

std::string_view trim(std::string_view text) {
  while (!text.empty() && (text.front() == ' ' || text.front() == '\t' || text.front() == '\r')) {
    text.remove_prefix(1);
  }
  while (!text.empty() && (text.back() == ' ' || text.back() == '\t' || text.back() == '\r')) {
    text.remove_suffix(1);
  }
  return text;
}

bool valid_id(std::string_view id) {
  if (id.empty()) {
    return false;
  }
  for (char c : id) {
    const bool ok = (c >= 'a' && c <= 'z') || (c >= 'A' && c <= 'Z') || (c >= '0' && c <= '9') ||
                    c == '_' || c == '-' || c == '.';
    if (!ok) {
      return false;
    }
  }
  return true;
}

}  // namespace

core::Result<Menu> parse_menu(std::string_view text, std::string_view origin) {
  Menu menu;
  std::set<std::string> seen;
  int line_number = 0;
  std::size_t pos = 0;
  while (pos <= text.size()) {
    auto end = text.find('\n', pos);
    if (end == std::string_view::npos) {
      end = text.size();
    }
    const auto line = trim(text.substr(pos, end - pos));
    pos = end + 1;
    ++line_number;
    if (line.empty() || line.front() == '#') {
      if (end == text.size()) {
        break;
      }
      continue;
    }
    auto fail = [&](const std::string& why) {
      return core::make_failure(core::FailureKind::invalid_argument, "prompts",
                                std::string(origin) + ":" + std::to_string(line_number) + ": " +
                                    why + " (expected '- id: text')");
    };
    if (line.size() < 2 || line[0] != '-' || line[1] != ' ') {
      return fail("not a menu item");
    }
    const auto body = line.substr(2);
    const auto colon = body.find(':');
    if (colon == std::string_view::npos) {
      return fail("missing ':' after the id");
    }
    const auto id = trim(body.substr(0, colon));
    const auto item_text = trim(body.substr(colon + 1));
    if (!valid_id(id)) {
      return fail("id '" + std::string(id) + "' must be letters, digits, '_', '-' or '.'");
    }
    if (item_text.empty()) {
      return fail("item '" + std::string(id) + "' has no text");
    }
    if (!seen.insert(std::string(id)).second) {
      return fail("duplicate id '" + std::string(id) + "'");
    }
    menu.items.push_back({std::string(id), std::string(item_text)});
    if (end == text.size()) {
      break;
    }
  }
  return menu;
}

core::Result<Menu> load_menu(const PromptLibrary& library, const std::string& target) {
  const std::string relative = "menus/" + target + ".md";
  auto text = library.read(relative);
  if (!text.ok()) {
    return core::make_failure(
        core::FailureKind::invalid_argument, "prompts",
        "no optimization menu for target '" + target + "': " + text.failure().message);
  }
  auto menu = parse_menu(text.value(), library.dir() + "/" + relative);
  if (!menu.ok()) {
    return menu;
  }
  menu->target = target;
  // Item texts may name hardware numbers as {{placeholders}} over the target's facts, so a menu
  // and the hardware notes never disagree.
  if (!library.exists(std::string(HardwareFacts::k_file))) {
    return menu;
  }
  auto facts = HardwareFacts::load(library);
  if (!facts.ok()) {
    return facts.failure();
  }
  auto values = facts->values(target);
  if (!values.ok()) {
    return menu;  // no facts for this target: the texts stay as written
  }
  for (auto& item : menu->items) {
    auto rendered = render_template(item.text, values.value(), library.dir() + "/" + relative);
    if (!rendered.ok()) {
      return rendered.failure();
    }
    item.text = std::move(rendered).value();
  }
  return menu;
}

std::uint64_t SeededRng::next() {
  std::uint64_t z = (m_state += 0x9E3779B97F4A7C15ULL);
  z = (z ^ (z >> 30)) * 0xBF58476D1CE4E5B9ULL;
  z = (z ^ (z >> 27)) * 0x94D049BB133111EBULL;
  return z ^ (z >> 31);
}

double SeededRng::uniform() {
  return static_cast<double>(next() >> 11) * 0x1.0p-53;
}

std::size_t SeededRng::below(std::size_t bound) {
  return static_cast<std::size_t>(uniform() * static_cast<double>(bound)) % bound;
}

std::vector<MenuItem> apply_dropout(const std::vector<MenuItem>& items, double drop_probability,
                                    SeededRng& rng) {
  if (drop_probability <= 0) {
    return items;
  }
  if (drop_probability >= 1) {
    return {};
  }
  std::vector<MenuItem> kept;
  for (const auto& item : items) {
    if (rng.uniform() >= drop_probability) {
      kept.push_back(item);
    }
  }
  if (kept.empty() && !items.empty()) {
    kept.push_back(items[rng.below(items.size())]);
  }
  return kept;
}

}  // namespace autocomp::search::prompts

namespace autocomp::search::prompts {

namespace {

std::string lower(std::string_view text) {
  std::string out(text);
  for (char& c : out) {
    if (c >= 'A' && c <= 'Z') {
      c = static_cast<char>(c - 'A' + 'a');
    }
  }
  return out;
}

double metric(const std::map<std::string, double>& values, const std::string& name,
              double fallback = 0) {
  auto found = values.find(name);
  return found == values.end() ? fallback : found->second;
}

// The loosest relative tolerance below which MX (fp8/fp4) matmuls are not offered.
constexpr double k_mx_min_rtol = 5e-2;

// What the ranking looks at, derived once from the context.
struct Signals {
  bool memory = false;         // memory-bound, or DMA busier than every compute engine
  bool compute = false;        // compute-bound
  bool underutilized = false;  // nothing is busy: latency, dependences, fixed costs
  bool matmul = false;
  bool transpose = false;
  bool exp = false;
  bool mask = false;
  bool loops = false;
  bool sequential_loop = false;
  bool reduction = false;
  bool division = false;
  bool partition_reduction = false;  // a reduction across partitions
  bool attention = false;            // exponentials and matmuls: attention-like
  bool narrow_tiles = false;         // no sign of 128-partition tiles
  bool bf16_tolerance = true;        // the tolerance admits bf16 rounding (or is not stated)
  bool mx_matmul = false;            // matmuls, and a stated tolerance that admits fp8 rounding
  bool grid_launch = false;          // the evaluation launches several programs
  bool fp32 = false;
  bool small_dma = false;
  bool spills = false;
  bool many_instructions = false;
  bool elementwise_chain = false;  // several element-wise calls in a row
  bool load_in_loop = false;
  bool vector_hot = false;
  bool scalar_hot = false;
  bool gpsimd_hot = false;
  bool tensor_hot = false;
  bool unbalanced = false;    // one compute engine much busier than the others
  bool idle_engine = false;   // an element-wise engine is hot while another one mostly idles
  bool compute_side = false;  // a compute engine, not DMA, limits the kernel
};

bool contains(const std::string& haystack, std::string_view needle) {
  return haystack.find(needle) != std::string::npos;
}

int count(const std::string& haystack, std::string_view needle) {
  int n = 0;
  for (auto pos = haystack.find(needle); pos != std::string::npos;
       pos = haystack.find(needle, pos + needle.size())) {
    ++n;
  }
  return n;
}

Signals read_signals(const MenuContext& context) {
  Signals s;
  const auto& m = context.metrics;
  const std::string src = lower(context.kernel_source);
  const double tensor = metric(m, "tensor_engine_active_time_percent");
  const double vector = metric(m, "vector_engine_active_time_percent");
  const double scalar = metric(m, "scalar_engine_active_time_percent");
  const double gpsimd = metric(m, "gpsimd_engine_active_time_percent");
  const double dma = metric(m, "dma_active_time_percent");
  const double busiest = std::max({tensor, vector, scalar, gpsimd});
  s.memory = context.bottleneck == "memory-bound" || (dma > busiest && dma > 30);
  s.compute = context.bottleneck == "compute-bound";
  s.underutilized = context.bottleneck == "underutilized";
  s.matmul = contains(src, "matmul") || metric(m, "matmul_instruction_count") > 0;
  s.transpose = contains(src, "transpose") || metric(m, "transpose_flops") > 0;
  s.exp = contains(src, "exp(") || contains(src, "softmax");
  s.mask = contains(src, "mask") || contains(src, "causal") || contains(src, "affine_select");
  s.loops = contains(src, "affine_range") || contains(src, "sequential_range") ||
            contains(src, "static_range") || contains(src, " in range(");
  s.sequential_loop = contains(src, "sequential_range");
  s.reduction = contains(src, "sum(") || contains(src, "reduce") || contains(src, "mean") ||
                contains(src, "max(");
  std::string code;  // the source without comments, where a "/" is a division
  for (std::size_t start = 0; start < src.size();) {
    auto end = src.find('\n', start);
    end = end == std::string::npos ? src.size() : end;
    const auto line = src.substr(start, end - start);
    code += line.substr(0, line.find('#')) + "\n";
    start = end + 1;
  }
  static const std::regex k_true_division(R"([^/]/[^/=])");
  s.division = contains(code, "divide") || std::regex_search(code, k_true_division);
  s.partition_reduction = contains(code, "partition_reduce") ||
                          contains(code, "partition_all_reduce") || contains(code, "axis=0") ||
                          contains(code, "axis=(0") || contains(code, "axis=[0");
  s.attention = s.exp && s.matmul;
  s.narrow_tiles = !contains(code, "128") && !contains(code, "pmax");
  s.bf16_tolerance = !context.rtol || *context.rtol >= 1e-2;
  // MX fp8 keeps 2-3 mantissa bits (up to ~6-12% error per element, more below a group's
  // largest element): only a loose tolerance the problem states admits it, never the default.
  s.mx_matmul = s.matmul && context.rtol && *context.rtol >= k_mx_min_rtol;
  s.grid_launch = context.programs > 1;
  s.fp32 = !contains(src, "bfloat16") && !contains(src, "bf16");
  const double average_bytes = metric(m, "dma_transfer_average_bytes", -1);
  s.small_dma = average_bytes >= 0 && average_bytes < 256 * 1024;
  s.spills = metric(m, "spill_save_bytes") > 0 || metric(m, "spill_reload_bytes") > 0;
  s.many_instructions = metric(m, "total_instruction_count") > 200;
  s.elementwise_chain = count(src, "nl.multiply") + count(src, "nl.add") +
                            count(src, "nl.subtract") + count(src, "nl.exp") +
                            count(src, "nl.rsqrt") + count(src, "tensor_scalar") +
                            count(src, "nl.divide") >=
                        3;
  s.load_in_loop = s.loops && count(src, "nl.load") + count(src, "dma_copy") >= 2;
  auto hot = [&](const std::string& engine, double pct) {
    const bool first = !context.hot_engines.empty() && context.hot_engines.front() == engine;
    return first || (pct >= busiest && pct > 20);
  };
  s.vector_hot = hot("vector", vector);
  s.scalar_hot = hot("scalar", scalar);
  s.gpsimd_hot = hot("gpsimd", gpsimd);
  s.tensor_hot = hot("tensor", tensor);
  const double others = tensor + vector + scalar + gpsimd - busiest;
  s.unbalanced = busiest > 30 && others < busiest * 0.5;
  // VectorE, ScalarE and GpSimdE can all run element-wise passes, so a hot one next to an idle
  // one is room to move work even when a second engine is busy too.
  const double elementwise_busiest = std::max({vector, scalar, gpsimd});
  const double elementwise_idlest = std::min({vector, scalar, gpsimd});
  s.idle_engine = elementwise_busiest > 50 && elementwise_idlest < elementwise_busiest * 0.4;
  s.compute_side = !s.memory && (s.compute || (busiest > 50 && busiest > dma + 20));
  return s;
}

struct Rule {
  double weight;
  const char* reason;
  bool Signals::*signal;
};

// Per item: what makes it fit (weights add up) and what it needs to apply at all.
struct ItemRules {
  std::vector<Rule> fits;
  bool Signals::*needs = nullptr;
  bool dma_side = false;  // speeds up data movement, not the compute engines
};

const std::map<std::string, ItemRules>& item_rules() {
  using S = Signals;
  static const std::map<std::string, ItemRules> k_rules = {
      {"tile_partitions_128",
       {{{1, "underutilized", &S::underutilized}, {1, "compute-bound", &S::compute}},
        &S::narrow_tiles}},
      {"moving_free_512",
       {{{2, "TensorE busy", &S::tensor_hot}, {1, "compute-bound", &S::compute}}, &S::matmul}},
      {"psum_accumulate_k", {{{2, "uses matmul", &S::matmul}}, &S::matmul}},
      {"hoist_loads",
       {{{2, "loads inside a loop", &S::load_in_loop}, {2, "memory-bound", &S::memory}},
        &S::loops,
        true}},
      {"block_free_dims",
       {{{2, "uses matmul", &S::matmul}, {1, "memory-bound", &S::memory}}, &S::matmul}},
      {"block_k", {{{1, "uses matmul", &S::matmul}, {1, "memory-bound", &S::memory}}, &S::matmul}},
      {"keep_resident",
       {{{2, "memory-bound", &S::memory}, {1, "loads inside a loop", &S::load_in_loop}},
        &S::loops,
        true}},
      {"fuse_passes",
       {{{2, "chain of element-wise ops", &S::elementwise_chain},
         {1, "VectorE busy", &S::vector_hot},
         {1, "memory-bound", &S::memory}}}},
      {"fuse_loops", {{{1, "memory-bound", &S::memory}}, &S::loops, true}},
      {"double_buffer",
       {{{2, "memory-bound", &S::memory}, {1, "loads inside a loop", &S::load_in_loop}},
        &S::loops,
        true}},
      {"independent_buffers",
       {{{2, "underutilized", &S::underutilized}, {1, "memory-bound", &S::memory}}, &S::loops}},
      {"larger_dma",
       {{{3, "small DMA transfers", &S::small_dma}, {2, "memory-bound", &S::memory}},
        nullptr,
        true}},
      {"coalesce_stores",
       {{{2, "small DMA transfers", &S::small_dma}, {1, "memory-bound", &S::memory}},
        &S::loops,
        true}},
      {"balance_engines",
       {{{3, "one engine does most of the work", &S::unbalanced},
         {2, "an element-wise engine idles while another is busy", &S::idle_engine},
         {1, "compute-bound", &S::compute}}}},
      {"activation_fused",
       {{{2, "chain of element-wise ops", &S::elementwise_chain},
         {1, "ScalarE busy", &S::scalar_hot},
         {1, "VectorE busy", &S::vector_hot}}}},
      {"activation_reduce",
       {{{2, "has a reduction", &S::reduction}, {1, "VectorE busy", &S::vector_hot}},
        &S::reduction}},
      {"tensor_scalar_two_ops",
       {{{2, "chain of element-wise ops", &S::elementwise_chain},
         {1, "VectorE busy", &S::vector_hot}}}},
      {"transpose_tensore", {{{2, "transposes", &S::transpose}}, &S::transpose}},
      {"dma_transpose",
       {{{1, "transposes", &S::transpose}, {1, "TensorE busy", &S::tensor_hot}}, &S::transpose}},
      {"avoid_transposes", {{{2, "transposes", &S::transpose}}, &S::transpose}},
      {"bf16_compute",
       {{{1, "fp32 compute", &S::fp32}, {1, "compute-bound", &S::compute}}, &S::bf16_tolerance}},
      {"mx_matmul",
       {{{2, "uses matmul", &S::matmul},
         {2, "TensorE busy", &S::tensor_hot},
         {1, "compute-bound", &S::compute}},
        &S::mx_matmul}},
      {"downcast_early", {{{1, "memory-bound", &S::memory}}, &S::transpose, true}},
      {"spmd_grid",
       {{{1, "compute-bound", &S::compute}, {1, "memory-bound", &S::memory}}, &S::grid_launch}},
      {"loop_reorder",
       {{{1, "uses matmul", &S::matmul}, {1, "loads inside a loop", &S::load_in_loop}}, &S::loops}},
      {"psum_banks", {{{1, "TensorE busy", &S::tensor_hot}}, &S::matmul}},
      {"evict_psum_batched",
       {{{1, "uses matmul", &S::matmul}, {1, "VectorE busy", &S::vector_hot}}, &S::matmul}},
      {"stationary_choice", {{{1, "TensorE busy", &S::tensor_hot}}, &S::matmul}},
      {"affine_range", {{{3, "sequential loop", &S::sequential_loop}}, &S::sequential_loop}},
      {"bn_stats",
       {{{2, "has a reduction", &S::reduction}, {1, "VectorE busy", &S::vector_hot}},
        &S::reduction}},
      {"online_softmax", {{{2, "exponentials", &S::exp}}, &S::attention}},
      {"defer_division", {{{2, "divides", &S::division}}, &S::division}},
      {"reciprocal_scalar",
       {{{2, "divides", &S::division}, {1, "VectorE busy", &S::vector_hot}}, &S::division}},
      {"cross_partition_reduce",
       {{{1, "reduces across partitions", &S::partition_reduction}}, &S::partition_reduction}},
      {"scan_instruction", {{{3, "sequential loop", &S::sequential_loop}}, &S::sequential_loop}},
      {"mask_with_affine_select", {{{2, "masks", &S::mask}}, &S::mask}},
      {"skip_masked_tiles", {{{2, "masks", &S::mask}}, &S::mask}},
      {"specialize_shapes", {{{1, "underutilized", &S::underutilized}}}},
      {"unroll_small_loops", {{{1, "underutilized", &S::underutilized}}, &S::loops}},
      {"software_pipeline",
       {{{2, "underutilized", &S::underutilized}, {1, "memory-bound", &S::memory}},
        &S::loops,
        true}},
      {"hoist_invariants", {{{1, "loads inside a loop", &S::load_in_loop}}, &S::loops}},
      {"reduce_instruction_count",
       {{{2, "many instructions", &S::many_instructions},
         {1, "underutilized", &S::underutilized}}}},
      {"tile_size_knobs", {{{1, "underutilized", &S::underutilized}}}},
      {"avoid_spills", {{{4, "spills", &S::spills}}, &S::spills}},
      {"simplify", {}},
  };
  return k_rules;
}

// An id's words: "double_buffer" -> {"double_buffer", "double buffer", "double-buffer"}.
std::vector<std::string> spellings(const std::string& id) {
  std::string spaced = lower(id);
  std::string dashed = spaced;
  for (std::size_t i = 0; i < spaced.size(); ++i) {
    if (spaced[i] == '_' || spaced[i] == '-') {
      spaced[i] = ' ';
      dashed[i] = '-';
    }
  }
  return {lower(id), spaced, dashed};
}

}  // namespace

std::vector<RankedItem> rank_menu(const std::vector<MenuItem>& items, const MenuContext& context) {
  const Signals signals = read_signals(context);
  std::vector<RankedItem> ranked;
  for (const auto& item : items) {
    if (context.tried.count(item.id) != 0) {
      continue;
    }
    RankedItem entry{item, 1.0, {}};
    if (auto rules = item_rules().find(item.id); rules != item_rules().end()) {
      for (const auto& rule : rules->second.fits) {
        if (signals.*(rule.signal)) {
          entry.score += rule.weight;
          entry.reasons.emplace_back(rule.reason);
        }
      }
      if (rules->second.dma_side && signals.compute_side && entry.score > 1) {
        entry.score = 1;  // below every item that fits the busy engine
        entry.reasons.assign(1, "DMA is not the bottleneck");
      }
      if (rules->second.needs != nullptr && !(signals.*(rules->second.needs))) {
        entry.score = -1;  // does not apply to this kernel as written
        entry.reasons.assign(1, "does not apply as written");
      }
    }
    ranked.push_back(std::move(entry));
  }
  std::stable_sort(ranked.begin(), ranked.end(),
                   [](const RankedItem& a, const RankedItem& b) { return a.score > b.score; });
  return ranked;
}

std::map<std::string, std::string> applied_items(const std::vector<MenuItem>& items,
                                                 std::string_view kernel_source) {
  struct Sign {
    const char* id;
    const char* pattern;  // found in the source: the item is applied
    const char* unless;   // found too: only partly applied, not marked ("" none)
    const char* words;
  };
  static const Sign k_signs[] = {
      {"bf16_compute", R"(bfloat16)", "", "it already uses bfloat16"},
      {"moving_free_512", R"(\b512\b)", "", "a 512-wide tile already appears"},
      {"affine_range", R"(affine_range)", "sequential_range", "its loops already use affine_range"},
      {"activation_reduce", R"(reduce_res\s*=|reduce_op\s*=)", "",
       "it already uses activation's fused reduction"},
      {"bn_stats", R"(bn_stats)", "", "it already uses bn_stats"},
      {"spmd_grid", R"(program_id)", "", "it already reads its program_id (SPMD grid)"},
      {"transpose_tensore", R"(nc_transpose)", "", "it already transposes on TensorE"},
      {"dma_transpose", R"(dma_transpose)", "", "it already uses a DMA transpose"},
      {"tensor_scalar_two_ops", R"(op1\s*=)", "", "it already combines two ops in tensor_scalar"},
      {"activation_fused", R"(activation\([^)]*(bias|scale)\s*=)", "",
       "it already folds scale or bias into activation"},
      {"reciprocal_scalar", R"(reciprocal)", "", "it already uses a reciprocal"},
      {"scan_instruction", R"(tensor_tensor_scan)", "", "it already uses tensor_tensor_scan"},
      {"mask_with_affine_select", R"(affine_select)", "", "it already masks with affine_select"},
  };
  std::set<std::string> ids;
  for (const auto& item : items) {
    ids.insert(item.id);
  }
  const std::string source(kernel_source);
  std::map<std::string, std::string> out;
  for (const auto& sign : k_signs) {
    if (ids.count(sign.id) == 0) {
      continue;
    }
    if (!std::regex_search(source, std::regex(sign.pattern))) {
      continue;
    }
    if (*sign.unless != '\0' && std::regex_search(source, std::regex(sign.unless))) {
      continue;
    }
    out[sign.id] = sign.words;
  }
  return out;
}

std::set<std::string> mentioned_items(const std::vector<MenuItem>& items, std::string_view text) {
  const std::string haystack = lower(text);
  std::set<std::string> found;
  for (const auto& item : items) {
    for (const auto& spelling : spellings(item.id)) {
      if (contains(haystack, spelling)) {
        found.insert(item.id);
        break;
      }
    }
  }
  return found;
}

}  // namespace autocomp::search::prompts
