# Warnings applied to korch's own targets (not to third-party code).
add_library(korch_warnings INTERFACE)
target_compile_options(korch_warnings INTERFACE
  -Wall -Wextra -Wpedantic -Wno-unused-parameter -Wno-missing-field-initializers)
