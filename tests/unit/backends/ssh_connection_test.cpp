// SshConnection against a real OpenSSH server on loopback.

#include "backends/ssh_connection.hpp"

#include <gtest/gtest.h>

#include <filesystem>
#include <fstream>

#include "support/sshd_fixture.hpp"

namespace autocomp::backends {
namespace {

namespace fs = std::filesystem;
using namespace std::chrono_literals;

class SshConnectionTest : public ::testing::Test {
 protected:
  void SetUp() override {
    m_tmp = std::make_unique<testing::TempDir>("autocomp-sshconn-test");
    testing::generate_key(m_tmp->path() / "key");
    m_server =
        std::make_unique<testing::LoopbackSshd>(m_tmp->path() / "sshd", m_tmp->path() / "key.pub");
    std::ofstream(m_tmp->path() / "known_hosts") << m_server->known_hosts_line();
  }

  SshEndpoint endpoint() const {
    SshEndpoint e;
    e.host = "127.0.0.1";
    e.port = m_server->port();
    e.user = "root";
    e.key_files = {(m_tmp->path() / "key").string()};
    e.known_hosts = (m_tmp->path() / "known_hosts").string();
    e.use_agent = false;
    return e;
  }

  std::unique_ptr<SshConnection> open() {
    auto connection = SshConnection::open(endpoint());
    EXPECT_TRUE(connection.ok()) << (connection.ok() ? "" : connection.failure().describe());
    return connection.ok() ? std::move(connection).value() : nullptr;
  }

  std::unique_ptr<testing::TempDir> m_tmp;
  std::unique_ptr<testing::LoopbackSshd> m_server;
};

TEST_F(SshConnectionTest, ExecReturnsOutputAndExitStatus) {
  auto connection = open();
  ASSERT_TRUE(connection);
  const std::string tricky = "it's $HOME; `x` \"q\"";
  auto run =
      connection->exec("printf '%s' " + shell_quote(tricky) + "; echo err >&2; exit 7", 30s, {});
  ASSERT_TRUE(run.ok()) << run.failure().describe();
  EXPECT_EQ(run->stdout_text, tricky);
  EXPECT_EQ(run->stderr_text, "err\n");
  EXPECT_EQ(run->exit_status, 7);
  EXPECT_TRUE(connection->alive());
  // The session is reusable.
  auto again = connection->exec("echo again", 30s, {});
  ASSERT_TRUE(again.ok());
  EXPECT_EQ(again->stdout_text, "again\n");
}

TEST_F(SshConnectionTest, PersistentShellRunsCommandsOneAfterAnother) {
  auto connection = open();
  ASSERT_TRUE(connection);
  auto first =
      connection->run_in_shell("echo $$ > /dev/null; printf 'no newline'; exit 3", 30s, {});
  ASSERT_TRUE(first.ok()) << first.failure().describe();
  EXPECT_EQ(first->stdout_text, "no newline");
  EXPECT_EQ(first->exit_status, 3);
  // `exit` ended only the command's subshell; the same shell answers again.
  auto second = connection->run_in_shell("echo out; echo err >&2; cd /tmp && exec true", 30s, {});
  ASSERT_TRUE(second.ok()) << second.failure().describe();
  EXPECT_EQ(second->stdout_text, "out\nerr\n");
  EXPECT_EQ(second->exit_status, 0);
  auto slow = connection->run_in_shell("sleep 30", 300ms, {});
  ASSERT_FALSE(slow.ok());
  EXPECT_EQ(slow.failure().kind, core::FailureKind::timeout);
  auto after = connection->run_in_shell("echo fresh shell", 30s, {});
  ASSERT_TRUE(after.ok()) << after.failure().describe();
  EXPECT_EQ(after->stdout_text, "fresh shell\n");
}

TEST_F(SshConnectionTest, ExecGivesUpAtItsDeadline) {
  auto connection = open();
  ASSERT_TRUE(connection);
  auto run = connection->exec("sleep 30", 500ms, {});
  ASSERT_FALSE(run.ok());
  EXPECT_EQ(run.failure().kind, core::FailureKind::timeout);
  core::CancelToken cancel;
  cancel.cancel();
  auto cancelled = connection->exec("sleep 30", 30s, cancel);
  ASSERT_FALSE(cancelled.ok());
  EXPECT_EQ(cancelled.failure().kind, core::FailureKind::cancelled);
}

TEST_F(SshConnectionTest, SftpFileOperations) {
  auto connection = open();
  ASSERT_TRUE(connection);
  const std::string base = (m_tmp->path() / "remote").string();
  ASSERT_TRUE(connection->make_dirs(base + "/a/b").ok());
  EXPECT_TRUE(connection->make_dirs(base + "/a/b").ok());  // already there is fine
  std::string big(100000, 'x');
  big += "END";
  ASSERT_TRUE(connection->write_file(base + "/a/b/file.txt", big).ok());
  EXPECT_EQ(connection->read_file(base + "/a/b/file.txt", 1 << 20).value(), big);
  EXPECT_EQ(connection->read_file(base + "/a/b/file.txt", 5, /*tail=*/true).value(), "xxEND");
  EXPECT_TRUE(connection->exists(base + "/a/b/file.txt").value());
  EXPECT_FALSE(connection->exists(base + "/a/nothing").value());
  auto missing = connection->read_file(base + "/a/nothing", 10);
  ASSERT_FALSE(missing.ok());
  EXPECT_EQ(missing.failure().kind, core::FailureKind::io_error);
  EXPECT_NE(missing.failure().message.find("/a/nothing"), std::string::npos);

  ASSERT_TRUE(connection->rename(base + "/a", base + "/c").ok());
  EXPECT_TRUE(fs::exists(base + "/c/b/file.txt"));
  ASSERT_TRUE(connection->remove_tree(base + "/c").ok());
  EXPECT_FALSE(fs::exists(base + "/c"));
  EXPECT_EQ(connection->home().value(), std::string(std::getenv("HOME")));
}

TEST_F(SshConnectionTest, RefusesAnUnknownHostAndRecordsItOnlyWhenAsked) {
  fs::path empty = m_tmp->path() / "empty_known_hosts";
  std::ofstream(empty).close();
  SshEndpoint e = endpoint();
  e.known_hosts = empty.string();
  auto refused = SshConnection::open(e);
  ASSERT_FALSE(refused.ok());
  EXPECT_NE(refused.failure().message.find("SHA256:"), std::string::npos);
  e.accept_new_host_key = true;
  auto accepted = SshConnection::open(e);
  ASSERT_TRUE(accepted.ok()) << accepted.failure().describe();
  e.accept_new_host_key = false;
  EXPECT_TRUE(SshConnection::open(e).ok());  // now known
}

TEST(SshConnectionDown, ConnectFailureNamesTheHost) {
  SshEndpoint e;
  e.host = "127.0.0.1";
  e.port = testing::free_loopback_port();
  e.timeout = 5s;
  auto connection = SshConnection::open(e);
  ASSERT_FALSE(connection.ok());
  EXPECT_EQ(connection.failure().kind, core::FailureKind::transport_error);
  EXPECT_NE(connection.failure().message.find("127.0.0.1:" + std::to_string(e.port)),
            std::string::npos);
}

}  // namespace
}  // namespace autocomp::backends
