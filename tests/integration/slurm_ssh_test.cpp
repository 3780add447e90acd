// slurm+ssh: Slurm's commands run on a "remote" head node reached over a real OpenSSH server on
// loopback, in front of a real single-node Slurm cluster on loopback.

#include <gtest/gtest.h>

#include <filesystem>
#include <fstream>

#include "backends/backend.hpp"
#include "support/slurm_cluster.hpp"
#include "support/sshd_fixture.hpp"

namespace autocomp::backends {
namespace {

namespace fs = std::filesystem;
using namespace std::chrono_literals;
using testing::LoopbackSshd;
using testing::SlurmCluster;
using testing::TempDir;

TEST(SlurmSshTest, EvaluatesThroughARemoteHeadNodeAndNamesJobAndNode) {
  if (auto missing = SlurmCluster::missing_binaries(); !missing.empty()) {
    GTEST_SKIP() << "Slurm is not installed (missing " << missing
                 << "); scripts/install-deps.sh installs slurm-wlm and munge";
  }
  TempDir tmp("autocomp-slurm-ssh-test");
  SlurmCluster cluster(tmp.path() / "cluster");
  fs::path key = tmp.path() / "user_key";
  testing::generate_key(key);
  LoopbackSshd server(tmp.path() / "sshd", fs::path(key.string() + ".pub"));
  fs::path known = tmp.path() / "known_hosts";
  std::ofstream(known) << server.known_hosts_line();
  // The head's login environment does not know the test cluster; the setup file tells it.
  fs::path setup = tmp.path() / "slurm_env.sh";
  std::ofstream(setup) << "export SLURM_CONF=" << cluster.conf_path() << "\n";
  fs::path stage = tmp.path() / "stage";

  std::string spec = "slurm+ssh://root@127.0.0.1:" + std::to_string(server.port()) +
                     "?partition=" + SlurmCluster::k_partition + "&key=" + key.string() +
                     "&known_hosts=" + known.string() + "&python=" AUTOCOMP_PYTHON +
                     "&stage=" + stage.string() + "&setup=" + setup.string() +
                     "&device=fake&fake_ms=200&poll_ms=50";
  auto made = make_backend(spec, {});
  ASSERT_TRUE(made.ok()) << made.failure().describe();
  auto backend = made.value();
  EXPECT_EQ(backend->identity(), "slurm+ssh://root@127.0.0.1:" + std::to_string(server.port()) +
                                     "?partition=eval&device=fake&fake_ms=200");

  EvalRequest request;
  request.kernel_source = "def kernel(a):\n    return a\n";
  request.problem_source = "import numpy as np\n";
  request.seeds = {0};
  request.warmup = 0;
  request.iters = 1;
  request.timeout = 60s;
  auto results = backend->evaluate({request, request}, {}, {});
  ASSERT_EQ(results.size(), 2u);
  for (const auto& result : results) {
    ASSERT_TRUE(result.ok()) << result.failure->describe();
    EXPECT_EQ(result.device, "fake");
    EXPECT_EQ(result.receipt.node, SlurmCluster::k_node);
    EXPECT_FALSE(result.receipt.job.empty());
    EXPECT_EQ(result.receipt.backend, backend->identity());
  }
  EXPECT_NE(results[0].receipt.job, results[1].receipt.job);
  EXPECT_TRUE(cluster.queued_jobs().empty());
  std::error_code ec;
  EXPECT_EQ(std::distance(fs::directory_iterator(stage / "work", ec), fs::directory_iterator()), 0);
}

}  // namespace
}  // namespace autocomp::backends
