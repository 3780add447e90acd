#include "search/engine/learning.hpp"

#include <spdlog/spdlog.h>

#include <algorithm>
#include <cmath>
#include <cstdio>
#include <map>

#include "core/hash.hpp"
#include "core/text.hpp"
#include "search/engine/gain.hpp"
#include "search/prompts/profile_text.hpp"
#include "search/prompts/prompt_builder.hpp"

namespace autocomp::search::engine {

namespace {

constexpr double k_lesson_speedup = 1.04;       // a child this much faster than its parent
constexpr double k_regression_slowdown = 1.25;  // a correct child this much slower
constexpr double k_same_lesson = 0.6;           // word overlap of two lessons saying the same

// How strongly a speedup supports a lesson: far from 1 either way; unknown (0) counts as 1.
double evidence_value(double speedup) {
  if (!(speedup > 0) || !std::isfinite(speedup)) {
    return 1.0;
  }
  return std::max(speedup, 1.0 / speedup);
}

std::string format_ratio(double ratio) {
  char buffer[32];
  std::snprintf(buffer, sizeof(buffer), "%.2fx", ratio);
  return buffer;
}

// A recorded lesson's evidence in words for the merge prompt.
std::string evidence_words(const store::Lesson& lesson) {
  std::string out;
  if (lesson.speedup > 1) {
    out = "a child " + format_ratio(lesson.speedup) + " faster";
  } else if (lesson.speedup > 0) {
    out = "a child " + format_ratio(1 / lesson.speedup) + " slower";
  }
  if (!lesson.evidence.empty()) {
    out += (out.empty() ? "" : "; ") + lesson.evidence;
  }
  return out.empty() ? "no measured speedup recorded" : out;
}

bool was_cancelled(const backends::EvalResult& result) {
  return result.failure && result.failure->kind == core::FailureKind::cancelled;
}

// The measured outcome of a child against its parent, in words.
std::string outcome_text(const Candidate& child, double parent_us) {
  if (!child.correct()) {
    return child.eval.failure ? child.eval.failure->describe()
                              : std::string("incorrect result (outputs differ from the reference)");
  }
  const double child_us = child.latency_us();
  if (child_us <= 0 || parent_us <= 0) {
    return "correct";
  }
  return "correct, " + core::describe_speed_change(parent_us, child_us);
}

// How good an attempt's result is, to pick one child per plan: faster correct ones first.
bool better_attempt(const Candidate& a, const Candidate& b) {
  if (a.correct() != b.correct()) {
    return a.correct();
  }
  if (a.correct()) {
    return a.latency_us() < b.latency_us();
  }
  return b.origin < a.origin;  // among failures, the last repair says most
}

}  // namespace

std::vector<std::string> LessonsStep::for_prompts() {
  m_lessons.clear();
  m_records.clear();
  const SearchConfig& config = m_context.config;
  if (config.lesson_limit <= 0) {
    return m_lessons;
  }
  if (auto lessons = m_context.memory.lessons(config.target, config.lesson_limit)) {
    for (const auto& lesson : lessons.value()) {
      m_lessons.push_back(lesson.text);
    }
    m_records = std::move(lessons).value();
  } else {
    spdlog::warn("could not load lessons: {}", lessons.failure().describe());
  }
  return m_lessons;
}

void LessonsStep::apply(const Batch& batch) {
  const SearchConfig& config = m_context.config;
  if (!batch.finished || !m_context.llm.has_providers() || m_context.stop.stopping()) {
    return;
  }
  const int iteration = batch.iteration;
  SummarizePromptInput input;
  input.target = config.target;
  input.problem_source = config.problem_source;
  if (!batch.parents.empty()) {
    input.input_signature = batch.parents.front().eval.input_signature;
  }
  // The workload's recorded lessons, which the reply replaces; other workloads' stay as they are.
  const std::string problem_key = core::source_key(config.problem_source);
  std::vector<const store::Lesson*> recorded;
  for (const auto& lesson : m_records) {
    if (lesson.problem_key == problem_key) {
      recorded.push_back(&lesson);
      input.existing_lessons.push_back(lesson.text);
      input.existing_ids.push_back(lesson.id);
      input.existing_evidence.push_back(evidence_words(lesson));
    }
  }
  double best_speedup = 0;
  double worst_speedup = 0;
  std::string best_key;  // the kernels that showed them
  std::string worst_key;
  for (const auto& child : batch.children) {
    const auto member = static_cast<std::size_t>(child.origin.member);
    if (child.key.empty() || child.duplicate || child.plan.empty() ||
        member >= batch.parents.size()) {
      continue;
    }
    const double parent_us = batch.parents[member].latency_us();
    LessonAttempt attempt{child.plan, parent_us, std::nullopt, ""};
    if (child.correct() && parent_us > 0 && child.latency_us() > 0) {
      const double speedup = parent_us / child.latency_us();
      // Neutral ones teach too; exact on deterministic backends, noise only where measured.
      attempt.outcome = change_words(batch.parents[member], child);
      if (const auto difference =
              prompts::profile_difference(batch.parents[member].eval, child.eval);
          !difference.empty()) {
        attempt.outcome += "; profile vs parent: " + difference;
      }
      if (speedup >= k_lesson_speedup) {
        if (speedup > best_speedup) {
          best_speedup = speedup;
          best_key = child.key.substr(0, 12);
        }
      } else if (speedup <= 1.0 / k_regression_slowdown) {
        if (worst_speedup == 0 || speedup < worst_speedup) {
          worst_speedup = speedup;
          worst_key = child.key.substr(0, 12);
        }
      }
      attempt.latency_us = child.latency_us();
    } else if (!child.correct()) {
      attempt.outcome = child.eval.failure ? child.eval.failure->describe() : "incorrect result";
    } else {
      continue;
    }
    input.attempts.push_back(std::move(attempt));
  }
  if (input.attempts.empty()) {
    return;
  }
  auto request = m_context.prompts.summarize(input);
  if (!request) {
    spdlog::warn("lesson prompt of iteration {}: {}", iteration, request.failure().describe());
    return;
  }
  const std::string call_id = "i" + std::to_string(iteration) + "/summarize";
  auto answer = m_context.llm.complete(*request, call_id, static_cast<std::size_t>(iteration));
  if (!answer) {
    spdlog::warn("lesson summary of iteration {} failed: {}", iteration,
                 answer.failure().describe());
    return;
  }
  const auto merged = prompts::parse_merged_lessons(answer->text);
  if (merged.empty()) {
    spdlog::warn("lesson summary of iteration {} held no lessons", iteration);
    return;
  }
  // One reply mixes lessons from wins and losses when the iteration had both: then no kind.
  const bool had_loss =
      std::any_of(input.attempts.begin(), input.attempts.end(),
                  [](const LessonAttempt& a) { return a.outcome.rfind("faster", 0) != 0; });
  const std::string kind = best_speedup > 0    ? (had_loss ? "" : "improvement")
                           : worst_speedup > 0 ? "regression"
                                               : "";
  const double speedup = best_speedup > 0 ? (had_loss ? 0 : best_speedup) : worst_speedup;
  std::string evidence = "run " + m_context.run_id + " iteration " + std::to_string(iteration);
  if (best_speedup > 0) {
    evidence +=
        ": kernel " + best_key + " " + format_ratio(best_speedup) + " faster than its parent";
  } else if (worst_speedup > 0) {
    evidence +=
        ": kernel " + worst_key + " " + format_ratio(1 / worst_speedup) + " slower than its parent";
  }
  const std::string workload = workload_of(config.problem_source);
  std::vector<store::Lesson> lessons;
  for (const auto& reply : merged) {
    store::Lesson lesson;
    lesson.target = config.target;
    lesson.text = prompts::scope_lesson(reply.text, workload);
    lesson.source_run = m_context.run_id;
    lesson.problem_key = problem_key;
    // The recorded lessons it keeps or merges: those it names, else one it repeats.
    std::vector<const store::Lesson*> sources;
    for (const store::Lesson* old : recorded) {
      const bool named =
          std::find(reply.from.begin(), reply.from.end(), old->id) != reply.from.end();
      if (named || (reply.from.empty() &&
                    prompts::lesson_similarity(old->text, lesson.text) >= k_same_lesson)) {
        sources.push_back(old);
      }
    }
    if (sources.empty()) {
      lesson.kind = kind;
      lesson.speedup = speedup;
      lesson.evidence = evidence;
    } else {
      // The strongest evidence of what it merges (a speedup far from 1 either way).
      const store::Lesson* strongest = sources.front();
      for (const store::Lesson* old : sources) {
        if (evidence_value(old->speedup) > evidence_value(strongest->speedup)) {
          strongest = old;
        }
      }
      lesson.kind = strongest->kind;
      lesson.speedup = strongest->speedup;
      lesson.evidence = strongest->evidence;
      lesson.source_run = strongest->source_run;
    }
    // A near-duplicate of a lesson already in the list is merged into it.
    auto same = std::find_if(lessons.begin(), lessons.end(), [&lesson](const store::Lesson& l) {
      return prompts::lesson_similarity(l.text, lesson.text) >= k_same_lesson;
    });
    if (same == lessons.end()) {
      lessons.push_back(std::move(lesson));
    } else if (evidence_value(lesson.speedup) > evidence_value(same->speedup)) {
      same->speedup = lesson.speedup;
      same->evidence = lesson.evidence;
      same->kind = lesson.kind;
    }
  }
  std::vector<std::int64_t> retired;
  for (const store::Lesson* old : recorded) {
    retired.push_back(old->id);
  }
  if (auto replaced = m_context.memory.replace_lessons(retired, lessons); !replaced) {
    spdlog::warn("could not store the lessons: {}", replaced.failure().describe());
  }
}

ReflexionStep::ReflexionStep(LearningContext context) : m_context(std::move(context)) {
  // One reflexion per attempt, also when a resumed run replays an iteration.
  if (auto recent = m_context.memory.recent_reflexions(m_context.run_id, 1000)) {
    for (const auto& reflexion : recent.value()) {
      m_reflected.insert(reflexion.candidate_key);
    }
  } else {
    spdlog::warn("could not load the run's reflexions: {}", recent.failure().describe());
  }
}

std::vector<std::string> ReflexionStep::for_prompts() {
  std::vector<std::string> out;
  auto recent = m_context.memory.recent_reflexions(m_context.run_id, m_context.config.reflexions);
  if (!recent) {
    spdlog::warn("could not load reflexions: {}", recent.failure().describe());
    return out;
  }
  for (auto it = recent->rbegin(); it != recent->rend(); ++it) {  // oldest first
    if (auto line = prompts::describe_reflexion(*it); !line.empty()) {
      out.push_back(std::move(line));
    }
  }
  return out;
}

void ReflexionStep::apply(const Batch& batch) {
  if (!batch.finished || !m_context.llm.has_providers() || m_context.stop.stopping()) {
    return;
  }
  // One reflexion per plan: its best implementation (or its last failure), in plan order.
  std::map<std::pair<int, int>, const Candidate*> per_plan;
  for (const auto& child : batch.children) {
    if (child.key.empty() || child.duplicate || child.plan.empty() ||
        child.origin.proposer != "llm" || was_cancelled(child.eval)) {
      continue;
    }
    auto& slot = per_plan[{child.origin.member, child.origin.plan}];
    if (slot == nullptr || better_attempt(child, *slot)) {
      slot = &child;
    }
  }
  for (const auto& [where, child] : per_plan) {
    if (m_context.stop.stopping()) {
      return;
    }
    const auto member = static_cast<std::size_t>(where.first);
    if (member >= batch.parents.size()) {
      continue;
    }
    const Candidate& parent = batch.parents[member];
    ReflectPromptInput input;
    input.target = m_context.config.target;
    input.plan = child->plan;
    input.parent_source = parent.source;
    input.parent_evaluation = &parent.eval;
    input.child_source = child->source;
    input.child_evaluation = &child->eval;
    input.outcome = outcome_text(*child, parent.latency_us());
    const std::string call_id =
        "i" + std::to_string(batch.iteration) + "/reflect/" + child->origin.label();
    auto request = m_context.prompts.reflect(input);
    auto answer =
        request ? m_context.llm.complete(*request, call_id, static_cast<std::size_t>(where.second))
                : core::Result<llm::Completion>(request.failure());
    store::Reflexion record;
    if (answer) {
      static_cast<prompts::ReflexionRecord&>(record) =
          m_context.prompts.parse_reflexion(answer->text);
      if (!record.structured()) {
        spdlog::warn("the reflection on {} had none of the expected fields; kept as raw text",
                     child->origin.label());
      }
    } else {
      spdlog::warn("reflection on {} failed: {}", child->origin.label(),
                   answer.failure().describe());
    }
    // What was measured is a fact, whatever the model said.
    record.fix_worked = child->correct() && child->latency_us() < parent.latency_us();
    record.actual = input.outcome + (record.actual.empty() ? "" : "; " + record.actual);
    if (record.expected.empty()) {
      record.expected = "plan: " + core::utf8_prefix(child->plan, 200);
    }
    record.scope = m_context.run_id;
    record.candidate_key = child->key;
    if (!m_reflected.insert(child->key).second) {
      continue;  // one reflexion per attempt, also when a resumed run replays an iteration
    }
    if (auto id = m_context.memory.add_reflexion(record); !id) {
      spdlog::warn("could not store a reflexion: {}", id.failure().describe());
    }
  }
}

}  // namespace autocomp::search::engine
