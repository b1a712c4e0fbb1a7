#pragma once
// The static rule table of evaluator/rules/korch_rules.py, compiled in at
// build time (gen_rule_table.cmake runs `korch_rules.py --dump-table`).
// rule_docs() itself is declared in evaluator/evaluator.hpp.
#include <cstddef>

#include "evaluator/evaluator.hpp"

namespace korch::evaluator {

// Absolute path of the directory holding korch_rules.py (the source tree:
// korch runs from its build tree). The rule and compile workers import the
// module from here. Never null.
const char* rules_python_dir();

// The Python interpreter the build ran korch_rules.py with (CMake cache
// KORCH_RULES_PYTHON, /usr/bin/python3 where present). `korch lint` runs
// the rules with it. Never null.
const char* rules_python();

namespace detail {
// One row of the generated table. `stage` is python | load_inline | flags |
// native | symbols.
struct RuleRow {
  const char* id;
  const char* message;
  const char* stage;
};
extern const RuleRow k_rule_rows[];
extern const std::size_t k_rule_row_count;
}  // namespace detail

}  // namespace korch::evaluator
