#include "tools/memory_tools.hpp"

#include <algorithm>

#include "core/hash.hpp"
#include "core/targets.hpp"
#include "core/text.hpp"
#include "tools/evaluation_json.hpp"
#include "tools/kernel_files.hpp"
#include "tools/tool_surface.hpp"

namespace autocomp::tools {

using nlohmann::json;

namespace {

constexpr std::size_t k_reflexion_chars = 2000;

std::optional<double> measured_us(search::store::EvaluationCache& evaluations,
                                  const std::string& key, const search::store::FileVersion& where) {
  auto stored_evaluations = evaluations.evaluations_for_candidate(key, 50);
  if (!stored_evaluations.ok()) {
    return std::nullopt;
  }
  for (const auto& stored : stored_evaluations.value()) {
    const auto& result = stored.result;
    if (stored.key.problem_key != where.problem_key || stored.key.target != where.target) {
      continue;
    }
    if (!result.failure && result.correct && result.latency && result.latency->median_us > 0) {
      return result.latency->median_us;
    }
  }
  return std::nullopt;
}

json reflexion_json(const search::store::Reflexion& r) {
  json item = {{"id", r.id},
               {"candidate", r.candidate_key},
               {"expected", r.expected},
               {"actual", r.actual},
               {"lessons", r.lessons},
               {"avoid", r.avoid},
               {"try_next", r.try_next},
               {"created_at_ms", r.created_at_ms}};
  if (r.diagnosis_right) {
    item["diagnosis_right"] = *r.diagnosis_right;
  }
  if (r.fix_worked) {
    item["fix_worked"] = *r.fix_worked;
  }
  return item;
}

// The newest search run whose winner is `candidate_key`, if any.
std::optional<std::string> run_with_winner(search::store::Store& db,
                                           const std::string& candidate_key) {
  auto runs = db.runs().list_runs(50);
  if (!runs.ok()) {
    return std::nullopt;
  }
  for (const auto& run : runs.value()) {
    if (run.best_candidate_key && *run.best_candidate_key == candidate_key) {
      return run.id;
    }
  }
  return std::nullopt;
}

json target_property() {
  return {{"type", "string"},
          {"enum", core::known_target_names()},
          {"description", "Only this target."}};
}

}  // namespace

server::ToolDef make_list_lessons_tool(std::shared_ptr<ToolEnv> env) {
  server::ToolDef tool;
  tool.name = "list_lessons";
  tool.title = "List lessons";
  tool.description = "Lessons remembered from earlier attempts, per target, newest first.";
  tool.input_schema = {
      {"type", "object"},
      {"properties",
       {{"target", target_property()},
        {"limit",
         {{"type", "integer"},
          {"minimum", 1},
          {"maximum", 200},
          {"description", "Most shown (50)."}}}}},
      {"additionalProperties", false},
  };
  tool.output_schema = object_schema({{"lessons", "array"}}, {"lessons"});
  tool.annotations = hints(true, false, true, false);
  tool.handler = [env](const json& arguments, server::ToolContext&) {
    auto db = env->store();
    if (!db.ok()) {
      return server::tool_failure(db.failure());
    }
    auto lessons =
        db.value()->memory().lessons(arguments.value("target", ""), arguments.value("limit", 50));
    if (!lessons.ok()) {
      return server::tool_failure(lessons.failure());
    }
    json list = json::array();
    std::string text = lessons.value().empty() ? "no lessons yet" : "lessons, newest first:";
    for (const auto& lesson : lessons.value()) {
      text += "\n#" + std::to_string(lesson.id) + " [" + lesson.target +
              (lesson.kind.empty() ? "" : ", " + lesson.kind) + "] " + lesson.text;
      if (lesson.speedup > 0) {
        text += " (" + format_number(lesson.speedup) + "x";
        text += lesson.source_run.empty() ? ")" : ", run " + lesson.source_run + ")";
      }
      json item = {{"id", lesson.id},          {"target", lesson.target},
                   {"text", lesson.text},      {"kind", lesson.kind},
                   {"run", lesson.source_run}, {"created_at_ms", lesson.created_at_ms}};
      if (lesson.speedup > 0) {
        item["speedup"] = lesson.speedup;
      }
      if (!lesson.evidence.empty()) {
        item["evidence"] = lesson.evidence;
      }
      list.push_back(std::move(item));
    }
    return server::ToolResult{json{{"lessons", std::move(list)}}, text, false, json::array()};
  };
  return tool;
}

server::ToolDef make_clear_lessons_tool(std::shared_ptr<ToolEnv> env) {
  server::ToolDef tool;
  tool.name = "clear_lessons";
  tool.title = "Forget lessons";
  tool.description = "Delete remembered lessons (one target or all). Needs confirm: true.";
  tool.input_schema = {
      {"type", "object"},
      {"properties",
       {{"target", target_property()},
        {"confirm", {{"type", "boolean"}, {"description", "Must be true."}}}}},
      {"required", {"confirm"}},
      {"additionalProperties", false},
  };
  tool.output_schema = object_schema({{"removed", "integer"}}, {"removed"});
  tool.annotations = hints(false, true, true, false);
  tool.handler = [env](const json& arguments, server::ToolContext&) {
    if (!arguments.at("confirm").get<bool>()) {
      return server::tool_error("nothing deleted: pass confirm: true to delete lessons");
    }
    auto db = env->store();
    if (!db.ok()) {
      return server::tool_failure(db.failure());
    }
    const std::string target = arguments.value("target", "");
    auto removed = db.value()->memory().clear_lessons(target);
    if (!removed.ok()) {
      return server::tool_failure(removed.failure());
    }
    return server::ToolResult{
        json{{"removed", removed.value()}, {"target", target.empty() ? "all" : target}}, "", false,
        json::array()};
  };
  return tool;
}

std::string FileAttempt::describe() const {
  if (!current_us || *current_us <= 0) {
    return "the new version has no correct measurement";
  }
  if (!previous_us || *previous_us <= 0) {
    return "correct, " + std::to_string(*current_us) + " us (no measurement of the version before)";
  }
  return "correct, " + core::describe_speed_change(*previous_us, *current_us);
}

std::optional<FileAttempt> last_attempt(search::store::FileHistory& files,
                                        search::store::EvaluationCache& evaluations,
                                        const std::string& abs_path,
                                        const std::string& current_key) {
  auto versions = files.file_versions(abs_path, 20);
  if (!versions.ok()) {
    return std::nullopt;
  }
  const search::store::FileVersion* current = nullptr;
  for (const auto& version : versions.value()) {
    if (version.candidate_key == current_key) {
      current = &version;  // newest first: the latest problem and target it was evaluated with
      break;
    }
  }
  if (current == nullptr) {
    return std::nullopt;
  }
  for (const auto& version : versions.value()) {
    if (version.candidate_key != current_key && version.problem_key == current->problem_key &&
        version.target == current->target) {
      FileAttempt attempt;
      attempt.previous_key = version.candidate_key;
      attempt.previous_us = measured_us(evaluations, version.candidate_key, *current);
      attempt.current_us = measured_us(evaluations, current_key, *current);
      return attempt;
    }
  }
  return std::nullopt;
}

std::vector<std::string> reflexion_lines(search::store::Memory& memory, const std::string& abs_path,
                                         int limit) {
  std::vector<std::string> lines;
  auto recent = memory.recent_reflexions(abs_path, limit);
  if (!recent.ok()) {
    return lines;
  }
  for (auto it = recent->rbegin(); it != recent->rend(); ++it) {
    if (auto line = search::prompts::describe_reflexion(*it); !line.empty()) {
      lines.push_back(std::move(line));
    }
  }
  return lines;
}

server::ToolDef make_record_reflexion_tool(std::shared_ptr<ToolEnv> env) {
  server::ToolDef tool;
  tool.name = "record_reflexion";
  tool.title = "Record a reflexion";
  tool.description =
      "After benchmarking a change, record what it taught; actual and fix_worked default to the "
      "measured change.";
  // Each text is at most k_reflexion_chars long (checked by the handler, not listed).
  auto text = [](const char* description) {
    return json{{"type", "string"}, {"description", description}};
  };
  tool.input_schema = {
      {"type", "object"},
      {"properties",
       {{"kernel", {{"type", "string"}, {"description", "Kernel file."}}},
        {"diagnosis_right", {{"type", "boolean"}, {"description", "Diagnosis right?"}}},
        {"fix_worked", {{"type", "boolean"}, {"description", "Did it help?"}}},
        {"expected", text("Expected gain.")},
        {"actual", text("What happened.")},
        {"lessons", text("The lesson.")},
        {"avoid", text("Not to retry.")},
        {"try_next", text("Next step.")},
        {"candidate", text("Version hash; default: last measured.")}}},
      {"required", {"kernel"}},
      {"additionalProperties", false},
  };
  tool.output_schema = object_schema({{"recorded", "object"}}, {"recorded"});
  tool.annotations = hints(false, false, false, false);
  tool.handler = [env](const json& arguments, server::ToolContext& context) {
    auto kernel = read_source_file("kernel", arguments.at("kernel"), context.working_dir());
    if (!kernel.ok()) {
      return server::tool_failure(kernel.failure());
    }
    auto db = env->store();
    if (!db.ok()) {
      return server::tool_failure(db.failure());
    }
    for (const char* field : {"expected", "actual", "lessons", "avoid", "try_next"}) {
      if (arguments.value(field, std::string()).size() > k_reflexion_chars) {
        return server::tool_error(std::string("arguments.") + field + ": longer than " +
                                  std::to_string(k_reflexion_chars) +
                                  " characters; keep a reflexion short");
      }
    }
    search::store::Reflexion reflexion;
    reflexion.scope = kernel->path;
    reflexion.candidate_key = core::source_key(kernel->text);
    reflexion.expected = arguments.value("expected", "");
    reflexion.actual = arguments.value("actual", "");
    reflexion.lessons = arguments.value("lessons", "");
    reflexion.avoid = arguments.value("avoid", "");
    reflexion.try_next = arguments.value("try_next", "");
    if (arguments.contains("diagnosis_right")) {
      reflexion.diagnosis_right = arguments.at("diagnosis_right").get<bool>();
    }
    if (arguments.contains("fix_worked")) {
      reflexion.fix_worked = arguments.at("fix_worked").get<bool>();
    }
    // A named version is the one described: the agent may have edited (and verified) the file
    // since it measured the attempt the reflexion is about.
    const std::string named = arguments.value("candidate", "");
    if (!named.empty()) {
      auto versions = db.value()->files().file_versions(kernel->path, 200);
      std::optional<std::string> found;
      if (named.size() >= 12 && versions.ok()) {
        for (const auto& version : *versions) {
          if (version.candidate_key.rfind(named, 0) == 0) {
            found = version.candidate_key;
            break;
          }
        }
      }
      if (!found) {
        return server::tool_error("arguments.candidate: no measured version of " + kernel->path +
                                  " starts with '" + named +
                                  "' (give 12 or more characters of the candidate a "
                                  "benchmark_kernel answer of this file named)");
      }
      reflexion.candidate_key = *found;
    }
    // Otherwise the attempt is the version measured last. After revert_to_best the file holds an
    // earlier (or a search's) version instead: the reflexion still describes what was measured.
    const std::string file_key = reflexion.candidate_key;
    bool described_last_measured = false;
    if (auto versions = db.value()->files().file_versions(kernel->path, 50);
        named.empty() && versions.ok() && !versions->empty() &&
        versions->front().candidate_key != file_key) {
      const bool known_version =
          std::any_of(versions->begin(), versions->end(),
                      [&](const search::store::FileVersion& version) {
                        return version.candidate_key == file_key;
                      }) ||
          [&] {
            auto evaluated = db.value()->evaluations().evaluations_for_candidate(file_key, 1);
            return evaluated.ok() && !evaluated->empty();
          }();
      if (known_version) {  // restored, not a new edit still to be measured
        reflexion.candidate_key = versions->front().candidate_key;
        described_last_measured = true;
      }
    }
    auto attempt = last_attempt(db.value()->files(), db.value()->evaluations(), kernel->path,
                                reflexion.candidate_key);
    if (attempt) {
      if (reflexion.actual.empty()) {
        reflexion.actual = attempt->describe();
      }
      if (!reflexion.fix_worked && attempt->previous_us && attempt->current_us) {
        reflexion.fix_worked = *attempt->current_us < *attempt->previous_us;
      }
    }
    if (search::prompts::describe_reflexion(reflexion).empty()) {
      return server::tool_error(
          "nothing recorded: give at least one of diagnosis_right, fix_worked, expected, actual, "
          "lessons, avoid, try_next (or benchmark the changed file first so the measured change "
          "can be filled in)");
    }
    auto id = db.value()->memory().add_reflexion(reflexion);
    if (!id.ok()) {
      return server::tool_failure(id.failure());
    }
    reflexion.id = id.value();
    // The new record only: the file's earlier reflexions reach the next plan through
    // propose_plan, and echoing them here grows every answer.
    json out = {{"recorded", reflexion_json(reflexion)}, {"kernel", kernel->path}};
    if (auto count = db.value()->memory().recent_reflexions(kernel->path, 1000); count.ok()) {
      out["reflexions_for_file"] = count->size();
    }
    if (described_last_measured) {
      out["note"] = "described the last measured version (candidate " +
                    reflexion.candidate_key.substr(0, 12) +
                    "), not the file's current content, which is an earlier version (restored by "
                    "revert_to_best)";
    } else if (auto run = run_with_winner(*db.value(), file_key)) {
      out["note"] = "the file holds the winner of search run " + *run +
                    " (restored by revert_to_best); this reflexion describes that version";
      out["run_id"] = *run;
    }
    std::string answer = "recorded reflexion " + std::to_string(reflexion.id) + " for " +
                         kernel->path + ": " + search::prompts::describe_reflexion(reflexion);
    if (out.contains("note")) {
      answer += "\nnote: " + out["note"].get<std::string>();
    }
    return server::ToolResult{out, answer, false, json::array()};
  };
  return tool;
}

}  // namespace autocomp::tools
