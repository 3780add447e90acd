#include "backends/spec.hpp"

#include <gtest/gtest.h>

namespace autocomp::backends {
namespace {

TEST(Spec, ParsesALocalSpecWithOptions) {
  auto spec = parse_spec("local?device=fake&fake_ms=100&slots=4");
  ASSERT_TRUE(spec.ok()) << spec.failure().describe();
  EXPECT_EQ(spec->scheme, "local");
  EXPECT_EQ(spec->param("device"), "fake");
  EXPECT_EQ(spec->int_param("slots")->value_or(0), 4);
  EXPECT_FALSE(spec->param("target").has_value());
}

TEST(Spec, ParsesAnSshSpec) {
  auto spec = parse_spec("ssh://ubuntu@trn2-a.example:2222?device=sim&key=%2Fhome%2Fme%2Fkey");
  ASSERT_TRUE(spec.ok()) << spec.failure().describe();
  EXPECT_EQ(spec->scheme, "ssh");
  EXPECT_EQ(spec->user, "ubuntu");
  EXPECT_EQ(spec->host, "trn2-a.example");
  EXPECT_EQ(spec->port, 2222);
  EXPECT_EQ(spec->param("key"), "/home/me/key");
}

TEST(Spec, HostWithoutUserOrPortAndIpv6) {
  auto plain = parse_spec("ssh://host");
  ASSERT_TRUE(plain.ok());
  EXPECT_EQ(plain->user, "");
  EXPECT_EQ(plain->port, 0);
  auto v6 = parse_spec("ssh://me@[::1]:22");
  ASSERT_TRUE(v6.ok());
  EXPECT_EQ(v6->host, "::1");
  EXPECT_EQ(v6->port, 22);
}

TEST(Spec, FlagsAcceptCommonTrueWords) {
  auto spec = parse_spec("ssh://h?accept_new_host_key=1&a=true&b=0");
  ASSERT_TRUE(spec.ok());
  EXPECT_TRUE(spec->flag("accept_new_host_key"));
  EXPECT_TRUE(spec->flag("a"));
  EXPECT_FALSE(spec->flag("b"));
  EXPECT_FALSE(spec->flag("missing"));
}

TEST(Spec, RejectsMalformedSpecsWithTheSpecInTheMessage) {
  for (const char* text : {"", "ssh://", "ssh://h:0", "ssh://h:99999", "ssh://h:x", "ssh://@h",
                           "ssh://h/path", "?x=1", "local?x=%zz"}) {
    auto spec = parse_spec(text);
    EXPECT_FALSE(spec.ok()) << text;
    if (!spec.ok()) {
      EXPECT_EQ(spec.failure().kind, core::FailureKind::invalid_argument);
    }
  }
  auto slots = parse_spec("local?slots=-2");
  ASSERT_TRUE(slots.ok());
  auto value = slots->int_param("slots");
  ASSERT_FALSE(value.ok());
  EXPECT_NE(value.failure().message.find("local?slots=-2"), std::string::npos);
}

TEST(Spec, SlotCountIsBounded) {
  auto most = parse_spec("local?slots=" + std::to_string(k_max_slots));
  ASSERT_TRUE(most.ok());
  EXPECT_EQ(most->int_param("slots")->value_or(0), k_max_slots);
  for (const char* text : {"local?slots=1025", "ssh://h?slots=2147483647"}) {
    auto spec = parse_spec(text);
    ASSERT_TRUE(spec.ok()) << text;
    auto value = spec->int_param("slots");
    ASSERT_FALSE(value.ok()) << text;
    EXPECT_NE(value.failure().message.find("slots must be at most 1024"), std::string::npos)
        << value.failure().message;
  }
  auto other = parse_spec("local?fake_ms=2147483647");  // only slots is bounded
  ASSERT_TRUE(other.ok());
  EXPECT_TRUE(other->int_param("fake_ms").ok());
}

TEST(Spec, SplitsCommaSeparatedLists) {
  auto specs = split_specs(" ssh://a , ssh://b?slots=2,,");
  ASSERT_EQ(specs.size(), 2u);
  EXPECT_EQ(specs[0], "ssh://a");
  EXPECT_EQ(specs[1], "ssh://b?slots=2");
}

}  // namespace
}  // namespace autocomp::backends
