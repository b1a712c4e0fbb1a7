#pragma once
// evaluator.gpus: "all" (every GPU the host has) or indices like "0,1" /
// "0-3", parsed once here. Without `count` only the syntax is checked (the
// config is validated before any GPU is asked); with it, every index must
// exist and "all" expands to 0..count-1.
#include <optional>
#include <string>
#include <vector>

#include "util/error.hpp"

namespace korch::config {

Result<std::vector<int>> parse_gpu_list(const std::string& spec, std::optional<int> count);

}  // namespace korch::config
