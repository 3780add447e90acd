#pragma once

// Checks on what an HTTP request claims about where it comes from and where it goes: the Host
// and Origin headers (the DNS-rebinding defence) and the Authorization header. Pure functions,
// so that every accepted and refused form is unit-tested.

#include <optional>
#include <string>
#include <string_view>

namespace autocomp::server {

// "host[:port]" of a Host header or an origin. `host` is lower-cased; an IPv6 literal keeps its
// brackets ("[::1]").
struct Authority {
  std::string host;
  std::optional<int> port;
};

// Parses a Host header value. nullopt when malformed: empty, user information ('@'), a path,
// spaces or other characters that no host name has, an empty or non-numeric port, a port
// outside 1-65535, an unterminated IPv6 literal.
std::optional<Authority> parse_authority(std::string_view text);

// Parses an Origin header value "scheme://host[:port]" (http or https only; no user
// information, path, query or fragment; "null" is not an origin we accept).
std::optional<Authority> parse_origin(std::string_view origin);

// True for "localhost", a numeric dotted-quad IPv4 address in 127.0.0.0/8, and the IPv6 loopback
// address ("::1", bracketed or not, in any valid spelling, or IPv4-mapped 127.0.0.0/8). Nothing
// else: "127.evil", "127.0.0.1.attacker.example" and "localhost.example" are not loopback.
bool is_loopback_host(std::string_view host);

// The host part of a listen address as given to --http ("127.0.0.1", "::1", "[::1]", "0.0.0.0")
// in the form parse_authority yields, for comparison with a Host header.
std::string normalized_listen_host(std::string_view host);

// Why a request's Host and Origin headers are refused, or nullopt when they are acceptable.
//   loopback_bind: the server listens on a loopback address; then Host is required and must name
//   a loopback host with the listening port (a missing port counts as 80); Origin, when sent,
//   must name a loopback host (any port: a local web page is a local process).
//   Otherwise (a token guards the server) Host is not checked, and Origin, when sent, must name a
//   loopback host or the listening host.
struct GuardRefusal {
  int status;  // 400 malformed, 403 forbidden
  std::string message;
};
std::optional<GuardRefusal> check_host_and_origin(const std::optional<std::string>& host_header,
                                                  const std::optional<std::string>& origin_header,
                                                  bool loopback_bind, std::string_view listen_host,
                                                  int listen_port);

// True when `header` is "<scheme> <credentials>" with the scheme "Bearer" in any case, one or
// more spaces, and credentials equal to `token` (compared in constant time).
bool bearer_token_matches(std::string_view header, std::string_view token);

}  // namespace autocomp::server
