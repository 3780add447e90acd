#include <gtest/gtest.h>

#include "backends/backend.hpp"

namespace autocomp::backends {
namespace {

TEST(Registry, SimIsTheDefault) {
  BackendOptions options;
  options.python = AUTOCOMP_PYTHON;
  for (const char* spec : {"", "sim"}) {
    auto backend = make_backend(spec, options);
    ASSERT_TRUE(backend.ok()) << backend.failure().describe();
    EXPECT_EQ(backend.value()->identity(), "sim");
    EXPECT_EQ(backend.value()->device(), "sim");
  }
}

TEST(Registry, LocalSpecsPassTheirOptions) {
  BackendOptions options;
  options.python = AUTOCOMP_PYTHON;
  auto backend = make_backend("local?device=fake&fake_ms=50&slots=4", options);
  ASSERT_TRUE(backend.ok()) << backend.failure().describe();
  EXPECT_EQ(backend.value()->identity(), "local?device=fake&fake_ms=50");
  EXPECT_EQ(backend.value()->slots(), 4);
}

TEST(Registry, SshSpecsFormOnePoolWithoutConnecting) {
  // Nothing listens on these ports; building the pool must not need the hosts.
  auto backend =
      make_backend("ssh://u@127.0.0.1:1?device=sim&slots=2, ssh://127.0.0.1:2?device=sim", {});
  ASSERT_TRUE(backend.ok()) << backend.failure().describe();
  EXPECT_EQ(backend.value()->slots(), 3);
  EXPECT_EQ(backend.value()->identity(),
            "ssh://u@127.0.0.1:1?device=sim,ssh://127.0.0.1:2?device=sim");
}

TEST(Registry, UnknownOrMixedSpecsAreClearErrors) {
  auto unknown = make_backend("gpu://box", {});
  ASSERT_FALSE(unknown.ok());
  EXPECT_EQ(unknown.failure().kind, core::FailureKind::invalid_argument);
  EXPECT_NE(unknown.failure().message.find("known: sim, local, ssh"), std::string::npos)
      << unknown.failure().message;

  auto mixed = make_backend("sim,ssh://host", {});
  ASSERT_FALSE(mixed.ok());
  EXPECT_NE(mixed.failure().message.find("cannot pool"), std::string::npos);

  auto typo = make_backend("ssh://host?slot=2", {});
  ASSERT_FALSE(typo.ok());
  EXPECT_NE(typo.failure().message.find("unknown option 'slot'"), std::string::npos);

  auto twice = make_backend("ssh://h:22,ssh://h", {});
  ASSERT_FALSE(twice.ok());
  EXPECT_NE(twice.failure().message.find("listed twice"), std::string::npos);

  auto device = make_backend("ssh://h?device=tpu", {});
  ASSERT_FALSE(device.ok());
  EXPECT_NE(device.failure().message.find("tpu"), std::string::npos);
}

TEST(Registry, CommandNamesMatchTheProtocol) {
  EXPECT_EQ(to_string(EvalCommand::verify), "verify");
  EXPECT_EQ(to_string(EvalCommand::benchmark), "benchmark");
  EXPECT_EQ(to_string(EvalCommand::profile), "profile");
  EXPECT_EQ(to_string(EvalCommand::evaluate), "evaluate");
}

}  // namespace
}  // namespace autocomp::backends
