#include "tools/kernel_files.hpp"

#include <unistd.h>

#include <cstdio>
#include <filesystem>
#include <fstream>
#include <sstream>
#include <system_error>

namespace autocomp::tools {
namespace fs = std::filesystem;
namespace {

core::Failure bad_argument(const std::string& argument_name, const std::string& message) {
  return core::make_failure(core::FailureKind::invalid_argument, "input",
                            "'" + argument_name + "': " + message);
}

bool is_valid_utf8(const std::string& text) {
  std::size_t i = 0;
  while (i < text.size()) {
    const auto byte = static_cast<unsigned char>(text[i]);
    std::size_t extra = 0;
    if (byte < 0x80) {
      extra = 0;
    } else if ((byte & 0xE0) == 0xC0 && byte >= 0xC2) {
      extra = 1;
    } else if ((byte & 0xF0) == 0xE0) {
      extra = 2;
    } else if ((byte & 0xF8) == 0xF0 && byte <= 0xF4) {
      extra = 3;
    } else {
      return false;
    }
    if (i + extra >= text.size() && extra > 0) {
      return false;  // truncated sequence
    }
    for (std::size_t k = 1; k <= extra; ++k) {
      if ((static_cast<unsigned char>(text[i + k]) & 0xC0) != 0x80) {
        return false;
      }
    }
    i += extra + 1;
  }
  return true;
}

}  // namespace

core::Result<SourceFile> read_source_file(const std::string& argument_name, const std::string& path,
                                          const std::string& working_dir) {
  if (path.empty()) {
    return bad_argument(argument_name, "the path is empty");
  }
  fs::path resolved(path);
  if (resolved.is_relative()) {
    resolved = fs::path(working_dir.empty() ? fs::current_path().string() : working_dir) / resolved;
  }
  resolved = resolved.lexically_normal();
  const std::string shown = resolved.string();

  std::error_code error;
  const auto status = fs::status(resolved, error);
  if (error || !fs::exists(status)) {
    return bad_argument(argument_name, "no such file: " + shown);
  }
  if (!fs::is_regular_file(status)) {
    return bad_argument(argument_name, "not a regular file: " + shown);
  }
  const auto size = fs::file_size(resolved, error);
  if (error) {
    return bad_argument(argument_name, "cannot read the size of " + shown + ": " + error.message());
  }
  if (size > k_max_source_bytes) {
    return bad_argument(argument_name, shown + " is " + std::to_string(size) +
                                           " bytes; the limit for a source file is " +
                                           std::to_string(k_max_source_bytes) + " bytes");
  }
  std::ifstream in(resolved, std::ios::binary);
  if (!in) {
    return bad_argument(argument_name, "cannot open " + shown + " for reading");
  }
  std::ostringstream buffer;
  buffer << in.rdbuf();
  std::string text = buffer.str();
  if (text.find('\0') != std::string::npos || !is_valid_utf8(text)) {
    return bad_argument(argument_name, shown + " is not UTF-8 text");
  }
  return SourceFile{shown, std::move(text)};
}

core::Status write_file_atomically(const std::string& path, const std::string& text) {
  const fs::path target(path);
  fs::path temporary = target;
  temporary += ".tmp-" + std::to_string(::getpid());
  {
    std::ofstream out(temporary, std::ios::binary | std::ios::trunc);
    if (!out) {
      return core::make_failure(core::FailureKind::io_error, "write",
                                "cannot write " + temporary.string());
    }
    out << text;
    out.flush();
    if (!out) {
      std::error_code ignored;
      fs::remove(temporary, ignored);
      return core::make_failure(core::FailureKind::io_error, "write",
                                "failed writing " + temporary.string());
    }
  }
  std::error_code error;
  fs::rename(temporary, target, error);
  if (error) {
    fs::remove(temporary, error);
    return core::make_failure(core::FailureKind::io_error, "write",
                              "cannot replace " + path + ": " + error.message());
  }
  return core::ok_status();
}

}  // namespace autocomp::tools
