#pragma once
// Did-you-mean for a name the user mistyped: config keys, command-line
// flags, subcommands, vocabulary values. One rule for all of them.
#include <string>
#include <string_view>
#include <vector>

namespace korch {

// The closest candidate to `key`, or "" when none is close. A candidate whose
// last dotted segment equals `key` ("mode" -> "evaluator.mode") also counts.
std::string closest(std::string_view key, const std::vector<std::string>& candidates);

// " (did you mean 'x'?)" for the closest candidate, or "".
std::string suggestion(std::string_view key, const std::vector<std::string>& candidates);

}  // namespace korch
