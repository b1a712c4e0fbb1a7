# clang-format targets (STYLE habit 12), never part of the default build or
# of ctest:
#   cmake --build build --target format-check   # fails on any unformatted file
#   cmake --build build --target format         # rewrites them in place
# They cover the directories in KORCH_FORMAT_DIRS: every C++ source directory
# (the whole tree was formatted in one commit of its own). A new top-level
# directory joins the list in the commit that adds it.
find_program(KORCH_CLANG_FORMAT NAMES clang-format-14 clang-format)
set(KORCH_FORMAT_DIRS "agent;config;daemon;evaluator;llm_clients;prompts;reports;store;tests;tools;util" CACHE STRING
    "Source directories (relative to the repository root) the format targets cover")

if(KORCH_CLANG_FORMAT)
  # The file list is taken when the target runs, so new files are covered.
  set(_korch_format_list
      "git ls-files -- ${KORCH_FORMAT_DIRS} | grep -E '\\.(cpp|hpp)$'")
  string(REPLACE ";" " " _korch_format_list "${_korch_format_list}")
  add_custom_target(format-check
    COMMAND sh -c "${_korch_format_list} | xargs -r '${KORCH_CLANG_FORMAT}' --style=file --dry-run --Werror"
    WORKING_DIRECTORY ${PROJECT_SOURCE_DIR}
    COMMENT "clang-format --dry-run on ${KORCH_FORMAT_DIRS}"
    VERBATIM)
  add_custom_target(format
    COMMAND sh -c "${_korch_format_list} | xargs -r '${KORCH_CLANG_FORMAT}' --style=file -i"
    WORKING_DIRECTORY ${PROJECT_SOURCE_DIR}
    COMMENT "clang-format -i on ${KORCH_FORMAT_DIRS}"
    VERBATIM)
else()
  message(STATUS "clang-format not found: no format / format-check targets")
endif()
