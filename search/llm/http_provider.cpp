// OpenAI-compatible and Anthropic providers over HTTP(S), and the provider table behind
// make_provider(). Wire formats stay in this file.

#include <httplib.h>
#include <spdlog/spdlog.h>

#include <atomic>
#include <chrono>
#include <cstdlib>
#include <nlohmann/json.hpp>
#include <random>
#include <stop_token>
#include <thread>

#include "search/llm/http_support.hpp"
#include "search/llm/pricing.hpp"
#include "search/llm/provider.hpp"

namespace autocomp::search::llm {

namespace {

using nlohmann::json;

enum class Wire { openai, anthropic };

// One row per provider scheme: adding a provider means adding a row here (and its wire format).
struct SchemeEntry {
  const char* scheme;
  const char* base_url_env;
  const char* key_env;
  const char* default_base_url;
  Wire wire;
};

constexpr SchemeEntry k_schemes[] = {
    {"openai", "OPENAI_BASE_URL", "OPENAI_API_KEY", "https://api.openai.com/v1", Wire::openai},
    {"anthropic", "ANTHROPIC_BASE_URL", "ANTHROPIC_API_KEY", "https://api.anthropic.com",
     Wire::anthropic},
};

constexpr const char* k_anthropic_version = "2023-06-01";

std::string env_or_empty(const char* name) {
  const char* value = std::getenv(name);
  return value == nullptr ? std::string() : std::string(value);
}

struct HttpReply {
  int status = 0;  // 0: no response
  std::string body;
  std::optional<std::string> retry_after;
  httplib::Error error = httplib::Error::Success;
  double elapsed_s = 0;
};

class HttpProvider : public Provider {
 public:
  HttpProvider(const SchemeEntry& entry, std::string spec, std::string model, Endpoint endpoint,
               std::string key, ProviderOptions options, PriceTable prices)
      : m_entry(entry),
        m_spec(std::move(spec)),
        m_model(std::move(model)),
        m_endpoint(std::move(endpoint)),
        m_key(std::move(key)),
        m_options(std::move(options)),
        m_prices(std::move(prices)),
        m_slots(std::max(1, m_options.max_concurrency)),
        m_clock(core::clock_or_steady(m_options.clock)),
        m_random(std::random_device{}()) {}

  std::string spec() const override { return m_spec; }
  int max_concurrency() const override { return std::max(1, m_options.max_concurrency); }

  core::Result<Completion> complete(const CompletionRequest& request,
                                    const core::CancelToken& cancel) override {
    const auto started = m_clock->now();
    if (cancel.cancelled() || !m_slots.acquire(cancel)) {
      return cancelled();
    }
    struct Release {
      CancellableSemaphore& slots;
      ~Release() { slots.release(); }
    } release{m_slots};

    std::optional<core::Failure> last_failure;
    int attempts = 0;
    int adaptations = 0;
    for (int retry = 0; retry <= std::max(0, m_options.max_retries);) {
      if (cancel.cancelled()) {
        return cancelled();
      }
      ++attempts;
      const auto reply = post(request_body(request), cancel);
      if (cancel.cancelled()) {
        return cancelled();
      }
      std::optional<double> wait;
      if (reply.status == 200) {
        auto completion = parse_reply(reply.body);
        if (completion.ok()) {
          completion->attempts = attempts;
          completion->latency_ms =
              std::chrono::duration<double, std::milli>(m_clock->now() - started).count();
          return completion;
        }
        last_failure = completion.failure();
      } else if (reply.status == 0) {
        last_failure = transport_failure(reply);
      } else if (reply.status == 400 && adaptations < 2 && adapt_to(reply.body)) {
        // The server rejected a parameter this model does not take; ask again without it.
        ++adaptations;
        continue;
      } else if (!retryable_status(reply.status)) {
        return http_failure(reply);
      } else {
        last_failure = http_failure(reply);
        if (reply.retry_after) {
          wait = parse_retry_after(*reply.retry_after, std::chrono::system_clock::now());
          if (wait) {
            wait = std::min(*wait, m_options.retry_after_cap_s);
          }
        }
      }
      if (retry == std::max(0, m_options.max_retries)) {
        break;
      }
      if (!wait) {
        wait = backoff_seconds(retry, m_options.backoff_initial_s, m_options.backoff_max_s, draw());
      }
      if (!sleep_unless_cancelled(*wait, cancel, *m_clock)) {
        return cancelled();
      }
      ++retry;
    }
    auto failure = *last_failure;
    failure.message +=
        " (after " + std::to_string(attempts) + " attempt" + (attempts == 1 ? "" : "s") + ")";
    return failure;
  }

 private:
  core::Failure cancelled() const {
    return core::make_failure(core::FailureKind::cancelled, "llm", spec() + ": call cancelled");
  }

  double draw() {
    std::lock_guard lock(m_random_mutex);
    return std::uniform_real_distribution<double>(0.0, 1.0)(m_random);
  }

  std::string path() const {
    if (m_entry.wire == Wire::openai) {
      return m_endpoint.path_prefix + "/chat/completions";
    }
    const auto& prefix = m_endpoint.path_prefix;
    const bool has_v1 = prefix.size() >= 3 && prefix.compare(prefix.size() - 3, 3, "/v1") == 0;
    return prefix + (has_v1 ? "/messages" : "/v1/messages");
  }

  std::string request_body(const CompletionRequest& request) const {
    json body;
    body["model"] = m_model;
    json messages = json::array();
    if (m_entry.wire == Wire::openai) {
      if (!request.system.empty()) {
        messages.push_back({{"role", "system"}, {"content", request.system}});
      }
      for (const auto& message : request.messages) {
        messages.push_back({{"role", message.role}, {"content", message.content}});
      }
      body["messages"] = std::move(messages);
      body[m_use_max_completion_tokens.load() ? "max_completion_tokens" : "max_tokens"] =
          request.max_tokens;
      if (!m_omit_temperature.load()) {
        body["temperature"] = request.temperature;
      }
    } else {
      for (const auto& message : request.messages) {
        messages.push_back({{"role", message.role}, {"content", message.content}});
      }
      if (!request.system.empty()) {
        body["system"] = request.system;
      }
      body["messages"] = std::move(messages);
      body["max_tokens"] = request.max_tokens;
      if (!m_omit_temperature.load()) {
        body["temperature"] = std::clamp(request.temperature, 0.0, 1.0);
      }
    }
    // Replace, not throw, should a prompt ever hold invalid UTF-8.
    return body.dump(-1, ' ', false, nlohmann::json::error_handler_t::replace);
  }

  HttpReply post(const std::string& body, const core::CancelToken& cancel) const {
    HttpReply reply;
    httplib::Client client(m_endpoint.origin());
    const auto whole = static_cast<time_t>(m_options.timeout_s);
    const auto micros =
        static_cast<time_t>((m_options.timeout_s - static_cast<double>(whole)) * 1e6);
    const double connect_s = std::min(m_options.timeout_s, 30.0);
    const auto connect_whole = static_cast<time_t>(connect_s);
    client.set_connection_timeout(
        connect_whole, static_cast<time_t>((connect_s - static_cast<double>(connect_whole)) * 1e6));
    client.set_read_timeout(whole, micros);
    client.set_write_timeout(whole, micros);
    client.set_keep_alive(false);
    httplib::Headers headers;
    if (m_entry.wire == Wire::openai) {
      if (!m_key.empty()) {
        headers.emplace("Authorization", "Bearer " + m_key);
      }
    } else {
      if (!m_key.empty()) {
        headers.emplace("x-api-key", m_key);
      }
      headers.emplace("anthropic-version", k_anthropic_version);
    }
    // A cancellation while the request is in flight shuts the socket down.
    std::jthread watcher([&client, &cancel](std::stop_token stop) {
      while (!stop.stop_requested()) {
        if (cancel.cancelled()) {
          client.stop();
          return;
        }
        std::this_thread::sleep_for(std::chrono::milliseconds(20));
      }
    });
    const auto started = m_clock->now();
    auto result = client.Post(path(), headers, body, "application/json");
    reply.elapsed_s = m_clock->seconds_since(started);
    watcher.request_stop();
    if (!result) {
      reply.error = result.error();
      return reply;
    }
    reply.status = result->status;
    reply.body = result->body;
    if (result->has_header("Retry-After")) {
      reply.retry_after = result->get_header_value("Retry-After");
    }
    return reply;
  }

  core::Failure transport_failure(const HttpReply& reply) const {
    const bool timed_out =
        reply.error == httplib::Error::ConnectionTimeout ||
        (reply.error == httplib::Error::Read && reply.elapsed_s >= m_options.timeout_s * 0.9);
    if (timed_out) {
      return core::make_failure(core::FailureKind::timeout, "llm",
                                spec() + ": no answer from " + m_endpoint.origin() + " within " +
                                    std::to_string(static_cast<int>(m_options.timeout_s + 0.5)) +
                                    " s");
    }
    return core::make_failure(core::FailureKind::transport_error, "llm",
                              spec() + ": cannot reach " + m_endpoint.origin() + " (" +
                                  httplib::to_string(reply.error) + ")");
  }

  // The server's own explanation, from either wire format's error object, else the raw body.
  std::string error_text(const std::string& body) const {
    std::string text;
    try {
      const auto parsed = json::parse(body);
      if (parsed.contains("error") && parsed["error"].is_object() &&
          parsed["error"].contains("message") && parsed["error"]["message"].is_string()) {
        text = parsed["error"]["message"].get<std::string>();
      } else if (parsed.contains("error") && parsed["error"].is_string()) {
        text = parsed["error"].get<std::string>();
      } else if (parsed.contains("message") && parsed["message"].is_string()) {
        text = parsed["message"].get<std::string>();
      }
    } catch (const json::exception&) {
    }
    if (text.empty()) {
      text = body;
    }
    if (text.size() > 400) {
      text = text.substr(0, 400) + "...";
    }
    return redact(text, m_key);
  }

  core::Failure http_failure(const HttpReply& reply) const {
    const std::string what =
        spec() + ": HTTP " + std::to_string(reply.status) + " from " + m_endpoint.origin();
    const std::string detail = error_text(reply.body);
    const std::string message = detail.empty() ? what : what + ": " + detail;
    if (reply.status == 401 || reply.status == 403) {
      return core::make_failure(core::FailureKind::unavailable, "llm",
                                message + " (check " + m_entry.key_env + ")");
    }
    if (retryable_status(reply.status)) {
      return core::make_failure(core::FailureKind::transport_error, "llm", message);
    }
    return core::make_failure(core::FailureKind::invalid_argument, "llm", message);
  }

  // Learns from a 400 which request parameter the model refuses; true when the next request
  // will differ.
  bool adapt_to(const std::string& body) {
    const auto text = error_text(body);
    bool changed = false;
    if (m_entry.wire == Wire::openai && !m_use_max_completion_tokens.load() &&
        text.find("max_completion_tokens") != std::string::npos) {
      m_use_max_completion_tokens = true;
      changed = true;
    }
    if (!m_omit_temperature.load() && text.find("temperature") != std::string::npos &&
        (text.find("support") != std::string::npos || text.find("only") != std::string::npos)) {
      m_omit_temperature = true;
      changed = true;
    }
    return changed;
  }

  core::Result<Completion> parse_reply(const std::string& body) const {
    auto malformed = [this](const std::string& why) {
      return core::make_failure(
          core::FailureKind::transport_error, "llm",
          spec() + ": malformed reply from " + m_endpoint.origin() + ": " + why);
    };
    json parsed;
    try {
      parsed = json::parse(body);
    } catch (const json::exception&) {
      return malformed("not JSON");
    }
    Completion completion;
    completion.provider = spec();
    try {
      if (m_entry.wire == Wire::openai) {
        if (!parsed.contains("choices") || !parsed["choices"].is_array() ||
            parsed["choices"].empty()) {
          return malformed("no choices");
        }
        const auto& message = parsed["choices"][0].value("message", json::object());
        const auto content = message.value("content", json());
        if (content.is_string()) {
          completion.text = content.get<std::string>();
        } else if (content.is_array()) {
          for (const auto& part : content) {
            if (part.is_object() && part.value("type", "") == "text") {
              completion.text += part.value("text", "");
            }
          }
        }
        if (const auto usage = parsed.value("usage", json::object()); usage.is_object()) {
          completion.usage.input_tokens = usage.value("prompt_tokens", 0L);
          completion.usage.output_tokens = usage.value("completion_tokens", 0L);
        }
      } else {
        if (!parsed.contains("content") || !parsed["content"].is_array()) {
          return malformed("no content");
        }
        for (const auto& block : parsed["content"]) {
          if (block.is_object() && block.value("type", "") == "text") {
            completion.text += block.value("text", "");
          }
        }
        if (const auto usage = parsed.value("usage", json::object()); usage.is_object()) {
          completion.usage.input_tokens = usage.value("input_tokens", 0L);
          completion.usage.output_tokens = usage.value("output_tokens", 0L);
        }
      }
    } catch (const json::exception& error) {
      return malformed(error.what());
    }
    if (completion.text.empty()) {
      return malformed("the model returned no text");
    }
    if (const auto cost = estimate_cost(m_prices, m_model, completion.usage.input_tokens,
                                        completion.usage.output_tokens)) {
      completion.usage.cost_usd = *cost;
      completion.usage.cost_known = true;
    }
    return completion;
  }

  const SchemeEntry& m_entry;
  std::string m_spec;  // as given, e.g. "openai:gpt-4o" or "openai:qwen@http://localhost:8000/v1"
  std::string m_model;
  Endpoint m_endpoint;
  std::string m_key;  // never logged, never part of a message
  ProviderOptions m_options;
  PriceTable m_prices;
  CancellableSemaphore m_slots;
  std::shared_ptr<const core::Clock> m_clock;
  std::mutex m_random_mutex;
  std::mt19937_64 m_random;
  std::atomic<bool> m_use_max_completion_tokens{false};
  std::atomic<bool> m_omit_temperature{false};
};

}  // namespace

core::Result<ModelSpec> parse_model_spec(const std::string& spec) {
  const auto colon = spec.find(':');
  if (colon == std::string::npos || colon == 0 || colon + 1 == spec.size()) {
    return core::make_failure(core::FailureKind::invalid_argument, "llm",
                              "bad LLM spec '" + spec +
                                  "': expected SCHEME:MODEL, e.g. openai:gpt-4o or "
                                  "anthropic:claude-sonnet-4-5");
  }
  return ModelSpec{spec.substr(0, colon), spec.substr(colon + 1)};
}

std::vector<std::string> provider_schemes() {
  std::vector<std::string> schemes;
  for (const auto& entry : k_schemes) {
    schemes.emplace_back(entry.scheme);
  }
  return schemes;
}

core::Result<std::shared_ptr<Provider>> make_provider(const std::string& spec,
                                                      const ProviderOptions& options) {
  auto parsed = parse_model_spec(spec);
  if (!parsed.ok()) {
    return parsed.failure();
  }
  const SchemeEntry* entry = nullptr;
  for (const auto& candidate : k_schemes) {
    if (parsed->scheme == candidate.scheme) {
      entry = &candidate;
    }
  }
  if (entry == nullptr) {
    std::string known;
    for (const auto& scheme : provider_schemes()) {
      known += (known.empty() ? "" : ", ") + scheme;
    }
    return core::make_failure(
        core::FailureKind::invalid_argument, "llm",
        "unknown LLM provider '" + parsed->scheme + "' in '" + spec + "' (known: " + known + ")");
  }
  std::string base_url = options.base_url;
  // "openai:MODEL@http://host:port/v1" names its own server, so one ensemble can mix servers.
  if (const auto at = parsed->model.rfind('@');
      at != std::string::npos && (parsed->model.compare(at + 1, 7, "http://") == 0 ||
                                  parsed->model.compare(at + 1, 8, "https://") == 0)) {
    base_url = parsed->model.substr(at + 1);
    parsed->model.erase(at);
  }
  if (base_url.empty()) {
    base_url = env_or_empty(entry->base_url_env);
  }
  if (base_url.empty()) {
    base_url = entry->default_base_url;
  }
  auto endpoint = parse_endpoint(base_url);
  if (!endpoint.ok()) {
    auto failure = endpoint.failure();
    failure.message += " (from " + std::string(entry->base_url_env) + ")";
    return failure;
  }
  std::string key = env_or_empty(entry->key_env);
  if (key.empty() && !endpoint->loopback()) {
    return core::make_failure(core::FailureKind::unavailable, "llm",
                              std::string(entry->key_env) + " is not set; it is needed for " +
                                  endpoint->origin() + " (a server on localhost needs no key)");
  }
  auto prices = PriceTable::with_overrides(options.prices);
  if (!prices.ok()) {
    return prices.failure();
  }
  if (!prices->find(parsed->model)) {
    spdlog::warn(
        "{}: no price known for model '{}'; its calls are counted as costing 0 USD "
        "(add it with AUTOCOMP_LLM_PRICES)",
        spec, parsed->model);
  }
  return std::shared_ptr<Provider>(
      std::make_shared<HttpProvider>(*entry, spec, parsed->model, std::move(endpoint).value(),
                                     std::move(key), options, std::move(prices).value()));
}

}  // namespace autocomp::search::llm
