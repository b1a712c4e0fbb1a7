// Tests of the AIMD concurrency limit (llm_clients/adaptive_limit.hpp).
#include "llm_clients/adaptive_limit.hpp"

#include <gtest/gtest.h>

namespace korch::llm {
namespace {

TEST(AdaptiveLimit, StartsAtMaximum) {
  AdaptiveLimit l(64, 1.0);
  EXPECT_EQ(l.limit(), 64);
  EXPECT_FALSE(l.on_success());  // already at the maximum
}

TEST(AdaptiveLimit, BurstOf429HalvesOncePerCooldown) {
  AdaptiveLimit l(64, 1.0);
  EXPECT_TRUE(l.on_rate_limited(10.0));
  EXPECT_EQ(l.limit(), 32);
  for (int i = 0; i < 50; ++i) EXPECT_FALSE(l.on_rate_limited(10.0 + i * 0.01));  // same burst
  EXPECT_EQ(l.limit(), 32);
  EXPECT_TRUE(l.on_rate_limited(11.1));
  EXPECT_EQ(l.limit(), 16);
}

TEST(AdaptiveLimit, NeverBelowOne) {
  AdaptiveLimit l(3, 0.0);
  l.on_rate_limited(1);
  l.on_rate_limited(2);
  EXPECT_EQ(l.limit(), 1);
  EXPECT_FALSE(l.on_rate_limited(3));
  EXPECT_EQ(l.limit(), 1);
}

TEST(AdaptiveLimit, GrowsBackAdditively) {
  AdaptiveLimit l(8, 0.0);
  l.on_rate_limited(1);  // 4
  ASSERT_EQ(l.limit(), 4);
  int changes = 0;
  int successes = 0;
  // One step per `limit` successes: 4 + 5 + 6 + 7 = 22 successes to reach 8.
  while (l.limit() < 8) {
    changes += l.on_success() ? 1 : 0;
    ++successes;
  }
  EXPECT_EQ(changes, 4);
  EXPECT_EQ(successes, 22);
  EXPECT_FALSE(l.on_success());
  EXPECT_EQ(l.limit(), 8);
}

}  // namespace
}  // namespace korch::llm
