#include "backends/kernel_modules.hpp"

#include <gtest/gtest.h>
#include <unistd.h>

#include <filesystem>
#include <fstream>
#include <string>

namespace autocomp::backends {
namespace {

namespace fs = std::filesystem;

class KernelModulesTest : public ::testing::Test {
 protected:
  void SetUp() override {
    m_dir = fs::temp_directory_path() / ("kernel_modules_test_" + std::to_string(::getpid()));
    fs::remove_all(m_dir);
    fs::create_directories(m_dir);
  }
  void TearDown() override { fs::remove_all(m_dir); }

  std::string write(const std::string& name, const std::string& text) {
    fs::create_directories((m_dir / name).parent_path());
    std::ofstream(m_dir / name, std::ios::binary | std::ios::trunc) << text;
    return text;
  }

  std::vector<std::string> collect(const std::string& kernel) {
    auto source = write(kernel, m_kernel_text);
    auto found = collect_kernel_modules(m_dir / kernel, source, m_dir / "problem.py");
    EXPECT_TRUE(found.ok()) << (found.ok() ? "" : found.failure().message);
    std::vector<std::string> paths;
    for (const auto& module : found.ok() ? found.value().modules : std::vector<KernelModule>{}) {
      paths.push_back(module.path);
    }
    m_folder = found.ok() ? found.value().kernel_folder : "?";
    return paths;
  }

  fs::path m_dir;
  std::string m_kernel_text;
  std::string m_folder;
};

TEST_F(KernelModulesTest, CollectsSiblingAndTransitiveImportsButNeverTheProblem) {
  write("problem.py", "import numpy as np\n");
  write("common.py", "import numpy as np\nfrom helpers import twice\n");
  write("helpers.py", "def twice(x):\n    return 2 * x\n");
  write("unused.py", "X = 1\n");
  m_kernel_text =
      "import numpy as np\nimport neuronxcc.nki as nki\nimport common\n"
      "from problem import inputs\nimport problem\n";
  EXPECT_EQ(collect("kernel.py"), (std::vector<std::string>{"common.py", "helpers.py"}));
}

TEST_F(KernelModulesTest, CollectsPackageRelativeAndParenthesisedImports) {
  write("__init__.py", "");
  write("mx_utils.py", "from .consts import (\n    A,\n    B,\n)\n");
  write("consts.py", "A = 1\nB = 2\n");
  write("sub/__init__.py", "");
  write("sub/tile.py", "T = 128\n");
  m_kernel_text =
      "from .mx_utils import A  # helpers\nfrom . import consts\nfrom sub import tile\n";
  EXPECT_EQ(collect("kernel.py"), (std::vector<std::string>{"consts.py", "mx_utils.py",
                                                            "sub/__init__.py", "sub/tile.py"}));
}

TEST_F(KernelModulesTest, RelativeImportsAboveTheKernelMoveTheRootUp) {
  write("problem.py", "import numpy as np\n");
  write("util/common_types.py", "from .. import problem\nNORM = 1\n");
  write("rmsnorm/constants.py", "EPS = 1e-6\n");
  write("rmsnorm/local.py", "X = 1\n");
  m_kernel_text =
      "from ..util.common_types import NORM\nfrom .constants import EPS\nimport local\n";
  EXPECT_EQ(collect("rmsnorm/kernel.py"),
            (std::vector<std::string>{"rmsnorm/constants.py", "rmsnorm/local.py",
                                      "util/common_types.py"}));
  EXPECT_EQ(m_folder, "rmsnorm");
  m_kernel_text = "from .constants import EPS\n";
  EXPECT_EQ(collect("rmsnorm/kernel.py"), (std::vector<std::string>{"constants.py"}));
  EXPECT_EQ(m_folder, "");
}

TEST_F(KernelModulesTest, NeverLeavesTheKernelsPackage) {
  write("outside.py", "X = 1\n");
  fs::create_directories(m_dir / "inner");
  fs::create_symlink("/etc/hostname", m_dir / "inner/link.py");
  m_kernel_text = "import link\nimport outside\nfrom .. import outside as o\n";
  // `from ..` makes m_dir the root: outside.py is inside it, the link's target is not.
  EXPECT_EQ(collect("inner/kernel.py"), (std::vector<std::string>{"outside.py"}));
  m_kernel_text = "import link\nimport outside\n";
  EXPECT_TRUE(collect("inner/kernel.py").empty());
}

TEST_F(KernelModulesTest, RefusesMoreModulesThanTheBound) {
  std::string imports;
  for (std::size_t i = 0; i <= k_max_kernel_modules; ++i) {
    write("m" + std::to_string(i) + ".py", "X = 1\n");
    imports += "import m" + std::to_string(i) + "\n";
  }
  write("kernel.py", imports);
  auto found = collect_kernel_modules(m_dir / "kernel.py", imports, m_dir / "problem.py");
  ASSERT_FALSE(found.ok());
  EXPECT_NE(found.failure().message.find("more than"), std::string::npos);
}

TEST(KernelModulePaths, OnlyPlainRelativePythonPaths) {
  EXPECT_TRUE(safe_module_path("common.py"));
  EXPECT_TRUE(safe_module_path("pkg/__init__.py"));
  EXPECT_FALSE(safe_module_path("../common.py"));
  EXPECT_FALSE(safe_module_path("/etc/common.py"));
  EXPECT_FALSE(safe_module_path("pkg/.hidden.py"));
  EXPECT_FALSE(safe_module_path("common.sh"));
  EXPECT_FALSE(safe_module_path("a b.py"));
}

TEST(KernelModulePaths, KernelFoldersArePlainNames) {
  EXPECT_TRUE(safe_kernel_folder("rmsnorm"));
  EXPECT_TRUE(safe_kernel_folder("a/b"));
  EXPECT_FALSE(safe_kernel_folder(""));
  EXPECT_FALSE(safe_kernel_folder(".."));
  EXPECT_FALSE(safe_kernel_folder("a/../b"));
  EXPECT_FALSE(safe_kernel_folder("/abs"));
}

TEST(KernelModulesDigest, ChangesWithAnyModuleText) {
  EXPECT_EQ(kernel_modules_digest({}), "");
  const auto a = kernel_modules_digest({{"common.py", "X = 1\n"}});
  EXPECT_NE(a, kernel_modules_digest({{"common.py", "X = 2\n"}}));
  EXPECT_NE(a, kernel_modules_digest({{"other.py", "X = 1\n"}}));
  EXPECT_NE(a, kernel_modules_digest({{"common.py", "X = 1\n"}}, "sub"));
  EXPECT_EQ(kernel_modules_digest({{"b.py", "1"}, {"a.py", "2"}}),
            kernel_modules_digest({{"a.py", "2"}, {"b.py", "1"}}));
}

}  // namespace
}  // namespace autocomp::backends
