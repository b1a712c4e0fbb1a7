#pragma once
// The files of reports/web/ (dashboard page, its script, the plotting code and
// the style sheet), embedded at build time by reports/web/embed.cmake: the
// daemon serves them and `korch report --format html` inlines them, so
// neither depends on an install or source directory at run time.
#include <string_view>
#include <vector>

namespace korch::web {

struct Asset {
  std::string_view name;          // "plots.js"
  std::string_view content_type;  // "text/javascript; charset=utf-8"
  std::string_view data;
};

// Every asset, sorted by name.
const std::vector<Asset>& assets();

// The asset called `name`, or nullptr.
inline const Asset* find_asset(std::string_view name) {
  for (auto& a : assets()) {
    if (a.name == name) return &a;
  }
  return nullptr;
}

}  // namespace korch::web
