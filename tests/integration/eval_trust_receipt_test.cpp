// The stored record of an evaluation carries its whole receipt (backend, host, job, node, input
// signature, ...), readable through autocomp://evaluations/{id}; tool calls use the interactive
// lane and a cached answer is keyed by the input signature.
#include <gtest/gtest.h>
#include <unistd.h>

#include <filesystem>
#include <fstream>
#include <string>

#include "server/tool.hpp"
#include "support/add_workload.hpp"
#include "tools/product_tools.hpp"

namespace autocomp::tools {
namespace {

namespace fs = std::filesystem;
using nlohmann::json;

TEST(EvalTrustReceipt, TheEvaluationResourceHoldsTheWholeReceipt) {
  const fs::path dir =
      fs::temp_directory_path() / ("eval_trust_receipt_" + std::to_string(::getpid()));
  fs::create_directories(dir);
  std::ofstream(dir / "problem.py") << testing::k_add_problem;
  std::ofstream(dir / "add.py") << testing::k_add_fast_kernel;
  server::Registries registries;
  ProductToolsOptions options;
  options.db_path = (dir / "store.db").string();
  register_product_tools(registries, options);

  const server::ToolDef* verify = registries.tools.find("verify_kernel");
  ASSERT_NE(verify, nullptr);
  server::ToolContext context;
  context.working_dir_sink = [&dir] { return dir.string(); };
  auto result = verify->handler(json{{"kernel", "add.py"}, {"problem", "problem.py"}}, context);
  ASSERT_FALSE(result.is_error) << result.structured.dump();
  const std::string uri = result.structured.at("details");

  auto match = registries.resources.match(uri);
  ASSERT_TRUE(match.has_value()) << uri;
  auto contents = match->read(uri, match->variables);
  ASSERT_TRUE(contents.ok()) << contents.failure().describe();
  const json body = json::parse(contents.value().at(0).at("text").get<std::string>());
  ASSERT_TRUE(body.contains("receipt")) << body.dump(2);
  const json& receipt = body.at("receipt");
  EXPECT_EQ(receipt.at("backend"), "sim");
  EXPECT_EQ(receipt.at("host"), "localhost");
  EXPECT_EQ(receipt.at("device"), "sim");
  EXPECT_EQ(receipt.at("target"), "trn2");
  EXPECT_TRUE(receipt.contains("job"));
  EXPECT_TRUE(receipt.contains("node"));
  EXPECT_FALSE(receipt.at("harness_version").get<std::string>().empty());
  EXPECT_EQ(receipt.at("input_signature"), "a:float32[128,512];b:float32[128,512]");
  EXPECT_EQ(body.at("input_signature"), "a:float32[128,512];b:float32[128,512]");
  fs::remove_all(dir);
}

}  // namespace
}  // namespace autocomp::tools
