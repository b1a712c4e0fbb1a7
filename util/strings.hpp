#pragma once
// Small ASCII string helpers, written once (they were written five times).
#include <algorithm>
#include <cctype>
#include <string>
#include <string_view>

namespace korch {

// `s` without leading and trailing whitespace (std::isspace, the C locale).
inline std::string_view trim(std::string_view s) {
  while (!s.empty() && std::isspace(static_cast<unsigned char>(s.front()))) s.remove_prefix(1);
  while (!s.empty() && std::isspace(static_cast<unsigned char>(s.back()))) s.remove_suffix(1);
  return s;
}

// `s` with ASCII letters lowered.
inline std::string lower(std::string_view s) {
  std::string out(s);
  std::transform(out.begin(), out.end(), out.begin(),
                 [](unsigned char c) { return static_cast<char>(std::tolower(c)); });
  return out;
}

}  // namespace korch
