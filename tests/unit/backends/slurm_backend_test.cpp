#include "backends/slurm_backend.hpp"

#include <gtest/gtest.h>

#include "backends/backend.hpp"
#include "backends/spec.hpp"

namespace autocomp::backends {
namespace {

TEST(SlurmSpec, ColonFormNamesTheScheme) {
  auto spec = parse_spec("slurm:?partition=trn2&device=fake&cores_per_task=2");
  ASSERT_TRUE(spec.ok()) << spec.failure().describe();
  EXPECT_EQ(spec->scheme, "slurm");
  EXPECT_EQ(spec->param("partition").value_or(""), "trn2");
  EXPECT_EQ(spec->param("cores_per_task").value_or(""), "2");
  auto remote = parse_spec("slurm+ssh://ec2-user@head:2222?partition=trn2");
  ASSERT_TRUE(remote.ok());
  EXPECT_EQ(remote->scheme, "slurm+ssh");
  EXPECT_EQ(remote->host, "head");
  EXPECT_EQ(remote->port, 2222);
}

TEST(SlurmSpec, IdentityNamesPartitionAndDeviceAndBadOptionsAreRefused) {
  auto backend = make_backend("slurm:?partition=trn2&device=fake&fake_ms=5&slots=3", {});
  ASSERT_TRUE(backend.ok()) << backend.failure().describe();
  EXPECT_EQ(backend.value()->identity(), "slurm:?partition=trn2&device=fake&fake_ms=5");
  EXPECT_EQ(backend.value()->slots(), 3);
  EXPECT_EQ(backend.value()->device(), "fake");

  auto device = make_backend("slurm:?partition=p&device=gpu", {});
  ASSERT_FALSE(device.ok());
  EXPECT_NE(device.failure().message.find("unknown device 'gpu'"), std::string::npos);
  auto count = make_backend("slurm:?partition=p&cores_per_task=0", {});
  ASSERT_FALSE(count.ok());
  EXPECT_NE(count.failure().message.find("cores_per_task"), std::string::npos);
  auto no_head = make_backend("slurm+ssh://?partition=p", {});
  EXPECT_FALSE(no_head.ok());
  auto pooled = make_backend("slurm:?partition=a,slurm:?partition=b", {});
  ASSERT_FALSE(pooled.ok());
  EXPECT_NE(pooled.failure().message.find("cannot be pooled"), std::string::npos);
}

TEST(SlurmScontrol, ParsesArrayTasksAndPendingRanges) {
  const std::string text =
      "JobId=12 ArrayJobId=10 ArrayTaskId=2 JobName=autocomp JobState=RUNNING Reason=None "
      "Dependency=(null) NodeList=trn2-dy-1 BatchHost=trn2-dy-1\n"
      "JobId=10 ArrayJobId=10 ArrayTaskId=3-7%4 JobName=autocomp JobState=PENDING "
      "Reason=JobArrayTaskLimit NodeList=(null)\n"
      "slurm_load_jobs error: Invalid job id specified\n"
      "JobId=11 ArrayJobId=10 ArrayTaskId=1 JobState=NODE_FAIL Reason=NodeDown NodeList=n2\n";
  auto records = parse_scontrol_jobs(text);
  ASSERT_EQ(records.size(), 3u);
  EXPECT_EQ(records[0].job_id, "12");
  EXPECT_EQ(records[0].array_job_id, "10");
  EXPECT_EQ(records[0].array_task_id, "2");
  EXPECT_EQ(records[0].state, "RUNNING");
  EXPECT_EQ(records[0].reason, "");
  EXPECT_EQ(records[0].node, "trn2-dy-1");
  EXPECT_EQ(records[1].array_task_id, "3-7%4");
  EXPECT_EQ(records[1].reason, "JobArrayTaskLimit");
  EXPECT_EQ(records[1].node, "");
  EXPECT_EQ(records[2].state, "NODE_FAIL");
  EXPECT_TRUE(parse_scontrol_jobs("").empty());
}

TEST(SlurmScontrol, EndStatesSayWhatHappenedAndWhichToRetry) {
  EXPECT_TRUE(slurm_state_is_final("COMPLETED"));
  EXPECT_TRUE(slurm_state_is_final("NODE_FAIL"));
  EXPECT_FALSE(slurm_state_is_final("RUNNING"));
  EXPECT_FALSE(slurm_state_is_final("COMPLETING"));
  EXPECT_FALSE(slurm_state_is_final("PENDING"));

  bool retry = false;
  auto node = slurm_end_failure("NODE_FAIL", "NodeDown", "10_1", "n2", retry);
  EXPECT_TRUE(retry);
  EXPECT_EQ(node.kind, core::FailureKind::transport_error);
  EXPECT_NE(node.message.find("Slurm job 10_1 on n2"), std::string::npos);
  EXPECT_NE(node.message.find("node failure"), std::string::npos);
  EXPECT_NE(node.message.find("NodeDown"), std::string::npos);

  auto preempted = slurm_end_failure("PREEMPTED", "", "10_2", "n1", retry);
  EXPECT_TRUE(retry);
  EXPECT_NE(preempted.message.find("preempted"), std::string::npos);

  auto limit = slurm_end_failure("TIMEOUT", "", "10_3", "n1", retry);
  EXPECT_FALSE(retry);
  EXPECT_EQ(limit.kind, core::FailureKind::timeout);

  auto cancelled = slurm_end_failure("CANCELLED", "", "10_4", "", retry);
  EXPECT_FALSE(retry);
  EXPECT_EQ(cancelled.kind, core::FailureKind::cancelled);
  EXPECT_EQ(cancelled.message.find(" on "), std::string::npos);
}

}  // namespace
}  // namespace autocomp::backends
