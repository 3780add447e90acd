// The SSH pool's rotation policy on a ManualClock: a refused host is skipped until its back-off
// has passed, then tried again; the back-off is short and grows. Nothing listens on the ports
// used, so every connection attempt is refused at once.
#include <gtest/gtest.h>

#include <chrono>
#include <memory>

#include "backends/ssh_backend.hpp"
#include "core/clock.hpp"

namespace autocomp::backends {
namespace {

using namespace std::chrono_literals;
EvalRequest request() {
  EvalRequest r;
  r.kernel_source = "def kernel(a):\n    return a\n";
  r.problem_source = "import numpy as np\n";
  r.timeout = 10s;
  return r;
}

std::shared_ptr<Backend> refused_pool(std::shared_ptr<core::ManualClock> clock) {
  auto spec = parse_spec("ssh://127.0.0.1:1?device=fake&slots=1&connect_timeout=2");
  EXPECT_TRUE(spec.ok());
  BackendOptions options;
  options.python = AUTOCOMP_PYTHON;
  options.clock = std::move(clock);
  auto backend = make_ssh_backend({spec.value()}, options);
  EXPECT_TRUE(backend.ok()) << (backend.ok() ? "" : backend.failure().describe());
  return backend.ok() ? backend.value() : nullptr;
}

TEST(SshRotation, ARefusedHostIsRetriedAfterAShortGrowingBackoff) {
  auto clock = std::make_shared<core::ManualClock>();
  auto pool = refused_pool(clock);
  ASSERT_TRUE(pool);
  auto results = pool->evaluate({request()}, {}, {});
  ASSERT_FALSE(results[0].ok());
  auto status = ssh_pool_status(*pool);
  ASSERT_EQ(status.size(), 1u);
  EXPECT_FALSE(status[0].in_rotation);
  EXPECT_EQ(status[0].errors, 1);
  EXPECT_EQ(status[0].retry_in, 2000ms);  // seconds, not minutes

  // Before the back-off ends the host is not tried (no new error).
  clock->advance(1500ms);
  results = pool->evaluate({request()}, {}, {});
  ASSERT_FALSE(results[0].ok());
  EXPECT_NE(results[0].failure->message.find("out of rotation"), std::string::npos)
      << results[0].failure->message;
  EXPECT_EQ(ssh_pool_status(*pool)[0].errors, 1);

  // After it, the host is probed again; still refused, so the next back-off doubles.
  clock->advance(500ms);
  results = pool->evaluate({request()}, {}, {});
  ASSERT_FALSE(results[0].ok());
  status = ssh_pool_status(*pool);
  EXPECT_EQ(status[0].errors, 2);
  EXPECT_EQ(status[0].retry_in, 4000ms);

  // Doubling stops at two minutes.
  for (int i = 0; i < 10; ++i) {
    clock->advance(ssh_pool_status(*pool)[0].retry_in);
    pool->evaluate({request()}, {}, {});
  }
  EXPECT_EQ(ssh_pool_status(*pool)[0].retry_in, std::chrono::milliseconds(2min));
}

TEST(SshRotation, HostsOutOfRotationAreSkippedUntilTheirBackoffPasses) {
  auto clock = std::make_shared<core::ManualClock>();
  auto first = parse_spec("ssh://127.0.0.1:1?device=fake&slots=1&connect_timeout=2");
  auto second = parse_spec("ssh://127.0.0.1:2?device=fake&slots=1&connect_timeout=2");
  ASSERT_TRUE(first.ok() && second.ok());
  BackendOptions options;
  options.python = AUTOCOMP_PYTHON;
  options.clock = clock;
  auto backend = make_ssh_backend({first.value(), second.value()}, options);
  ASSERT_TRUE(backend.ok()) << backend.failure().describe();
  auto pool = backend.value();

  // The request moves on to the other host when the first refuses; both leave rotation.
  auto results = pool->evaluate({request()}, {}, {});
  ASSERT_FALSE(results[0].ok());
  auto status = ssh_pool_status(*pool);
  ASSERT_EQ(status.size(), 2u);
  for (const auto& host : status) {
    EXPECT_FALSE(host.in_rotation) << host.host;
    EXPECT_EQ(host.errors, 1) << host.host;
  }

  // While the back-off runs, neither is tried: the failure says so without a new attempt.
  clock->advance(1999ms);
  results = pool->evaluate({request()}, {}, {});
  ASSERT_FALSE(results[0].ok());
  EXPECT_NE(results[0].failure->message.find("all 2 hosts out of rotation"), std::string::npos)
      << results[0].failure->message;
  for (const auto& host : ssh_pool_status(*pool)) {
    EXPECT_EQ(host.errors, 1) << host.host;
    EXPECT_EQ(host.retry_in, 1ms) << host.host;
  }

  // Once it has passed, both are tried again.
  clock->advance(1ms);
  pool->evaluate({request()}, {}, {});
  for (const auto& host : ssh_pool_status(*pool)) {
    EXPECT_EQ(host.errors, 2) << host.host;
    EXPECT_EQ(host.retry_in, 4000ms) << host.host;
  }
}

}  // namespace
}  // namespace autocomp::backends
