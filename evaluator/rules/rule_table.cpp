#include "evaluator/rules/rule_table.hpp"

namespace korch::evaluator {

std::vector<RuleDoc> rule_docs() {
  std::vector<RuleDoc> docs;
  docs.reserve(detail::k_rule_row_count);
  for (std::size_t i = 0; i < detail::k_rule_row_count; ++i) {
    docs.push_back(RuleDoc{detail::k_rule_rows[i].id, detail::k_rule_rows[i].message});
  }
  return docs;
}

const char* rules_python_dir() { return KORCH_RULES_PY_DIR; }

const char* rules_python() { return KORCH_RULES_PYTHON_EXE; }

}  // namespace korch::evaluator
