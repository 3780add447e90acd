// The SSH pool's rotation policy with a fake clock: a refused host comes back after a short,
// growing back-off instead of minutes. Nothing listens on the ports used, so every connection
// attempt is refused at once.
#include <gtest/gtest.h>

#include <chrono>
#include <memory>

#include "backends/ssh_backend.hpp"

namespace autocomp::backends {
namespace {

using namespace std::chrono_literals;
using Clock = std::chrono::steady_clock;

class FakeClock {
 public:
  SteadyNow function() {
    return [this] { return m_now; };
  }
  void advance(Clock::duration by) { m_now += by; }

 private:
  Clock::time_point m_now = Clock::now();
};

EvalRequest request() {
  EvalRequest r;
  r.kernel_source = "def kernel(a):\n    return a\n";
  r.problem_source = "import numpy as np\n";
  r.timeout = 10s;
  return r;
}

std::shared_ptr<Backend> refused_pool(FakeClock& clock) {
  auto spec = parse_spec("ssh://127.0.0.1:1?device=fake&slots=1&connect_timeout=2");
  EXPECT_TRUE(spec.ok());
  BackendOptions options;
  options.python = AUTOCOMP_PYTHON;
  auto backend = make_ssh_backend({spec.value()}, options, clock.function());
  EXPECT_TRUE(backend.ok()) << (backend.ok() ? "" : backend.failure().describe());
  return backend.ok() ? backend.value() : nullptr;
}

TEST(SshRotation, ARefusedHostIsRetriedAfterAShortGrowingBackoff) {
  FakeClock clock;
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
  clock.advance(1500ms);
  results = pool->evaluate({request()}, {}, {});
  ASSERT_FALSE(results[0].ok());
  EXPECT_NE(results[0].failure->message.find("out of rotation"), std::string::npos)
      << results[0].failure->message;
  EXPECT_EQ(ssh_pool_status(*pool)[0].errors, 1);

  // After it, the host is probed again; still refused, so the next back-off doubles.
  clock.advance(500ms);
  results = pool->evaluate({request()}, {}, {});
  ASSERT_FALSE(results[0].ok());
  status = ssh_pool_status(*pool);
  EXPECT_EQ(status[0].errors, 2);
  EXPECT_EQ(status[0].retry_in, 4000ms);

  // Doubling stops at two minutes.
  for (int i = 0; i < 10; ++i) {
    clock.advance(ssh_pool_status(*pool)[0].retry_in);
    pool->evaluate({request()}, {}, {});
  }
  EXPECT_EQ(ssh_pool_status(*pool)[0].retry_in, std::chrono::milliseconds(2min));
}

}  // namespace
}  // namespace autocomp::backends
