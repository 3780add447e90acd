#pragma once

#include <cstdint>
#include <map>
#include <optional>
#include <string>
#include <string_view>
#include <vector>

#include "backends/backend.hpp"
#include "core/failure.hpp"
#include "core/result.hpp"
#include "search/llm/provider.hpp"
#include "search/prompts/floors.hpp"
#include "search/prompts/library.hpp"
#include "search/prompts/reflexion_record.hpp"

namespace autocomp::search::prompts {

// The line the implementation prompt asks a model to put directly above a tunable constant it
// introduces, e.g. "# autocomp: knob TILE_N = [128, 256, 512]" followed by "TILE_N = 128".
inline constexpr std::string_view k_knob_syntax = "# autocomp: knob NAME = [v1, v2, v3]";

// A kernel as the prompts show it: source plus whatever measurements exist.
struct KernelSnapshot {
  std::string source;
  std::string function_name;  // empty: detected from the source
  std::optional<double> latency_us;
  std::map<std::string, double> metrics;    // neuron-profile summary names
  std::map<std::string, double> roofline;   // PROTOCOL.md roofline names
  std::string bottleneck;                   // compute-bound | memory-bound | underutilized | ""
  std::vector<backends::Hotspot> hotspots;  // busiest source lines first
  std::vector<backends::EngineWait> waits;  // engines idle on others, largest first
  std::optional<Floors> floors;             // busy time per engine and the modelled floor
};

// How a planning prompt asks for its strategy.
enum class PlanVariant {
  pick,      // apply exactly one item of the (dropped-out) menu
  inspired,  // invent a strategy inspired by the menu
  unlike,    // propose a strategy unlike anything on the menu
  free,      // dropout left no menu (p = 1): propose the most promising change
};
std::string_view to_string(PlanVariant variant);

struct PlanPromptInput {
  std::string target = "trn2";  // selects arch/<target>.md and menus/<target>.md
  KernelSnapshot kernel;
  std::optional<double> baseline_latency_us;  // the starting kernel's latency, for context
  std::string problem_notes;                  // optional: shapes, dtypes, tolerances
  std::vector<std::string> recent_failures;   // short lines; empty: section omitted
  std::vector<std::string> lessons;           // optimization memory; empty: section omitted
  std::vector<std::string> reflexions;        // empty: section omitted
  std::vector<std::string> tried_plans;       // plans already tried on this kernel; may be empty
  // The previous iteration's children: plan, outcome and profile difference from their parent.
  std::vector<std::string> recent_results;
  // Plans already chosen for this kernel in this iteration (being implemented now).
  std::vector<std::string> sibling_plans;
  int iteration = 1;  // 1-based
  int total_iterations = 10;
  double dropout = 0.7;               // probability of dropping each menu item
  double inspired_probability = 0.1;  // chance of the `inspired` variant
  double unlike_probability = 0.1;    // chance of the `unlike` variant
  std::uint64_t seed = 0;             // same input and seed -> same prompt
  // Plan request k (>= 0) of a parent always shows the k-th best-fitting menu item (cycling over
  // the items the profile calls for), so dropout never leaves a request without a fitting item
  // and sibling requests lead with different ones; -1: no such guarantee.
  int plan_index = -1;
  std::optional<double> rtol;  // the problem's relative tolerance (menu relevance)
  long long programs = 1;      // programs the evaluation launches (menu relevance)
};

struct PlanPrompt {
  llm::CompletionRequest request;  // purpose "plan"
  PlanVariant variant = PlanVariant::pick;
  std::vector<std::string> menu_ids;      // items that survived dropout, in menu order
  std::vector<std::string> instructions;  // NKI calls detected in the kernel
};

struct ImplementPromptInput {
  std::string target = "trn2";
  KernelSnapshot kernel;  // the parent being rewritten
  std::string plan;
  std::string problem_notes;
  std::vector<std::string> lessons;  // shown in order, at most max_implement_lessons
};

struct RepairPromptInput {
  std::string target = "trn2";
  std::string source;         // the failing kernel
  std::string function_name;  // empty: detected
  std::string plan;           // the plan it was implementing; may be empty
  core::Failure failure;      // kind, message and line (when known)
  std::string details;        // extra compiler or runtime output; truncated in the prompt
  int attempt = 1;
  int max_attempts = 2;
};

// One finished attempt, for lesson summaries.
struct AttemptRecord {
  std::string plan;
  std::optional<double> parent_latency_us;
  std::optional<double> latency_us;
  std::string outcome;  // "faster", "slower", "compile_error: ...", ...
};

struct SummarizeLessonsInput {
  std::string target = "trn2";
  std::string problem_notes;  // shapes, dtypes and tolerances; empty: section omitted
  std::vector<AttemptRecord> attempts;
  std::vector<std::string> existing_lessons;
  // Parallel to existing_lessons when not empty: each lesson's store id (shown as "L<id>", so a
  // reply can name what it keeps or merges) and its evidence in words.
  std::vector<std::int64_t> existing_ids;
  std::vector<std::string> existing_evidence;
  int max_lessons = 8;
};

struct ReflectInput {
  std::string target = "trn2";
  std::string plan;
  KernelSnapshot parent;
  KernelSnapshot child;  // source may be empty when the attempt produced no code
  std::string outcome;   // what happened, in words ("3.1x slower", "mismatch on seed 2", ...)
};

struct PromptBuilderOptions {
  int plan_max_tokens = 8192;
  int code_max_tokens = 16384;
  int note_max_tokens = 2048;  // summarize and reflect
  double plan_temperature = 0.9;
  double code_temperature = 0.4;
  double note_temperature = 0.3;
  std::size_t max_details_chars = 3000;  // compiler output kept in a repair prompt
  std::size_t max_metrics = 64;  // profile entries shown in a planning prompt; the rest are named
  std::size_t max_implement_lessons = 8;  // lessons shown in an implementation prompt
};

// Assembles the requests sent to models from plain inputs. Every file is read from the prompts
// folder at call time (templates/, arch/, menus/, isa/); a missing file is a failure naming its
// path. Thread-safe (no mutable state).
class PromptBuilder {
 public:
  explicit PromptBuilder(PromptLibrary library, PromptBuilderOptions options = {});
  // Resolves the prompts folder (see resolve_prompts_dir) when `dir` is empty.
  static core::Result<PromptBuilder> open(const std::string& dir = "",
                                          PromptBuilderOptions options = {});

  core::Result<PlanPrompt> plan(const PlanPromptInput& input) const;
  core::Result<llm::CompletionRequest> implement(const ImplementPromptInput& input) const;
  core::Result<llm::CompletionRequest> repair(const RepairPromptInput& input) const;
  core::Result<llm::CompletionRequest> summarize_lessons(const SummarizeLessonsInput& input) const;
  core::Result<llm::CompletionRequest> reflect(const ReflectInput& input) const;

  const PromptLibrary& library() const { return m_library; }

 private:
  core::Result<std::string> system_text(const std::string& target) const;
  core::Result<std::string> render(const std::string& relative,
                                   std::map<std::string, std::string> values) const;

  PromptLibrary m_library;
  PromptBuilderOptions m_options;
};

// Parses the lesson list a summarize_lessons reply holds: lines starting with "- " or "* " or
// "1. ", trimmed, at most `max_lessons`.
std::vector<std::string> parse_lessons(std::string_view reply, std::size_t max_lessons = 8);

// Lessons without near-duplicates: a lesson whose words mostly repeat an earlier one's (Jaccard
// similarity of their word sets >= `threshold`) is dropped; order is kept.
std::vector<std::string> merge_lessons(const std::vector<std::string>& lessons,
                                       double threshold = 0.6);

// The lessons of a summarize reply that `existing` does not already hold (near-duplicates
// dropped, see merge_lessons), at most `max_lessons`.
std::vector<std::string> new_lessons(std::string_view reply,
                                     const std::vector<std::string>& existing,
                                     std::size_t max_lessons = 8);

// One lesson of a merged summary: its text and the recorded lessons ("(L3, L7) text") it keeps
// or merges.
struct MergedLesson {
  std::string text;
  std::vector<std::int64_t> from;
};
// The lessons of a summarize reply with the ids they name; at most `max_lessons`; each bounded by
// whole sentences (cut_at_sentence, 400 characters).
std::vector<MergedLesson> parse_merged_lessons(std::string_view reply, std::size_t max_lessons = 8);

// `text` when it fits in `max_chars`, else its leading whole sentences that fit; when even the
// first sentence does not fit, that whole sentence (never a cut mid-sentence).
std::string cut_at_sentence(const std::string& text, std::size_t max_chars);

// How much two lessons say the same (Jaccard similarity of their word sets, scope ignored).
double lesson_similarity(const std::string& a, const std::string& b);

// Lessons carry their workload (the problem's kernel function) in the text: "[workload] lesson".
std::string scope_lesson(const std::string& lesson, const std::string& workload);
// For a prompt about `workload`: its own lessons without the tag, other workloads' lessons
// labelled "(from another workload: w)", unscoped ones unchanged; near-duplicates merged.
std::vector<std::string> lessons_for(const std::vector<std::string>& lessons,
                                     const std::string& workload);

// Reads "field: value" lines (diagnosis_right, fix_worked, expected, actual, lessons, avoid,
// try_next; case and markdown emphasis ignored; a value may continue on following lines). Never
// fails: a reply with none of the fields gives a record with only raw_text.
ReflexionRecord parse_reflexion(std::string_view reply);

// One line for a planning prompt ("fix worked: no; expected ...; actual ...; avoid ..."); empty
// when the record holds nothing structured.
std::string describe_reflexion(const ReflexionRecord& record, std::size_t max_chars = 600);

}  // namespace autocomp::search::prompts
