# Generates a C++ source that holds every prompt template as a string, so
# the binary needs no template files at run time. Invoked at build time with
# -DOUT=<file> -DDIR=<templates dir>.
file(GLOB names RELATIVE ${DIR} ${DIR}/*.txt)
list(SORT names)
set(body "// Generated from prompts/templates/*.txt by prompts/embed.cmake. Do not edit.\n#include \"prompts/templates.hpp\"\n\nnamespace korch::prompts {\n\nconst std::vector<std::pair<std::string_view, std::string_view>>& templates() {\n  static const std::vector<std::pair<std::string_view, std::string_view>> k_templates = {\n")
foreach(name ${names})
  file(READ ${DIR}/${name} text)
  string(REGEX REPLACE "\\.txt$" "" key ${name})
  string(APPEND body "      {\"${key}\", R\"korch_tpl(${text})korch_tpl\"},\n")
endforeach()
string(APPEND body "  };\n  return k_templates;\n}\n\n}  // namespace korch::prompts\n")
file(WRITE ${OUT}.tmp "${body}")
file(COPY_FILE ${OUT}.tmp ${OUT} ONLY_IF_DIFFERENT)
