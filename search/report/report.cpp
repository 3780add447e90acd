#include "search/report/report.hpp"

#include <algorithm>
#include <filesystem>
#include <fstream>
#include <iomanip>
#include <map>
#include <sstream>

#include "search/engine/gain.hpp"
#include "search/prompts/floors.hpp"
#include "search/prompts/profile_text.hpp"

namespace autocomp::search::report {

namespace {

std::string html_escape(const std::string& text) {
  std::string out;
  out.reserve(text.size());
  for (char c : text) {
    switch (c) {
      case '&':
        out += "&amp;";
        break;
      case '<':
        out += "&lt;";
        break;
      case '>':
        out += "&gt;";
        break;
      case '"':
        out += "&quot;";
        break;
      default:
        out += c;
    }
  }
  return out;
}

std::string fixed(double value, int digits = 2) {
  std::ostringstream out;
  out << std::fixed << std::setprecision(digits) << value;
  return out.str();
}

std::string short_key(const std::string& key) {
  return key.substr(0, 12);
}

std::string status_line(const engine::SearchOutcome& outcome) {
  std::string line = outcome.status;
  if (!outcome.stop_reason.empty()) {
    line += " (" + outcome.stop_reason + ")";
  }
  return line;
}

std::string step_title(const engine::Candidate& step, std::size_t index) {
  if (index == 0) {
    return "Input kernel";
  }
  return "Step " + std::to_string(index) + " (iteration " + std::to_string(step.origin.iteration) +
         (step.origin.repair > 0 ? ", repaired" : "") + ")";
}

std::string plan_or_none(const engine::Candidate& step) {
  return step.plan.empty() ? std::string("(no plan recorded)") : step.plan;
}

std::vector<std::string> split_lines(const std::string& text) {
  std::vector<std::string> lines;
  std::string line;
  std::istringstream in(text);
  while (std::getline(in, line)) {
    lines.push_back(line);
  }
  return lines;
}

std::string one_line(const std::string& text, std::size_t max_chars) {
  std::string out;
  for (char c : text) {
    out += (c == '\n' || c == '\r' || c == '\t') ? ' ' : c;
  }
  if (out.size() > max_chars) {
    std::size_t cut = max_chars;
    while (cut > 0 && (static_cast<unsigned char>(out[cut]) & 0xC0) == 0x80) {
      --cut;
    }
    out = out.substr(0, cut) + "...";
  }
  return out;
}

std::string markdown_cell(const std::string& text) {
  std::string out;
  for (char c : text) {
    if (c == '|') {
      out += "\\|";
    } else {
      out += c;
    }
  }
  return out;
}

// The candidate a report should read a profile from: the run's stored evaluation of `key` (the
// outcome's copy may be a re-verification without a profile).
const engine::Candidate* profiled(const ReportInput& input, const engine::Candidate& kernel) {
  if (!kernel.eval.metrics.empty()) {
    return &kernel;
  }
  for (const auto& candidate : input.candidates) {
    if (candidate.key == kernel.key && candidate.correct() && !candidate.eval.metrics.empty()) {
      return &candidate;
    }
  }
  return &kernel;
}

}  // namespace

std::vector<CandidateRow> candidate_rows(const ReportInput& input) {
  const engine::SearchOutcome& outcome = *input.outcome;
  std::map<std::string, const engine::Candidate*> measured;
  if (outcome.baseline.correct()) {
    measured[outcome.baseline.key] = &outcome.baseline;
  }
  for (const auto& candidate : input.candidates) {
    if (candidate.correct() && !candidate.key.empty()) {
      measured.emplace(candidate.key, &candidate);
    }
  }
  std::vector<CandidateRow> rows;
  for (const auto& candidate : input.candidates) {
    if (candidate.parent_key.empty()) {
      continue;  // the input kernel
    }
    CandidateRow row;
    row.origin = candidate.origin.label();
    row.plan = candidate.plan.empty() ? "(no plan)" : one_line(candidate.plan, 240);
    if (candidate.duplicate) {
      row.outcome = "duplicate of an earlier candidate";
    } else if (!candidate.correct()) {
      row.outcome =
          "failed: " + one_line(candidate.eval.failure ? candidate.eval.failure->describe()
                                                       : std::string("incorrect result"),
                                160);
    } else {
      row.latency_us = candidate.latency_us();
      if (candidate.device_us) {
        row.scale = candidate.device_measured ? "device" : "estimate";
        row.simulated_us = candidate.evaluated_us();
      }
      std::string verdict = candidate.key == outcome.best.key ? "winner"
                            : candidate.verdict.empty()       ? "measured"
                                                              : candidate.verdict;
      auto parent = measured.find(candidate.parent_key);
      row.outcome = parent == measured.end()
                        ? verdict
                        : verdict + ", " + engine::change_words(*parent->second, candidate);
    }
    rows.push_back(std::move(row));
  }
  return rows;
}

std::string latency_cell(const CandidateRow& row) {
  if (row.latency_us <= 0) {
    return "-";
  }
  if (row.scale == "device") {
    return fixed(row.latency_us, 3) + " (device; simulator " + fixed(row.simulated_us, 3) + ")";
  }
  if (row.scale == "estimate") {
    return "~" + fixed(row.latency_us, 3) + " (estimate; simulator " + fixed(row.simulated_us, 3) +
           ")";
  }
  return fixed(row.latency_us, 3);
}

std::vector<BusyBar> busy_bars(const ReportInput& input) {
  const engine::SearchOutcome& outcome = *input.outcome;
  const auto before = prompts::compute_floors(profiled(input, outcome.baseline)->eval);
  const auto after = prompts::compute_floors(profiled(input, outcome.best)->eval);
  std::vector<BusyBar> bars;
  if (!before && !after) {
    return bars;
  }
  for (const char* engine : prompts::k_floor_engines) {
    BusyBar bar;
    bar.engine = prompts::engine_name(engine);
    if (before) {
      if (auto it = before->busy_us.find(engine); it != before->busy_us.end()) {
        bar.input_us = it->second;
      }
    }
    if (after) {
      if (auto it = after->busy_us.find(engine); it != after->busy_us.end()) {
        bar.winner_us = it->second;
      }
    }
    if (bar.input_us > 0 || bar.winner_us > 0) {
      bars.push_back(bar);
    }
  }
  return bars;
}

std::string render_busy_svg(const std::vector<BusyBar>& bars) {
  constexpr double width = 640;
  constexpr double left = 90;
  constexpr double right = 90;
  constexpr double top = 30;
  constexpr double bar_height = 14;
  constexpr double group_gap = 12;
  const double height = top + static_cast<double>(bars.size()) * (2 * bar_height + group_gap) + 30;
  std::ostringstream svg;
  svg << "<svg xmlns=\"http://www.w3.org/2000/svg\" id=\"busy-chart\" width=\"" << width
      << "\" height=\"" << height << "\" viewBox=\"0 0 " << width << ' ' << height
      << "\" role=\"img\" aria-label=\"Busy time per engine and DMA, input and winner\">\n";
  svg << "<rect x=\"0\" y=\"0\" width=\"" << width << "\" height=\"" << height
      << "\" fill=\"#ffffff\"/>\n";
  double max_us = 0;
  for (const auto& bar : bars) {
    max_us = std::max({max_us, bar.input_us, bar.winner_us});
  }
  if (bars.empty() || max_us <= 0) {
    svg << "<text x=\"20\" y=\"40\">No profile</text>\n</svg>\n";
    return svg.str();
  }
  const double span = width - left - right;
  svg << "<rect x=\"" << left << "\" y=\"8\" width=\"12\" height=\"10\" fill=\"#9aa5b1\"/>"
      << "<text x=\"" << left + 16 << "\" y=\"17\" font-size=\"11\">input</text>\n";
  svg << "<rect x=\"" << left + 70 << "\" y=\"8\" width=\"12\" height=\"10\" fill=\"#1f77b4\"/>"
      << "<text x=\"" << left + 86 << "\" y=\"17\" font-size=\"11\">winner</text>\n";
  double y = top;
  for (const auto& bar : bars) {
    svg << "<text x=\"" << left - 8 << "\" y=\"" << fixed(y + bar_height + 4, 1)
        << "\" font-size=\"12\" text-anchor=\"end\">" << html_escape(bar.engine) << "</text>\n";
    const std::pair<const char*, double> kernels[] = {{"input", bar.input_us},
                                                      {"winner", bar.winner_us}};
    for (const auto& [kernel, us] : kernels) {
      const double w = span * us / max_us;
      svg << "<rect class=\"bar\" data-engine=\"" << html_escape(bar.engine) << "\" data-kernel=\""
          << kernel << "\" data-us=\"" << fixed(us, 3) << "\" x=\"" << left << "\" y=\""
          << fixed(y, 1) << "\" width=\"" << fixed(w, 2) << "\" height=\"" << bar_height
          << "\" fill=\"" << (std::string(kernel) == "input" ? "#9aa5b1" : "#1f77b4")
          << "\"><title>" << html_escape(bar.engine) << ", " << kernel << ": " << fixed(us, 3)
          << " us</title></rect>\n";
      svg << "<text x=\"" << fixed(left + w + 4, 1) << "\" y=\"" << fixed(y + bar_height - 3, 1)
          << "\" font-size=\"10\">" << fixed(us, 1) << " us</text>\n";
      y += bar_height;
    }
    y += group_gap;
  }
  svg << "</svg>\n";
  return svg.str();
}

std::string unified_diff(const std::string& before, const std::string& after,
                         const std::string& before_name, const std::string& after_name) {
  if (before == after) {
    return {};
  }
  const auto a = split_lines(before);
  const auto b = split_lines(after);
  const std::size_t n = a.size();
  const std::size_t m = b.size();
  // Longest common subsequence of lines, then the edit script.
  std::vector<std::vector<unsigned>> lcs(n + 1, std::vector<unsigned>(m + 1, 0));
  for (std::size_t i = n; i-- > 0;) {
    for (std::size_t j = m; j-- > 0;) {
      lcs[i][j] = a[i] == b[j] ? lcs[i + 1][j + 1] + 1 : std::max(lcs[i + 1][j], lcs[i][j + 1]);
    }
  }
  struct Edit {
    char kind;  // ' ', '-', '+'
    std::size_t a_line;
    std::size_t b_line;
    std::string text;
  };
  std::vector<Edit> edits;
  std::size_t i = 0;
  std::size_t j = 0;
  while (i < n || j < m) {
    if (i < n && j < m && a[i] == b[j]) {
      edits.push_back({' ', i, j, a[i]});
      ++i;
      ++j;
    } else if (i < n && (j == m || lcs[i + 1][j] >= lcs[i][j + 1])) {
      edits.push_back({'-', i, j, a[i]});  // removals before additions, as diff(1) shows them
      ++i;
    } else {
      edits.push_back({'+', i, j, b[j]});
      ++j;
    }
  }
  constexpr std::size_t context = 3;
  std::ostringstream out;
  out << "--- " << before_name << "\n+++ " << after_name << "\n";
  std::size_t k = 0;
  while (k < edits.size()) {
    if (edits[k].kind == ' ') {
      ++k;
      continue;
    }
    // A hunk: from `context` lines before this change to `context` lines after the last change
    // that is within 2 * context lines of the previous one.
    const std::size_t start = k >= context ? k - context : 0;
    std::size_t end = k;
    std::size_t last_change = k;
    while (end < edits.size()) {
      if (edits[end].kind != ' ') {
        last_change = end;
      } else if (end - last_change > 2 * context) {
        break;
      }
      ++end;
    }
    end = std::min(edits.size(), last_change + context + 1);
    std::size_t a_count = 0;
    std::size_t b_count = 0;
    for (std::size_t e = start; e < end; ++e) {
      a_count += edits[e].kind != '+' ? 1 : 0;
      b_count += edits[e].kind != '-' ? 1 : 0;
    }
    out << "@@ -" << edits[start].a_line + 1 << ',' << a_count << " +" << edits[start].b_line + 1
        << ',' << b_count << " @@\n";
    for (std::size_t e = start; e < end; ++e) {
      out << edits[e].kind << edits[e].text << "\n";
    }
    k = end;
  }
  return out.str();
}

namespace {

std::string winner_diff(const ReportInput& input) {
  const engine::SearchOutcome& outcome = *input.outcome;
  return unified_diff(outcome.baseline.source, outcome.best.source, "input kernel", "winner");
}

}  // namespace

std::vector<std::pair<int, double>> latency_points(const engine::SearchOutcome& outcome) {
  std::vector<std::pair<int, double>> points;
  if (outcome.baseline.correct()) {
    points.emplace_back(0, outcome.baseline.latency_us());
  }
  for (const auto& summary : outcome.history) {
    if (summary.best_latency_us > 0) {
      points.emplace_back(summary.iteration, summary.best_latency_us);
    }
  }
  return points;
}

std::string render_latency_svg(const std::vector<std::pair<int, double>>& points) {
  constexpr double width = 640;
  constexpr double height = 320;
  constexpr double left = 70;
  constexpr double right = 20;
  constexpr double top = 20;
  constexpr double bottom = 50;
  std::ostringstream svg;
  svg << "<svg xmlns=\"http://www.w3.org/2000/svg\" width=\"" << width << "\" height=\"" << height
      << "\" viewBox=\"0 0 " << width << ' ' << height
      << "\" role=\"img\" aria-label=\"Best latency per iteration\">\n";
  svg << "<rect x=\"0\" y=\"0\" width=\"" << width << "\" height=\"" << height
      << "\" fill=\"#ffffff\"/>\n";
  if (points.empty()) {
    svg << "<text x=\"20\" y=\"40\">No measurements</text>\n</svg>\n";
    return svg.str();
  }
  int max_iteration = 1;
  double max_latency = 0;
  double min_latency = points.front().second;
  for (const auto& [iteration, latency] : points) {
    max_iteration = std::max(max_iteration, iteration);
    max_latency = std::max(max_latency, latency);
    min_latency = std::min(min_latency, latency);
  }
  const double y_max = max_latency * 1.05;
  const double y_min = 0;
  auto x_of = [&](double iteration) {
    return left + (width - left - right) * iteration / max_iteration;
  };
  auto y_of = [&](double latency) {
    return top + (height - top - bottom) * (1 - (latency - y_min) / (y_max - y_min));
  };
  // Axes and labels.
  svg << "<line x1=\"" << left << "\" y1=\"" << top << "\" x2=\"" << left << "\" y2=\""
      << height - bottom << "\" stroke=\"#333\"/>\n";
  svg << "<line x1=\"" << left << "\" y1=\"" << height - bottom << "\" x2=\"" << width - right
      << "\" y2=\"" << height - bottom << "\" stroke=\"#333\"/>\n";
  for (int tick = 0; tick <= 4; ++tick) {
    double value = y_max * tick / 4;
    svg << "<text x=\"" << left - 6 << "\" y=\"" << fixed(y_of(value) + 4, 1)
        << "\" font-size=\"11\" text-anchor=\"end\">" << fixed(value, 1) << "</text>\n";
  }
  const int step = std::max(1, max_iteration / 10);
  for (int iteration = 0; iteration <= max_iteration; iteration += step) {
    svg << "<text x=\"" << fixed(x_of(iteration), 1) << "\" y=\"" << height - bottom + 16
        << "\" font-size=\"11\" text-anchor=\"middle\">" << iteration << "</text>\n";
  }
  svg << "<text x=\"" << (left + width - right) / 2 << "\" y=\"" << height - 10
      << "\" font-size=\"12\" text-anchor=\"middle\">iteration</text>\n";
  svg << "<text x=\"14\" y=\"" << (top + height - bottom) / 2
      << "\" font-size=\"12\" text-anchor=\"middle\" transform=\"rotate(-90 14 "
      << (top + height - bottom) / 2 << ")\">best latency (us)</text>\n";
  // The line, stepped: the best only changes at the end of an iteration.
  svg << "<polyline fill=\"none\" stroke=\"#1f77b4\" stroke-width=\"2\" points=\"";
  for (const auto& [iteration, latency] : points) {
    svg << fixed(x_of(iteration), 1) << ',' << fixed(y_of(latency), 1) << ' ';
  }
  svg << "\"/>\n";
  for (const auto& [iteration, latency] : points) {
    svg << "<circle cx=\"" << fixed(x_of(iteration), 1) << "\" cy=\"" << fixed(y_of(latency), 1)
        << "\" r=\"3\" fill=\"#1f77b4\"><title>iteration " << iteration << ": " << fixed(latency, 3)
        << " us</title></circle>\n";
  }
  svg << "</svg>\n";
  return svg.str();
}

std::string render_markdown(const ReportInput& input) {
  const engine::SearchOutcome& outcome = *input.outcome;
  std::ostringstream md;
  md << "# autocomp search report: run " << outcome.run_id << "\n\n";
  md << "| | |\n|---|---|\n";
  md << "| kernel | `" << input.kernel_path << "` |\n";
  md << "| problem | `" << input.problem_path << "` |\n";
  md << "| target | " << outcome.config.target << " |\n";
  md << "| backend | " << input.backend << " |\n";
  std::string llms;
  for (const auto& spec : input.llm_specs) {
    llms += (llms.empty() ? "" : ", ") + spec;
  }
  md << "| models | " << llms << " |\n";
  md << "| status | " << status_line(outcome) << " |\n";
  md << "| baseline latency | " << fixed(outcome.baseline.latency_us(), 3) << " us |\n";
  md << "| best latency | " << fixed(outcome.best.latency_us(), 3) << " us |\n";
  md << "| speedup | " << fixed(outcome.speedup(), 3) << "x |\n";
  if (!outcome.confirmation.empty()) {
    md << "| device confirmation | " << markdown_cell(outcome.confirmation) << " |\n";
  }
  md << "| iterations | " << outcome.iterations_done << " of " << outcome.config.iterations
     << " (beam " << outcome.config.beam << ", plans " << outcome.config.plans << ", impls "
     << outcome.config.impls << ", seed " << outcome.config.seed << ") |\n";
  md << "| candidates | " << outcome.candidates_evaluated << " evaluated, "
     << outcome.candidates_failed << " failed, " << outcome.duplicates << " duplicates, "
     << outcome.repairs << " repairs |\n";
  md << "| LLM spend | " << outcome.llm_calls << " calls, " << outcome.tokens << " tokens, $"
     << fixed(outcome.cost_usd, 4) << " |\n";
  if (!input.best_path.empty()) {
    md << "| best kernel | `" << input.best_path << "` |\n";
  }
  md << "\n## Best latency per iteration\n\n| iteration | best latency (us) |\n|---|---|\n";
  for (const auto& [iteration, latency] : latency_points(outcome)) {
    md << "| " << iteration << " | " << fixed(latency, 3) << " |\n";
  }
  md << "\n## Lineage of the winner\n\n";
  for (std::size_t i = 0; i < outcome.lineage.size(); ++i) {
    const auto& step = outcome.lineage[i];
    md << "### " << step_title(step, i) << ": " << fixed(step.latency_us(), 3) << " us\n\n";
    md << "Kernel `" << short_key(step.key) << "`";
    if (i > 0) {
      md << ", proposed by " << step.origin.proposer << " (" << step.origin.label() << ")";
    }
    md << ".\n\n";
    if (i > 0) {
      md << "Plan:\n\n";
      std::istringstream lines(plan_or_none(step));
      std::string line;
      while (std::getline(lines, line)) {
        md << "> " << line << "\n";
      }
      md << "\n";
    }
  }
  if (const auto rows = candidate_rows(input); !rows.empty()) {
    md << "## Every candidate\n\n| origin | plan | outcome | latency (us) |\n|---|---|---|---|\n";
    for (const auto& row : rows) {
      md << "| " << row.origin << " | " << markdown_cell(row.plan) << " | "
         << markdown_cell(row.outcome) << " | " << latency_cell(row) << " |\n";
    }
    md << "\n";
  }
  if (const auto bars = busy_bars(input); !bars.empty()) {
    md << "## Engine and DMA busy time, input and winner\n\n| engine | input (us) | winner (us) "
          "|\n|---|---|---|\n";
    for (const auto& bar : bars) {
      md << "| " << bar.engine << " | " << fixed(bar.input_us, 3) << " | "
         << fixed(bar.winner_us, 3) << " |\n";
    }
    md << "\n";
  }
  if (const auto diff = winner_diff(input); !diff.empty()) {
    md << "## The winner against the input\n\n```diff\n" << diff << "```\n\n";
  }
  if (!input.lessons.empty()) {
    md << "## Lessons learned\n\n";
    for (const auto& lesson : input.lessons) {
      md << "- " << lesson << "\n";
    }
    md << "\n";
  }
  md << "## Best kernel\n\n```python\n" << outcome.best.source;
  if (!outcome.best.source.empty() && outcome.best.source.back() != '\n') {
    md << '\n';
  }
  md << "```\n";
  return md.str();
}

std::string render_html(const ReportInput& input) {
  const engine::SearchOutcome& outcome = *input.outcome;
  std::ostringstream html;
  html << "<!DOCTYPE html>\n<html lang=\"en\">\n<head>\n<meta charset=\"utf-8\">\n<title>autocomp "
          "run "
       << html_escape(outcome.run_id) << "</title>\n<style>\n"
       << "body{font-family:system-ui,sans-serif;max-width:900px;margin:2em auto;color:#222}\n"
       << "table{border-collapse:collapse}td,th{border:1px solid #ccc;padding:4px 8px;"
          "text-align:left}\n"
       << "blockquote{border-left:3px solid #1f77b4;margin:0.5em 0;padding:0.2em 1em;"
          "white-space:pre-wrap}\n"
       << "pre{background:#f6f8fa;padding:1em;overflow:auto}\n"
       << ".add{background:#e6ffec;color:#116329}.del{background:#ffebe9;color:#82071e}"
          ".hunk{color:#6639ba}.file{font-weight:bold}\n</style>\n</head>\n<body>\n";
  html << "<h1>autocomp search report: run " << html_escape(outcome.run_id) << "</h1>\n";
  html << "<table>\n";
  auto row = [&html](const std::string& name, const std::string& value) {
    html << "<tr><th>" << html_escape(name) << "</th><td>" << html_escape(value) << "</td></tr>\n";
  };
  row("kernel", input.kernel_path);
  row("problem", input.problem_path);
  row("target", outcome.config.target);
  row("backend", input.backend);
  std::string llms;
  for (const auto& spec : input.llm_specs) {
    llms += (llms.empty() ? "" : ", ") + spec;
  }
  row("models", llms);
  row("status", status_line(outcome));
  row("baseline latency", fixed(outcome.baseline.latency_us(), 3) + " us");
  row("best latency", fixed(outcome.best.latency_us(), 3) + " us");
  row("speedup", fixed(outcome.speedup(), 3) + "x");
  if (!outcome.confirmation.empty()) {
    row("device confirmation", outcome.confirmation);
  }
  row("iterations",
      std::to_string(outcome.iterations_done) + " of " + std::to_string(outcome.config.iterations));
  row("candidates", std::to_string(outcome.candidates_evaluated) + " evaluated, " +
                        std::to_string(outcome.candidates_failed) + " failed, " +
                        std::to_string(outcome.duplicates) + " duplicates, " +
                        std::to_string(outcome.repairs) + " repairs");
  row("LLM spend", std::to_string(outcome.llm_calls) + " calls, " + std::to_string(outcome.tokens) +
                       " tokens, $" + fixed(outcome.cost_usd, 4));
  if (!input.best_path.empty()) {
    row("best kernel", input.best_path);
  }
  html << "</table>\n<h2>Best latency per iteration</h2>\n";
  html << render_latency_svg(latency_points(outcome));
  html << "<h2>Lineage of the winner</h2>\n<ol start=\"0\">\n";
  for (std::size_t i = 0; i < outcome.lineage.size(); ++i) {
    const auto& step = outcome.lineage[i];
    html << "<li><strong>" << html_escape(step_title(step, i))
         << "</strong>: " << fixed(step.latency_us(), 3) << " us, kernel <code>"
         << short_key(step.key) << "</code>";
    if (i > 0) {
      html << "<blockquote class=\"plan\">" << html_escape(plan_or_none(step)) << "</blockquote>";
    }
    html << "</li>\n";
  }
  html << "</ol>\n";
  if (const auto rows = candidate_rows(input); !rows.empty()) {
    html << "<h2>Every candidate</h2>\n<table id=\"candidates\">\n<tr><th>origin</th><th>plan</th>"
            "<th>outcome</th><th>latency (us)</th></tr>\n";
    for (const auto& candidate : rows) {
      html << "<tr><td><code>" << html_escape(candidate.origin) << "</code></td><td>"
           << html_escape(candidate.plan) << "</td><td>" << html_escape(candidate.outcome)
           << "</td><td>" << html_escape(latency_cell(candidate)) << "</td></tr>\n";
    }
    html << "</table>\n";
  }
  if (const auto bars = busy_bars(input); !bars.empty()) {
    html << "<h2>Engine and DMA busy time, input and winner</h2>\n" << render_busy_svg(bars);
  }
  if (const auto diff = winner_diff(input); !diff.empty()) {
    html << "<h2>The winner against the input</h2>\n<pre id=\"winner-diff\"><code>";
    for (const auto& line : split_lines(diff)) {
      const char* cls = line.rfind("+++", 0) == 0 || line.rfind("---", 0) == 0 ? "file"
                        : line.rfind("@@", 0) == 0                             ? "hunk"
                        : !line.empty() && line[0] == '+'                      ? "add"
                        : !line.empty() && line[0] == '-'                      ? "del"
                                                                               : "ctx";
      html << "<span class=\"" << cls << "\">" << html_escape(line) << "</span>\n";
    }
    html << "</code></pre>\n";
  }
  if (!input.lessons.empty()) {
    html << "<h2>Lessons learned</h2>\n<ul>\n";
    for (const auto& lesson : input.lessons) {
      html << "<li>" << html_escape(lesson) << "</li>\n";
    }
    html << "</ul>\n";
  }
  html << "<h2>Best kernel</h2>\n<pre><code>" << html_escape(outcome.best.source)
       << "</code></pre>\n</body>\n</html>\n";
  return html.str();
}

core::Result<std::vector<std::string>> write_report(const ReportInput& input,
                                                    const std::string& dir) {
  namespace fs = std::filesystem;
  std::error_code error;
  fs::create_directories(dir, error);
  if (error) {
    return core::make_failure(core::FailureKind::io_error, "report",
                              "cannot create " + dir + ": " + error.message());
  }
  std::vector<std::pair<std::string, std::string>> files{
      {(fs::path(dir) / "report.html").string(), render_html(input)},
      {(fs::path(dir) / "report.md").string(), render_markdown(input)}};
  std::vector<std::string> written;
  for (const auto& [path, content] : files) {
    const std::string temporary = path + ".tmp";
    {
      std::ofstream out(temporary, std::ios::binary | std::ios::trunc);
      out << content;
      if (!out) {
        return core::make_failure(core::FailureKind::io_error, "report",
                                  "cannot write " + temporary);
      }
    }
    fs::rename(temporary, path, error);
    if (error) {
      return core::make_failure(core::FailureKind::io_error, "report",
                                "cannot rename " + temporary + ": " + error.message());
    }
    written.push_back(path);
  }
  return written;
}

}  // namespace autocomp::search::report
