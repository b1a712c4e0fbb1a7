// util/allocator: heap_stats() reports what the program holds, through the
// allocator the korch executables link (this test links it too).
#include <gtest/gtest.h>

#include <cstring>
#include <memory>
#include <vector>

#include "util/allocator/allocator.hpp"

namespace {

TEST(HeapStats, InUseFollowsWhatTheProgramHolds) {
  constexpr std::size_t k_blocks = 64;
  constexpr std::size_t k_block = 64 * 1024;  // conversation-sized strings, not one huge map
  const auto before = korch::heap_stats();
  std::vector<std::unique_ptr<char[]>> held;
  for (std::size_t i = 0; i < k_blocks; ++i) {
    held.emplace_back(new char[k_block]);
    std::memset(held.back().get(), 1, k_block);
  }
  const auto loaded = korch::heap_stats();
  EXPECT_GE(loaded.in_use - before.in_use, static_cast<std::int64_t>(k_blocks * k_block))
      << korch::allocator_name();
  held.clear();
  const auto after = korch::heap_stats();
  EXPECT_LE(after.in_use, loaded.in_use - static_cast<std::int64_t>(k_blocks * k_block) / 2)
      << korch::allocator_name();
  EXPECT_GE(after.free, 0);
}

}  // namespace
