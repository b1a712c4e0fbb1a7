# Generates a C++ source holding every file of reports/web/ (the dashboard and
# the plotting code shared with `korch report --format html`) as a string, so
# neither the daemon nor the report needs files at run time. Invoked at build
# time with -DOUT=<file> -DDIR=<reports/web>.
file(GLOB names RELATIVE ${DIR} ${DIR}/*.html ${DIR}/*.js ${DIR}/*.css)
list(SORT names)
set(body "// Generated from reports/web/ by reports/web/embed.cmake. Do not edit.\n#include \"reports/web_assets.hpp\"\n\nnamespace korch::web {\n\nconst std::vector<Asset>& assets() {\n  static const std::vector<Asset> k_assets = {\n")
foreach(name ${names})
  file(READ ${DIR}/${name} text)
  if(text MATCHES "\\)korch_web\"")
    message(FATAL_ERROR "${name} contains the raw-string delimiter )korch_web\"")
  endif()
  if(name MATCHES "\\.html$")
    set(type "text/html; charset=utf-8")
  elseif(name MATCHES "\\.js$")
    set(type "text/javascript; charset=utf-8")
  else()
    set(type "text/css; charset=utf-8")
  endif()
  string(APPEND body "      {\"${name}\", \"${type}\", R\"korch_web(${text})korch_web\"},\n")
endforeach()
string(APPEND body "  };\n  return k_assets;\n}\n\n}  // namespace korch::web\n")
file(WRITE ${OUT}.tmp "${body}")
file(COPY_FILE ${OUT}.tmp ${OUT} ONLY_IF_DIFFERENT)
