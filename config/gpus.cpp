#include "config/gpus.hpp"

#include <algorithm>
#include <cctype>
#include <set>

namespace korch::config {

Result<std::vector<int>> parse_gpu_list(const std::string& spec, std::optional<int> count) {
  auto err = [&](std::string m) -> Result<std::vector<int>> { return fail(std::move(m)); };
  std::string s;
  for (char c : spec)
    if (!std::isspace(static_cast<unsigned char>(c))) s += c;
  std::vector<int> out;
  if (s.empty() || s == "all") {
    if (!count) return out;  // syntax only: "all" is known once the host is
    for (int i = 0; i < *count; ++i) out.push_back(i);
    if (out.empty()) return err("the host reports no GPU");
    return out;
  }
  std::set<int> seen;
  std::size_t pos = 0;
  while (pos <= s.size()) {
    std::size_t comma = s.find(',', pos);
    if (comma == std::string::npos) comma = s.size();
    const std::string tok = s.substr(pos, comma - pos);
    pos = comma + 1;
    auto num = [&](const std::string& t) -> int {
      if (t.empty() || t.size() > 4 || !std::all_of(t.begin(), t.end(), [](char c) {
            return std::isdigit(static_cast<unsigned char>(c));
          }))
        return -1;
      return std::stoi(t);
    };
    int a, b;
    if (auto dash = tok.find('-'); dash != std::string::npos) {
      a = num(tok.substr(0, dash));
      b = num(tok.substr(dash + 1));
    } else {
      a = b = num(tok);
    }
    if (a < 0 || b < a)
      return err("'" + tok + "' is not a GPU index or range (write \"all\", \"0,1\" or \"0-3\")");
    for (int g = a; g <= b; ++g) {
      if (count && g >= *count)
        return err("GPU " + std::to_string(g) + " does not exist (the host has " +
                   std::to_string(*count) + ")");
      if (seen.insert(g).second) out.push_back(g);
    }
    if (comma == s.size()) break;
  }
  return out;
}

}  // namespace korch::config
