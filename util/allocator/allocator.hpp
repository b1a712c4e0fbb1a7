#pragma once
// The allocator the korch executables run on (issue 10). The campaign engine
// allocates and frees conversation-sized strings (request bodies, replies,
// rows) on several threads at thousands of turns per second; glibc's malloc
// spent ~14% of the engine's samples in its bins and consolidation there.
// The daemon, the CLI and the benchmarks that stand for them link gperftools'
// tcmalloc (CMake option KORCH_ALLOCATOR, default tcmalloc); the sandboxed
// worker (korch-worker: CPython, torch) and the test binaries keep the
// system's malloc, except test_heap_stats, which tests this file.
// tools/bench/README.md has the measurements.
#include <cstdint>
#include <string>

namespace korch {

// What the allocator holds, in bytes: handed out to the program (in use) and
// kept free for reuse without being returned to the system. RSS is roughly
// their sum plus what is not heap (stacks, mapped files).
struct HeapStats {
  std::int64_t in_use = 0;
  std::int64_t free = 0;
};
HeapStats heap_stats();

// "tcmalloc 2.10", or "system malloc" in a build with KORCH_ALLOCATOR=system.
// Calling it is also what keeps the allocator linked under --as-needed.
std::string allocator_name();

}  // namespace korch
