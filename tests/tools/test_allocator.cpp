// util/allocator: the korch executable runs on the allocator the build chose
// (KORCH_ALLOCATOR), and the sandboxed worker keeps the system's malloc
// (it hosts CPython and torch, which korch does not re-link).
#include <gtest/gtest.h>

#include <string>

#include "util/process.hpp"

namespace {

std::string run(const std::vector<std::string>& argv) {
  auto r = korch::process::run_capture(argv);
  EXPECT_TRUE(r.has_value()) << argv[0];
  if (!r) return "";
  EXPECT_EQ(r->status, 0) << argv[0];
  return r->out;
}

TEST(Allocator, KorchVersionNamesTheAllocatorItRunsOn) {
  auto out = run({KORCH_BIN, "--version"});
  EXPECT_NE(out.find("korch 0.1.0"), std::string::npos) << out;
  EXPECT_NE(out.find(std::string("allocator: ") + KORCH_EXPECT_ALLOCATOR), std::string::npos)
      << out;
}

TEST(Allocator, OnlyTheKorchExecutableLinksTcmalloc) {
  // ldd (glibc's libc-bin) lists the shared objects each binary loads.
  bool tcmalloc_build = std::string(KORCH_EXPECT_ALLOCATOR) == "tcmalloc";
  EXPECT_EQ(run({"ldd", KORCH_BIN}).find("libtcmalloc") != std::string::npos, tcmalloc_build);
  EXPECT_EQ(run({"ldd", KORCH_WORKER_BIN}).find("libtcmalloc"), std::string::npos);
}

}  // namespace
