#include <gtest/gtest.h>

#include <cstdlib>
#include <filesystem>
#include <fstream>
#include <sstream>
#include <string>

#include "search/autotune/knobs.hpp"

namespace autocomp::search::autotune {
namespace {

TEST(AutotuneKnobs, ReadsModuleLevelAndIndentedKnobsOfEveryLiteralKind) {
  const std::string source =
      "import nki\n"
      "# autocomp: knob TILE_N = [512, 256, 128]\n"
      "TILE_N = 256\n"
      "# autocomp: knob SCALE = [0.5, 1.0, 2e-3]\n"
      "SCALE = 1.0  # how much\n"
      "\n"
      "def kernel(x):\n"
      "    # autocomp: knob ENGINE = [\"vector\", 'scalar']\n"
      "    ENGINE = 'scalar'\n"
      "    #autocomp: knob HOIST=[False,True]\n"
      "    HOIST = False\n"
      "    return x\n";
  auto knobs = parse_knobs(source);
  ASSERT_EQ(knobs.size(), 4u);

  EXPECT_EQ(knobs[0].name, "TILE_N");
  EXPECT_EQ(knobs[0].values, (std::vector<std::string>{"512", "256", "128"}));
  EXPECT_EQ(knobs[0].current, "256");
  EXPECT_EQ(knobs[0].current_index, 1u);
  EXPECT_EQ(knobs[0].line, 2u);

  EXPECT_EQ(knobs[1].name, "SCALE");
  EXPECT_EQ(knobs[1].values, (std::vector<std::string>{"0.5", "1.0", "2e-3"}));
  EXPECT_EQ(knobs[1].current_index, 1u);

  EXPECT_EQ(knobs[2].name, "ENGINE");
  EXPECT_EQ(knobs[2].values, (std::vector<std::string>{"\"vector\"", "'scalar'"}));
  EXPECT_EQ(knobs[2].current, "'scalar'");
  EXPECT_EQ(knobs[2].current_index, 1u);

  EXPECT_EQ(knobs[3].name, "HOIST");
  EXPECT_EQ(knobs[3].values, (std::vector<std::string>{"False", "True"}));
  EXPECT_EQ(knobs[3].current_index, 0u);
}

TEST(AutotuneKnobs, EqualLiteralsWrittenDifferentlyMatch) {
  auto knobs = parse_knobs(
      "# autocomp: knob A = ['x', 1_000, 2.50]\nA = \"x\"\n"
      "# autocomp: knob B = [1_000, 7]\nB = 1000\n"
      "# autocomp: knob C = [2.50, 1]\nC = 2.5\n");
  ASSERT_EQ(knobs.size(), 3u);
  EXPECT_EQ(knobs[0].current_index, 0u);
  EXPECT_EQ(knobs[1].current_index, 0u);
  EXPECT_EQ(knobs[2].current_index, 0u);
}

TEST(AutotuneKnobs, ValueNotDeclaredLeavesNoCurrentIndexAndDuplicatesAreKeptOnce) {
  auto knobs = parse_knobs("# autocomp: knob N = [1, 2, 2, 1]\nN = 3\n");
  ASSERT_EQ(knobs.size(), 1u);
  EXPECT_EQ(knobs[0].values, (std::vector<std::string>{"1", "2"}));
  EXPECT_FALSE(knobs[0].current_index.has_value());
}

TEST(AutotuneKnobs, StringsMayHoldCommasBracketsAndHashes) {
  auto knobs = parse_knobs("# autocomp: knob M = [\"a, b]\", '# c', \"d\\\"e\"]\nM = '# c'\n");
  ASSERT_EQ(knobs.size(), 1u);
  EXPECT_EQ(knobs[0].values, (std::vector<std::string>{"\"a, b]\"", "'# c'", "\"d\\\"e\""}));
  EXPECT_EQ(knobs[0].current_index, 1u);
}

TEST(AutotuneKnobs, MalformedDeclarationsAreIgnoredWithoutFailing) {
  const char* sources[] = {
      "# autocomp: knob N = [1, 2\nN = 1\n",            // unclosed list
      "# autocomp: knob N = 1, 2\nN = 1\n",             // no list
      "# autocomp: knob N = []\nN = 1\n",               // nothing to try
      "# autocomp: knob N = [1, foo]\nN = 1\n",         // not a literal
      "# autocomp: knob N = [1 2]\nN = 1\n",            // missing comma
      "# autocomp: knob = [1, 2]\nN = 1\n",             // no name
      "# autocomp: knobN = [1, 2]\nN = 1\n",            // no space after knob
      "# autocomp: knob N = ['a, 1]\nN = 1\n",          // unterminated string
      "# autocomp: knob N = [1, 2] trailing\nN = 1\n",  // junk after the list
      "# autocomp: knob N = [1, 2]",                    // no next line at all
      "# autocomp: knob N = [1, 2]\n",                  // next line empty
      "# autocomp:",
      "",
  };
  for (const char* source : sources) {
    EXPECT_TRUE(parse_knobs(source).empty()) << source;
  }
}

TEST(AutotuneKnobs, EveryPrefixOfADeclarationIsReadWithoutFailing) {
  const std::string source =
      "# autocomp: knob M = [\"a, b]\", 'c\\'', 1.5e3, -2, True]\nM = 'c\\''  # x\n";
  for (std::size_t n = 0; n <= source.size(); ++n) {
    auto knobs = parse_knobs(source.substr(0, n));
    if (!knobs.empty()) {
      EXPECT_EQ(knobs[0].values.size(), 5u);
    }
  }
  auto knobs = parse_knobs(source);
  ASSERT_EQ(knobs.size(), 1u);
  EXPECT_EQ(knobs[0].current_index, 1u);
}

TEST(AutotuneKnobs, DeclarationNotFollowedByItsAssignmentIsIgnored) {
  const char* sources[] = {
      "# autocomp: knob N = [1, 2]\nM = 1\n",             // another name
      "# autocomp: knob N = [1, 2]\n\nN = 1\n",           // blank line between
      "# autocomp: knob N = [1, 2]\nN == 1\n",            // a comparison
      "# autocomp: knob N = [1, 2]\nN = 1 * 2\n",         // an expression
      "# autocomp: knob N = [1, 2]\nN = foo\n",           // a name
      "# autocomp: knob N = [1, 2]\nNX = 1\n",            // a longer name
      "# autocomp: knob N = [1, 2]\nfor N in x:\n",       // not an assignment
      "# autocomp: knob N = [1, 2]\n# comment\nN = 1\n",  // comment between
  };
  for (const char* source : sources) {
    EXPECT_TRUE(parse_knobs(source).empty()) << source;
  }
}

TEST(AutotuneKnobs, AnnotatedAssignmentsAndCrlfLineEndsAreRead) {
  const std::string source = "# autocomp: knob N = [1, 2]\r\nN: int = 2\r\nx = N\r\n";
  auto knobs = parse_knobs(source);
  ASSERT_EQ(knobs.size(), 1u);
  EXPECT_EQ(knobs[0].current, "2");
  auto edited = set_knob(source, knobs[0], "1");
  ASSERT_TRUE(edited.ok());
  EXPECT_EQ(edited.value(), "# autocomp: knob N = [1, 2]\r\nN: int = 1\r\nx = N\r\n");
}

TEST(AutotuneKnobs, RewritingChangesOnlyTheRightHandSide) {
  const std::string source =
      "# autocomp: knob TILE_N = [512, 256, 128]\n"
      "TILE_N   =   512   # rows\n"
      "def k():\n"
      "    # autocomp: knob E = ['a', \"bb\"]\n"
      "    E = 'a'\n"
      "    return TILE_N, E\n";
  auto knobs = parse_knobs(source);
  ASSERT_EQ(knobs.size(), 2u);
  auto first = set_knob(source, knobs[0], "128");
  ASSERT_TRUE(first.ok());
  EXPECT_EQ(first.value(),
            "# autocomp: knob TILE_N = [512, 256, 128]\n"
            "TILE_N   =   128   # rows\n"
            "def k():\n"
            "    # autocomp: knob E = ['a', \"bb\"]\n"
            "    E = 'a'\n"
            "    return TILE_N, E\n");
  auto second = set_knob(source, knobs[1], "\"bb\"");
  ASSERT_TRUE(second.ok());
  EXPECT_EQ(second.value(),
            "# autocomp: knob TILE_N = [512, 256, 128]\n"
            "TILE_N   =   512   # rows\n"
            "def k():\n"
            "    # autocomp: knob E = ['a', \"bb\"]\n"
            "    E = \"bb\"\n"
            "    return TILE_N, E\n");
  // The rewritten source still declares both knobs, so a later round can tune again.
  auto again = parse_knobs(second.value());
  ASSERT_EQ(again.size(), 2u);
  EXPECT_EQ(again[1].current_index, 1u);
}

TEST(AutotuneKnobs, RewritingRefusesAKnobFromAnotherSourceOrANonLiteral) {
  const std::string source = "# autocomp: knob N = [1, 2]\nN = 1\n";
  auto knobs = parse_knobs(source);
  ASSERT_EQ(knobs.size(), 1u);
  EXPECT_FALSE(set_knob("x = 0\n", knobs[0], "2").ok());
  EXPECT_FALSE(set_knob(source, knobs[0], "2; import os").ok());
}

std::string read_text(const std::filesystem::path& path) {
  std::ifstream in(path, std::ios::binary);
  std::ostringstream text;
  text << in.rdbuf();
  return text.str();
}

bool python_parses(const std::string& source, const std::filesystem::path& file) {
  std::ofstream(file, std::ios::binary) << source;
  std::string command = std::string(AUTOCOMP_PYTHON) +
                        " -c \"import ast,sys; ast.parse(open(sys.argv[1]).read())\" '" +
                        file.string() + "' 2>/dev/null";
  return std::system(command.c_str()) == 0;
}

TEST(AutotuneKnobs, EveryValueOfTheTunableSeedGivesValidPython) {
  auto seed_path = std::filesystem::path(AUTOCOMP_SOURCE_DIR) / "seeds/rmsnorm/tunable.py";
  std::string source = read_text(seed_path);
  auto knobs = parse_knobs(source);
  ASSERT_GE(knobs.size(), 1u);
  auto file =
      std::filesystem::temp_directory_path() /
      ("autotune_seed_" + std::to_string(::testing::UnitTest::GetInstance()->random_seed()) + "_" +
       std::to_string(reinterpret_cast<std::uintptr_t>(&source)) + ".py");
  for (const auto& knob : knobs) {
    ASSERT_TRUE(knob.current_index.has_value()) << knob.name;
    ASSERT_GE(knob.values.size(), 2u) << knob.name;
    for (const auto& value : knob.values) {
      auto edited = set_knob(source, knob, value);
      ASSERT_TRUE(edited.ok());
      EXPECT_TRUE(python_parses(edited.value(), file)) << knob.name << " = " << value;
    }
  }
  std::filesystem::remove(file);
}

}  // namespace
}  // namespace autocomp::search::autotune
