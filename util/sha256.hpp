#pragma once
#include <string>
#include <string_view>

namespace korch {

// Lowercase hex SHA-256 of `data` (64 characters).
std::string sha256_hex(std::string_view data);

}  // namespace korch
