#include "backends/hosts_file.hpp"

#include <gtest/gtest.h>
#include <sys/stat.h>

#include <cstdlib>
#include <filesystem>
#include <fstream>
#include <optional>

#include "backends/backend.hpp"
#include "backends/ssh_backend.hpp"
#include "support/sshd_fixture.hpp"

namespace autocomp::backends {
namespace {

namespace fs = std::filesystem;

std::string message_of(const core::Result<std::vector<BackendSpec>>& result) {
  return result.ok() ? std::string("(no failure)") : result.failure().message;
}

bool contains(const std::string& text, const std::string& part) {
  return text.find(part) != std::string::npos;
}

// Sets HOME for the life of the object and puts the old value back afterwards.
class ScopedHome {
 public:
  explicit ScopedHome(const std::string& home) {
    if (const char* old = std::getenv("HOME")) {
      m_old = old;
    }
    ::setenv("HOME", home.c_str(), 1);
  }
  ~ScopedHome() {
    if (m_old) {
      ::setenv("HOME", m_old->c_str(), 1);
    } else {
      ::unsetenv("HOME");
    }
  }
  ScopedHome(const ScopedHome&) = delete;
  ScopedHome& operator=(const ScopedHome&) = delete;

 private:
  std::optional<std::string> m_old;
};

TEST(HostsFile, SkipsCommentsAndBlankLinesAndTrimsWhitespace) {
  const std::string text =
      "# the trn2 fleet\n"
      "\n"
      "   ssh://ubuntu@trn2-a:2222?device=neuron&slots=4   \n"
      "\t\n"
      "\tssh://trn2-b?key=/keys/b#1   # rack 3, key name holds a '#'\r\n"
      "  # ssh://commented-out\n"
      "ssh://[::1]:22\n";
  auto specs = parse_hosts_file(text, "fleet.txt");
  ASSERT_TRUE(specs.ok()) << specs.failure().describe();
  ASSERT_EQ(specs->size(), 3u);
  const auto& a = specs.value()[0];
  EXPECT_EQ(a.text, "ssh://ubuntu@trn2-a:2222?device=neuron&slots=4");
  EXPECT_EQ(a.scheme, "ssh");
  EXPECT_EQ(a.user, "ubuntu");
  EXPECT_EQ(a.host, "trn2-a");
  EXPECT_EQ(a.port, 2222);
  EXPECT_EQ(a.param("slots"), "4");
  EXPECT_EQ(a.origin, "fleet.txt:3");
  const auto& b = specs.value()[1];
  EXPECT_EQ(b.host, "trn2-b");
  EXPECT_EQ(b.param("key"), "/keys/b#1");
  EXPECT_EQ(b.origin, "fleet.txt:5");
  EXPECT_EQ(specs.value()[2].host, "::1");
  EXPECT_EQ(specs.value()[2].origin, "fleet.txt:7");
}

TEST(HostsFile, LastLineWithoutNewlineCounts) {
  auto specs = parse_hosts_file("ssh://a\nssh://b", "f");
  ASSERT_TRUE(specs.ok()) << specs.failure().describe();
  ASSERT_EQ(specs->size(), 2u);
  EXPECT_EQ(specs.value()[1].host, "b");
}

TEST(HostsFile, BadLineNamesFileLineAndTheSpecsError) {
  auto bad_port = parse_hosts_file("# hosts\nssh://a\n\nssh://b:99999\n", "fleet.txt");
  ASSERT_FALSE(bad_port.ok());
  EXPECT_EQ(bad_port.failure().kind, core::FailureKind::invalid_argument);
  EXPECT_TRUE(contains(message_of(bad_port), "fleet.txt:4: ")) << message_of(bad_port);
  EXPECT_TRUE(contains(message_of(bad_port), "bad port '99999'")) << message_of(bad_port);

  auto two_on_a_line = parse_hosts_file("ssh://a ssh://b\n", "fleet.txt");
  ASSERT_FALSE(two_on_a_line.ok());
  EXPECT_TRUE(contains(message_of(two_on_a_line), "fleet.txt:1: ")) << message_of(two_on_a_line);
  EXPECT_TRUE(contains(message_of(two_on_a_line), "one spec per line"))
      << message_of(two_on_a_line);
}

TEST(HostsFile, OnlySshLinesAreAllowed) {
  for (const char* line : {"sim", "local?device=fake", "hosts:/other/file"}) {
    auto specs = parse_hosts_file(std::string("ssh://a\n") + line + "\n", "fleet.txt");
    ASSERT_FALSE(specs.ok()) << line;
    EXPECT_TRUE(contains(message_of(specs), "fleet.txt:2: not an ssh://")) << message_of(specs);
    // The offending line is not quoted: the file may be anything the server can read.
    EXPECT_FALSE(contains(message_of(specs), line)) << message_of(specs);
  }
}

TEST(HostsFile, ErrorsNeverQuoteAForeignFile) {
  testing::TempDir tmp("autocomp-hosts-test");
  const fs::path path = tmp.path() / "passwd";
  std::ofstream(path) << "root:x:0:0:secret-gecos:/root:/bin/bash\nssh://a\n";
  auto specs = read_hosts_file(path.string());
  ASSERT_FALSE(specs.ok());
  EXPECT_TRUE(contains(message_of(specs), path.string() + ":1: not an ssh://"))
      << message_of(specs);
  EXPECT_FALSE(contains(message_of(specs), "secret-gecos")) << message_of(specs);
  EXPECT_FALSE(contains(message_of(specs), "root:x")) << message_of(specs);

  // A real spec line is still quoted, so that a typo in a hosts file is easy to find.
  std::ofstream(path, std::ios::trunc) << "ssh://a b\n";
  auto typo = read_hosts_file(path.string());
  ASSERT_FALSE(typo.ok());
  EXPECT_TRUE(contains(message_of(typo), "'ssh://a b'")) << message_of(typo);
}

TEST(HostsFile, OnlyBoundedRegularFilesAreRead) {
  testing::TempDir tmp("autocomp-hosts-test");
  // Devices: /dev/zero would grow without end, /dev/stdin would steal the stdio stream.
  EXPECT_FALSE(read_hosts_file("/dev/stdin").ok());
  for (const char* device : {"/dev/zero", "/dev/null", "/dev/tty"}) {
    auto specs = read_hosts_file(device);
    ASSERT_FALSE(specs.ok()) << device;
    EXPECT_EQ(specs.failure().kind, core::FailureKind::io_error) << device;
    EXPECT_TRUE(contains(message_of(specs), std::string("cannot read hosts file ") + device))
        << message_of(specs);
  }
  auto zero = read_hosts_file("/dev/zero");
  EXPECT_TRUE(contains(message_of(zero), "not a regular file")) << message_of(zero);

  // A FIFO with no writer would block a plain open forever.
  const fs::path fifo = tmp.path() / "fifo";
  ASSERT_EQ(::mkfifo(fifo.c_str(), 0600), 0);
  auto from_fifo = read_hosts_file(fifo.string());
  ASSERT_FALSE(from_fifo.ok());
  EXPECT_TRUE(contains(message_of(from_fifo), "not a regular file")) << message_of(from_fifo);

  // Larger than the limit: refused before reading it.
  const fs::path big = tmp.path() / "big";
  {
    std::ofstream out(big);
    std::string line = "ssh://host-with-a-long-name.example.com?device=sim\n";
    while (static_cast<std::size_t>(out.tellp()) <= k_max_hosts_file_bytes) {
      out << line;
    }
  }
  auto too_big = read_hosts_file(big.string());
  ASSERT_FALSE(too_big.ok());
  EXPECT_TRUE(contains(message_of(too_big), "larger than 1024 KiB")) << message_of(too_big);

  // A binary file is not a hosts file.
  const fs::path binary = tmp.path() / "binary";
  std::ofstream(binary) << std::string("ssh://a\n\0\0", 10);
  auto from_binary = read_hosts_file(binary.string());
  ASSERT_FALSE(from_binary.ok());
  EXPECT_TRUE(contains(message_of(from_binary), "not a text file")) << message_of(from_binary);
}

TEST(HostsFile, FileWithNoHostsIsAnError) {
  for (const char* text : {"", "\n\n", "# nothing yet\n   \n  # still nothing\n"}) {
    auto specs = parse_hosts_file(text, "/etc/fleet");
    ASSERT_FALSE(specs.ok()) << "'" << text << "'";
    EXPECT_EQ(specs.failure().kind, core::FailureKind::invalid_argument);
    EXPECT_TRUE(contains(message_of(specs), "/etc/fleet lists no hosts")) << message_of(specs);
  }
}

TEST(HostsFile, ReadsAFileAndNamesItInMessages) {
  testing::TempDir tmp("autocomp-hosts-test");
  const fs::path path = tmp.path() / "fleet";
  std::ofstream(path) << "ssh://a?device=sim\nssh://b:x\n";
  auto bad = read_hosts_file(path.string());
  ASSERT_FALSE(bad.ok());
  EXPECT_TRUE(contains(message_of(bad), path.string() + ":2: ")) << message_of(bad);

  std::ofstream(path) << "ssh://a?device=sim\nssh://b\n";
  auto good = read_hosts_file(path.string());
  ASSERT_TRUE(good.ok()) << good.failure().describe();
  ASSERT_EQ(good->size(), 2u);
  EXPECT_EQ(good.value()[1].origin, path.string() + ":2");

  std::ofstream(path, std::ios::trunc).close();
  auto empty = read_hosts_file(path.string());
  ASSERT_FALSE(empty.ok());
  EXPECT_TRUE(contains(message_of(empty), path.string() + " lists no hosts")) << message_of(empty);
}

TEST(HostsFile, MissingFileOrFolderIsAnIoErrorNamingThePath) {
  testing::TempDir tmp("autocomp-hosts-test");
  const std::string missing = (tmp.path() / "no-such-hosts").string();
  auto specs = read_hosts_file(missing);
  ASSERT_FALSE(specs.ok());
  EXPECT_EQ(specs.failure().kind, core::FailureKind::io_error);
  EXPECT_TRUE(contains(message_of(specs), "cannot read hosts file " + missing + ": no such file"))
      << message_of(specs);

  auto folder = read_hosts_file(tmp.path().string());
  ASSERT_FALSE(folder.ok());
  EXPECT_TRUE(contains(message_of(folder), tmp.path().string() + ": it is a directory"))
      << message_of(folder);

  auto no_path = read_hosts_file("");
  ASSERT_FALSE(no_path.ok());
  EXPECT_TRUE(contains(message_of(no_path), "needs a file path")) << message_of(no_path);
}

TEST(HostsFile, TildeMeansHome) {
  testing::TempDir tmp("autocomp-hosts-test");
  ScopedHome home(tmp.path().string());
  EXPECT_EQ(expand_home("~"), tmp.path().string());
  EXPECT_EQ(expand_home("~/.ssh/id_ed25519"), tmp.path().string() + "/.ssh/id_ed25519");
  EXPECT_EQ(expand_home("~other/key"), "~other/key");
  EXPECT_EQ(expand_home("/abs/~/key"), "/abs/~/key");
  EXPECT_EQ(expand_home(""), "");

  std::ofstream(tmp.path() / "fleet") << "ssh://a\n";
  auto specs = read_hosts_file("~/fleet");
  ASSERT_TRUE(specs.ok()) << specs.failure().describe();
  EXPECT_EQ(specs.value()[0].origin, (tmp.path() / "fleet").string() + ":1");
}

TEST(HostsFile, HostsSpecFormsTheSamePoolAsRepeatedSshSpecs) {
  testing::TempDir tmp("autocomp-hosts-test");
  const fs::path path = tmp.path() / "fleet";
  // Nothing listens on these ports; building the pool must not need the hosts.
  std::ofstream(path) << "# two loopback hosts\n"
                         "ssh://u@127.0.0.1:1?device=sim&slots=2\n"
                         "ssh://127.0.0.1:2?device=sim   # second\n";
  auto from_file = make_backend("hosts:" + path.string(), {});
  ASSERT_TRUE(from_file.ok()) << from_file.failure().describe();
  auto repeated =
      make_backend("ssh://u@127.0.0.1:1?device=sim&slots=2,ssh://127.0.0.1:2?device=sim", {});
  ASSERT_TRUE(repeated.ok()) << repeated.failure().describe();
  EXPECT_EQ(from_file.value()->identity(), repeated.value()->identity());
  EXPECT_EQ(from_file.value()->slots(), 3);
  auto status = ssh_pool_status(*from_file.value());
  ASSERT_EQ(status.size(), 2u);
  EXPECT_EQ(status[0].host, "u@127.0.0.1:1");

  // A hosts file and further ssh:// specs join into one pool.
  auto joined = make_backend("hosts:" + path.string() + ",ssh://127.0.0.1:3?device=sim", {});
  ASSERT_TRUE(joined.ok()) << joined.failure().describe();
  EXPECT_EQ(ssh_pool_status(*joined.value()).size(), 3u);
}

TEST(HostsFile, PoolErrorsNameTheFileAndLine) {
  testing::TempDir tmp("autocomp-hosts-test");
  const fs::path path = tmp.path() / "fleet";
  std::ofstream(path) << "ssh://a\n\nssh://b?slot=2\n";
  auto typo = make_backend("hosts:" + path.string(), {});
  ASSERT_FALSE(typo.ok());
  EXPECT_TRUE(contains(typo.failure().message, path.string() + ":3: ")) << typo.failure().message;
  EXPECT_TRUE(contains(typo.failure().message, "unknown option 'slot'")) << typo.failure().message;

  std::ofstream(path) << "ssh://a\nssh://b?slots=zero\n";
  auto slots = make_backend("hosts:" + path.string(), {});
  ASSERT_FALSE(slots.ok());
  EXPECT_TRUE(contains(slots.failure().message, path.string() + ":2: ")) << slots.failure().message;

  std::ofstream(path) << "ssh://a:22\nssh://a\n";
  auto twice = make_backend("hosts:" + path.string(), {});
  ASSERT_FALSE(twice.ok());
  EXPECT_TRUE(contains(twice.failure().message, path.string() + ":2: host "))
      << twice.failure().message;
  EXPECT_TRUE(contains(twice.failure().message, "listed twice")) << twice.failure().message;

  auto missing = make_backend("hosts:" + (tmp.path() / "gone").string(), {});
  ASSERT_FALSE(missing.ok());
  EXPECT_EQ(missing.failure().kind, core::FailureKind::io_error);
  EXPECT_TRUE(contains(missing.failure().message, (tmp.path() / "gone").string()));

  std::ofstream(path) << "ssh://a\n";
  auto mixed = make_backend("sim,hosts:" + path.string(), {});
  ASSERT_FALSE(mixed.ok());
  EXPECT_TRUE(contains(mixed.failure().message, "cannot pool")) << mixed.failure().message;
}

}  // namespace
}  // namespace autocomp::backends
