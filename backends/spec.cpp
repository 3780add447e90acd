#include "backends/spec.hpp"

#include <charconv>
#include <cstdlib>
#include <limits>

namespace autocomp::backends {
namespace {

core::Failure bad_spec(std::string_view text, const std::string& why) {
  return core::make_failure(core::FailureKind::invalid_argument, "backend",
                            "invalid backend spec '" + std::string(text) + "': " + why);
}

int hex_value(char c) {
  if (c >= '0' && c <= '9') {
    return c - '0';
  }
  if (c >= 'a' && c <= 'f') {
    return c - 'a' + 10;
  }
  if (c >= 'A' && c <= 'F') {
    return c - 'A' + 10;
  }
  return -1;
}

std::optional<std::string> percent_decode(std::string_view text) {
  std::string out;
  for (std::size_t i = 0; i < text.size(); ++i) {
    if (text[i] == '%') {
      if (i + 2 >= text.size()) {
        return std::nullopt;
      }
      int hi = hex_value(text[i + 1]);
      int lo = hex_value(text[i + 2]);
      if (hi < 0 || lo < 0) {
        return std::nullopt;
      }
      out.push_back(static_cast<char>(hi * 16 + lo));
      i += 2;
    } else {
      out.push_back(text[i]);
    }
  }
  return out;
}

std::optional<int> parse_int(std::string_view text) {
  int value = 0;
  auto [end, ec] = std::from_chars(text.data(), text.data() + text.size(), value);
  if (ec != std::errc() || end != text.data() + text.size()) {
    return std::nullopt;
  }
  return value;
}

std::string_view trim(std::string_view text) {
  while (!text.empty() && (text.front() == ' ' || text.front() == '\t' || text.front() == '\n')) {
    text.remove_prefix(1);
  }
  while (!text.empty() && (text.back() == ' ' || text.back() == '\t' || text.back() == '\n')) {
    text.remove_suffix(1);
  }
  return text;
}

}  // namespace

std::optional<std::string> BackendSpec::param(const std::string& name) const {
  auto it = params.find(name);
  if (it == params.end()) {
    return std::nullopt;
  }
  return it->second;
}

core::Result<std::optional<int>> BackendSpec::int_param(const std::string& name) const {
  auto value = param(name);
  if (!value) {
    return std::optional<int>{};
  }
  auto number = parse_int(*value);
  if (!number || *number <= 0) {
    auto failure = bad_spec(text, name + " must be a positive integer, got '" + *value + "'");
    if (!origin.empty()) {
      failure.message = origin + ": " + failure.message;
    }
    return failure;
  }
  if (name == "slots" && *number > k_max_slots) {
    auto failure = bad_spec(
        text, "slots must be at most " + std::to_string(k_max_slots) + ", got '" + *value + "'");
    if (!origin.empty()) {
      failure.message = origin + ": " + failure.message;
    }
    return failure;
  }
  return std::optional<int>{*number};
}

bool BackendSpec::flag(const std::string& name) const {
  auto value = param(name);
  return value && (*value == "1" || *value == "true" || *value == "yes");
}

core::Result<BackendSpec> parse_spec(std::string_view text) {
  text = trim(text);
  if (text.empty()) {
    return bad_spec(text, "empty");
  }
  BackendSpec spec;
  spec.text = std::string(text);

  std::string_view rest = text;
  std::string_view query;
  if (auto q = rest.find('?'); q != std::string_view::npos) {
    query = rest.substr(q + 1);
    rest = rest.substr(0, q);
  }

  if (auto sep = rest.find("://"); sep != std::string_view::npos) {
    spec.scheme = std::string(rest.substr(0, sep));
    std::string_view authority = rest.substr(sep + 3);
    if (!authority.empty() && authority.back() == '/') {
      authority.remove_suffix(1);
    }
    if (authority.find('/') != std::string_view::npos) {
      return bad_spec(text, "a path is not allowed after the host");
    }
    if (auto at = authority.rfind('@'); at != std::string_view::npos) {
      auto user = percent_decode(authority.substr(0, at));
      if (!user || user->empty()) {
        return bad_spec(text, "empty or malformed user name");
      }
      spec.user = *user;
      authority = authority.substr(at + 1);
    }
    std::string_view host = authority;
    if (!authority.empty() && authority.front() == '[') {
      auto close = authority.find(']');
      if (close == std::string_view::npos) {
        return bad_spec(text, "unterminated [IPv6] address");
      }
      host = authority.substr(1, close - 1);
      std::string_view after = authority.substr(close + 1);
      if (!after.empty()) {
        if (after.front() != ':') {
          return bad_spec(text, "unexpected text after the address");
        }
        auto port = parse_int(after.substr(1));
        if (!port || *port <= 0 || *port > 65535) {
          return bad_spec(text, "bad port '" + std::string(after.substr(1)) + "'");
        }
        spec.port = *port;
      }
    } else if (auto colon = authority.rfind(':'); colon != std::string_view::npos) {
      host = authority.substr(0, colon);
      auto port = parse_int(authority.substr(colon + 1));
      if (!port || *port <= 0 || *port > 65535) {
        return bad_spec(text, "bad port '" + std::string(authority.substr(colon + 1)) + "'");
      }
      spec.port = *port;
    }
    if (host.empty()) {
      return bad_spec(text, "no host");
    }
    spec.host = std::string(host);
  } else {
    spec.scheme = std::string(rest);
    if (!spec.scheme.empty() && spec.scheme.back() == ':') {
      spec.scheme.pop_back();  // "slurm:?partition=P" names the scheme like a URI does
    }
  }
  if (spec.scheme.empty()) {
    return bad_spec(text, "no backend name");
  }

  while (!query.empty()) {
    auto amp = query.find('&');
    std::string_view pair = query.substr(0, amp);
    query = amp == std::string_view::npos ? std::string_view{} : query.substr(amp + 1);
    if (pair.empty()) {
      continue;
    }
    auto eq = pair.find('=');
    auto name = percent_decode(pair.substr(0, eq));
    auto value = eq == std::string_view::npos ? std::optional<std::string>{"1"}
                                              : percent_decode(pair.substr(eq + 1));
    if (!name || name->empty() || !value) {
      return bad_spec(text, "malformed option '" + std::string(pair) + "'");
    }
    spec.params[*name] = *value;
  }
  return spec;
}

std::vector<std::string> split_specs(std::string_view text) {
  std::vector<std::string> specs;
  while (true) {
    auto comma = text.find(',');
    auto piece = trim(text.substr(0, comma));
    if (!piece.empty()) {
      specs.emplace_back(piece);
    }
    if (comma == std::string_view::npos) {
      break;
    }
    text = text.substr(comma + 1);
  }
  return specs;
}

std::string expand_home(std::string_view path) {
  if (path.empty() || path.front() != '~' || (path.size() > 1 && path[1] != '/')) {
    return std::string(path);
  }
  const char* home = std::getenv("HOME");
  if (home == nullptr || *home == '\0') {
    return std::string(path);
  }
  return std::string(home) + std::string(path.substr(1));
}

}  // namespace autocomp::backends
