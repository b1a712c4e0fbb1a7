#include "util/did_you_mean.hpp"

#include <algorithm>

namespace korch {
namespace {

std::size_t edit_distance(std::string_view a, std::string_view b) {
  std::vector<std::size_t> row(b.size() + 1);
  for (std::size_t j = 0; j <= b.size(); ++j) row[j] = j;
  for (std::size_t i = 1; i <= a.size(); ++i) {
    std::size_t diag = row[0];
    row[0] = i;
    for (std::size_t j = 1; j <= b.size(); ++j) {
      std::size_t up = row[j];
      row[j] = std::min({row[j] + 1, row[j - 1] + 1, diag + (a[i - 1] == b[j - 1] ? 0 : 1)});
      diag = up;
    }
  }
  return row[b.size()];
}

}  // namespace

std::string closest(std::string_view key, const std::vector<std::string>& candidates) {
  std::string best;
  std::size_t best_d = std::max<std::size_t>(2, key.size() / 3) + 1;
  for (const auto& c : candidates) {
    auto dot = c.rfind('.');
    if (dot != std::string::npos && std::string_view(c).substr(dot + 1) == key) return c;
    auto d = edit_distance(key, c);
    if (d < best_d) {
      best_d = d;
      best = c;
    }
  }
  return best;
}

std::string suggestion(std::string_view key, const std::vector<std::string>& candidates) {
  auto c = closest(key, candidates);
  return c.empty() ? "" : " (did you mean '" + c + "'?)";
}

}  // namespace korch
