// Entry point of autocomp-mcp: MCP over stdio (default) or Streamable HTTP, the `call`
// subcommand, and --autonomous.

#include <fcntl.h>
#include <spdlog/sinks/stdout_color_sinks.h>
#include <spdlog/spdlog.h>
#include <unistd.h>

#include <atomic>
#include <csignal>
#include <cstdio>
#include <cstdlib>
#include <iostream>
#include <thread>

#include "app/autonomous.hpp"
#include "app/bench.hpp"
#include "app/calibrate.hpp"
#include "app/cli.hpp"
#include "server/conformance_fixtures.hpp"
#include "server/http_transport.hpp"
#include "server/instructions.hpp"
#include "server/protocol.hpp"
#include "server/stdio_transport.hpp"
#include "tools/product_tools.hpp"

namespace {

using autocomp::app::CliOptions;

void setup_logging(const std::string& level) {
  auto logger = spdlog::stderr_color_mt("autocomp");
  logger->set_pattern("[%H:%M:%S.%e] [%^%l%$] %v");
  spdlog::set_default_logger(logger);
  spdlog::set_level(spdlog::level::from_str(level));
}

// Everything the process writes to fd 1 from now on goes to stderr; the returned descriptor is
// the real stdout, reserved for protocol messages.
int reserve_stdout() {
  std::fflush(stdout);
  const int protocol_fd = ::dup(1);
  if (protocol_fd < 0) {
    return 1;
  }
  ::fcntl(protocol_fd, F_SETFD, FD_CLOEXEC);
  ::dup2(2, 1);
  return protocol_fd;
}

bool register_everything(autocomp::server::Registries& registries, const CliOptions& options) {
  try {
    autocomp::tools::register_product_tools(registries, options.product);
    if (options.conformance_fixtures) {
      autocomp::server::register_conformance_fixtures(registries);
    }
  } catch (const std::exception& error) {
    spdlog::critical("cannot set up the tools: {}", error.what());
    return false;
  }
  return true;
}

int run_call(const CliOptions& options, autocomp::server::Server& server) {
  nlohmann::json args = nlohmann::json::parse(options.call_args, nullptr, false);
  if (args.is_discarded() || !args.is_object()) {
    std::cerr << "autocomp-mcp call: --args must be a JSON object (got: " << options.call_args
              << ")\n";
    return 2;
  }
  autocomp::server::ToolContext context;
  context.progress_sink = [](double done, std::optional<double> total, const std::string& message) {
    spdlog::info("progress {}{}{}{}", done, total ? "/" + std::to_string(*total) : "",
                 message.empty() ? "" : ": ", message);
  };
  context.log_sink = [](autocomp::server::LogLevel level, const std::string& logger,
                        const nlohmann::json& data) {
    spdlog::info("[{}] {}: {}", autocomp::server::to_string(level), logger,
                 data.is_string() ? data.get<std::string>() : data.dump());
  };
  auto result = server.call_tool(options.call_tool, args, context);
  if (!result) {
    std::cerr << "autocomp-mcp call: unknown tool '" << options.call_tool << "'; tools:";
    for (const auto& tool : server.registries().tools.all()) {
      std::cerr << " " << tool.name;
    }
    std::cerr << "\n";
    return 2;
  }
  const bool is_error = result->value("isError", false);
  const nlohmann::json printed =
      result->contains("structuredContent") ? (*result)["structuredContent"] : *result;
  if (options.call_text) {
    // The text blocks, as an MCP client shows them to the model; other blocks by their type.
    for (const auto& block : result->value("content", nlohmann::json::array())) {
      if (block.value("type", "") == "text") {
        std::cout << block.value("text", "") << "\n";
      } else {
        std::cout << "[" << block.value("type", "") << " " << block.value("uri", "") << "]\n";
      }
    }
    std::cout.flush();
  } else {
    std::cout << printed.dump(2, ' ', false, nlohmann::json::error_handler_t::replace) << std::endl;
  }
  if (is_error) {
    const std::string text = printed.is_object() && printed.contains("error")
                                 ? printed["error"].dump()
                                 : std::string("the tool reported an error");
    std::cerr << "autocomp-mcp call: " << options.call_tool << " failed: " << text << "\n";
    const bool invalid_arguments = text.find("Invalid arguments for tool") != std::string::npos;
    return invalid_arguments ? 2 : 1;
  }
  return 0;
}

int run_http(const CliOptions& options, autocomp::server::Server& server) {
  // Signals are taken by a dedicated thread, so that stopping is an ordinary call.
  sigset_t signals;
  sigemptyset(&signals);
  sigaddset(&signals, SIGINT);
  sigaddset(&signals, SIGTERM);
  pthread_sigmask(SIG_BLOCK, &signals, nullptr);

  autocomp::server::HttpTransport transport(server, options.http);
  auto bound = transport.bind();
  if (!bound.ok()) {
    std::cerr << "autocomp-mcp: " << bound.failure().message << "\n";
    return 2;
  }
  std::atomic<bool> signalled{false};
  std::thread signal_thread([&transport, &signalled, signals] {
    int received = 0;
    sigwait(&signals, &received);
    signalled = true;
    spdlog::info("signal {} received; stopping", received);
    transport.stop();
  });
  transport.serve();
  transport.stop();
  if (!server.wait_idle(std::chrono::milliseconds(2000))) {
    server.close_all_sessions();
    if (!server.wait_idle(std::chrono::milliseconds(1000))) {
      std::fflush(nullptr);
      std::_Exit(0);
    }
  }
  if (!signalled) {
    ::pthread_kill(signal_thread.native_handle(), SIGTERM);  // wakes its sigwait
  }
  signal_thread.join();
  return 0;
}

}  // namespace

int main(int argc, char** argv) {
  std::signal(SIGPIPE, SIG_IGN);
  const std::vector<std::string> args(argv, argv + argc);
  if (args.size() > 1 && args[1] == "bench") {
    return autocomp::app::bench_main(argc, argv);
  }
  if (args.size() > 1 && args[1] == "calibrate") {
    return autocomp::app::calibrate_main(argc, argv);
  }
  auto parsed = autocomp::app::parse_cli(args);
  if (!parsed.options) {
    std::cerr << "autocomp-mcp: " << parsed.error << "\n";
    return 2;
  }
  const CliOptions& options = *parsed.options;
  switch (options.mode) {
    case CliOptions::Mode::autonomous:
      return autocomp::app::autonomous_main(argc, argv);
    case CliOptions::Mode::help:
      std::cout << autocomp::app::usage_text();
      return 0;
    case CliOptions::Mode::version:
      std::cout << "autocomp-mcp " << AUTOCOMP_VERSION << "\n";
      return 0;
    default:
      break;
  }

  const int protocol_fd = options.mode == CliOptions::Mode::stdio ? reserve_stdout() : 1;
  setup_logging(options.log_level);

  autocomp::server::Registries registries;
  if (!register_everything(registries, options)) {
    return 2;
  }
  autocomp::server::ServerOptions server_options = options.server;
  server_options.instructions = std::string(autocomp::server::k_server_instructions);
  // The server's own endpoints stay usable when a tool argument repeats them.
  for (const auto& spec : options.product.backend_specs) {
    server_options.trusted_endpoints.push_back(spec);
  }
  for (const auto& spec : options.product.llm_specs) {
    server_options.trusted_endpoints.push_back(spec);
  }
  autocomp::server::Server server(registries, server_options);

  if (options.mode == CliOptions::Mode::call) {
    return run_call(options, server);
  }
  if (options.mode == CliOptions::Mode::http) {
    return run_http(options, server);
  }
  autocomp::server::StdioOptions stdio;
  stdio.out_fd = protocol_fd;
  if (!autocomp::server::serve_stdio(server, stdio)) {
    std::fflush(nullptr);
    std::_Exit(0);  // a handler ignores cancellation; do not wait for it
  }
  return 0;
}
