#pragma once
// The prompt templates (prompts/templates/*.txt), embedded at build time.
#include <string>
#include <string_view>
#include <utility>
#include <vector>

namespace korch::prompts {

// (name without .txt, text) for every template, sorted by name.
const std::vector<std::pair<std::string_view, std::string_view>>& templates();

}  // namespace korch::prompts
