#include "search/prompts/code_extract.hpp"

#include <gtest/gtest.h>

namespace autocomp::search::prompts {
namespace {

constexpr const char* k_code = "import nki.language as nl\n\n\ndef kernel(a):\n    return a\n";

TEST(CodeExtractTest, SinglePythonFence) {
  auto code = extract_kernel_code(
      std::string("Here is the kernel:\n```python\n") + k_code + "```\nIt hoists the loads.",
      "kernel");
  ASSERT_TRUE(code.ok()) << code.failure().describe();
  EXPECT_EQ(code.value(), k_code);
}

TEST(CodeExtractTest, PyAndBareFences) {
  EXPECT_EQ(extract_kernel_code(std::string("```py\n") + k_code + "```", "kernel").value(), k_code);
  EXPECT_EQ(extract_kernel_code(std::string("```\n") + k_code + "```", "kernel").value(), k_code);
  EXPECT_EQ(extract_kernel_code(std::string("~~~python\n") + k_code + "~~~", "kernel").value(),
            k_code);
}

TEST(CodeExtractTest, PicksTheBlockDefiningTheKernelOverLongerOnes) {
  const std::string helper =
      "```python\n# a long unrelated helper\ndef helper(x):\n" + std::string(40, ' ') +
      "\n    return x + 1  # padding padding padding padding padding padding padding\n"
      "    # more padding to make this block the longest one of the reply\n```\n";
  auto code =
      extract_kernel_code("First:\n" + helper + "Then:\n```python\n" + k_code + "```\n", "kernel");
  ASSERT_TRUE(code.ok());
  EXPECT_EQ(code.value(), k_code);
}

TEST(CodeExtractTest, WithoutANameTheLongestCodeBlockWins) {
  auto code = extract_kernel_code(std::string("```python\ndef a():\n    pass\n```\n```python\n") +
                                  k_code + "```\n");
  ASSERT_TRUE(code.ok());
  EXPECT_EQ(code.value(), k_code);
}

TEST(CodeExtractTest, NonPythonBlocksAreIgnored) {
  auto code = extract_kernel_code(
      std::string("```bash\npython run.py\n```\n```python\n") + k_code + "```\n", "kernel");
  ASSERT_TRUE(code.ok());
  EXPECT_EQ(code.value(), k_code);
}

TEST(CodeExtractTest, UnfencedCodeWithProseAroundIt) {
  const std::string reply = std::string("Here is the optimized kernel.\n\n") + k_code +
                            "\nThis version keeps tiles in SBUF and should be faster.\n";
  auto code = extract_kernel_code(reply, "kernel");
  ASSERT_TRUE(code.ok()) << code.failure().describe();
  EXPECT_EQ(code.value(), k_code);
}

TEST(CodeExtractTest, DecoratorsAndCommentsAtTheTopAreKept) {
  const std::string source =
      "# tuned kernel\nimport nki\n\n@nki.jit\ndef kernel(a):\n    return a\n";
  auto code = extract_kernel_code("Sure!\n" + source, "kernel");
  ASSERT_TRUE(code.ok());
  EXPECT_EQ(code.value(), source);
}

TEST(CodeExtractTest, CrlfAndIndentedFencesAreNormalized) {
  auto code = extract_kernel_code(
      "Answer:\r\n  ```python\r\n  def kernel(a):\r\n      return a   \r\n  ```\r\n", "kernel");
  ASSERT_TRUE(code.ok());
  EXPECT_EQ(code.value(), "def kernel(a):\n    return a\n");
}

TEST(CodeExtractTest, UnterminatedFenceStillYieldsTheCode) {
  auto code = extract_kernel_code(std::string("```python\n") + k_code, "kernel");
  ASSERT_TRUE(code.ok());
  EXPECT_EQ(code.value(), k_code);
}

TEST(CodeExtractTest, ReasoningBlocksAreIgnored) {
  auto code = extract_kernel_code(
      std::string("<think>maybe ```python\ndef kernel(x):\n    wrong\n```</think>\n```python\n") +
          k_code + "```",
      "kernel");
  ASSERT_TRUE(code.ok());
  EXPECT_EQ(code.value(), k_code);
}

TEST(CodeExtractTest, NoPlausibleKernelIsAFailure) {
  auto prose = extract_kernel_code("I cannot help with that.", "kernel");
  ASSERT_FALSE(prose.ok());
  EXPECT_EQ(prose.failure().kind, core::FailureKind::invalid_argument);
  EXPECT_EQ(prose.failure().stage, "extract");
  EXPECT_FALSE(extract_kernel_code("", "kernel").ok());
  auto wrong_name = extract_kernel_code("```python\ndef other(a):\n    return a\n```", "kernel");
  ASSERT_FALSE(wrong_name.ok());
  EXPECT_NE(wrong_name.failure().message.find("'kernel'"), std::string::npos);
  EXPECT_FALSE(extract_kernel_code("```python\nx = 1\n```").ok());
}

TEST(CodeExtractTest, PlanExtractionStripsBoilerplateAndBoundsLength) {
  EXPECT_EQ(extract_plan("<think>long musing</think>\nSure! Here is my plan:\n\n"
                         "[hoist_loads] Move the rhs load out of the k loop.\r\n"),
            "[hoist_loads] Move the rhs load out of the k loop.");
  EXPECT_EQ(extract_plan("musing</think>The plan."), "The plan.");
  const std::string long_plan = std::string(3000, 'a') + "\n" + std::string(3000, 'b');
  const auto bounded = extract_plan(long_plan, 4000);
  EXPECT_LE(bounded.size(), 4000u + 20u);
  EXPECT_NE(bounded.find("[plan truncated]"), std::string::npos);
  EXPECT_EQ(extract_plan("   \n  "), "");
}

TEST(CodeExtractTest, DetectsKernelFunctionAndSignature) {
  const std::string source =
      "import nki\n\ndef helper(x):\n    return x\n\n@nki.jit\ndef my_kernel(a,\n              "
      "b):\n"
      "    return helper(a)\n";
  EXPECT_EQ(detect_kernel_function(source), "my_kernel");
  EXPECT_EQ(function_signature(source, "my_kernel"), "def my_kernel(a, b):");
  EXPECT_EQ(detect_kernel_function("def only(x):\n    pass\n"), "only");
  EXPECT_EQ(detect_kernel_function("x = 1\n"), "");
}

TEST(CodeExtractTest, DetectsInstructionsWhateverTheImportAlias) {
  const std::string source =
      "import neuronxcc.nki.language as lang\nfrom neuronxcc.nki import isa as I\n"
      "import nki\n"
      "def k(a):\n"
      "    t = lang.load(a)  # nl.fake_in_comment(\n"
      "    p = I.nc_matmul(t, t)\n"
      "    q = nki.isa.activation(op=lang.exp, data=p)\n"
      "    x.nl.load(t)\n"
      "    return lang.store(a, value=q)\n";
  EXPECT_EQ(detect_instructions(source),
            (std::vector<std::string>{"nisa.activation", "nisa.nc_matmul", "nl.load", "nl.store"}));
}

}  // namespace
}  // namespace autocomp::search::prompts
