#include "util/allocator/allocator.hpp"

#if KORCH_WITH_TCMALLOC
#include <gperftools/malloc_extension_c.h>
#include <gperftools/tcmalloc.h>
#else
#include <malloc.h>
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

#if KORCH_WITH_TCMALLOC
namespace {
std::int64_t tcmalloc_property(const char* name) {
  std::size_t value = 0;
  return MallocExtension_GetNumericProperty(name, &value) ? static_cast<std::int64_t>(value) : 0;
}
}  // namespace
#endif

HeapStats heap_stats() {
  HeapStats s;
#if KORCH_WITH_TCMALLOC
  s.in_use = tcmalloc_property("generic.current_allocated_bytes");
  s.free = tcmalloc_property("tcmalloc.pageheap_free_bytes") +
           tcmalloc_property("tcmalloc.central_cache_free_bytes") +
           tcmalloc_property("tcmalloc.transfer_cache_free_bytes") +
           tcmalloc_property("tcmalloc.thread_cache_free_bytes");
#else
  // glibc: mallinfo2 sums every arena; hblkhd is what chunks mapped on
  // their own hold.
  struct mallinfo2 m = mallinfo2();
  s.in_use = static_cast<std::int64_t>(m.uordblks + m.hblkhd);
  s.free = static_cast<std::int64_t>(m.fordblks);
#endif
  return s;
}

}  // namespace korch
