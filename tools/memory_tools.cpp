#include "tools/memory_tools.hpp"

namespace autocomp::tools {

using nlohmann::json;

namespace {

json target_property() {
  return {{"type", "string"},
          {"enum", {"trn1", "trn2"}},
          {"description", "Only this target's lessons (default: every target)."}};
}

}  // namespace

server::ToolDef make_list_lessons_tool(std::shared_ptr<ToolEnv> env) {
  server::ToolDef tool;
  tool.name = "list_lessons";
  tool.title = "List remembered optimization lessons";
  tool.description =
      "The optimization memory: short lessons learned from earlier attempts (what made kernels "
      "faster or slower on a target), newest first, with their evidence. Searches and "
      "propose_plan show them to planning.";
  tool.input_schema = {
      {"type", "object"},
      {"properties",
       {{"target", target_property()},
        {"limit", {{"type", "integer"}, {"minimum", 1}, {"maximum", 200}}}}},
      {"additionalProperties", false},
  };
  tool.annotations = {{"readOnlyHint", true}, {"openWorldHint", false}};
  tool.handler = [env](const json& arguments, server::ToolContext&) {
    auto db = env->store();
    if (!db.ok()) {
      return server::tool_failure(db.failure());
    }
    auto lessons = db.value()->lessons(arguments.value("target", ""), arguments.value("limit", 50));
    if (!lessons.ok()) {
      return server::tool_failure(lessons.failure());
    }
    json list = json::array();
    for (const auto& lesson : lessons.value()) {
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
    return server::ToolResult{json{{"lessons", std::move(list)}}, "", false, json::array()};
  };
  return tool;
}

server::ToolDef make_clear_lessons_tool(std::shared_ptr<ToolEnv> env) {
  server::ToolDef tool;
  tool.name = "clear_lessons";
  tool.title = "Forget optimization lessons";
  tool.description =
      "Delete remembered optimization lessons, for one target or all of them, when they mislead "
      "planning (for example after the simulator or hardware changed). Needs confirm: true.";
  tool.input_schema = {
      {"type", "object"},
      {"properties",
       {{"target", target_property()},
        {"confirm", {{"type", "boolean"}, {"description", "Must be true."}}}}},
      {"required", {"confirm"}},
      {"additionalProperties", false},
  };
  tool.annotations = {{"readOnlyHint", false},
                      {"destructiveHint", true},
                      {"idempotentHint", true},
                      {"openWorldHint", false}};
  tool.handler = [env](const json& arguments, server::ToolContext&) {
    if (!arguments.at("confirm").get<bool>()) {
      return server::tool_error("nothing deleted: pass confirm: true to delete lessons");
    }
    auto db = env->store();
    if (!db.ok()) {
      return server::tool_failure(db.failure());
    }
    const std::string target = arguments.value("target", "");
    auto removed = db.value()->clear_lessons(target);
    if (!removed.ok()) {
      return server::tool_failure(removed.failure());
    }
    return server::ToolResult{
        json{{"removed", removed.value()}, {"target", target.empty() ? "all" : target}}, "", false,
        json::array()};
  };
  return tool;
}

}  // namespace autocomp::tools
