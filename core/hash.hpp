#pragma once

#include <string>
#include <string_view>

namespace autocomp::core {

// Lower-case hex SHA-256 of the bytes.
std::string sha256_hex(std::string_view bytes);

// The text a candidate is keyed by (design §5.3): line endings normalised to \n, trailing white
// space removed from every line, trailing blank lines removed, one final newline.
std::string normalize_source(std::string_view source);

// sha256_hex(normalize_source(source)).
std::string source_key(std::string_view source);

}  // namespace autocomp::core
