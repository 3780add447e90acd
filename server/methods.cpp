#include "server/methods.hpp"

#include <algorithm>
#include <map>

#include "server/protocol_detail.hpp"

// The one method table of both protocol generations, and the methods both answer alike.

namespace autocomp::server {

using namespace detail;

namespace {

// Static lists (tools, prompts, templates, the server's description) do not change while the
// process runs; resources (jobs, results) do, so they are not cached.
constexpr std::int64_t k_static_ttl_ms = std::int64_t{5} * 60 * 1000;

}  // namespace

const std::vector<MethodRow>& Session::method_table() {
  using Call = std::shared_ptr<ModernCall>;
  using Params = nlohmann::json;
  constexpr bool legacy = true;
  constexpr bool modern = true;
  constexpr bool no = false;
  // name, 2025-11-25, 2026-07-28, route, before initialize, answer, modern cache (ttl, scope),
  // inputs (inputResponses/requestState)
  static const std::vector<MethodRow> k_table = {
      {"ping", legacy, no, MethodRoute::answer, true,
       [](Session&, const Params&, const Call&) { return nlohmann::json::object(); }},
      {"initialize", legacy, no, MethodRoute::answer, true,
       [](Session& s, const Params& p, const Call&) { return s.initialize(p); }},
      {"server/discover", no, modern, MethodRoute::answer, false,
       [](Session& s, const Params&, const Call&) { return s.discover(); }, k_static_ttl_ms,
       "public"},
      {"tools/list", legacy, modern, MethodRoute::answer, false,
       [](Session& s, const Params& p, const Call&) { return s.list_tools(p); }, k_static_ttl_ms,
       "public"},
      {"tools/call", legacy, modern, MethodRoute::tool_call, false, nullptr, -1, nullptr, true},
      {"resources/list", legacy, modern, MethodRoute::answer, false,
       [](Session& s, const Params& p, const Call&) { return s.list_resources(p); }, 0, "private"},
      {"resources/templates/list", legacy, modern, MethodRoute::answer, false,
       [](Session& s, const Params& p, const Call&) { return s.list_resource_templates(p); },
       k_static_ttl_ms, "public"},
      {"resources/read", legacy, modern, MethodRoute::answer, false,
       [](Session& s, const Params& p, const Call&) { return s.read_resource(p); }, 0, "private"},
      {"resources/subscribe", legacy, no, MethodRoute::answer, false,
       [](Session& s, const Params& p, const Call&) { return s.subscribe(p, true); }},
      {"resources/unsubscribe", legacy, no, MethodRoute::answer, false,
       [](Session& s, const Params& p, const Call&) { return s.subscribe(p, false); }},
      {"prompts/list", legacy, modern, MethodRoute::answer, false,
       [](Session& s, const Params& p, const Call&) { return s.list_prompts(p); }, k_static_ttl_ms,
       "public"},
      {"prompts/get", legacy, modern, MethodRoute::answer, false,
       [](Session& s, const Params& p, const Call& c) { return s.get_prompt(p, c); }, -1, nullptr,
       true},
      {"completion/complete", legacy, modern, MethodRoute::answer, false,
       [](Session& s, const Params& p, const Call&) { return s.complete(p); }},
      {"logging/setLevel", legacy, no, MethodRoute::answer, false,
       [](Session& s, const Params& p, const Call&) { return s.set_log_level(p); }},
      {"subscriptions/listen", no, modern, MethodRoute::listen, false},
      // Protocol tasks (server/tasks.cpp): 2025-11-25 tasks in a session; the
      // io.modelcontextprotocol/tasks extension (SEP-2663: no tasks/result or tasks/list) in both.
      {"tasks/get", legacy, modern, MethodRoute::task, false},
      {"tasks/result", legacy, no, MethodRoute::task, false},
      {"tasks/list", legacy, no, MethodRoute::task, false},
      {"tasks/cancel", legacy, modern, MethodRoute::task, false},
      {"tasks/update", legacy, modern, MethodRoute::task, false},
  };
  return k_table;
}

const MethodRow* find_method(std::string_view name) {
  static const std::map<std::string_view, const MethodRow*> k_by_name = [] {
    std::map<std::string_view, const MethodRow*> index;
    for (const auto& row : Session::method_table()) {
      index[row.name] = &row;
    }
    return index;
  }();
  auto it = k_by_name.find(name);
  return it == k_by_name.end() ? nullptr : it->second;
}

nlohmann::json Session::list_tools(const nlohmann::json& params) const {
  return paginate(m_server.registries().tools.all(), params, m_server.options().page_size, "tools",
                  [](const ToolDef& tool) {
                    nlohmann::json entry = {{"name", tool.name},
                                            {"description", tool.description},
                                            {"inputSchema", tool.input_schema}};
                    put_if_not_empty(entry, "title", tool.title);
                    if (!tool.output_schema.is_null()) {
                      entry["outputSchema"] = tool.output_schema;
                    }
                    if (!tool.annotations.is_null()) {
                      entry["annotations"] = tool.annotations;
                    }
                    if (!tool.meta.is_null()) {
                      entry["_meta"] = tool.meta;
                    }
                    add_task_execution(entry, tool);
                    return entry;
                  });
}

nlohmann::json Session::list_resources(const nlohmann::json& params) const {
  return paginate(m_server.registries().resources.resources(), params, m_server.options().page_size,
                  "resources", [](const ResourceDef& resource) {
                    nlohmann::json entry = {{"uri", resource.uri}, {"name", resource.name}};
                    put_if_not_empty(entry, "title", resource.title);
                    put_if_not_empty(entry, "description", resource.description);
                    put_if_not_empty(entry, "mimeType", resource.mime_type);
                    return entry;
                  });
}

nlohmann::json Session::list_resource_templates(const nlohmann::json& params) const {
  return paginate(m_server.registries().resources.templates(), params, m_server.options().page_size,
                  "resourceTemplates", [](const ResourceTemplateDef& resource_template) {
                    nlohmann::json entry = {{"uriTemplate", resource_template.uri_template},
                                            {"name", resource_template.name}};
                    put_if_not_empty(entry, "title", resource_template.title);
                    put_if_not_empty(entry, "description", resource_template.description);
                    put_if_not_empty(entry, "mimeType", resource_template.mime_type);
                    return entry;
                  });
}

nlohmann::json Session::read_resource(const nlohmann::json& params) const {
  const std::string uri = required_string(params, "uri");
  auto match = m_server.registries().resources.match(uri);
  if (!match) {
    throw RpcError{jsonrpc::k_resource_not_found, "Resource not found: " + uri, {{"uri", uri}}};
  }
  auto contents = match->read(uri, match->variables);
  if (!contents.ok()) {
    const auto& failure = contents.failure();
    const int code = failure.kind == core::FailureKind::invalid_argument ? jsonrpc::k_invalid_params
                     : failure.kind == core::FailureKind::unavailable
                         ? jsonrpc::k_resource_not_found
                         : jsonrpc::k_internal_error;
    throw RpcError{code, failure.message, {{"uri", uri}}};
  }
  nlohmann::json list =
      contents.value().is_array() ? contents.value() : nlohmann::json::array({contents.value()});
  return {{"contents", std::move(list)}};
}

nlohmann::json Session::list_prompts(const nlohmann::json& params) const {
  return paginate(
      m_server.registries().prompts.all(), params, m_server.options().page_size, "prompts",
      [](const PromptDef& prompt) {
        nlohmann::json entry = {{"name", prompt.name}};
        put_if_not_empty(entry, "title", prompt.title);
        put_if_not_empty(entry, "description", prompt.description);
        nlohmann::json arguments = nlohmann::json::array();
        for (const auto& argument : prompt.arguments) {
          nlohmann::json item = {{"name", argument.name}, {"required", argument.required}};
          put_if_not_empty(item, "description", argument.description);
          arguments.push_back(std::move(item));
        }
        entry["arguments"] = std::move(arguments);
        return entry;
      });
}

nlohmann::json Session::get_prompt(const nlohmann::json& params,
                                   const std::shared_ptr<ModernCall>& modern) const {
  const std::string name = required_string(params, "name");
  const PromptDef* prompt = m_server.registries().prompts.find(name);
  if (prompt == nullptr) {
    throw RpcError{jsonrpc::k_invalid_params, "Invalid params: unknown prompt '" + name + "'"};
  }
  std::map<std::string, std::string> arguments;
  if (auto it = params.find("arguments"); it != params.end() && !it->is_null()) {
    if (!it->is_object()) {
      throw RpcError{jsonrpc::k_invalid_params, "Invalid params: \"arguments\" must be an object"};
    }
    for (const auto& [key, value] : it->items()) {
      if (!value.is_string()) {
        throw RpcError{jsonrpc::k_invalid_params,
                       "Invalid params: prompt argument '" + key + "' must be a string"};
      }
      arguments[key] = value.get<std::string>();
    }
  }
  for (const auto& argument : prompt->arguments) {
    if (argument.required && arguments.count(argument.name) == 0) {
      throw RpcError{jsonrpc::k_invalid_params, "Invalid params: prompt '" + name +
                                                    "' needs the argument '" + argument.name + "'"};
    }
  }
  core::Result<nlohmann::json> result = nlohmann::json();
  if (prompt->get_with_context) {
    ToolContext context;
    if (modern) {
      context.client_capabilities = modern->capabilities;
      context.client_supports_sampling = modern->capabilities.contains("sampling");
      context.client_supports_elicitation = modern->capabilities.contains("elicitation");
      context.input_sink = [modern](const std::string& key, const std::string& method,
                                    const nlohmann::json& request_params) {
        return modern_input(*modern, key, method, request_params);
      };
    } else {
      // prompts/get is answered on the reader thread: no request can be sent and waited for.
      context.input_sink = [](const std::string&, const std::string& method,
                              const nlohmann::json&) -> core::Result<nlohmann::json> {
        return core::make_failure(
            core::FailureKind::unavailable, "client-request",
            "prompts/get cannot ask the client for input (" + method + ") in a 2025-11-25 session");
      };
    }
    result = prompt->get_with_context(arguments, context);
  } else {
    result = prompt->get(arguments);
  }
  if (modern) {
    bool waiting = false;
    {
      std::lock_guard lock(modern->mutex);
      waiting = !modern->pending.empty() || !modern->missing_capabilities.empty();
    }
    if (waiting) {
      return modern_outcome(m_server, *modern, nlohmann::json::object());
    }
  }
  if (!result.ok()) {
    const auto& failure = result.failure();
    throw RpcError{failure.kind == core::FailureKind::invalid_argument ? jsonrpc::k_invalid_params
                                                                       : jsonrpc::k_internal_error,
                   failure.message};
  }
  nlohmann::json out = result.value();
  if (!out.is_object() || !out.contains("messages")) {
    throw RpcError{jsonrpc::k_internal_error, "prompt '" + name + "' produced no messages"};
  }
  if (!out.contains("description") && !prompt->description.empty()) {
    out["description"] = prompt->description;
  }
  return modern ? modern_outcome(m_server, *modern, std::move(out)) : out;
}

nlohmann::json Session::complete(const nlohmann::json& params) const {
  const auto& object = object_or_empty(params);
  auto ref = object.find("ref");
  auto argument = object.find("argument");
  if (ref == object.end() || !ref->is_object() || argument == object.end() ||
      !argument->is_object()) {
    throw RpcError{jsonrpc::k_invalid_params,
                   "Invalid params: completion needs \"ref\" and \"argument\" objects"};
  }
  const std::string argument_name = required_string(*argument, "name");
  std::string prefix;
  if (auto value = argument->find("value"); value != argument->end() && value->is_string()) {
    prefix = value->get<std::string>();
  }
  std::map<std::string, std::string> context;
  if (auto ctx = object.find("context"); ctx != object.end() && ctx->is_object()) {
    if (auto resolved = ctx->find("arguments"); resolved != ctx->end() && resolved->is_object()) {
      for (const auto& [key, value] : resolved->items()) {
        if (value.is_string()) {
          context[key] = value.get<std::string>();
        }
      }
    }
  }
  const std::string type = ref->value("type", std::string());
  Completer completer;
  if (type == "ref/prompt") {
    const std::string name = required_string(*ref, "name");
    const PromptDef* prompt = m_server.registries().prompts.find(name);
    if (prompt == nullptr) {
      throw RpcError{jsonrpc::k_invalid_params, "Invalid params: unknown prompt '" + name + "'"};
    }
    completer = prompt->complete;
  } else if (type == "ref/resource") {
    const std::string uri = required_string(*ref, "uri");
    for (const auto& resource_template : m_server.registries().resources.templates()) {
      if (resource_template.uri_template == uri) {
        completer = resource_template.complete;
      }
    }
  } else {
    throw RpcError{jsonrpc::k_invalid_params,
                   "Invalid params: ref.type must be \"ref/prompt\" or \"ref/resource\""};
  }
  std::vector<std::string> values;
  if (completer) {
    values = completer(argument_name, prefix, context);
  }
  const std::size_t total = values.size();
  if (values.size() > 100) {
    values.resize(100);
  }
  return {{"completion", {{"values", values}, {"total", total}, {"hasMore", total > 100}}}};
}

}  // namespace autocomp::server
