#pragma once

// A scripted LLM server on 127.0.0.1 for tests: a test double that speaks the OpenAI chat
// completions wire format (POST /v1/chat/completions) and the Anthropic Messages format
// (POST /v1/messages) on the same port. It answers from a queue of scripted responses, records
// every request (path, headers, body, prompt text, arrival time) and the highest number of
// requests it was serving at once. Header-only so that any test binary can include it.

#include <httplib.h>

#include <algorithm>
#include <atomic>
#include <cctype>
#include <chrono>
#include <condition_variable>
#include <deque>
#include <map>
#include <mutex>
#include <nlohmann/json.hpp>
#include <optional>
#include <stdexcept>
#include <string>
#include <thread>
#include <utility>
#include <vector>

namespace autocomp::testing {

struct ScriptedResponse {
  int status = 200;
  std::string text;      // the assistant's reply, wrapped in the request's wire format
  std::string raw_body;  // when non-empty, sent verbatim instead (content type application/json)
  std::optional<std::string> retry_after;  // Retry-After header value, e.g. "1"
  std::chrono::milliseconds delay{0};      // wait before answering (cut short when stopping)
  std::string match;    // when non-empty, used only for a request whose prompt contains it
  bool repeat = false;  // stays in the queue after use (a standing answer for matching requests)
  long input_tokens = 100;
  long output_tokens = 50;

  static ScriptedResponse reply(std::string text) {
    ScriptedResponse response;
    response.text = std::move(text);
    return response;
  }
  static ScriptedResponse status_code(int status, std::string body = "{}") {
    ScriptedResponse response;
    response.status = status;
    response.raw_body = std::move(body);
    return response;
  }
};

struct RecordedRequest {
  std::string path;
  std::multimap<std::string, std::string> headers;  // as httplib received them
  std::string body;
  std::string prompt;  // system text and every message's content joined by "\n"
  std::chrono::steady_clock::time_point received;

  std::string header(const std::string& name) const {
    for (const auto& [key, value] : headers) {
      if (std::equal(key.begin(), key.end(), name.begin(), name.end(),
                     [](char a, char b) { return std::tolower(a) == std::tolower(b); })) {
        return value;
      }
    }
    return {};
  }
};

class ScriptedLlmServer {
 public:
  ScriptedLlmServer() {
    m_server.new_task_queue = [] { return new httplib::ThreadPool(32); };
    m_server.Post("/v1/chat/completions",
                  [this](const httplib::Request& request, httplib::Response& response) {
                    handle(request, response, false);
                  });
    m_server.Post("/v1/messages",
                  [this](const httplib::Request& request, httplib::Response& response) {
                    handle(request, response, true);
                  });
    m_port = m_server.bind_to_any_port("127.0.0.1");
    if (m_port <= 0) {
      throw std::runtime_error("scripted LLM server: cannot bind a loopback port");
    }
    m_thread = std::thread([this] { m_server.listen_after_bind(); });
    while (!m_server.is_running()) {
      std::this_thread::sleep_for(std::chrono::milliseconds(1));
    }
  }

  ~ScriptedLlmServer() { stop(); }
  ScriptedLlmServer(const ScriptedLlmServer&) = delete;
  ScriptedLlmServer& operator=(const ScriptedLlmServer&) = delete;

  void stop() {
    {
      std::lock_guard lock(m_mutex);
      m_stopping = true;
    }
    m_wake.notify_all();
    if (m_thread.joinable()) {
      m_server.stop();
      m_thread.join();
    }
  }

  int port() const { return m_port; }
  // What OPENAI_BASE_URL should be: "http://127.0.0.1:PORT/v1".
  std::string openai_base_url() const {
    return "http://127.0.0.1:" + std::to_string(m_port) + "/v1";
  }
  // What ANTHROPIC_BASE_URL should be: "http://127.0.0.1:PORT".
  std::string anthropic_base_url() const { return "http://127.0.0.1:" + std::to_string(m_port); }

  void push(ScriptedResponse response) {
    std::lock_guard lock(m_mutex);
    m_queue.push_back(std::move(response));
  }
  void push_text(std::string text) { push(ScriptedResponse::reply(std::move(text))); }
  // Answer for requests that no queued response matches (default: HTTP 500 "no scripted response").
  void set_fallback(ScriptedResponse response) {
    std::lock_guard lock(m_mutex);
    m_fallback = std::move(response);
  }

  std::vector<RecordedRequest> requests() const {
    std::lock_guard lock(m_mutex);
    return m_requests;
  }
  std::size_t request_count() const {
    std::lock_guard lock(m_mutex);
    return m_requests.size();
  }
  std::size_t pending() const {
    std::lock_guard lock(m_mutex);
    return m_queue.size();
  }
  int max_concurrent() const { return m_max_in_flight.load(); }

 private:
  static std::string prompt_of(const nlohmann::json& body) {
    std::string prompt;
    auto append = [&prompt](const nlohmann::json& content) {
      if (content.is_string()) {
        prompt += content.get<std::string>();
        prompt += '\n';
      } else if (content.is_array()) {
        for (const auto& block : content) {
          if (block.is_object() && block.contains("text") && block["text"].is_string()) {
            prompt += block["text"].get<std::string>();
            prompt += '\n';
          }
        }
      }
    };
    if (body.contains("system")) {
      append(body["system"]);
    }
    if (body.contains("messages") && body["messages"].is_array()) {
      for (const auto& message : body["messages"]) {
        if (message.is_object() && message.contains("content")) {
          append(message["content"]);
        }
      }
    }
    return prompt;
  }

  void handle(const httplib::Request& request, httplib::Response& response, bool anthropic) {
    const int in_flight = ++m_in_flight;
    int seen = m_max_in_flight.load();
    while (in_flight > seen && !m_max_in_flight.compare_exchange_weak(seen, in_flight)) {
    }
    RecordedRequest recorded;
    recorded.path = request.path;
    for (const auto& [key, value] : request.headers) {
      recorded.headers.emplace(key, value);
    }
    recorded.body = request.body;
    recorded.received = std::chrono::steady_clock::now();
    std::string model = "scripted";
    try {
      auto body = nlohmann::json::parse(request.body);
      recorded.prompt = prompt_of(body);
      if (body.contains("model") && body["model"].is_string()) {
        model = body["model"].get<std::string>();
      }
    } catch (const nlohmann::json::exception&) {
      recorded.prompt = request.body;
    }

    ScriptedResponse chosen;
    {
      std::unique_lock lock(m_mutex);
      m_requests.push_back(recorded);
      auto it = std::find_if(m_queue.begin(), m_queue.end(), [&](const ScriptedResponse& r) {
        return r.match.empty() || recorded.prompt.find(r.match) != std::string::npos;
      });
      if (it != m_queue.end()) {
        chosen = *it;
        if (!it->repeat) {
          m_queue.erase(it);
        }
      } else if (m_fallback) {
        chosen = *m_fallback;
      } else {
        chosen = ScriptedResponse::status_code(
            500, R"({"error":{"message":"no scripted response","type":"server_error"}})");
      }
      if (chosen.delay.count() > 0) {
        m_wake.wait_for(lock, chosen.delay, [this] { return m_stopping; });
      }
    }

    response.status = chosen.status;
    if (chosen.retry_after) {
      response.set_header("Retry-After", *chosen.retry_after);
    }
    if (!chosen.raw_body.empty() || chosen.status != 200) {
      response.set_content(chosen.raw_body.empty() ? "{}" : chosen.raw_body, "application/json");
    } else if (anthropic) {
      nlohmann::json body = {
          {"id", "msg_scripted"},
          {"type", "message"},
          {"role", "assistant"},
          {"model", model},
          {"content", nlohmann::json::array({{{"type", "text"}, {"text", chosen.text}}})},
          {"stop_reason", "end_turn"},
          {"usage",
           {{"input_tokens", chosen.input_tokens}, {"output_tokens", chosen.output_tokens}}}};
      response.set_content(body.dump(), "application/json");
    } else {
      nlohmann::json body = {
          {"id", "chatcmpl-scripted"},
          {"object", "chat.completion"},
          {"model", model},
          {"choices",
           nlohmann::json::array({{{"index", 0},
                                   {"message", {{"role", "assistant"}, {"content", chosen.text}}},
                                   {"finish_reason", "stop"}}})},
          {"usage",
           {{"prompt_tokens", chosen.input_tokens},
            {"completion_tokens", chosen.output_tokens},
            {"total_tokens", chosen.input_tokens + chosen.output_tokens}}}};
      response.set_content(body.dump(), "application/json");
    }
    --m_in_flight;
  }

  httplib::Server m_server;
  std::thread m_thread;
  int m_port = 0;
  mutable std::mutex m_mutex;
  std::condition_variable m_wake;
  bool m_stopping = false;
  std::deque<ScriptedResponse> m_queue;
  std::optional<ScriptedResponse> m_fallback;
  std::vector<RecordedRequest> m_requests;
  std::atomic<int> m_in_flight{0};
  std::atomic<int> m_max_in_flight{0};
};

}  // namespace autocomp::testing
