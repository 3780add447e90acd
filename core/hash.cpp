#include "core/hash.hpp"

#include <openssl/evp.h>

#include <array>
#include <memory>
#include <stdexcept>

namespace autocomp::core {

std::string sha256_hex(std::string_view bytes) {
  std::unique_ptr<EVP_MD_CTX, decltype(&EVP_MD_CTX_free)> ctx(EVP_MD_CTX_new(), &EVP_MD_CTX_free);
  std::array<unsigned char, EVP_MAX_MD_SIZE> digest{};
  unsigned int length = 0;
  if (!ctx || EVP_DigestInit_ex(ctx.get(), EVP_sha256(), nullptr) != 1 ||
      EVP_DigestUpdate(ctx.get(), bytes.data(), bytes.size()) != 1 ||
      EVP_DigestFinal_ex(ctx.get(), digest.data(), &length) != 1) {
    throw std::runtime_error("OpenSSL SHA-256 failed");
  }
  static constexpr char k_hex[] = "0123456789abcdef";
  std::string out;
  out.reserve(length * 2);
  for (unsigned int i = 0; i < length; ++i) {
    out.push_back(k_hex[digest[i] >> 4]);
    out.push_back(k_hex[digest[i] & 0xf]);
  }
  return out;
}

std::string normalize_source(std::string_view source) {
  std::string out;
  out.reserve(source.size() + 1);
  std::size_t pos = 0;
  while (pos <= source.size()) {
    std::size_t end = source.find('\n', pos);
    if (end == std::string_view::npos) {
      end = source.size();
    }
    std::string_view line = source.substr(pos, end - pos);
    while (!line.empty() && (line.back() == ' ' || line.back() == '\t' || line.back() == '\r')) {
      line.remove_suffix(1);
    }
    out.append(line);
    out.push_back('\n');
    pos = end + 1;
  }
  while (out.size() >= 2 && out[out.size() - 1] == '\n' && out[out.size() - 2] == '\n') {
    out.pop_back();
  }
  if (out == "\n") {
    out.clear();
  }
  return out;
}

std::string source_key(std::string_view source) {
  return sha256_hex(normalize_source(source));
}

}  // namespace autocomp::core
