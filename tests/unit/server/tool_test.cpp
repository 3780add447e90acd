#include "server/tool.hpp"

#include <gtest/gtest.h>

namespace autocomp::server {
namespace {

ToolDef valid_tool(const std::string& name) {
  ToolDef tool;
  tool.name = name;
  tool.description = "a tool";
  tool.handler = [](const nlohmann::json&, ToolContext&) { return ToolResult{}; };
  return tool;
}

TEST(ToolRegistry, RejectsProgrammerErrors) {
  ToolRegistry tools;
  tools.add(valid_tool("verify_kernel"));
  EXPECT_THROW(tools.add(valid_tool("verify_kernel")), std::invalid_argument);
  EXPECT_THROW(tools.add(valid_tool("has space")), std::invalid_argument);
  EXPECT_THROW(tools.add(valid_tool("")), std::invalid_argument);
  auto no_description = valid_tool("x");
  no_description.description.clear();
  EXPECT_THROW(tools.add(no_description), std::invalid_argument);
  auto bad_schema = valid_tool("y");
  bad_schema.input_schema = {{"type", "string"}};
  EXPECT_THROW(tools.add(bad_schema), std::invalid_argument);
  EXPECT_NE(tools.find("verify_kernel"), nullptr);
  EXPECT_EQ(tools.find("nope"), nullptr);
}

TEST(UriTemplate, ExtractsVariables) {
  auto vars = match_uri_template("autocomp://runs/{run}/candidates/{id}",
                                 "autocomp://runs/r1/candidates/abc");
  ASSERT_TRUE(vars);
  EXPECT_EQ((*vars)["run"], "r1");
  EXPECT_EQ((*vars)["id"], "abc");
  EXPECT_FALSE(match_uri_template("test://template/{id}/data", "test://template//data"));
  EXPECT_FALSE(match_uri_template("test://template/{id}/data", "test://template/1/2/data"));
  EXPECT_FALSE(match_uri_template("test://template/{id}/data", "test://other/1/data"));
  EXPECT_EQ((*match_uri_template("test://template/{id}/data", "test://template/123/data"))["id"],
            "123");
}

TEST(ToolContext, ProgressIsMonotonicAndRequestWithoutChannelFails) {
  ToolContext context;
  std::vector<double> seen;
  context.progress_sink = [&](double done, std::optional<double>, const std::string&) {
    seen.push_back(done);
  };
  context.progress(1, 10);
  context.progress(0.5, 10);
  context.progress(3, 10);
  EXPECT_EQ(seen, (std::vector<double>{1, 3}));
  auto answer = context.request("roots/list", nlohmann::json::object());
  ASSERT_FALSE(answer.ok());
  EXPECT_EQ(answer.failure().kind, core::FailureKind::unavailable);
  EXPECT_FALSE(context.create_message({}).ok());
  EXPECT_FALSE(context.working_dir().empty());
}

TEST(ToolResults, ErrorHelpersCarryTheMessage) {
  auto error = tool_error("kernel file not found: k.py");
  EXPECT_TRUE(error.is_error);
  EXPECT_EQ(error.structured["error"], "kernel file not found: k.py");
  auto failure = tool_failure(core::Failure{core::FailureKind::compile_error, "verify", "bad", 12});
  EXPECT_EQ(failure.structured["kind"], "compile_error");
  EXPECT_EQ(failure.structured["line"], 12);
}

TEST(LogLevels, RoundTrip) {
  EXPECT_EQ(log_level_from_string("warning"), LogLevel::warning);
  EXPECT_EQ(to_string(LogLevel::emergency), "emergency");
  EXPECT_FALSE(log_level_from_string("verbose"));
}

}  // namespace
}  // namespace autocomp::server
