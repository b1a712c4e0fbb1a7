#include "util/allocator/allocator.hpp"

#if KORCH_WITH_TCMALLOC
#include <gperftools/tcmalloc.h>
#endif

#include <fmt/format.h>

namespace korch {

std::string allocator_name() {
#if KORCH_WITH_TCMALLOC
  int major = 0;
  int minor = 0;
  const char* patch = "";
  tc_version(&major, &minor, &patch);
  return fmt::format("tcmalloc {}.{}{}", major, minor, patch ? patch : "");
#else
  return "system malloc";
#endif
}

}  // namespace korch
