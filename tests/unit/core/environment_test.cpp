#include "core/environment.hpp"

#include <gtest/gtest.h>
#include <stdlib.h>

#include <algorithm>
#include <string>

#include "core/process.hpp"

namespace autocomp::core {
namespace {

bool has_name(const EnvironmentList& list, const std::string& name) {
  return std::any_of(list.begin(), list.end(),
                     [&](const auto& entry) { return entry.first == name; });
}

TEST(HarnessEnvironment, AllowsWhatAHarnessNeedsAndNoSecrets) {
  for (const char* name :
       {"PATH", "HOME", "LANG", "LC_ALL", "TMPDIR", "PYTHONPATH", "AUTOCOMP_SMALL",
        "AUTOCOMP_REF_CACHE", "NEURON_RT_VISIBLE_CORES", "NKI_DEBUG"}) {
    EXPECT_TRUE(harness_may_inherit(name)) << name;
  }
  for (const char* name :
       {"ANTHROPIC_API_KEY", "OPENAI_API_KEY", "OPENAI_BASE_URL", "AUTOCOMP_AUTH_TOKEN",
        "GITHUB_TOKEN", "AWS_SECRET_ACCESS_KEY", "NEURON_API_KEY", "PYTHON_TOKEN", "SSH_AUTH_SOCK",
        "AUTOCOMP_DB", "RANDOM_VARIABLE", "", "BAD-NAME"}) {
    EXPECT_FALSE(harness_may_inherit(name)) << name;
  }
  // Operator additions pass, but never past the deny rules.
  EXPECT_TRUE(harness_may_inherit("MY_SETTING", {"MY_SETTING"}));
  EXPECT_FALSE(harness_may_inherit("MY_API_KEY", {"MY_API_KEY"}));
}

TEST(HarnessEnvironment, FiltersThisProcessEnvironment) {
  ::setenv("AUTOCOMP_TEST_API_KEY", "sk-secret", 1);
  ::setenv("AUTOCOMP_AUTH_TOKEN", "bearer-secret", 1);
  ::setenv("NKI_TEST_SETTING", "kept", 1);
  ::setenv("AUTOCOMP_TEST_EXTRA", "extra", 1);
  auto list = harness_environment();
  EXPECT_FALSE(has_name(list, "AUTOCOMP_TEST_API_KEY"));
  EXPECT_FALSE(has_name(list, "AUTOCOMP_AUTH_TOKEN"));
  EXPECT_TRUE(has_name(list, "NKI_TEST_SETTING"));
  EXPECT_FALSE(has_name(list, "AUTOCOMP_TEST_EXTRA"));
  EXPECT_EQ(has_name(list, "PATH"), std::getenv("PATH") != nullptr);

  ::setenv("AUTOCOMP_HARNESS_ENV", "AUTOCOMP_TEST_EXTRA, AUTOCOMP_TEST_API_KEY", 1);
  list = harness_environment();
  EXPECT_TRUE(has_name(list, "AUTOCOMP_TEST_EXTRA"));
  EXPECT_FALSE(has_name(list, "AUTOCOMP_TEST_API_KEY"));
  for (const char* name : {"AUTOCOMP_TEST_API_KEY", "AUTOCOMP_AUTH_TOKEN", "NKI_TEST_SETTING",
                           "AUTOCOMP_TEST_EXTRA", "AUTOCOMP_HARNESS_ENV"}) {
    ::unsetenv(name);
  }
}

TEST(HarnessEnvironment, ShellFilterAppliesTheSameList) {
  ProcessSpec spec;
  spec.argv = {"sh", "-c", harness_environment_shell_filter() + "env"};
  spec.env = {
      {"OPENAI_API_KEY", "sk-1"}, {"AUTOCOMP_AUTH_TOKEN", "t"},     {"SOME_PASSWORD", "p"},
      {"UNLISTED_VARIABLE", "u"}, {"NEURON_RT_VISIBLE_CORES", "3"}, {"PYTHONPATH", "/opt/lib"},
      {"LC_ALL", "C.UTF-8"},      {"MULTI", "line\nFAKE_LINE=1"}};
  auto run = run_process(spec);
  ASSERT_TRUE(run.ok()) << run.failure().describe();
  ASSERT_TRUE(run->succeeded()) << run->stderr_text;
  const std::string& out = run->stdout_text;
  for (const char* kept :
       {"NEURON_RT_VISIBLE_CORES=3", "PYTHONPATH=/opt/lib", "LC_ALL=C.UTF-8", "PATH="}) {
    EXPECT_NE(out.find(kept), std::string::npos) << kept << " in\n" << out;
  }
  for (const char* gone : {"OPENAI_API_KEY", "AUTOCOMP_AUTH_TOKEN", "SOME_PASSWORD",
                           "UNLISTED_VARIABLE", "MULTI=", "autocomp_v"}) {
    EXPECT_EQ(out.find(gone), std::string::npos) << gone << " in\n" << out;
  }
}

TEST(HarnessEnvironment, ShellFilterKeepsWhatTheFollowingCommandNeedsButNeverASecret) {
  ProcessSpec spec;
  spec.argv = {
      "sh", "-c",
      harness_environment_shell_filter({"SLURM_CONF", "OPENAI_API_KEY", "bad name"}) + "env"};
  spec.env = {{"SLURM_CONF", "/etc/slurm.conf"}, {"OPENAI_API_KEY", "sk-1"}, {"OTHER", "o"}};
  auto run = run_process(spec);
  ASSERT_TRUE(run.ok()) << run.failure().describe();
  ASSERT_TRUE(run->succeeded()) << run->stderr_text;
  EXPECT_NE(run->stdout_text.find("SLURM_CONF=/etc/slurm.conf"), std::string::npos)
      << run->stdout_text;
  EXPECT_EQ(run->stdout_text.find("OPENAI_API_KEY"), std::string::npos) << run->stdout_text;
  EXPECT_EQ(run->stdout_text.find("OTHER="), std::string::npos) << run->stdout_text;
}

}  // namespace
}  // namespace autocomp::core
