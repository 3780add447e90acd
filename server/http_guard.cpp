#include "server/http_guard.hpp"

#include <arpa/inet.h>
#include <netinet/in.h>
#include <openssl/crypto.h>

#include <algorithm>
#include <cctype>

namespace autocomp::server {

namespace {

std::string lower(std::string_view text) {
  std::string out(text);
  std::transform(out.begin(), out.end(), out.begin(),
                 [](unsigned char c) { return static_cast<char>(std::tolower(c)); });
  return out;
}

bool is_name_char(char c) {
  return std::isalnum(static_cast<unsigned char>(c)) != 0 || c == '-' || c == '.';
}

std::optional<int> parse_port(std::string_view text) {
  if (text.empty() || text.size() > 5) {
    return std::nullopt;
  }
  int port = 0;
  for (char c : text) {
    if (c < '0' || c > '9') {
      return std::nullopt;
    }
    port = port * 10 + (c - '0');
  }
  if (port < 1 || port > 65535) {
    return std::nullopt;
  }
  return port;
}

std::string describe(std::string_view value) {
  std::string out;
  for (char c : value.substr(0, 100)) {
    const auto u = static_cast<unsigned char>(c);
    out.push_back(u < 0x20 || u >= 0x7F ? '?' : c);
  }
  return out;
}

}  // namespace

std::optional<Authority> parse_authority(std::string_view text) {
  if (text.empty()) {
    return std::nullopt;
  }
  Authority out;
  std::string_view rest;
  if (text.front() == '[') {
    const auto close = text.find(']');
    if (close == std::string_view::npos || close < 2) {
      return std::nullopt;
    }
    const std::string_view inside = text.substr(1, close - 1);
    for (char c : inside) {
      if (std::isxdigit(static_cast<unsigned char>(c)) == 0 && c != ':' && c != '.') {
        return std::nullopt;
      }
    }
    out.host = "[" + lower(inside) + "]";
    rest = text.substr(close + 1);
  } else {
    const auto colon = text.find(':');
    const std::string_view name = text.substr(0, colon);
    if (name.empty() || !std::all_of(name.begin(), name.end(), is_name_char)) {
      return std::nullopt;
    }
    out.host = lower(name);
    rest = colon == std::string_view::npos ? std::string_view() : text.substr(colon);
  }
  if (!rest.empty()) {
    if (rest.front() != ':') {
      return std::nullopt;
    }
    auto port = parse_port(rest.substr(1));
    if (!port) {
      return std::nullopt;
    }
    out.port = port;
  }
  return out;
}

std::optional<Authority> parse_origin(std::string_view origin) {
  const std::string text = lower(origin);
  std::string_view rest;
  if (text.rfind("http://", 0) == 0) {
    rest = std::string_view(text).substr(7);
  } else if (text.rfind("https://", 0) == 0) {
    rest = std::string_view(text).substr(8);
  } else {
    return std::nullopt;
  }
  if (!rest.empty() && rest.back() == '/') {
    rest.remove_suffix(1);  // tolerated: some clients send "http://host:port/"
  }
  // parse_authority refuses '@', '/', '?' and '#' as host characters.
  return parse_authority(rest);
}

bool is_loopback_host(std::string_view host) {
  const std::string h = lower(host);
  if (h == "localhost") {
    return true;
  }
  std::string literal = h;
  if (literal.size() >= 2 && literal.front() == '[' && literal.back() == ']') {
    literal = literal.substr(1, literal.size() - 2);
    in6_addr address6{};
    if (::inet_pton(AF_INET6, literal.c_str(), &address6) != 1) {
      return false;
    }
    if (IN6_IS_ADDR_LOOPBACK(&address6)) {
      return true;
    }
    return IN6_IS_ADDR_V4MAPPED(&address6) && address6.s6_addr[12] == 127;
  }
  in6_addr address6{};
  if (literal.find(':') != std::string::npos) {
    if (::inet_pton(AF_INET6, literal.c_str(), &address6) != 1) {
      return false;
    }
    return IN6_IS_ADDR_LOOPBACK(&address6) ||
           (IN6_IS_ADDR_V4MAPPED(&address6) && address6.s6_addr[12] == 127);
  }
  // inet_pton accepts only the four-part decimal form (no "127.1", no hex, no octal).
  in_addr address4{};
  if (::inet_pton(AF_INET, literal.c_str(), &address4) != 1) {
    return false;
  }
  return (ntohl(address4.s_addr) >> 24) == 127;
}

std::string normalized_listen_host(std::string_view host) {
  std::string h = lower(host);
  if (h.find(':') != std::string::npos && h.front() != '[') {
    h = "[" + h + "]";
  }
  return h;
}

std::optional<GuardRefusal> check_host_and_origin(const std::optional<std::string>& host_header,
                                                  const std::optional<std::string>& origin_header,
                                                  bool loopback_bind, std::string_view listen_host,
                                                  int listen_port) {
  if (loopback_bind) {
    if (!host_header) {
      return GuardRefusal{400, "Bad Request: a Host header is required"};
    }
    auto host = parse_authority(*host_header);
    if (!host) {
      return GuardRefusal{403, "Forbidden: malformed Host '" + describe(*host_header) + "'"};
    }
    if (!is_loopback_host(host->host)) {
      return GuardRefusal{403, "Forbidden: Host '" + describe(host->host) +
                                   "' is not a loopback name (localhost, 127.x.y.z, [::1])"};
    }
    if (host->port.value_or(80) != listen_port) {
      return GuardRefusal{403, "Forbidden: Host '" + describe(*host_header) +
                                   "' names another port than " + std::to_string(listen_port)};
    }
  }
  if (origin_header) {
    auto origin = parse_origin(*origin_header);
    if (!origin) {
      return GuardRefusal{403, "Forbidden: Origin '" + describe(*origin_header) +
                                   "' is not an http(s)://host[:port] origin"};
    }
    const bool allowed = is_loopback_host(origin->host) ||
                         (!loopback_bind && origin->host == normalized_listen_host(listen_host));
    if (!allowed) {
      return GuardRefusal{403,
                          "Forbidden: Origin '" + describe(*origin_header) + "' is not allowed"};
    }
  }
  return std::nullopt;
}

bool bearer_token_matches(std::string_view header, std::string_view token) {
  constexpr std::string_view k_scheme = "bearer";
  if (token.empty() || header.size() <= k_scheme.size() ||
      lower(header.substr(0, k_scheme.size())) != k_scheme || header[k_scheme.size()] != ' ') {
    return false;
  }
  std::string_view credentials = header.substr(k_scheme.size());
  while (!credentials.empty() && credentials.front() == ' ') {
    credentials.remove_prefix(1);
  }
  while (!credentials.empty() && (credentials.back() == ' ' || credentials.back() == '\t')) {
    credentials.remove_suffix(1);
  }
  if (credentials.size() != token.size()) {
    return false;
  }
  return CRYPTO_memcmp(credentials.data(), token.data(), token.size()) == 0;
}

}  // namespace autocomp::server
