#pragma once

#include <cstddef>
#include <cstdint>
#include <filesystem>
#include <string>
#include <vector>

#include "backends/backend.hpp"
#include "core/result.hpp"

namespace autocomp::backends {

// Bounds on what a kernel may bring along: a kernel with more or bigger local modules is refused
// with a clear error rather than shipped.
inline constexpr std::size_t k_max_kernel_modules = 64;
inline constexpr std::uintmax_t k_max_kernel_module_bytes = 4 * 1024 * 1024;  // all together

// What a kernel brings along: its local modules (paths relative to the root) and its own folder
// relative to that root (EvalRequest::kernel_modules, kernel_folder).
struct KernelFiles {
  std::vector<KernelModule> modules;
  std::string kernel_folder;
};

// The local Python modules `kernel_source` (the text of the file at `kernel_path`) imports,
// transitively: `.py` files that `import m`, `from m import x`, `from .m import x`,
// `from ..util import f`, `from . import m`, `import pkg.m` name (packages' __init__.py
// included). The root is the kernel's folder, or the ancestor its deepest package-relative
// import reaches (at most 2 up); absolute imports resolve from the kernel's folder. Never the
// problem file (`problem_path`, compared after resolving links) nor the kernel file itself,
// never a file outside the root. Imports that name no local file (numpy, nki) are skipped.
// Sorted by path. invalid_argument when the bounds above are exceeded or a module cannot be read.
core::Result<KernelFiles> collect_kernel_modules(const std::filesystem::path& kernel_path,
                                                 const std::string& kernel_source,
                                                 const std::filesystem::path& problem_path);

// Whether `path` may be written beside a kernel: relative, '/'-separated plain names (letters,
// digits, '_', '-', '.'; none starting with '.'), at most 4 levels, ending in ".py".
bool safe_module_path(const std::string& path);

// Whether `folder` may hold the kernel below the work folder: 1 to 3 plain names, '/'-separated.
bool safe_kernel_folder(const std::string& folder);

// A digest of the modules' paths and texts and of the kernel's folder ("" for neither):
// evaluation keys include it so an edited helper module is never served a stored result of the
// old one.
std::string kernel_modules_digest(const std::vector<KernelModule>& modules,
                                  const std::string& kernel_folder = "");

}  // namespace autocomp::backends
