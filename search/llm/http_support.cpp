#include "search/llm/http_support.hpp"

#include <algorithm>
#include <cctype>
#include <cmath>
#include <ctime>
#include <thread>

namespace autocomp::search::llm {

std::string Endpoint::origin() const {
  return scheme + "://" + host + ":" + std::to_string(port);
}

bool Endpoint::loopback() const {
  return host == "localhost" || host == "::1" || host == "[::1]" || host.rfind("127.", 0) == 0;
}

core::Result<Endpoint> parse_endpoint(std::string_view url) {
  auto fail = [&url](const std::string& why) {
    return core::make_failure(core::FailureKind::invalid_argument, "llm",
                              "bad base URL '" + std::string(url) + "': " + why);
  };
  Endpoint endpoint;
  const auto scheme_end = url.find("://");
  if (scheme_end == std::string_view::npos) {
    return fail("expected http:// or https://");
  }
  endpoint.scheme = std::string(url.substr(0, scheme_end));
  std::transform(endpoint.scheme.begin(), endpoint.scheme.end(), endpoint.scheme.begin(),
                 [](unsigned char c) { return static_cast<char>(std::tolower(c)); });
  if (endpoint.scheme != "http" && endpoint.scheme != "https") {
    return fail("expected http:// or https://");
  }
  auto rest = url.substr(scheme_end + 3);
  const auto slash = rest.find('/');
  auto authority = rest.substr(0, slash);
  std::string path = slash == std::string_view::npos ? "" : std::string(rest.substr(slash));
  if (const auto at = authority.rfind('@'); at != std::string_view::npos) {
    return fail("credentials in the URL are not supported; use the API key variable");
  }
  std::string_view port_text;
  if (!authority.empty() && authority.front() == '[') {
    const auto close = authority.find(']');
    if (close == std::string_view::npos) {
      return fail("unterminated IPv6 address");
    }
    endpoint.host = std::string(authority.substr(1, close - 1));
    if (close + 1 < authority.size() && authority[close + 1] == ':') {
      port_text = authority.substr(close + 2);
    }
  } else {
    const auto colon = authority.rfind(':');
    endpoint.host = std::string(authority.substr(0, colon));
    if (colon != std::string_view::npos) {
      port_text = authority.substr(colon + 1);
    }
  }
  if (endpoint.host.empty()) {
    return fail("missing host");
  }
  if (!port_text.empty()) {
    int port = 0;
    for (char c : port_text) {
      if (c < '0' || c > '9') {
        return fail("bad port");
      }
      port = port * 10 + (c - '0');
      if (port > 65535) {
        return fail("bad port");
      }
    }
    endpoint.port = port;
  } else {
    endpoint.port = endpoint.scheme == "https" ? 443 : 80;
  }
  if (const auto query = path.find_first_of("?#"); query != std::string::npos) {
    path.erase(query);
  }
  while (!path.empty() && path.back() == '/') {
    path.pop_back();
  }
  endpoint.path_prefix = path;
  return endpoint;
}

std::optional<double> parse_retry_after(std::string_view value,
                                        std::chrono::system_clock::time_point now) {
  while (!value.empty() && value.front() == ' ') {
    value.remove_prefix(1);
  }
  while (!value.empty() && value.back() == ' ') {
    value.remove_suffix(1);
  }
  if (value.empty()) {
    return std::nullopt;
  }
  if (std::all_of(value.begin(), value.end(),
                  [](char c) { return (c >= '0' && c <= '9') || c == '.'; })) {
    try {
      return std::stod(std::string(value));
    } catch (const std::exception&) {
      return std::nullopt;
    }
  }
  // IMF-fixdate, the form HTTP/1.1 servers send: "Sun, 06 Nov 1994 08:49:37 GMT".
  std::tm tm{};
  char month[4] = {};
  char weekday[4] = {};
  int day = 0;
  int year = 0;
  int hour = 0;
  int minute = 0;
  int second = 0;
  const std::string text(value);
  if (std::sscanf(text.c_str(), "%3s, %d %3s %d %d:%d:%d GMT", weekday, &day, month, &year, &hour,
                  &minute, &second) != 7) {
    return std::nullopt;
  }
  static const char* k_months[] = {"Jan", "Feb", "Mar", "Apr", "May", "Jun",
                                   "Jul", "Aug", "Sep", "Oct", "Nov", "Dec"};
  int month_index = -1;
  for (int i = 0; i < 12; ++i) {
    if (std::string_view(month) == k_months[i]) {
      month_index = i;
    }
  }
  if (month_index < 0) {
    return std::nullopt;
  }
  tm.tm_year = year - 1900;
  tm.tm_mon = month_index;
  tm.tm_mday = day;
  tm.tm_hour = hour;
  tm.tm_min = minute;
  tm.tm_sec = second;
  const std::time_t when = timegm(&tm);
  if (when == static_cast<std::time_t>(-1)) {
    return std::nullopt;
  }
  const auto delta =
      std::chrono::duration<double>(std::chrono::system_clock::from_time_t(when) - now);
  return std::max(0.0, delta.count());
}

double backoff_seconds(int retry, double initial_s, double max_s, double random01) {
  const double full = std::min(max_s, initial_s * std::pow(2.0, std::max(0, retry)));
  return full * (0.5 + 0.5 * std::clamp(random01, 0.0, 1.0));
}

bool retryable_status(int status) {
  return status == 408 || status == 409 || status == 425 || status == 429 || status >= 500;
}

bool sleep_unless_cancelled(double seconds, const core::CancelToken& cancel,
                            const core::Clock& clock) {
  const auto deadline = clock.now() + std::chrono::duration_cast<core::Clock::Duration>(
                                          std::chrono::duration<double>(std::max(0.0, seconds)));
  for (;;) {
    if (cancel.cancelled()) {
      return false;
    }
    const auto now = clock.now();
    if (now >= deadline) {
      return true;
    }
    const core::Clock::Duration left = deadline - now;
    clock.sleep_for(clock.real_time()
                        ? std::min<core::Clock::Duration>(left, std::chrono::milliseconds(10))
                        : left);
  }
}

bool CancellableSemaphore::acquire(const core::CancelToken& cancel) {
  std::unique_lock lock(m_mutex);
  while (m_count <= 0) {
    if (cancel.cancelled()) {
      return false;
    }
    m_available.wait_for(lock, std::chrono::milliseconds(20));
  }
  if (cancel.cancelled()) {
    return false;
  }
  --m_count;
  return true;
}

void CancellableSemaphore::release() {
  {
    std::lock_guard lock(m_mutex);
    ++m_count;
  }
  m_available.notify_one();
}

std::string redact(std::string text, const std::string& secret) {
  if (secret.empty()) {
    return text;
  }
  std::size_t pos = 0;
  while ((pos = text.find(secret, pos)) != std::string::npos) {
    text.replace(pos, secret.size(), "[redacted]");
    pos += 10;
  }
  return text;
}

}  // namespace autocomp::search::llm
