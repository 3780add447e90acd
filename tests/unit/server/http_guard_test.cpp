#include "server/http_guard.hpp"

#include <gtest/gtest.h>

namespace autocomp::server {
namespace {

TEST(HttpGuard, LoopbackHostsAreExactlyTheNumericLoopbackAddressesAndLocalhost) {
  for (const char* host : {"localhost", "LocalHost", "127.0.0.1", "127.1.2.3", "127.255.255.255",
                           "[::1]", "::1", "[0:0:0:0:0:0:0:1]", "[::ffff:127.0.0.1]"}) {
    EXPECT_TRUE(is_loopback_host(host)) << host;
  }
  for (const char* host :
       {"127.0.0.1.attacker.example", "127.evil", "127.0.0.1.", "127.1", "0x7f.0.0.1",
        "127.0.0.256", "localhost.example", "localhost.", "evil.localhost", "[::2]", "[::1",
        "128.0.0.1", "0.0.0.0", "", "[]", "[::ffff:10.0.0.1]", "127.0.0.1 "}) {
    EXPECT_FALSE(is_loopback_host(host)) << host;
  }
}

TEST(HttpGuard, AuthorityParsingKeepsHostAndPortOnly) {
  auto plain = parse_authority("LOCALHOST:8080");
  ASSERT_TRUE(plain);
  EXPECT_EQ(plain->host, "localhost");
  EXPECT_EQ(plain->port, 8080);
  auto v6 = parse_authority("[::1]:9");
  ASSERT_TRUE(v6);
  EXPECT_EQ(v6->host, "[::1]");
  EXPECT_EQ(v6->port, 9);
  auto bare = parse_authority("127.0.0.1");
  ASSERT_TRUE(bare);
  EXPECT_FALSE(bare->port);
  for (const char* bad : {"", ":80", "127.0.0.1:", "127.0.0.1:x", "127.0.0.1:0", "127.0.0.1:65536",
                          "127.0.0.1@evil.com", "user@127.0.0.1", "127.0.0.1/x", "[::1]x", "[::1",
                          "local host", "127.0.0.1:80:80", "[evil.com]"}) {
    EXPECT_FALSE(parse_authority(bad)) << bad;
  }
}

TEST(HttpGuard, OriginsAreSchemeHostPortWithoutUserInformation) {
  auto origin = parse_origin("http://localhost:3000");
  ASSERT_TRUE(origin);
  EXPECT_EQ(origin->host, "localhost");
  EXPECT_EQ(origin->port, 3000);
  EXPECT_TRUE(parse_origin("https://[::1]"));
  for (const char* bad : {"", "null", "file://", "localhost:3000", "ftp://localhost",
                          "https://127.0.0.1@evil.com", "http://127.0.0.1:80@evil.com",
                          "http://evil.com#@127.0.0.1", "http://127.0.0.1/path", "http://"}) {
    EXPECT_FALSE(parse_origin(bad)) << bad;
  }
}

TEST(HttpGuard, LoopbackBindNeedsALoopbackHostWithTheListeningPort) {
  auto check = [](std::optional<std::string> host, std::optional<std::string> origin) {
    return check_host_and_origin(host, origin, true, "127.0.0.1", 8123);
  };
  EXPECT_FALSE(check("127.0.0.1:8123", std::nullopt));
  EXPECT_FALSE(check("localhost:8123", "http://localhost:3000"));
  EXPECT_FALSE(check("[::1]:8123", "http://127.0.0.1:8123"));
  const std::vector<std::pair<std::optional<std::string>, std::optional<std::string>>> refused = {
      {std::nullopt, std::nullopt},
      {"", std::nullopt},
      {"127.0.0.1.attacker.example:8123", std::nullopt},
      {"127.evil:8123", std::nullopt},
      {"evil.example", std::nullopt},
      {"127.0.0.1:9999", std::nullopt},
      {"127.0.0.1", std::nullopt},  // port 80
      {"127.0.0.1:8123", ""},
      {"127.0.0.1:8123", "null"},
      {"127.0.0.1:8123", "https://127.0.0.1@evil.com"},
      {"127.0.0.1:8123", "http://127.0.0.1.attacker.example"},
      {"127.0.0.1:8123", "http://evil.example:8123"},
  };
  for (const auto& [host, origin] : refused) {
    auto refusal = check(host, origin);
    ASSERT_TRUE(refusal) << host.value_or("(none)") << " / " << origin.value_or("(none)");
    EXPECT_TRUE(refusal->status == 400 || refusal->status == 403);
  }
}

TEST(HttpGuard, TokenGuardedWideBindChecksOriginOnly) {
  EXPECT_FALSE(check_host_and_origin("server.lan:8080", "http://server.lan:8080", false,
                                     "server.lan", 8080));
  EXPECT_FALSE(check_host_and_origin("anything", std::nullopt, false, "0.0.0.0", 8080));
  EXPECT_TRUE(
      check_host_and_origin("server.lan:8080", "http://evil.example", false, "server.lan", 8080));
}

TEST(HttpGuard, BearerSchemeIsCaseInsensitive) {
  EXPECT_TRUE(bearer_token_matches("Bearer s3cret", "s3cret"));
  EXPECT_TRUE(bearer_token_matches("bearer s3cret", "s3cret"));
  EXPECT_TRUE(bearer_token_matches("BEARER   s3cret", "s3cret"));
  EXPECT_FALSE(bearer_token_matches("Bearer S3CRET", "s3cret"));
  EXPECT_FALSE(bearer_token_matches("Basic s3cret", "s3cret"));
  EXPECT_FALSE(bearer_token_matches("Bearers3cret", "s3cret"));
  EXPECT_FALSE(bearer_token_matches("Bearer s3cret2", "s3cret"));
  EXPECT_FALSE(bearer_token_matches("Bearer ", ""));
  EXPECT_FALSE(bearer_token_matches("", "s3cret"));
}

}  // namespace
}  // namespace autocomp::server
