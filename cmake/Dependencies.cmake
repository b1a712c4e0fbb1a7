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
# The store's PostgreSQL backend (store/pg*.cpp; libpq-dev). ON everywhere
# install-deps.sh ran; the GPU machine's build (scripts/gpu/build.sh) turns it
# off: it has no registry for libpq, and its evaluations need no server store.
option(KORCH_WITH_POSTGRES "The PostgreSQL store backend (libpq)" ON)
if(KORCH_WITH_POSTGRES)
  pkg_check_modules(LIBPQ REQUIRED IMPORTED_TARGET libpq)
endif()

# The allocator of the korch executables (util/allocator/allocator.hpp):
# gperftools' tcmalloc by default, the system's malloc with -DKORCH_ALLOCATOR=system.
set(KORCH_ALLOCATOR "tcmalloc" CACHE STRING "malloc of the korch executables: tcmalloc or system")
set_property(CACHE KORCH_ALLOCATOR PROPERTY STRINGS tcmalloc system)
if(KORCH_ALLOCATOR STREQUAL "tcmalloc")
  pkg_check_modules(TCMALLOC REQUIRED IMPORTED_TARGET libtcmalloc_minimal)
elseif(NOT KORCH_ALLOCATOR STREQUAL "system")
  message(FATAL_ERROR "KORCH_ALLOCATOR must be tcmalloc or system, not '${KORCH_ALLOCATOR}'")
endif()

# Debian's cpp-httplib 0.11 is a compiled library found through pkg-config;
# httplib::httplib names it like upstream's CMake package does.
pkg_check_modules(HTTPLIB REQUIRED IMPORTED_TARGET cpp-httplib)
if(NOT TARGET httplib::httplib)
  add_library(httplib::httplib ALIAS PkgConfig::HTTPLIB)
endif()

if(KORCH_BUILD_TESTS)
  find_package(GTest REQUIRED)
endif()
