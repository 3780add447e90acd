#pragma once

#include <cstddef>
#include <cstdio>
#include <string>
#include <string_view>

namespace autocomp::core {

// The longest prefix of `text` of at most `max_bytes` bytes that does not end inside a UTF-8
// multi-byte sequence, so that cutting text for a prompt or a listing never makes invalid UTF-8.
inline std::string utf8_prefix(std::string_view text, std::size_t max_bytes) {
  if (text.size() <= max_bytes) {
    return std::string(text);
  }
  std::size_t end = max_bytes;
  // Step back over continuation bytes (10xxxxxx) to the start of the cut character.
  while (end > 0 && (static_cast<unsigned char>(text[end]) & 0xC0) == 0x80) {
    --end;
  }
  return std::string(text.substr(0, end));
}

// The longest suffix of at most `max_bytes` bytes that starts on a character boundary.
inline std::string utf8_suffix(std::string_view text, std::size_t max_bytes) {
  if (text.size() <= max_bytes) {
    return std::string(text);
  }
  std::size_t start = text.size() - max_bytes;
  while (start < text.size() && (static_cast<unsigned char>(text[start]) & 0xC0) == 0x80) {
    ++start;
  }
  return std::string(text.substr(start));
}

// A correct kernel's latency change in words: "1.25x faster (100.0 us -> 80.0 us)". Both
// latencies must be positive.
inline std::string describe_speed_change(double before_us, double after_us) {
  const double ratio = before_us / after_us;
  char text[160];
  std::snprintf(text, sizeof text, "%.2fx %s (%.1f us -> %.1f us)", ratio >= 1 ? ratio : 1 / ratio,
                ratio >= 1 ? "faster" : "slower", before_us, after_us);
  return text;
}

}  // namespace autocomp::core
