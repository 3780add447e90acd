#include "server/tool.hpp"

#include <algorithm>
#include <array>
#include <filesystem>
#include <stdexcept>
#include <system_error>
#include <utility>

namespace autocomp::server {

namespace {

constexpr std::array<std::string_view, 8> k_level_names = {
    "debug", "info", "notice", "warning", "error", "critical", "alert", "emergency"};

bool valid_tool_name(std::string_view name) {
  if (name.empty() || name.size() > 128) {
    return false;
  }
  return std::all_of(name.begin(), name.end(), [](char c) {
    return (c >= 'a' && c <= 'z') || (c >= 'A' && c <= 'Z') || (c >= '0' && c <= '9') || c == '_' ||
           c == '-' || c == '.';
  });
}

}  // namespace

std::string_view to_string(LogLevel level) {
  return k_level_names.at(static_cast<std::size_t>(level));
}

std::optional<LogLevel> log_level_from_string(std::string_view name) {
  for (std::size_t i = 0; i < k_level_names.size(); ++i) {
    if (k_level_names[i] == name) {
      return static_cast<LogLevel>(i);
    }
  }
  return std::nullopt;
}

std::string ToolContext::working_dir() const {
  if (working_dir_sink) {
    std::string dir = working_dir_sink();
    if (!dir.empty()) {
      return dir;
    }
  }
  std::error_code error;
  auto current = std::filesystem::current_path(error);
  return error ? std::string(".") : current.string();
}

void ToolContext::progress(double done, std::optional<double> total,
                           const std::string& message) const {
  if (!progress_sink) {
    return;
  }
  {
    std::lock_guard lock(progress_state->first);
    if (progress_state->second && done <= *progress_state->second) {
      return;
    }
    progress_state->second = done;
  }
  progress_sink(done, total, message);
}

void ToolContext::log(LogLevel level, const std::string& logger, const nlohmann::json& data) const {
  if (log_sink) {
    log_sink(level, logger, data);
  }
}

core::Result<nlohmann::json> ToolContext::request(const std::string& method,
                                                  const nlohmann::json& params,
                                                  std::chrono::milliseconds timeout) const {
  if (!request_sink) {
    return core::make_failure(core::FailureKind::unavailable, "client-request",
                              "no client connection can carry a request to the client");
  }
  return request_sink(method, params, timeout, cancel);
}

core::Result<nlohmann::json> ToolContext::create_message(const nlohmann::json& params) const {
  if (!client_supports_sampling) {
    return core::make_failure(core::FailureKind::unavailable, "sampling",
                              "the MCP client did not declare the sampling capability");
  }
  return request("sampling/createMessage", params);
}

core::Result<nlohmann::json> ToolContext::elicit(const nlohmann::json& params) const {
  if (!client_supports_elicitation) {
    return core::make_failure(core::FailureKind::unavailable, "elicitation",
                              "the MCP client did not declare the elicitation capability");
  }
  return request("elicitation/create", params);
}

core::Result<nlohmann::json> ToolContext::request_input(const std::string& key,
                                                        const std::string& method,
                                                        const nlohmann::json& params) const {
  if (input_sink) {
    return input_sink(key, method, params);
  }
  return request(method, params);
}

ClientChannel ToolContext::session_channel() const {
  return ClientChannel(session_request_sink, client_capabilities);
}

ClientChannel::ClientChannel(Sink sink, nlohmann::json client_capabilities)
    : m_sink(std::move(sink)),
      m_capabilities(client_capabilities.is_object() ? std::move(client_capabilities)
                                                     : nlohmann::json::object()) {}

core::Result<nlohmann::json> ClientChannel::request(const std::string& method,
                                                    const nlohmann::json& params,
                                                    std::chrono::milliseconds timeout,
                                                    const core::CancelToken& cancel) const {
  if (!m_sink) {
    return core::make_failure(core::FailureKind::unavailable, "client-request",
                              "no MCP session can carry " + method + " to a client");
  }
  if (cancel.cancelled()) {
    return core::make_failure(core::FailureKind::cancelled, "client-request",
                              method + " was cancelled");
  }
  return m_sink(method, params, timeout, cancel);
}

core::Result<nlohmann::json> ClientChannel::create_message(const nlohmann::json& params,
                                                           std::chrono::milliseconds timeout,
                                                           const core::CancelToken& cancel) const {
  if (!supports_sampling()) {
    return core::make_failure(core::FailureKind::unavailable, "sampling",
                              "the MCP client did not declare the sampling capability");
  }
  return request("sampling/createMessage", params, timeout, cancel);
}

void ToolContext::close_sse_stream(std::chrono::milliseconds retry) const {
  if (close_stream_sink) {
    close_stream_sink(retry);
  }
}

ToolResult tool_error(std::string message) {
  ToolResult result;
  result.structured = {{"error", message}};
  result.text = std::move(message);
  result.is_error = true;
  return result;
}

ToolResult tool_failure(const core::Failure& failure) {
  ToolResult result;
  result.structured = {{"error", failure.message},
                       {"kind", std::string(core::to_string(failure.kind))},
                       {"stage", failure.stage}};
  if (failure.line) {
    result.structured["line"] = *failure.line;
  }
  result.text = failure.describe();
  result.is_error = true;
  return result;
}

void ToolRegistry::add(ToolDef tool) {
  if (!valid_tool_name(tool.name)) {
    throw std::invalid_argument("invalid tool name '" + tool.name +
                                "' (1-128 of A-Z a-z 0-9 _ - .)");
  }
  if (find(tool.name) != nullptr) {
    throw std::invalid_argument("duplicate tool name '" + tool.name + "'");
  }
  if (tool.description.empty()) {
    throw std::invalid_argument("tool '" + tool.name + "' has no description");
  }
  if (!tool.handler) {
    throw std::invalid_argument("tool '" + tool.name + "' has no handler");
  }
  if (!tool.input_schema.is_object() || tool.input_schema.value("type", "") != "object") {
    throw std::invalid_argument("tool '" + tool.name +
                                "' input schema must be an object schema (type: object)");
  }
  if (!tool.output_schema.is_null() &&
      (!tool.output_schema.is_object() || tool.output_schema.value("type", "") != "object")) {
    throw std::invalid_argument("tool '" + tool.name +
                                "' output schema must be null or an object schema");
  }
  m_tools.push_back(std::move(tool));
}

const ToolDef* ToolRegistry::find(std::string_view name) const {
  for (const auto& tool : m_tools) {
    if (tool.name == name) {
      return &tool;
    }
  }
  return nullptr;
}

void ResourceRegistry::add(ResourceDef resource) {
  if (resource.uri.empty() || !resource.read) {
    throw std::invalid_argument("resource needs a uri and a reader");
  }
  std::lock_guard lock(m_mutex);
  for (const auto& existing : m_resources) {
    if (existing.uri == resource.uri) {
      throw std::invalid_argument("duplicate resource uri '" + resource.uri + "'");
    }
  }
  if (resource.name.empty()) {
    resource.name = resource.uri;
  }
  m_resources.push_back(std::move(resource));
}

void ResourceRegistry::add_template(ResourceTemplateDef resource_template) {
  if (resource_template.uri_template.empty() || !resource_template.read) {
    throw std::invalid_argument("resource template needs a uriTemplate and a reader");
  }
  std::lock_guard lock(m_mutex);
  for (const auto& existing : m_templates) {
    if (existing.uri_template == resource_template.uri_template) {
      throw std::invalid_argument("duplicate resource template '" + resource_template.uri_template +
                                  "'");
    }
  }
  if (resource_template.name.empty()) {
    resource_template.name = resource_template.uri_template;
  }
  m_templates.push_back(std::move(resource_template));
}

std::vector<ResourceDef> ResourceRegistry::resources() const {
  std::lock_guard lock(m_mutex);
  return m_resources;
}

std::vector<ResourceTemplateDef> ResourceRegistry::templates() const {
  std::lock_guard lock(m_mutex);
  return m_templates;
}

std::optional<ResourceRegistry::Match> ResourceRegistry::match(const std::string& uri) const {
  std::lock_guard lock(m_mutex);
  for (const auto& resource : m_resources) {
    if (resource.uri == uri) {
      return Match{resource.read, {}};
    }
  }
  for (const auto& resource_template : m_templates) {
    if (auto variables = match_uri_template(resource_template.uri_template, uri)) {
      return Match{resource_template.read, std::move(*variables)};
    }
  }
  return std::nullopt;
}

void ResourceRegistry::notify_updated(const std::string& uri) const {
  std::function<void(const std::string&)> listener;
  {
    std::lock_guard lock(m_mutex);
    listener = m_update_listener;
  }
  if (listener) {
    listener(uri);
  }
}

void ResourceRegistry::set_update_listener(std::function<void(const std::string&)> listener) {
  std::lock_guard lock(m_mutex);
  m_update_listener = std::move(listener);
}

std::optional<std::map<std::string, std::string>> match_uri_template(std::string_view uri_template,
                                                                     std::string_view uri) {
  std::map<std::string, std::string> variables;
  std::size_t t = 0;
  std::size_t u = 0;
  while (t < uri_template.size()) {
    if (uri_template[t] == '{') {
      std::size_t close = uri_template.find('}', t);
      if (close == std::string_view::npos) {
        return std::nullopt;
      }
      std::string name(uri_template.substr(t + 1, close - t - 1));
      t = close + 1;
      // The variable runs up to the next literal character of the template (or '/', or the end).
      std::size_t end = u;
      while (end < uri.size() && uri[end] != '/' &&
             !(t < uri_template.size() && uri_template[t] != '{' && uri[end] == uri_template[t])) {
        ++end;
      }
      if (end == u) {
        return std::nullopt;
      }
      variables[name] = std::string(uri.substr(u, end - u));
      u = end;
    } else {
      if (u >= uri.size() || uri[u] != uri_template[t]) {
        return std::nullopt;
      }
      ++t;
      ++u;
    }
  }
  if (u != uri.size()) {
    return std::nullopt;
  }
  return variables;
}

void PromptRegistry::add(PromptDef prompt) {
  if (prompt.name.empty() || !prompt.get) {
    throw std::invalid_argument("prompt needs a name and a getter");
  }
  if (find(prompt.name) != nullptr) {
    throw std::invalid_argument("duplicate prompt name '" + prompt.name + "'");
  }
  m_prompts.push_back(std::move(prompt));
}

const PromptDef* PromptRegistry::find(std::string_view name) const {
  for (const auto& prompt : m_prompts) {
    if (prompt.name == name) {
      return &prompt;
    }
  }
  return nullptr;
}

}  // namespace autocomp::server
