#pragma once

#include <map>
#include <nlohmann/json.hpp>
#include <string>
#include <vector>

#include "backends/backend.hpp"
#include "core/failure.hpp"

namespace autocomp::tools {

struct EvaluationOutcome;

// JSON shapes shared by the evaluation tools' structured results (documented in docs/tools.md).
nlohmann::json failure_json(const core::Failure& failure);
nlohmann::json seeds_json(const std::vector<backends::SeedCheck>& seeds);
// {min, median, max} and, when `with_samples`, the raw samples.
nlohmann::json latency_json(const backends::LatencyStats& latency, bool with_samples);
// Where a result came from: backend, host, device, target, harness_version, cached, steps.
nlohmann::json provenance_json(const backends::EvalResult& result, bool cached);
// The full result, as served by the autocomp://evaluations/{id} resource.
nlohmann::json full_result_json(const backends::EvalResult& result);

// Percent of peak under each named rule the roofline carries (the harness's `pct_of_peak_<rule>`
// and peak figures): {"rule": headline rule, "<rule>": {"percent", "theoretical_us", "peaks"}},
// each rule also with its definition ("rule") when `define_rules` (brief answers leave it out).
// Empty when the roofline has none.
nlohmann::json percent_of_peak_json(const std::map<std::string, double>& roofline,
                                    bool define_rules = true);

// One line for people: "correct on 5/5 seeds" or the failure, used in summaries.
std::string verdict_text(const backends::EvalResult& result);

// How much an evaluation tool answers: `brief` (the default) carries what decides the next step;
// `full` adds the whole record (per-seed errors, samples, every metric, timings).
enum class Detail { brief, full };
Detail parse_detail(const nlohmann::json& arguments);
// Adds the `detail` property to an evaluation tool's input schema.
nlohmann::json with_detail_argument(nlohmann::json input_schema);

// How the result was measured, one line: the receipt's summary, or what the result itself names
// when the harness sent no receipt ("sim trn2 on localhost").
std::string receipt_line(const backends::EvalResult& result);

// The fields every brief evaluation answer starts with: kernel, candidate, evaluation_id, details
// (the resource with the whole record), cached, measured (receipt_line).
nlohmann::json brief_header_json(const EvaluationOutcome& outcome);
// An output schema of the tool's own `properties` and `required` fields; the header fields are
// in every answer but not listed.
nlohmann::json brief_output_schema(nlohmann::json properties,
                                   const std::vector<std::string>& required);

// The busiest source lines, at most `limit`, each {line, text, engine, share_pct, instructions,
// us_per_instr (when the time is known)}, text cut to 80 characters;
// a missing `text` is taken from `kernel_source` (1-based line numbers).
nlohmann::json hotspots_json(const std::vector<backends::Hotspot>& hotspots,
                             const std::string& kernel_source, std::size_t limit);
// Engines idle on others, at most `limit`, each {engine, waiting_on, idle_pct, line}.
nlohmann::json waits_json(const std::vector<backends::EngineWait>& waits, std::size_t limit);

// Engine names as people write them: "tensor" -> "TensorE", "dma" -> "DMA".
std::string engine_label(const std::string& engine);
// "line 31 (VectorE 40.0%, 12 instr, 0.5 us each): out = nl.multiply(a, b)"
std::string describe_hotspot(const nlohmann::json& hotspot);
// "VectorE idle 40% waiting on DMA at line 31"
std::string describe_wait(const nlohmann::json& wait);

// Line `line` (1-based) of `source`, trimmed and cut to `max_chars`; "" when out of range.
std::string source_line(const std::string& source, int line, std::size_t max_chars = 100);

// Compact number rendering for answers: 4 significant digits, as text or as a JSON number.
std::string format_number(double value);
double round_sig(double value);

// The text block of a brief answer: `lines` joined, then the receipt and the details resource.
std::string brief_text(const std::vector<std::string>& lines, const nlohmann::json& header);

}  // namespace autocomp::tools
