#include "app/cli.hpp"

#include <gtest/gtest.h>
#include <stdlib.h>

#include <fstream>

namespace autocomp::app {
namespace {

TEST(Cli, DefaultsToStdio) {
  auto parsed = parse_cli({"autocomp-mcp"});
  ASSERT_TRUE(parsed.options);
  EXPECT_EQ(parsed.options->mode, CliOptions::Mode::stdio);
}

TEST(Cli, ParsesHttpAndProductOptions) {
  const std::string token_file = ::testing::TempDir() + "cli_test_token";
  std::ofstream(token_file) << "  s3cret\n";
  auto parsed = parse_cli({"autocomp-mcp", "--http", "0.0.0.0:8080", "--auth-token-file",
                           token_file, "--backend", "local-sim", "--backend", "ssh:host", "--llm",
                           "openai:m", "--db", "x.db", "--target", "trn2", "--port-file", "p"});
  ASSERT_TRUE(parsed.options) << parsed.error;
  const auto& options = *parsed.options;
  EXPECT_EQ(options.mode, CliOptions::Mode::http);
  EXPECT_EQ(options.http.host, "0.0.0.0");
  EXPECT_EQ(options.http.port, 8080);
  EXPECT_EQ(options.http.auth_token, "s3cret");
  EXPECT_EQ(options.product.backend_specs, (std::vector<std::string>{"local-sim", "ssh:host"}));
  EXPECT_EQ(options.product.target, "trn2");
}

TEST(Cli, AuthTokenNeverComesFromTheCommandLine) {
  for (const char* form : {"--auth-token", "--auth-token=s3cret"}) {
    auto parsed = parse_cli({"autocomp-mcp", "--http", "0", form, "s3cret"});
    EXPECT_FALSE(parsed.options) << form;
    EXPECT_NE(parsed.error.find("--auth-token-file PATH"), std::string::npos) << parsed.error;
    EXPECT_NE(parsed.error.find("AUTOCOMP_AUTH_TOKEN"), std::string::npos) << parsed.error;
  }
  auto missing = parse_cli({"autocomp-mcp", "--auth-token-file", "/nonexistent/token"});
  EXPECT_FALSE(missing.options);
  EXPECT_NE(missing.error.find("cannot read"), std::string::npos) << missing.error;
  const std::string empty_file = ::testing::TempDir() + "cli_test_empty_token";
  std::ofstream(empty_file) << "\n";
  auto empty = parse_cli({"autocomp-mcp", "--auth-token-file", empty_file});
  EXPECT_FALSE(empty.options);
  EXPECT_NE(empty.error.find("holds no token"), std::string::npos) << empty.error;
  ::setenv("AUTOCOMP_AUTH_TOKEN", "from-env", 1);
  auto from_env = parse_cli({"autocomp-mcp", "--http", "0"});
  ::unsetenv("AUTOCOMP_AUTH_TOKEN");
  ASSERT_TRUE(from_env.options);
  EXPECT_EQ(from_env.options->http.auth_token, "from-env");
}

TEST(Cli, TargetMustBeAKnownOne) {
  auto trn3 = parse_cli({"autocomp-mcp", "--target", "trn3"});
  ASSERT_TRUE(trn3.options) << trn3.error;
  EXPECT_EQ(trn3.options->product.target, "trn3");
  auto unknown = parse_cli({"autocomp-mcp", "--target", "trn7"});
  EXPECT_FALSE(unknown.options);
  EXPECT_NE(unknown.error.find("trn1, trn2 or trn3"), std::string::npos) << unknown.error;
}

TEST(Cli, SecurityOptions) {
  auto parsed =
      parse_cli({"autocomp-mcp", "--http", "0", "--allow-remote-endpoints", "--max-sessions", "7",
                 "--session-idle-timeout", "60", "--max-connections", "64"});
  ASSERT_TRUE(parsed.options) << parsed.error;
  EXPECT_TRUE(parsed.options->server.allow_remote_endpoints);
  EXPECT_EQ(parsed.options->http.max_sessions, 7u);
  EXPECT_EQ(parsed.options->http.session_idle_timeout, std::chrono::seconds(60));
  EXPECT_EQ(parsed.options->http.max_connections, 64u);
  auto defaults = parse_cli({"autocomp-mcp", "--http", "0"});
  ASSERT_TRUE(defaults.options);
  EXPECT_FALSE(defaults.options->server.allow_remote_endpoints);
  EXPECT_GT(defaults.options->http.session_idle_timeout.count(), 0);
  EXPECT_FALSE(parse_cli({"autocomp-mcp", "--max-sessions", "0"}).options);
  EXPECT_FALSE(parse_cli({"autocomp-mcp", "--session-idle-timeout", "soon"}).options);
}

TEST(Cli, ListenAddressForms) {
  EXPECT_EQ(parse_listen_address("8080")->first, "127.0.0.1");
  EXPECT_EQ(parse_listen_address("[::1]:9")->first, "::1");
  EXPECT_FALSE(parse_listen_address("host:port"));
  EXPECT_FALSE(parse_listen_address("70000"));
}

TEST(Cli, CallSubcommand) {
  auto parsed = parse_cli({"autocomp-mcp", "call", "verify_kernel", "--args", "{\"a\":1}"});
  ASSERT_TRUE(parsed.options);
  EXPECT_EQ(parsed.options->mode, CliOptions::Mode::call);
  EXPECT_EQ(parsed.options->call_tool, "verify_kernel");
  EXPECT_FALSE(parsed.options->call_text);
  EXPECT_FALSE(parse_cli({"autocomp-mcp", "call"}).options);
  auto text = parse_cli({"autocomp-mcp", "call", "list_runs", "--text"});
  ASSERT_TRUE(text.options);
  EXPECT_TRUE(text.options->call_text);
  EXPECT_FALSE(parse_cli({"autocomp-mcp", "--text"}).options) << "only for call";
}

TEST(Cli, BadUsageIsReported) {
  EXPECT_FALSE(parse_cli({"autocomp-mcp", "--frobnicate"}).options);
  EXPECT_FALSE(parse_cli({"autocomp-mcp", "--workers", "zero"}).options);
  EXPECT_FALSE(parse_cli({"autocomp-mcp", "--http"}).options);
  EXPECT_FALSE(parse_cli({"autocomp-mcp", "--args", "{}"}).options);
}

TEST(Cli, AutonomousAnywhere) {
  auto parsed = parse_cli({"autocomp-mcp", "--kernel", "k.py", "--autonomous"});
  ASSERT_TRUE(parsed.options);
  EXPECT_EQ(parsed.options->mode, CliOptions::Mode::autonomous);
}

}  // namespace
}  // namespace autocomp::app
