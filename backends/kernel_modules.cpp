#include "backends/kernel_modules.hpp"

#include <algorithm>
#include <fstream>
#include <map>
#include <set>
#include <sstream>
#include <system_error>

#include "core/failure.hpp"
#include "core/hash.hpp"

namespace autocomp::backends {
namespace {

namespace fs = std::filesystem;

constexpr int k_max_package_levels = 3;  // `from ...x`: the harness builds at most 3 packages

struct ImportStatement {
  int level = 0;                   // leading dots of a relative import
  std::string module;              // dotted module name ("" for `from . import x`)
  std::vector<std::string> names;  // the names a from-import takes (possible submodules)
};

std::string trim(std::string_view text) {
  const auto first = text.find_first_not_of(" \t\r");
  if (first == std::string_view::npos) {
    return {};
  }
  const auto last = text.find_last_not_of(" \t\r");
  return std::string(text.substr(first, last - first + 1));
}

std::vector<std::string> split(const std::string& text, char separator) {
  std::vector<std::string> out;
  std::string part;
  std::istringstream in(text);
  while (std::getline(in, part, separator)) {
    out.push_back(trim(part));
  }
  return out;
}

// The first word of an `a as b` clause.
std::string name_of(const std::string& clause) {
  return trim(clause.substr(0, clause.find_first_of(" \t")));
}

// Logical lines that start an import statement, with parenthesised and backslash continuations
// joined and comments dropped. A light reading of the source, not a parser: it only has to find
// the modules a kernel may import beside it.
std::vector<std::string> import_lines(const std::string& source) {
  std::vector<std::string> out;
  std::istringstream in(source);
  std::string line;
  std::string pending;
  bool open_paren = false;
  while (std::getline(in, line)) {
    if (const auto hash = line.find('#'); hash != std::string::npos) {
      line.erase(hash);
    }
    std::string text = trim(line);
    if (!open_paren && pending.empty()) {
      if (text.rfind("import ", 0) != 0 && text.rfind("from ", 0) != 0) {
        continue;
      }
    }
    bool continued = !text.empty() && text.back() == '\\';
    if (continued) {
      text.pop_back();
    }
    pending += " " + text;
    if (text.find('(') != std::string::npos) {
      open_paren = true;
    }
    if (text.find(')') != std::string::npos) {
      open_paren = false;
    }
    if (!open_paren && !continued) {
      if (const auto semi = pending.find(';'); semi != std::string::npos) {
        pending.erase(semi);
      }
      out.push_back(trim(pending));
      pending.clear();
    }
  }
  return out;
}

std::vector<ImportStatement> parse_imports(const std::string& source) {
  std::vector<ImportStatement> out;
  for (std::string line : import_lines(source)) {
    std::erase(line, '(');
    std::erase(line, ')');
    if (line.rfind("import ", 0) == 0) {
      for (const auto& clause : split(line.substr(7), ',')) {
        ImportStatement statement;
        statement.module = name_of(clause);
        if (!statement.module.empty()) {
          out.push_back(statement);
        }
      }
      continue;
    }
    const auto at = line.find(" import ");
    if (at == std::string::npos) {
      continue;
    }
    ImportStatement statement;
    std::string module = trim(line.substr(5, at - 5));
    while (!module.empty() && module.front() == '.') {
      ++statement.level;
      module.erase(0, 1);
    }
    statement.module = module;
    for (const auto& clause : split(line.substr(at + 8), ',')) {
      if (auto name = name_of(clause); !name.empty() && name != "*") {
        statement.names.push_back(name);
      }
    }
    out.push_back(statement);
  }
  return out;
}

bool inside(const fs::path& root, const fs::path& path) {
  const auto relative = path.lexically_relative(root);
  return !relative.empty() && *relative.begin() != ".." && relative.is_relative();
}

class Collector {
 public:
  Collector(fs::path root, fs::path home, fs::path kernel, fs::path problem)
      : m_root(std::move(root)),
        m_home(std::move(home)),
        m_kernel(std::move(kernel)),
        m_problem(std::move(problem)) {}

  core::Status visit(const fs::path& file_dir, const std::string& source) {
    for (const auto& statement : parse_imports(source)) {
      fs::path base = file_dir;
      for (int up = 1; up < statement.level; ++up) {
        if (base == m_root) {
          base.clear();
          break;
        }
        base = base.parent_path();
      }
      if (statement.level > 0 && base.empty()) {
        continue;  // above the kernel's folder: the harness cannot resolve it either
      }
      if (statement.level == 0) {
        base = m_home;  // absolute imports resolve from the kernel's folder (on sys.path)
      }
      fs::path at = base;
      bool found = true;
      if (!statement.module.empty()) {
        for (const auto& part : split(statement.module, '.')) {
          found = step(at, part);
          if (!found) {
            break;
          }
        }
      }
      if (!found) {
        continue;
      }
      if (auto status = flush(); !status.ok()) {
        return status;
      }
      // `from pkg import sub` / `from . import sub`: the names may be submodules.
      if (statement.module.empty() || fs::is_directory(at)) {
        for (const auto& name : statement.names) {
          fs::path sub = at;
          if (step(sub, name)) {
            if (auto status = flush(); !status.ok()) {
              return status;
            }
          }
        }
      }
    }
    return core::ok_status();
  }

  std::vector<KernelModule> take() {
    std::vector<KernelModule> out;
    for (auto& [path, source] : m_found) {
      out.push_back({path, std::move(source)});
    }
    return out;
  }

 private:
  // Moves `at` (a folder) to the module `part` inside it: `part.py`, or the package `part/`
  // (queuing its __init__.py). False when neither exists.
  bool step(fs::path& at, const std::string& part) {
    if (part.empty() || !fs::is_directory(at)) {
      return false;
    }
    std::error_code ec;
    const fs::path file = at / (part + ".py");
    if (fs::is_regular_file(file, ec)) {
      queue(file);
      at = at / part;  // a module: nothing below it
      return true;
    }
    const fs::path package = at / part;
    if (fs::is_directory(package, ec)) {
      if (fs::is_regular_file(package / "__init__.py", ec)) {
        queue(package / "__init__.py");
      }
      at = package;
      return true;
    }
    return false;
  }

  void queue(const fs::path& file) {
    std::error_code ec;
    const fs::path real = fs::weakly_canonical(file, ec);
    if (ec || !inside(m_root, real) || real == m_kernel || real == m_problem) {
      return;
    }
    const std::string relative = real.lexically_relative(m_root).generic_string();
    if (m_found.count(relative) || !safe_module_path(relative)) {
      return;
    }
    m_found[relative];  // reserved; read and scanned by flush()
    m_queue.push_back(real);
  }

  core::Status flush() {
    while (!m_queue.empty()) {
      const fs::path file = m_queue.back();
      m_queue.pop_back();
      const std::string relative = file.lexically_relative(m_root).generic_string();
      if (m_found.size() > k_max_kernel_modules) {
        return core::make_failure(core::FailureKind::invalid_argument, "kernel_modules",
                                  "the kernel imports more than " +
                                      std::to_string(k_max_kernel_modules) +
                                      " local modules; evaluate a smaller set of files");
      }
      std::error_code ec;
      const auto size = fs::file_size(file, ec);
      if (ec || size + m_bytes > k_max_kernel_module_bytes) {
        return core::make_failure(core::FailureKind::invalid_argument, "kernel_modules",
                                  ec ? "cannot read the local module " + file.string()
                                     : "the kernel's local modules exceed " +
                                           std::to_string(k_max_kernel_module_bytes / 1024) +
                                           " KiB together (at " + relative + ")");
      }
      std::ifstream in(file, std::ios::binary);
      std::ostringstream text;
      text << in.rdbuf();
      if (!in.good() && !in.eof()) {
        return core::make_failure(core::FailureKind::invalid_argument, "kernel_modules",
                                  "cannot read the local module " + file.string());
      }
      m_bytes += size;
      m_found[relative] = text.str();
      if (auto status = visit(file.parent_path(), m_found[relative]); !status.ok()) {
        return status;
      }
    }
    return core::ok_status();
  }

  fs::path m_root;
  fs::path m_home;
  fs::path m_kernel;
  fs::path m_problem;
  std::map<std::string, std::string> m_found;
  std::vector<fs::path> m_queue;
  std::uintmax_t m_bytes = 0;
};

}  // namespace

core::Result<KernelFiles> collect_kernel_modules(const fs::path& kernel_path,
                                                 const std::string& kernel_source,
                                                 const fs::path& problem_path) {
  std::error_code ec;
  const fs::path kernel = fs::weakly_canonical(kernel_path, ec);
  if (ec || kernel.parent_path().empty()) {
    return KernelFiles{};
  }
  const fs::path problem =
      problem_path.empty() ? fs::path() : fs::weakly_canonical(problem_path, ec);
  const fs::path home = kernel.parent_path();
  int levels = 0;
  for (const auto& statement : parse_imports(kernel_source)) {
    levels = std::max(levels, statement.level);
  }
  fs::path root = home;
  for (int up = 1; up < std::min(levels, k_max_package_levels) && root.has_relative_path(); ++up) {
    root = root.parent_path();
  }
  KernelFiles files;
  files.kernel_folder = home.lexically_relative(root).generic_string();
  if (files.kernel_folder == ".") {
    files.kernel_folder.clear();
  }
  if (!files.kernel_folder.empty() && !safe_kernel_folder(files.kernel_folder)) {
    return core::make_failure(core::FailureKind::invalid_argument, "kernel_modules",
                              "the kernel's folder '" + files.kernel_folder +
                                  "' (below the package its relative imports reach) is not a "
                                  "plain folder name");
  }
  Collector collector(root, home, kernel, ec ? problem_path : problem);
  if (auto status = collector.visit(home, kernel_source); !status.ok()) {
    return status.failure();
  }
  files.modules = collector.take();
  return files;
}

bool safe_kernel_folder(const std::string& folder) {
  const auto parts = split(folder, '/');
  if (folder.empty() || parts.size() > 3) {
    return false;
  }
  for (const auto& part : parts) {
    if (!safe_module_path(part + ".py") || part.find('.') != std::string::npos) {
      return false;
    }
  }
  return true;
}

bool safe_module_path(const std::string& path) {
  if (path.size() < 4 || path.size() > 200 || path.substr(path.size() - 3) != ".py") {
    return false;
  }
  const auto parts = split(path, '/');
  if (parts.empty() || parts.size() > 4) {
    return false;
  }
  for (const auto& part : parts) {
    if (part.empty() || part.front() == '.' || part.front() == '-') {
      return false;
    }
    for (char c : part) {
      const bool plain = (c >= 'a' && c <= 'z') || (c >= 'A' && c <= 'Z') ||
                         (c >= '0' && c <= '9') || c == '_' || c == '-' || c == '.';
      if (!plain) {
        return false;
      }
    }
  }
  return true;
}

std::string kernel_modules_digest(const std::vector<KernelModule>& modules,
                                  const std::string& kernel_folder) {
  if (modules.empty() && kernel_folder.empty()) {
    return {};
  }
  std::vector<const KernelModule*> sorted;
  for (const auto& module : modules) {
    sorted.push_back(&module);
  }
  std::sort(sorted.begin(), sorted.end(),
            [](const KernelModule* a, const KernelModule* b) { return a->path < b->path; });
  std::string text = "folder " + kernel_folder + "\n";
  for (const auto* module : sorted) {
    text += module->path + "\n" + core::source_key(module->source) + "\n";
  }
  return core::sha256_hex(text);
}

}  // namespace autocomp::backends
