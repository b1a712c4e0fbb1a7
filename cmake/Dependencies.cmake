# Third-party dependencies, all from Debian packages (scripts/install-deps.sh).
# Each is wrapped in an imported target so modules can link them PRIVATE.
find_package(Threads REQUIRED)
find_package(PkgConfig REQUIRED)
find_package(SQLite3 REQUIRED)
find_package(CURL REQUIRED)
find_package(OpenSSL REQUIRED)
find_package(nlohmann_json 3 REQUIRED)
find_package(simdjson REQUIRED)  # the reply parser's fast path (llm_clients/completion_fast.cpp)
find_package(fmt REQUIRED)
find_package(spdlog REQUIRED)
pkg_check_modules(TOMLPP REQUIRED IMPORTED_TARGET tomlplusplus)
pkg_check_modules(SECCOMP REQUIRED IMPORTED_TARGET libseccomp)

# Debian's cpp-httplib 0.11 is a compiled library found through pkg-config;
# httplib::httplib names it like upstream's CMake package does.
pkg_check_modules(HTTPLIB REQUIRED IMPORTED_TARGET cpp-httplib)
if(NOT TARGET httplib::httplib)
  add_library(httplib::httplib ALIAS PkgConfig::HTTPLIB)
endif()

if(KORCH_BUILD_TESTS)
  find_package(GTest REQUIRED)
endif()
