#include "tools/kernel_files.hpp"

#include <gtest/gtest.h>

#include <filesystem>
#include <fstream>
#include <string>

namespace autocomp::tools {
namespace {

namespace fs = std::filesystem;

class KernelFilesTest : public ::testing::Test {
 protected:
  void SetUp() override {
    m_dir = fs::temp_directory_path() / ("kernel_files_test_" + std::to_string(::getpid()));
    fs::create_directories(m_dir);
  }
  void TearDown() override { fs::remove_all(m_dir); }

  fs::path write(const std::string& name, const std::string& text) {
    const fs::path path = m_dir / name;
    std::ofstream(path, std::ios::binary) << text;
    return path;
  }

  fs::path m_dir;
};

TEST_F(KernelFilesTest, ResolvesRelativePathsAgainstTheWorkingFolder) {
  write("k.py", "def kernel(): pass\n");
  auto file = read_source_file("kernel", "sub/../k.py", m_dir.string());
  ASSERT_TRUE(file.ok()) << file.failure().describe();
  EXPECT_EQ(file->path, (m_dir / "k.py").string());
  EXPECT_EQ(file->text, "def kernel(): pass\n");
}

TEST_F(KernelFilesTest, MissingFileNamesTheArgumentAndThePath) {
  auto file = read_source_file("problem", "nope.py", m_dir.string());
  ASSERT_FALSE(file.ok());
  EXPECT_EQ(file.failure().kind, core::FailureKind::invalid_argument);
  EXPECT_NE(file.failure().message.find("'problem'"), std::string::npos);
  EXPECT_NE(file.failure().message.find("no such file"), std::string::npos);
  EXPECT_NE(file.failure().message.find((m_dir / "nope.py").string()), std::string::npos);
}

TEST_F(KernelFilesTest, RejectsFoldersEmptyPathsOversizeAndBinary) {
  EXPECT_NE(
      read_source_file("kernel", m_dir.string(), "").failure().message.find("not a regular file"),
      std::string::npos);
  EXPECT_NE(read_source_file("kernel", "", "").failure().message.find("empty"), std::string::npos);
  write("big.py", std::string(k_max_source_bytes + 1, 'x'));
  EXPECT_NE(read_source_file("kernel", "big.py", m_dir.string()).failure().message.find("limit"),
            std::string::npos);
  write("bin.py", std::string("a\0b", 3));
  EXPECT_NE(read_source_file("kernel", "bin.py", m_dir.string()).failure().message.find("UTF-8"),
            std::string::npos);
  write("latin1.py", "caf\xe9\n");
  EXPECT_FALSE(read_source_file("kernel", "latin1.py", m_dir.string()).ok());
  write("utf8.py", "# caf\xc3\xa9 \xe2\x9c\x93\n");
  EXPECT_TRUE(read_source_file("kernel", "utf8.py", m_dir.string()).ok());
}

TEST_F(KernelFilesTest, AtomicWriteReplacesContentAndLeavesNoTemporary) {
  const fs::path path = write("k.py", "old\n");
  ASSERT_TRUE(write_file_atomically(path.string(), "new\n").ok());
  EXPECT_EQ(read_source_file("kernel", path.string(), "")->text, "new\n");
  int entries = 0;
  for ([[maybe_unused]] const auto& entry : fs::directory_iterator(m_dir)) {
    ++entries;
  }
  EXPECT_EQ(entries, 1);
  EXPECT_FALSE(write_file_atomically((m_dir / "missing" / "k.py").string(), "x").ok());
}

}  // namespace
}  // namespace autocomp::tools
