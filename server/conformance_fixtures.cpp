#include "server/conformance_fixtures.hpp"

#include <chrono>
#include <stdexcept>
#include <thread>

#include "server/tasks.hpp"

namespace autocomp::server {

namespace {

// A 1x1 red PNG and a silent 8-sample WAV, generated for these fixtures.
constexpr const char* k_png_base64 =
    "iVBORw0KGgoAAAANSUhEUgAAAAEAAAABCAIAAACQd1PeAAAADElEQVR4nGP4z8AAAAMBAQDJ/pLvAAAAAElFTkSuQmCC";
constexpr const char* k_wav_base64 =
    "UklGRjQAAABXQVZFZm10IBAAAAABAAEAQB8AAIA+AAACABAAZGF0YRAAAAAAAAAAAAAAAAAAAAAAAAAA";

const nlohmann::json k_no_arguments = {
    {"type", "object"}, {"properties", nlohmann::json::object()}, {"additionalProperties", false}};

nlohmann::json text_block(const std::string& text) {
  return {{"type", "text"}, {"text", text}};
}

ToolResult content_only(nlohmann::json blocks) {
  ToolResult result;
  result.extra_content = std::move(blocks);
  return result;
}

void sleep_unless_cancelled(const ToolContext& context, std::chrono::milliseconds duration) {
  const auto until = std::chrono::steady_clock::now() + duration;
  while (!context.cancel.cancelled() && std::chrono::steady_clock::now() < until) {
    std::this_thread::sleep_for(std::chrono::milliseconds(10));
  }
}

std::string describe_elicitation(const core::Result<nlohmann::json>& answer) {
  const auto& value = answer.value();
  return "action=" + value.value("action", std::string("?")) +
         ", content=" + value.value("content", nlohmann::json::object()).dump();
}

ToolDef simple_tool(std::string name, std::string description, ToolHandler handler) {
  ToolDef tool;
  tool.name = std::move(name);
  tool.description = std::move(description);
  tool.input_schema = k_no_arguments;
  tool.handler = std::move(handler);
  return tool;
}

nlohmann::json elicitation(const std::string& message, const std::string& field,
                           const std::string& type) {
  return {
      {"message", message},
      {"requestedSchema",
       {{"type", "object"}, {"properties", {{field, {{"type", type}}}}}, {"required", {field}}}}};
}

std::string elicited(const nlohmann::json& answer, const std::string& field) {
  const auto content = answer.value("content", nlohmann::json::object());
  if (!content.is_object() || !content.contains(field)) {
    return "(declined)";
  }
  return content[field].is_string() ? content[field].get<std::string>() : content[field].dump();
}

// Returned while inputs are missing; the protocol layer replaces it with input_required.
ToolResult waiting() {
  return content_only({text_block("waiting for the client's input")});
}

// A job source whose start fails at the protocol level (not a tool error): the task ends failed.
class BrokenJobSource : public JobSource {
 public:
  Started start(ToolContext& /*context*/, const TaskCall& /*call*/) override {
    throw std::runtime_error("the job could not be started (conformance fixture)");
  }
  JobStatus status(const std::string& /*job*/) override { return {}; }
  void cancel(const std::string& /*job*/) override {}
};

// Tools for the tasks scenarios (2025-11-25 task augmentation and the tasks extension).
void add_task_tools(ToolRegistry& tools) {
  auto with_schema = [](ToolDef tool, nlohmann::json properties, TaskSupport support) {
    tool.input_schema = {{"type", "object"}, {"properties", std::move(properties)}};
    tool.task_support = support;
    return tool;
  };
  tools.add(with_schema(
      simple_tool("greet", "Says hello at once; never a task (conformance fixture).",
                  [](const nlohmann::json& args, ToolContext&) {
                    return content_only(
                        {text_block("Hello, " + args.value("name", std::string("World")) + "!")});
                  }),
      {{"name", {{"type", "string"}}}}, TaskSupport::forbidden));
  tools.add(with_schema(
      simple_tool("slow_compute",
                  "Sleeps `seconds` (cancellable), then reports; may run as a task "
                  "(conformance fixture).",
                  [](const nlohmann::json& args, ToolContext& context) {
                    const double seconds = args.value("seconds", 1.0);
                    sleep_unless_cancelled(
                        context, std::chrono::milliseconds(static_cast<long>(seconds * 1000)));
                    return content_only(
                        {text_block("computed " + args.value("label", std::string("result")) +
                                    " after " + std::to_string(seconds) + " s")});
                  }),
      {{"seconds", {{"type", "number"}, {"minimum", 0}, {"maximum", 600}}},
       {"label", {{"type", "string"}}}},
      TaskSupport::optional));
  tools.add(with_schema(simple_tool("failing_job",
                                    "Runs only as a task and ends in a tool error after about a "
                                    "second (conformance fixture).",
                                    [](const nlohmann::json&, ToolContext& context) {
                                      sleep_unless_cancelled(context, std::chrono::seconds(1));
                                      return tool_error("failing_job failed on purpose");
                                    }),
                        nlohmann::json::object(), TaskSupport::required));
  {
    ToolDef tool = with_schema(
        simple_tool("protocol_error_job",
                    "Runs only as a task whose job cannot start, a "
                    "protocol-level failure (conformance fixture).",
                    [](const nlohmann::json&, ToolContext&) { return tool_error("not reached"); }),
        nlohmann::json::object(), TaskSupport::optional);
    tool.jobs = std::make_shared<BrokenJobSource>();
    tools.add(std::move(tool));
  }
  {
    // Without a user_name argument it asks for one; a 2026-07-28 client answers before the task
    // exists (input_required rounds, then the task).
    auto ask_name = [](ToolContext& context) {
      return context.request_input("user_name", "elicitation/create",
                                   elicitation("What is your name?", "name", "string"));
    };
    ToolDef tool = with_schema(
        simple_tool("test_tool_with_task",
                    "Runs only as a task: waits about a second, then greets `user_name`, asked "
                    "for when not given (conformance fixture).",
                    [ask_name](const nlohmann::json& args, ToolContext& context) {
                      std::string name = args.value("user_name", std::string());
                      if (name.empty()) {
                        auto answer = ask_name(context);
                        if (!answer.ok()) {
                          return waiting();
                        }
                        name = elicited(answer.value(), "name");
                      }
                      sleep_unless_cancelled(context, std::chrono::seconds(1));
                      return content_only({text_block("Task finished for " + name)});
                    }),
        {{"user_name", {{"type", "string"}}}}, TaskSupport::required);
    tool.task_inputs = [ask_name](const nlohmann::json& args, ToolContext& context) {
      if (!args.contains("user_name")) {
        static_cast<void>(ask_name(context));  // recorded as pending until answered
      }
    };
    tools.add(std::move(tool));
  }
  tools.add(with_schema(
      simple_tool("confirm_delete",
                  "Asks the user to confirm deleting `filename`, then reports the decision; "
                  "deletes nothing (conformance fixture).",
                  [](const nlohmann::json& args, ToolContext& context) {
                    const std::string file = args.value("filename", std::string("(unnamed)"));
                    auto answer = context.request_input(
                        "confirm", "elicitation/create",
                        elicitation("Delete " + file + "?", "confirm", "boolean"));
                    if (!answer.ok()) {
                      return waiting();
                    }
                    const bool yes = answer.value().value("action", std::string()) == "accept" &&
                                     elicited(answer.value(), "confirm") == "true";
                    return content_only({text_block((yes ? "Deletion of " : "Kept ") + file +
                                                    (yes ? " confirmed" : ": not confirmed") +
                                                    " (fixture: no file touched)")});
                  }),
      {{"filename", {{"type", "string"}}}}, TaskSupport::optional));
  tools.add(with_schema(
      simple_tool("multi_input",
                  "Asks for a name and a confirmation at once, then reports both "
                  "(conformance fixture).",
                  [](const nlohmann::json&, ToolContext& context) {
                    auto name =
                        context.request_input("name", "elicitation/create",
                                              elicitation("What is your name?", "name", "string"));
                    auto confirm =
                        context.request_input("confirm", "elicitation/create",
                                              elicitation("Please confirm", "confirm", "boolean"));
                    if (!name.ok() || !confirm.ok()) {
                      return waiting();
                    }
                    return content_only(
                        {text_block("Name " + elicited(name.value(), "name") + ", confirmed " +
                                    elicited(confirm.value(), "confirm"))});
                  }),
      nlohmann::json::object(), TaskSupport::optional));
}

void add_tools(ToolRegistry& tools) {
  add_task_tools(tools);
  tools.add(simple_tool("test_simple_text", "Returns a fixed text (conformance fixture).",
                        [](const nlohmann::json&, ToolContext&) {
                          return content_only(
                              {text_block("This is a simple text response for testing.")});
                        }));
  tools.add(
      simple_tool("test_image_content", "Returns a 1x1 PNG image (conformance fixture).",
                  [](const nlohmann::json&, ToolContext&) {
                    return content_only(
                        {{{"type", "image"}, {"data", k_png_base64}, {"mimeType", "image/png"}}});
                  }));
  tools.add(
      simple_tool("test_audio_content", "Returns a short WAV clip (conformance fixture).",
                  [](const nlohmann::json&, ToolContext&) {
                    return content_only(
                        {{{"type", "audio"}, {"data", k_wav_base64}, {"mimeType", "audio/wav"}}});
                  }));
  tools.add(simple_tool(
      "test_embedded_resource", "Returns an embedded text resource (conformance fixture).",
      [](const nlohmann::json&, ToolContext&) {
        return content_only({{{"type", "resource"},
                              {"resource",
                               {{"uri", "test://embedded-resource"},
                                {"mimeType", "text/plain"},
                                {"text", "This is an embedded resource content."}}}}});
      }));
  tools.add(simple_tool(
      "test_multiple_content_types",
      "Returns text, an image and an embedded resource (conformance fixture).",
      [](const nlohmann::json&, ToolContext&) {
        return content_only({text_block("Multiple content types test:"),
                             {{"type", "image"}, {"data", k_png_base64}, {"mimeType", "image/png"}},
                             {{"type", "resource"},
                              {"resource",
                               {{"uri", "test://mixed-content-resource"},
                                {"mimeType", "application/json"},
                                {"text", R"({"test":"data","value":123})"}}}}});
      }));
  tools.add(simple_tool("test_tool_with_logging",
                        "Sends three info log messages while running (conformance fixture).",
                        [](const nlohmann::json&, ToolContext& context) {
                          context.log(LogLevel::info, "conformance", "Tool execution started");
                          sleep_unless_cancelled(context, std::chrono::milliseconds(50));
                          context.log(LogLevel::info, "conformance", "Tool processing data");
                          sleep_unless_cancelled(context, std::chrono::milliseconds(50));
                          context.log(LogLevel::info, "conformance", "Tool execution completed");
                          return content_only({text_block("Tool with logging executed")});
                        }));
  tools.add(simple_tool("test_tool_with_progress",
                        "Reports progress 0, 50 and 100 of 100 (conformance fixture).",
                        [](const nlohmann::json&, ToolContext& context) {
                          context.progress(0, 100, "started");
                          sleep_unless_cancelled(context, std::chrono::milliseconds(50));
                          context.progress(50, 100, "halfway");
                          sleep_unless_cancelled(context, std::chrono::milliseconds(50));
                          context.progress(100, 100, "done");
                          return content_only({text_block("Tool with progress executed")});
                        }));
  tools.add(simple_tool("test_error_handling", "Always fails (conformance fixture).",
                        [](const nlohmann::json&, ToolContext&) {
                          ToolResult result;
                          result.is_error = true;
                          result.text = "This tool intentionally returns an error for testing";
                          return result;
                        }));
  {
    ToolDef tool;
    tool.name = "test_sampling";
    tool.description = "Asks the client's model to answer a prompt (conformance fixture).";
    tool.input_schema = {{"type", "object"},
                         {"properties", {{"prompt", {{"type", "string"}}}}},
                         {"required", {"prompt"}}};
    tool.handler = [](const nlohmann::json& args, ToolContext& context) {
      auto answer = context.create_message(
          {{"messages",
            {{{"role", "user"}, {"content", text_block(args.at("prompt").get<std::string>())}}}},
           {"maxTokens", 100}});
      if (!answer.ok()) {
        return tool_error("Sampling failed: " + answer.failure().message);
      }
      std::string text;
      const auto& content = answer.value().value("content", nlohmann::json::object());
      if (content.is_object()) {
        text = content.value("text", std::string());
      } else if (content.is_array() && !content.empty() && content[0].is_object()) {
        text = content[0].value("text", std::string());
      }
      return content_only({text_block("LLM response: " + text)});
    };
    tools.add(std::move(tool));
  }
  {
    ToolDef tool;
    tool.name = "test_elicitation";
    tool.description = "Asks the user for a username and email (conformance fixture).";
    tool.input_schema = {{"type", "object"},
                         {"properties", {{"message", {{"type", "string"}}}}},
                         {"required", {"message"}}};
    tool.handler = [](const nlohmann::json& args, ToolContext& context) {
      auto answer = context.elicit(
          {{"message", args.at("message")},
           {"requestedSchema",
            {{"type", "object"},
             {"properties",
              {{"username", {{"type", "string"}, {"description", "User's response"}}},
               {"email", {{"type", "string"}, {"description", "User's email address"}}}}},
             {"required", {"username", "email"}}}}});
      if (!answer.ok()) {
        return tool_error("Elicitation failed: " + answer.failure().message);
      }
      return content_only({text_block("User response: " + describe_elicitation(answer))});
    };
    tools.add(std::move(tool));
  }
  tools.add(simple_tool(
      "test_elicitation_sep1034_defaults",
      "Elicits values whose schema carries defaults for every primitive type (conformance "
      "fixture).",
      [](const nlohmann::json&, ToolContext& context) {
        auto answer = context.elicit(
            {{"message", "Please review and update the form fields with defaults"},
             {"requestedSchema",
              {{"type", "object"},
               {"properties",
                {{"name",
                  {{"type", "string"}, {"description", "User name"}, {"default", "John Doe"}}},
                 {"age", {{"type", "integer"}, {"description", "User age"}, {"default", 30}}},
                 {"score", {{"type", "number"}, {"description", "User score"}, {"default", 95.5}}},
                 {"status",
                  {{"type", "string"},
                   {"description", "User status"},
                   {"enum", {"active", "inactive", "pending"}},
                   {"default", "active"}}},
                 {"verified",
                  {{"type", "boolean"},
                   {"description", "Verification status"},
                   {"default", true}}}}},
               {"required", nlohmann::json::array()}}}});
        if (!answer.ok()) {
          return tool_error("Elicitation failed: " + answer.failure().message);
        }
        return content_only({text_block("Elicitation completed: " + describe_elicitation(answer))});
      }));
  tools.add(simple_tool(
      "test_elicitation_sep1330_enums",
      "Elicits values with the five enum schema forms (conformance fixture).",
      [](const nlohmann::json&, ToolContext& context) {
        auto titled = [](const char* a, const char* b, const char* c, const char* ta,
                         const char* tb, const char* tc) {
          return nlohmann::json::array({{{"const", a}, {"title", ta}},
                                        {{"const", b}, {"title", tb}},
                                        {{"const", c}, {"title", tc}}});
        };
        auto answer = context.elicit(
            {{"message", "Please pick from the enum fields"},
             {"requestedSchema",
              {{"type", "object"},
               {"properties",
                {{"untitledSingle",
                  {{"type", "string"},
                   {"description", "Untitled single-select"},
                   {"enum", {"option1", "option2", "option3"}}}},
                 {"titledSingle",
                  {{"type", "string"},
                   {"description", "Titled single-select"},
                   {"oneOf", titled("value1", "value2", "value3", "First Option", "Second Option",
                                    "Third Option")}}},
                 {"legacyEnum",
                  {{"type", "string"},
                   {"description", "Legacy titled enum"},
                   {"enum", {"opt1", "opt2", "opt3"}},
                   {"enumNames", {"Option One", "Option Two", "Option Three"}}}},
                 {"untitledMulti",
                  {{"type", "array"},
                   {"description", "Untitled multi-select"},
                   {"items", {{"type", "string"}, {"enum", {"option1", "option2", "option3"}}}}}},
                 {"titledMulti",
                  {{"type", "array"},
                   {"description", "Titled multi-select"},
                   {"items",
                    {{"anyOf", titled("value1", "value2", "value3", "First Choice", "Second Choice",
                                      "Third Choice")}}}}}}},
               {"required", nlohmann::json::array()}}}});
        if (!answer.ok()) {
          return tool_error("Elicitation failed: " + answer.failure().message);
        }
        return content_only({text_block("Elicitation completed: " + describe_elicitation(answer))});
      }));
  tools.add(simple_tool(
      "test_reconnection",
      "Closes its SSE stream mid-call and answers after the client resumes (conformance "
      "fixture).",
      [](const nlohmann::json&, ToolContext& context) {
        sleep_unless_cancelled(context, std::chrono::milliseconds(100));
        context.close_sse_stream(std::chrono::milliseconds(500));
        sleep_unless_cancelled(context, std::chrono::milliseconds(1500));
        return content_only({text_block("Reconnection test completed")});
      }));
  {
    ToolDef tool;
    tool.name = "json_schema_2020_12_tool";
    tool.description =
        "Declares an input schema using JSON Schema 2020-12 keywords (conformance "
        "fixture).";
    tool.input_schema = {
        {"$schema", "https://json-schema.org/draft/2020-12/schema"},
        {"type", "object"},
        {"$defs",
         {{"address",
           {{"$anchor", "addressDef"},
            {"type", "object"},
            {"properties", {{"street", {{"type", "string"}}}, {"city", {{"type", "string"}}}}}}}}},
        {"properties",
         {{"name", {{"type", "string"}}},
          {"address", {{"$ref", "#/$defs/address"}}},
          {"contactMethod", {{"type", "string"}, {"enum", {"phone", "email"}}}},
          {"phone", {{"type", "string"}}},
          {"email", {{"type", "string"}}}}},
        {"allOf", {{{"anyOf", {{{"required", {"phone"}}}, {{"required", {"email"}}}}}}}},
        {"if",
         {{"properties", {{"contactMethod", {{"const", "phone"}}}}},
          {"required", {"contactMethod"}}}},
        {"then", {{"required", {"phone"}}}},
        {"else", {{"required", {"email"}}}},
        {"additionalProperties", false}};
    tool.handler = [](const nlohmann::json& args, ToolContext&) {
      return content_only({text_block("Received: " + args.dump())});
    };
    tools.add(std::move(tool));
  }
}

void add_resources(ResourceRegistry& resources) {
  resources.add({"test://static-text", "static-text", "Static text",
                 "A fixed text resource (conformance fixture)", "text/plain",
                 [](const std::string& uri,
                    const std::map<std::string, std::string>&) -> core::Result<nlohmann::json> {
                   return nlohmann::json::array(
                       {{{"uri", uri},
                         {"mimeType", "text/plain"},
                         {"text", "This is the content of the static text resource."}}});
                 }});
  resources.add({"test://static-binary", "static-binary", "Static binary",
                 "A fixed PNG resource (conformance fixture)", "image/png",
                 [](const std::string& uri,
                    const std::map<std::string, std::string>&) -> core::Result<nlohmann::json> {
                   return nlohmann::json::array(
                       {{{"uri", uri}, {"mimeType", "image/png"}, {"blob", k_png_base64}}});
                 }});
  resources.add(
      {"test://watched-resource", "watched-resource", "Watched resource",
       "A resource clients may subscribe to (conformance fixture)", "text/plain",
       [](const std::string& uri,
          const std::map<std::string, std::string>&) -> core::Result<nlohmann::json> {
         return nlohmann::json::array(
             {{{"uri", uri}, {"mimeType", "text/plain"}, {"text", "Watched resource content"}}});
       }});
  ResourceTemplateDef data_template;
  data_template.uri_template = "test://template/{id}/data";
  data_template.name = "template-data";
  data_template.title = "Template data";
  data_template.description = "Data for an id (conformance fixture)";
  data_template.mime_type = "application/json";
  data_template.read =
      [](const std::string& uri,
         const std::map<std::string, std::string>& vars) -> core::Result<nlohmann::json> {
    const std::string id = vars.at("id");
    const nlohmann::json data = {
        {"id", id}, {"templateTest", true}, {"data", "Data for ID: " + id}};
    return nlohmann::json::array(
        {{{"uri", uri}, {"mimeType", "application/json"}, {"text", data.dump()}}});
  };
  data_template.complete = [](const std::string&, const std::string& prefix,
                              const std::map<std::string, std::string>&) {
    std::vector<std::string> values;
    for (const char* id : {"1", "2", "3", "123"}) {
      if (std::string(id).rfind(prefix, 0) == 0) {
        values.emplace_back(id);
      }
    }
    return values;
  };
  resources.add_template(std::move(data_template));
}

// --- 2026-07-28: input gathered through retried requests (MRTR) ------------------------------

nlohmann::json sampling(const std::string& text, int max_tokens) {
  return {{"messages", {{{"role", "user"}, {"content", text_block(text)}}}},
          {"maxTokens", max_tokens}};
}

// The text of a sampling answer (CreateMessageResult content, a block or a list of blocks).
std::string sampled_text(const nlohmann::json& answer) {
  const auto content = answer.value("content", nlohmann::json::object());
  if (content.is_object()) {
    return content.value("text", std::string());
  }
  if (content.is_array() && !content.empty() && content[0].is_object()) {
    return content[0].value("text", std::string());
  }
  return {};
}

void add_input_tools(ToolRegistry& tools) {
  tools.add(simple_tool(
      "test_input_required_result_elicitation",
      "Asks for the user's name with an elicitation, then greets them (conformance fixture).",
      [](const nlohmann::json&, ToolContext& context) {
        auto answer = context.request_input("user_name", "elicitation/create",
                                            elicitation("What is your name?", "name", "string"));
        if (!answer.ok()) {
          return waiting();
        }
        return content_only({text_block("Hello, " + elicited(answer.value(), "name") + "!")});
      }));
  tools.add(simple_tool(
      "test_input_required_result_sampling",
      "Asks the client's model a question, then reports its answer (conformance fixture).",
      [](const nlohmann::json&, ToolContext& context) {
        auto answer = context.request_input("capital_question", "sampling/createMessage",
                                            sampling("What is the capital of France?", 100));
        if (!answer.ok()) {
          return waiting();
        }
        return content_only({text_block("The model answered: " + sampled_text(answer.value()))});
      }));
  tools.add(simple_tool(
      "test_input_required_result_list_roots",
      "Asks for the client's roots, then lists them (conformance fixture).",
      [](const nlohmann::json&, ToolContext& context) {
        auto answer = context.request_input("client_roots", "roots/list", nlohmann::json::object());
        if (!answer.ok()) {
          return waiting();
        }
        std::string uris;
        for (const auto& root : answer.value().value("roots", nlohmann::json::array())) {
          if (root.is_object()) {
            uris += (uris.empty() ? "" : ", ") + root.value("uri", std::string("?"));
          }
        }
        return content_only({text_block("Client roots: " + (uris.empty() ? "(none)" : uris))});
      }));
  for (const char* name :
       {"test_input_required_result_request_state", "test_input_required_result_tampered_state"}) {
    tools.add(simple_tool(
        name,
        "Asks for a confirmation; the answer comes back with an integrity-checked requestState "
        "(conformance fixture).",
        [](const nlohmann::json&, ToolContext& context) {
          auto answer = context.request_input("confirm", "elicitation/create",
                                              elicitation("Please confirm", "ok", "boolean"));
          if (!answer.ok()) {
            return waiting();
          }
          return content_only(
              {text_block("state-ok: confirmation " + elicited(answer.value(), "ok"))});
        }));
  }
  tools.add(simple_tool(
      "test_input_required_result_multiple_inputs",
      "Asks for a name, a generated greeting and the roots in one round (conformance fixture).",
      [](const nlohmann::json&, ToolContext& context) {
        auto name = context.request_input("user_name", "elicitation/create",
                                          elicitation("What is your name?", "name", "string"));
        auto greeting = context.request_input("greeting", "sampling/createMessage",
                                              sampling("Generate a greeting", 50));
        auto roots = context.request_input("client_roots", "roots/list", nlohmann::json::object());
        if (!name.ok() || !greeting.ok() || !roots.ok()) {
          return waiting();
        }
        return content_only({text_block(
            "Name " + elicited(name.value(), "name") + ", greeting '" +
            sampled_text(greeting.value()) + "', " +
            std::to_string(roots.value().value("roots", nlohmann::json::array()).size()) +
            " root(s)")});
      }));
  tools.add(simple_tool(
      "test_input_required_result_multi_round",
      "Asks for a name, then (next round) a favourite colour (conformance fixture).",
      [](const nlohmann::json&, ToolContext& context) {
        auto name =
            context.request_input("step1", "elicitation/create",
                                  elicitation("Step 1: What is your name?", "name", "string"));
        if (!name.ok()) {
          return waiting();
        }
        auto color = context.request_input(
            "step2", "elicitation/create",
            elicitation("Step 2: What is your favorite color?", "color", "string"));
        if (!color.ok()) {
          return waiting();
        }
        return content_only({text_block(elicited(name.value(), "name") + " likes " +
                                        elicited(color.value(), "color"))});
      }));
  tools.add(simple_tool(
      "test_input_required_result_capabilities",
      "Asks only for the inputs the client declared it can give (conformance fixture).",
      [](const nlohmann::json&, ToolContext& context) {
        const auto& capabilities = context.client_capabilities;
        bool complete = true;
        std::string text = "Inputs:";
        if (capabilities.contains("sampling")) {
          auto answer = context.request_input("question", "sampling/createMessage",
                                              sampling("Say hello", 20));
          complete = complete && answer.ok();
          text += answer.ok() ? " sampled '" + sampled_text(answer.value()) + "'" : "";
        }
        if (capabilities.contains("elicitation")) {
          auto answer = context.request_input("user_name", "elicitation/create",
                                              elicitation("What is your name?", "name", "string"));
          complete = complete && answer.ok();
          text += answer.ok() ? " name " + elicited(answer.value(), "name") : "";
        }
        if (capabilities.contains("roots")) {
          auto answer =
              context.request_input("client_roots", "roots/list", nlohmann::json::object());
          complete = complete && answer.ok();
        }
        return complete ? content_only({text_block(text)}) : waiting();
      }));
  tools.add(simple_tool(
      "test_missing_capability",
      "Needs the client's sampling capability; a client without it gets "
      "MissingRequiredClientCapability (conformance fixture).",
      [](const nlohmann::json&, ToolContext& context) {
        auto answer = context.request("sampling/createMessage", sampling("Say hello", 20));
        if (!answer.ok()) {
          return tool_error("Sampling failed: " + answer.failure().message);
        }
        return content_only({text_block("The model answered: " + sampled_text(answer.value()))});
      }));
  tools.add(simple_tool(
      "test_streaming_elicitation",
      "Reports progress, then asks for a confirmation (conformance fixture).",
      [](const nlohmann::json&, ToolContext& context) {
        context.progress(0, 1, "asking for a confirmation");
        auto answer = context.request_input("confirm", "elicitation/create",
                                            elicitation("Please confirm", "ok", "boolean"));
        if (!answer.ok()) {
          return waiting();
        }
        return content_only({text_block("Confirmed: " + elicited(answer.value(), "ok"))});
      }));
  {
    ToolDef tool;
    tool.name = "test_custom_header";
    tool.description =
        "Echoes its region, which 2026-07-28 HTTP clients mirror in an Mcp-Param-Region header "
        "(conformance fixture).";
    tool.input_schema = {
        {"type", "object"},
        {"properties",
         {{"region",
           {{"type", "string"}, {"x-mcp-header", "Region"}, {"description", "A region"}}}}},
        {"required", {"region"}}};
    tool.handler = [](const nlohmann::json& args, ToolContext&) {
      return content_only({text_block("Region: " + args.value("region", std::string()))});
    };
    tools.add(std::move(tool));
  }
  tools.add(simple_tool(
      "test_logging_tool", "Logs three messages at info level, then answers (conformance fixture).",
      [](const nlohmann::json&, ToolContext& context) {
        for (int i = 1; i <= 3; ++i) {
          context.log(LogLevel::info, "conformance", "log message " + std::to_string(i));
        }
        return content_only({text_block("Logged three messages")});
      }));
}

nlohmann::json user_message(nlohmann::json content) {
  return {{"role", "user"}, {"content", std::move(content)}};
}

void add_prompts(PromptRegistry& prompts) {
  prompts.add(
      {"test_simple_prompt",
       "Simple prompt",
       "A prompt without arguments (conformance "
       "fixture)",
       {},
       [](const std::map<std::string, std::string>&) -> core::Result<nlohmann::json> {
         return nlohmann::json{
             {"messages", {user_message(text_block("This is a simple prompt for testing."))}}};
       },
       nullptr});
  prompts.add({"test_prompt_with_arguments",
               "Prompt with arguments",
               "A prompt with two required arguments (conformance fixture)",
               {{"arg1", "First test argument", true}, {"arg2", "Second test argument", true}},
               [](const std::map<std::string, std::string>& args) -> core::Result<nlohmann::json> {
                 return nlohmann::json{
                     {"messages",
                      {user_message(text_block("Prompt with arguments: arg1='" + args.at("arg1") +
                                               "', arg2='" + args.at("arg2") + "'"))}}};
               },
               [](const std::string&, const std::string& prefix,
                  const std::map<std::string, std::string>&) {
                 std::vector<std::string> values;
                 for (const char* word : {"paris", "park", "party", "hello", "world"}) {
                   if (std::string(word).rfind(prefix, 0) == 0) {
                     values.emplace_back(word);
                   }
                 }
                 return values;
               }});
  prompts.add({"test_prompt_with_embedded_resource",
               "Prompt with embedded resource",
               "A prompt embedding a resource (conformance fixture)",
               {{"resourceUri", "URI of the resource to embed", true}},
               [](const std::map<std::string, std::string>& args) -> core::Result<nlohmann::json> {
                 return nlohmann::json{
                     {"messages",
                      {user_message({{"type", "resource"},
                                     {"resource",
                                      {{"uri", args.at("resourceUri")},
                                       {"mimeType", "text/plain"},
                                       {"text", "Embedded resource content for testing."}}}}),
                       user_message(text_block("Please process the embedded resource above."))}}};
               },
               nullptr});
  prompts.add(
      {"test_prompt_with_image",
       "Prompt with image",
       "A prompt carrying an image (conformance fixture)",
       {},
       [](const std::map<std::string, std::string>&) -> core::Result<nlohmann::json> {
         return nlohmann::json{
             {"messages",
              {user_message({{"type", "image"}, {"data", k_png_base64}, {"mimeType", "image/png"}}),
               user_message(text_block("Please analyze the image above."))}}};
       },
       nullptr});
  PromptDef input_prompt{
      "test_input_required_result_prompt",
      "Prompt that needs input",
      "Asks the user for the context to use, then builds the prompt (conformance fixture)",
      {},
      [](const std::map<std::string, std::string>&) -> core::Result<nlohmann::json> {
        return nlohmann::json{
            {"messages", {user_message(text_block("Use the context of this conversation."))}}};
      },
      nullptr};
  input_prompt.get_with_context = [](const std::map<std::string, std::string>&,
                                     ToolContext& context) -> core::Result<nlohmann::json> {
    auto answer = context.request_input(
        "user_context", "elicitation/create",
        elicitation("What context should the prompt use?", "context", "string"));
    const std::string text = answer.ok() ? elicited(answer.value(), "context")
                                         : std::string("the context of this conversation");
    return nlohmann::json{{"messages", {user_message(text_block("Use this context: " + text))}}};
  };
  prompts.add(std::move(input_prompt));
}

}  // namespace

void register_conformance_fixtures(Registries& registries) {
  add_tools(registries.tools);
  add_input_tools(registries.tools);
  add_resources(registries.resources);
  add_prompts(registries.prompts);
}

}  // namespace autocomp::server
