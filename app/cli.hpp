#pragma once

// Command line of the autocomp-mcp binary (parsing only; app/main.cpp acts on it).

#include <optional>
#include <string>
#include <vector>

#include "server/http_transport.hpp"
#include "server/protocol.hpp"
#include "tools/product_tools.hpp"

namespace autocomp::app {

struct CliOptions {
  enum class Mode { stdio, http, call, help, version, autonomous };
  Mode mode = Mode::stdio;
  bool conformance_fixtures = false;
  std::string log_level = "info";  // stderr log level (spdlog names: trace..off)
  server::ServerOptions server;
  server::HttpOptions http;
  tools::ProductToolsOptions product;
  std::string call_tool;  // `call TOOL`
  std::string call_args = "{}";
  bool call_text = false;  // `call TOOL --text`: print the text content an agent reads
};

// Parses argv (argv[0] is the program). Returns the options or a message for bad usage.
// Reads the bearer token from --auth-token-file PATH, else from AUTOCOMP_AUTH_TOKEN; a token
// given on the command line (--auth-token TOKEN) is refused.
struct CliParse {
  std::optional<CliOptions> options;
  std::string error;
};
CliParse parse_cli(const std::vector<std::string>& args);

// "HOST:PORT", "PORT", "[::1]:PORT" → host and port; nullopt when malformed.
std::optional<std::pair<std::string, int>> parse_listen_address(const std::string& text);

std::string usage_text();

}  // namespace autocomp::app
