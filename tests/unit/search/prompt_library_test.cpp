#include <gtest/gtest.h>

#include <cstdlib>
#include <filesystem>
#include <fstream>

#include "search/prompts/library.hpp"

namespace autocomp::search::prompts {
namespace {

namespace fs = std::filesystem;

TEST(PromptLibraryTest, RendersPlaceholdersAndOptionalSections) {
  const std::string text = "Hello {{name}}!\n{{#extra}}Extra: {{extra}}\n{{/extra}}End {{ name }}.";
  auto with = render_template(text, {{"name", "trn2"}, {"extra", "notes"}});
  ASSERT_TRUE(with.ok()) << with.failure().describe();
  EXPECT_EQ(with.value(), "Hello trn2!\nExtra: notes\nEnd trn2.\n");
  auto without = render_template(text, {{"name", "trn2"}, {"extra", ""}});
  ASSERT_TRUE(without.ok());
  EXPECT_EQ(without.value(), "Hello trn2!\nEnd trn2.\n");
}

TEST(PromptLibraryTest, ValuesAreNotRescanned) {
  auto rendered = render_template("code: {{code}}", {{"code", "d = {{'a': 1}}"}});
  ASSERT_TRUE(rendered.ok());
  EXPECT_EQ(rendered.value(), "code: d = {{'a': 1}}\n");
}

TEST(PromptLibraryTest, UnknownPlaceholderIsReportedWithItsOrigin) {
  auto rendered = render_template("{{typo}}", {{"name", "x"}}, "templates/plan.md");
  ASSERT_FALSE(rendered.ok());
  EXPECT_NE(rendered.failure().message.find("templates/plan.md"), std::string::npos);
  EXPECT_NE(rendered.failure().message.find("{{typo}}"), std::string::npos);
  EXPECT_FALSE(render_template("{{#open}} no close", {{"open", "x"}}).ok());
  EXPECT_FALSE(render_template("{{unterminated", {}).ok());
}

TEST(PromptLibraryTest, CollapsesBlankLinesLeftByEmptySections) {
  auto rendered = render_template("a\n\n{{x}}\n\n\n\nb", {{"x", ""}});
  ASSERT_TRUE(rendered.ok());
  EXPECT_EQ(rendered.value(), "a\n\nb\n");
}

TEST(PromptLibraryTest, MissingFileNamesThePath) {
  const auto dir = fs::temp_directory_path() / "autocomp_prompt_library_test";
  fs::create_directories(dir);
  PromptLibrary library(dir.string());
  auto text = library.read("templates/nothing.md");
  ASSERT_FALSE(text.ok());
  EXPECT_EQ(text.failure().kind, core::FailureKind::io_error);
  EXPECT_NE(text.failure().message.find((dir / "templates/nothing.md").string()),
            std::string::npos);
  fs::remove_all(dir);
}

TEST(PromptLibraryTest, EnvironmentFolderWinsAndABadOneIsAnError) {
  const auto dir = fs::temp_directory_path() / "autocomp_prompt_env_test";
  fs::create_directories(dir);
  setenv("AUTOCOMP_PROMPTS_DIR", dir.c_str(), 1);
  auto resolved = resolve_prompts_dir();
  setenv("AUTOCOMP_PROMPTS_DIR", (dir / "missing").c_str(), 1);
  auto bad = resolve_prompts_dir();
  unsetenv("AUTOCOMP_PROMPTS_DIR");
  auto fallback = resolve_prompts_dir();
  fs::remove_all(dir);
  ASSERT_TRUE(resolved.ok());
  EXPECT_EQ(resolved.value(), dir.string());
  ASSERT_FALSE(bad.ok());
  EXPECT_NE(bad.failure().message.find("AUTOCOMP_PROMPTS_DIR"), std::string::npos);
  ASSERT_TRUE(fallback.ok());
  EXPECT_EQ(fallback.value(), std::string(AUTOCOMP_SOURCE_DIR) + "/prompts");
}

TEST(PromptLibraryTest, CrlfFilesReadAsLf) {
  const auto dir = fs::temp_directory_path() / "autocomp_prompt_crlf_test";
  fs::create_directories(dir);
  {
    std::ofstream out(dir / "t.md", std::ios::binary);
    out << "line one\r\nline two\r\n";
  }
  PromptLibrary library(dir.string());
  auto text = library.read("t.md");
  fs::remove_all(dir);
  ASSERT_TRUE(text.ok());
  EXPECT_EQ(text.value(), "line one\nline two\n");
}

}  // namespace
}  // namespace autocomp::search::prompts
