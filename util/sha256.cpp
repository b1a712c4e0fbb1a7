#include "util/sha256.hpp"

#include <openssl/evp.h>

namespace korch {

std::string sha256_hex(std::string_view data) {
  unsigned char digest[EVP_MAX_MD_SIZE];
  unsigned int len = 0;
  EVP_Digest(data.data(), data.size(), digest, &len, EVP_sha256(), nullptr);
  static constexpr char k_hex[] = "0123456789abcdef";
  std::string out(len * 2, '0');
  for (unsigned int i = 0; i < len; ++i) {
    out[2 * i] = k_hex[digest[i] >> 4];
    out[2 * i + 1] = k_hex[digest[i] & 0xf];
  }
  return out;
}

}  // namespace korch
