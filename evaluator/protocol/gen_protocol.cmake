# Writes OUT, the C++ header of the job protocol's schema (protocol.json):
# the Verdict enum and its names, the evaluator version, the job protocol.
# Usage: cmake -DSCHEMA=protocol.json -DOUT=protocol_schema.hpp -P gen_protocol.cmake
file(READ "${SCHEMA}" json)
string(JSON version GET "${json}" evaluator_version)
string(JSON job_protocol GET "${json}" job_protocol)
string(JSON count LENGTH "${json}" verdicts)
if(count EQUAL 0)
  message(FATAL_ERROR "${SCHEMA}: no verdicts")
endif()
math(EXPR last "${count} - 1")
set(enumerators "")
set(names "")
foreach(i RANGE ${last})
  string(JSON name GET "${json}" verdicts ${i} name)
  string(JSON meaning GET "${json}" verdicts ${i} meaning)
  if(NOT name MATCHES "^[a-z][a-z_]*$")
    message(FATAL_ERROR "${SCHEMA}: verdict ${i} '${name}' is not a lower_snake_case word")
  endif()
  string(APPEND enumerators "  ${name},  // ${meaning}\n")
  string(APPEND names "    \"${name}\",\n")
endforeach()
set(content "// Generated from evaluator/protocol/protocol.json by gen_protocol.cmake. Do not edit.
#pragma once
#include <array>
#include <string_view>

namespace korch::evaluator {

// The verdicts of an evaluation, in the schema's order.
enum class Verdict {
${enumerators}};

namespace schema {
inline constexpr std::string_view k_evaluator_version = \"${version}\";
inline constexpr int k_job_protocol = ${job_protocol};
inline constexpr std::array<std::string_view, ${count}> k_verdict_names = {
${names}};
}  // namespace schema

}  // namespace korch::evaluator
")
# Rewrite only on change, so a re-run does not rebuild every includer.
if(EXISTS "${OUT}")
  file(READ "${OUT}" old)
  if(old STREQUAL content)
    return()
  endif()
endif()
file(WRITE "${OUT}" "${content}")
