#include "app/cli.hpp"

#include <charconv>
#include <cstdlib>
#include <fstream>
#include <sstream>

#include "core/targets.hpp"

namespace autocomp::app {

namespace {

std::optional<long long> parse_number(const std::string& text) {
  long long value = 0;
  const auto* end = text.data() + text.size();
  auto [ptr, error] = std::from_chars(text.data(), end, value);
  if (error != std::errc() || ptr != end) {
    return std::nullopt;
  }
  return value;
}

// The token file's text without surrounding white space; nullopt when unreadable.
std::optional<std::string> read_token_file(const std::string& path) {
  std::ifstream in(path, std::ios::binary);
  if (!in) {
    return std::nullopt;
  }
  std::ostringstream text;
  text << in.rdbuf();
  std::string token = text.str();
  const auto first = token.find_first_not_of(" \t\r\n");
  if (first == std::string::npos) {
    return std::string();
  }
  const auto last = token.find_last_not_of(" \t\r\n");
  return token.substr(first, last - first + 1);
}

}  // namespace

std::optional<std::pair<std::string, int>> parse_listen_address(const std::string& text) {
  std::string host = "127.0.0.1";
  std::string port_text = text;
  if (!text.empty() && text.front() == '[') {
    const auto close = text.find("]:");
    if (close == std::string::npos) {
      return std::nullopt;
    }
    host = text.substr(1, close - 1);
    port_text = text.substr(close + 2);
  } else if (const auto colon = text.rfind(':'); colon != std::string::npos) {
    host = text.substr(0, colon);
    port_text = text.substr(colon + 1);
  }
  auto port = parse_number(port_text);
  if (host.empty() || !port || *port < 0 || *port > 65535) {
    return std::nullopt;
  }
  return std::make_pair(host, static_cast<int>(*port));
}

std::string usage_text() {
  return R"(autocomp-mcp: MCP server for optimizing AWS Trainium NKI kernels

Usage:
  autocomp-mcp [OPTIONS]                       serve MCP over stdio (default)
  autocomp-mcp --http [HOST:]PORT [OPTIONS]    serve MCP Streamable HTTP at http://HOST:PORT/mcp
  autocomp-mcp call TOOL [--args JSON] [--text] [OPTIONS]
                                               call one tool in-process, print its structured
                                               result as JSON, or with --text the text an agent
                                               reads (exit 0; 1 error result; 2 bad usage)
  autocomp-mcp bench SUITE [OPTIONS]           verify, benchmark and profile every kernel of a
                                               suite (NKIBench summary.json, manifest, seeds/
                                               folder); prints a table (see bench --help)
  autocomp-mcp --autonomous ...                run the search from the terminal (see its --help)
  autocomp-mcp --help | --version

HTTP options:
  --http [HOST:]PORT       listen address; HOST defaults to 127.0.0.1, PORT 0 picks a free port
  --auth-token-file PATH   require "Authorization: Bearer TOKEN", TOKEN read from PATH (or
                           from the AUTOCOMP_AUTH_TOKEN environment variable); mandatory when
                           HOST is not a loopback address. Never given on the command line,
                           where every local process could read it.
  --port-file FILE         write the bound port to FILE once listening
  --allow-remote-endpoints accept tool arguments that name outbound endpoints (an llm spec with
                           a base URL, an ssh:// or hosts: backend); without it, over HTTP only
                           the server's own --llm/--backend endpoints are contacted
  --max-sessions N         sessions kept at once (default 1024); beyond it, sessions that made
                           no request after initialize make room, working ones are kept and
                           new sessions are refused (503)
  --session-idle-timeout S end sessions unused for S seconds (default 3600; 0: never)
  --max-connections N      connections served at once (default 512; beyond: 503)

Server options:
  --conformance-fixtures   also register the MCP conformance suite's fixture tools/resources/prompts
  --workers N              concurrent tool calls (default 8)
  --page-size N            items per list page (default 50)
  --max-message-bytes N    largest accepted message (default 4194304)
  --log-level LEVEL        stderr log level: trace, debug, info, warn, error, off (default info)

Product options:
  --db PATH                results database
  --backend SPEC           evaluation backend (repeatable): sim (default),
                           local?device=fake, ssh://user@host?device=neuron, or
                           hosts:PATH (a file of ssh:// hosts, one per line)
  --target TARGET          Trainium target: trn1, trn2 or trn3 (default: the problem's
                           TARGET, else trn2)
  --llm SPEC               LLM provider for searches (repeatable), e.g. openai:MODEL
  --harness-dir DIR        evaluation harness folder
)";
}

CliParse parse_cli(const std::vector<std::string>& args) {
  CliOptions options;
  options.server.version = AUTOCOMP_VERSION;
  bool auth_given = false;
  auto fail = [](std::string message) { return CliParse{std::nullopt, std::move(message)}; };
  std::size_t i = 1;
  if (args.size() > 1 && args[1] == "call") {
    options.mode = CliOptions::Mode::call;
    if (args.size() < 3 || args[2].rfind("--", 0) == 0) {
      return fail("call needs a tool name: autocomp-mcp call TOOL --args JSON");
    }
    options.call_tool = args[2];
    i = 3;
  }
  for (const auto& arg : args) {
    if (arg == "--autonomous") {
      options.mode = CliOptions::Mode::autonomous;
      return CliParse{options, {}};
    }
  }
  for (; i < args.size(); ++i) {
    const std::string& arg = args[i];
    auto value = [&](std::string& out) -> bool {
      if (i + 1 >= args.size()) {
        return false;
      }
      out = args[++i];
      return true;
    };
    auto number = [&](std::size_t& out, long long min) -> std::optional<std::string> {
      std::string text;
      if (!value(text)) {
        return arg + " needs a value";
      }
      auto parsed = parse_number(text);
      if (!parsed || *parsed < min) {
        return arg + " needs an integer >= " + std::to_string(min) + " (got '" + text + "')";
      }
      out = static_cast<std::size_t>(*parsed);
      return std::nullopt;
    };
    std::string text;
    if (arg == "--help" || arg == "-h") {
      options.mode = CliOptions::Mode::help;
      return CliParse{options, {}};
    } else if (arg == "--version") {
      options.mode = CliOptions::Mode::version;
      return CliParse{options, {}};
    } else if (arg == "--http") {
      if (options.mode == CliOptions::Mode::call) {
        return fail("--http cannot be combined with call");
      }
      if (!value(text)) {
        return fail("--http needs [HOST:]PORT");
      }
      auto address = parse_listen_address(text);
      if (!address) {
        return fail("--http needs [HOST:]PORT with PORT 0-65535 (got '" + text + "')");
      }
      options.mode = CliOptions::Mode::http;
      options.http.host = address->first;
      options.http.port = address->second;
    } else if (arg == "--stdio") {
      // The default; accepted for clients configured with it.
    } else if (arg == "--auth-token" || arg.rfind("--auth-token=", 0) == 0) {
      return fail(
          "--auth-token TOKEN is not accepted: a command line is readable by every local "
          "process; put the token in a file and pass --auth-token-file PATH, or set "
          "AUTOCOMP_AUTH_TOKEN");
    } else if (arg == "--auth-token-file") {
      if (!value(text)) {
        return fail("--auth-token-file needs a PATH");
      }
      auto token = read_token_file(text);
      if (!token) {
        return fail("--auth-token-file: cannot read '" + text + "'");
      }
      if (token->empty()) {
        return fail("--auth-token-file: '" + text + "' holds no token");
      }
      options.http.auth_token = *token;
      auth_given = true;
    } else if (arg == "--port-file") {
      if (!value(options.http.port_file)) {
        return fail("--port-file needs a FILE");
      }
    } else if (arg == "--allow-remote-endpoints") {
      options.server.allow_remote_endpoints = true;
    } else if (arg == "--max-sessions") {
      if (auto error = number(options.http.max_sessions, 1)) {
        return fail(*error);
      }
    } else if (arg == "--max-connections") {
      if (auto error = number(options.http.max_connections, 8)) {
        return fail(*error);
      }
    } else if (arg == "--session-idle-timeout") {
      std::size_t seconds = 0;
      if (auto error = number(seconds, 0)) {
        return fail(*error);
      }
      options.http.session_idle_timeout = std::chrono::seconds(seconds);
    } else if (arg == "--conformance-fixtures") {
      options.conformance_fixtures = true;
    } else if (arg == "--workers") {
      if (auto error = number(options.server.worker_threads, 1)) {
        return fail(*error);
      }
    } else if (arg == "--page-size") {
      if (auto error = number(options.server.page_size, 1)) {
        return fail(*error);
      }
    } else if (arg == "--max-message-bytes") {
      if (auto error = number(options.server.limits.max_message_bytes, 64)) {
        return fail(*error);
      }
    } else if (arg == "--log-level") {
      if (!value(options.log_level)) {
        return fail("--log-level needs a LEVEL");
      }
    } else if (arg == "--args") {
      if (options.mode != CliOptions::Mode::call) {
        return fail("--args is only for: autocomp-mcp call TOOL --args JSON");
      }
      if (!value(options.call_args)) {
        return fail("--args needs a JSON object");
      }
    } else if (arg == "--text") {
      if (options.mode != CliOptions::Mode::call) {
        return fail("--text is only for: autocomp-mcp call TOOL --text");
      }
      options.call_text = true;
    } else if (arg == "--db") {
      if (!value(options.product.db_path)) {
        return fail("--db needs a PATH");
      }
    } else if (arg == "--backend") {
      if (!value(text)) {
        return fail("--backend needs a SPEC");
      }
      options.product.backend_specs.push_back(text);
    } else if (arg == "--target") {
      if (!value(options.product.target)) {
        return fail("--target needs a TARGET");
      }
      if (!core::is_known_target(options.product.target)) {
        return fail("--target must be " + core::known_targets_text() + ", not '" +
                    options.product.target + "'");
      }
    } else if (arg == "--llm") {
      if (!value(text)) {
        return fail("--llm needs a SPEC");
      }
      options.product.llm_specs.push_back(text);
    } else if (arg == "--harness-dir") {
      if (!value(options.product.harness_dir)) {
        return fail("--harness-dir needs a DIR");
      }
    } else {
      return fail("unknown option '" + arg + "' (see autocomp-mcp --help)");
    }
  }
  if (!auth_given) {
    if (const char* token = std::getenv("AUTOCOMP_AUTH_TOKEN"); token != nullptr && *token) {
      options.http.auth_token = token;
    }
  }
  return CliParse{options, {}};
}

}  // namespace autocomp::app
