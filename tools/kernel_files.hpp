#pragma once

#include <cstdint>
#include <string>

#include "core/result.hpp"

namespace autocomp::tools {

// Largest kernel or problem file the tools read; anything bigger is surely not a kernel.
inline constexpr std::uintmax_t k_max_source_bytes = 1024 * 1024;

// A source file read for evaluation: its absolute, normalized path and its text.
struct SourceFile {
  std::string path;
  std::string text;
};

// Resolves `path` against `working_dir` (when relative), then reads it. Failures
// (invalid_argument) name the argument and say what is wrong: empty, does not exist, not a regular
// file, larger than k_max_source_bytes, not readable, not valid UTF-8 text.
core::Result<SourceFile> read_source_file(const std::string& argument_name, const std::string& path,
                                          const std::string& working_dir);

// Writes `text` to `path` atomically (temporary file in the same folder, then rename), so a
// reader never sees a half-written kernel. io_error on failure.
core::Status write_file_atomically(const std::string& path, const std::string& text);

}  // namespace autocomp::tools
