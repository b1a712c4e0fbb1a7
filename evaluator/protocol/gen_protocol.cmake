# Writes OUT, the C++ header of the job protocol's schema (protocol.json):
# the Verdict enum and its names, the evaluator version, the job protocol, the
# measured numbers (struct Measured, k_measured_fields); and TYPES, the
# measure result's typed parts (measure_result.structs: a struct and its JSON
# reader each).
# Usage: cmake -DSCHEMA=protocol.json -DOUT=protocol_schema.hpp -DTYPES=protocol_types.hpp
#              -P gen_protocol.cmake
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
# measure_result.measured: struct Measured and its field list.
string(JSON nmeasured LENGTH "${json}" measure_result measured fields)
math(EXPR mlast "${nmeasured} - 1")
set(measured_members "")
set(measured_fields "")
foreach(i RANGE ${mlast})
  string(JSON fname GET "${json}" measure_result measured fields ${i} name)
  string(JSON ftype GET "${json}" measure_result measured fields ${i} type)
  string(JSON fmeaning GET "${json}" measure_result measured fields ${i} meaning)
  if(NOT ftype STREQUAL "number")
    message(FATAL_ERROR "${SCHEMA}: measured field '${fname}' is ${ftype}, not number")
  endif()
  string(APPEND measured_members "  std::optional<double> ${fname};  // ${fmeaning}\n")
  string(APPEND measured_fields "    {\"${fname}\", &Measured::${fname}},\n")
endforeach()

set(content "// Generated from evaluator/protocol/protocol.json by gen_protocol.cmake. Do not edit.
#pragma once
#include <array>
#include <optional>
#include <string_view>
#include <utility>

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

// What a measurement found (protocol.json, measure_result.measured). The
// measure job's result and the report both hold it under these names
// (protocol::MeasureResult, Report); their JSON readers and writers go
// through k_measured_fields.
struct Measured {
${measured_members}};

// Measured's fields and their JSON names: the one list of them.
inline constexpr std::pair<const char*, std::optional<double> Measured::*> k_measured_fields[] = {
${measured_fields}};

}  // namespace korch::evaluator
")
# measure_result.structs: one struct each, with its reader.
set(types "")
string(JSON nstructs LENGTH "${json}" measure_result structs)
math(EXPR slast "${nstructs} - 1")
foreach(s RANGE ${slast})
  string(JSON sname GET "${json}" measure_result structs ${s} name)
  string(JSON swhere GET "${json}" measure_result structs ${s} where)
  string(JSON smeaning GET "${json}" measure_result structs ${s} meaning)
  string(JSON nfields LENGTH "${json}" measure_result structs ${s} fields)
  math(EXPR flast "${nfields} - 1")
  set(members "")
  set(reads "")
  foreach(i RANGE ${flast})
    string(JSON fname GET "${json}" measure_result structs ${s} fields ${i} name)
    string(JSON ftype GET "${json}" measure_result structs ${s} fields ${i} type)
    string(JSON fmeaning GET "${json}" measure_result structs ${s} fields ${i} meaning)
    string(JSON fdefault ERROR_VARIABLE no_default GET "${json}" measure_result structs ${s} fields ${i} default)
    if(ftype STREQUAL "number")
      string(APPEND members "  std::optional<double> ${fname};  // ${fmeaning}\n")
      string(APPEND reads "  if (auto it = j.find(\"${fname}\"); it != j.end() && it->is_number())\n    v.${fname} = it->get<double>();\n")
    elseif(ftype STREQUAL "bool")
      if(no_default)
        set(fdefault "false")
      elseif(fdefault STREQUAL "ON")
        set(fdefault "true")
      elseif(fdefault STREQUAL "OFF")
        set(fdefault "false")
      endif()
      string(APPEND members "  bool ${fname} = ${fdefault};  // ${fmeaning}\n")
      string(APPEND reads "  if (auto it = j.find(\"${fname}\"); it != j.end() && it->is_boolean())\n    v.${fname} = it->get<bool>();\n")
    elseif(ftype STREQUAL "string")
      if(no_default)
        set(fdefault "")
      endif()
      string(APPEND members "  std::string ${fname} = \"${fdefault}\";  // ${fmeaning}\n")
      string(APPEND reads "  if (auto it = j.find(\"${fname}\"); it != j.end() && it->is_string())\n    v.${fname} = it->get<std::string>();\n")
    elseif(ftype STREQUAL "strings")
      string(APPEND members "  std::vector<std::string> ${fname};  // ${fmeaning}\n")
      string(APPEND reads "  if (auto it = j.find(\"${fname}\"); it != j.end() && it->is_array())\n    for (const auto& x : *it)\n      if (x.is_string()) v.${fname}.push_back(x.get<std::string>());\n")
    else()
      message(FATAL_ERROR "${SCHEMA}: ${sname}.${fname} has unknown type '${ftype}'")
    endif()
  endforeach()
  string(APPEND types "// ${smeaning}. In the result: ${swhere}.
struct ${sname} {
${members}  // Whether the result carried it at all (absent: every field its default).
  bool present = false;
};

// Reads a ${sname} from its JSON object; a field of another type keeps its default.
inline ${sname} read_${sname}(const nlohmann::json& j) {
  ${sname} v;
  if (!j.is_object()) return v;
  v.present = true;
${reads}  return v;
}

")
endforeach()
set(types_content "// Generated from evaluator/protocol/protocol.json by gen_protocol.cmake. Do not edit.
// The measure result's typed parts (measure_result.structs); korch_protocol.py
// makes the same ones dataclasses for the judge.
#pragma once
#include <optional>
#include <string>
#include <vector>

#include <nlohmann/json.hpp>

namespace korch::evaluator::protocol {

${types}}  // namespace korch::evaluator::protocol
")

# Rewrite only on change, so a re-run does not rebuild every includer.
function(write_if_changed path text)
  if(EXISTS "${path}")
    file(READ "${path}" old)
    if(old STREQUAL text)
      return()
    endif()
  endif()
  file(WRITE "${path}" "${text}")
endfunction()
write_if_changed("${OUT}" "${content}")
if(TYPES)
  write_if_changed("${TYPES}" "${types_content}")
endif()
