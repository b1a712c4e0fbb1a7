# Writes OUT, a C++ source holding the rule table printed by
# `PYTHON RULES_PY --dump-table` (JSON: [{"id", "message", "stage"}, ...]).
# Usage: cmake -DPYTHON=... -DRULES_PY=... -DOUT=... -P gen_rule_table.cmake
execute_process(
  COMMAND ${PYTHON} ${RULES_PY} --dump-table
  OUTPUT_VARIABLE json
  ERROR_VARIABLE err
  RESULT_VARIABLE rc)
if(NOT rc EQUAL 0)
  message(FATAL_ERROR "korch_rules.py --dump-table failed (${rc}): ${err}")
endif()

string(JSON count LENGTH "${json}")
if(count EQUAL 0)
  message(FATAL_ERROR "korch_rules.py --dump-table printed an empty table")
endif()
math(EXPR last "${count} - 1")
set(rows "")
foreach(i RANGE ${last})
  foreach(key id message stage)
    string(JSON ${key} GET "${json}" ${i} ${key})
    string(FIND "${${key}}" ")korch\"" bad)
    if(NOT bad EQUAL -1)
      message(FATAL_ERROR "rule ${i}: ${key} contains the raw-string delimiter")
    endif()
  endforeach()
  string(APPEND rows "    {R\"korch(${id})korch\", R\"korch(${message})korch\", R\"korch(${stage})korch\"},\n")
endforeach()

set(content "// Generated from korch_rules.py --dump-table by gen_rule_table.cmake. Do not edit.
#include \"evaluator/rules/rule_table.hpp\"

namespace korch::evaluator::detail {

const RuleRow k_rule_rows[] = {
${rows}};
const std::size_t k_rule_row_count = sizeof(k_rule_rows) / sizeof(k_rule_rows[0]);

}  // namespace korch::evaluator::detail
")
# Rewrite only on change, so an unchanged table does not rebuild dependents.
if(EXISTS "${OUT}")
  file(READ "${OUT}" old)
endif()
if(NOT "${old}" STREQUAL "${content}")
  file(WRITE "${OUT}" "${content}")
endif()
