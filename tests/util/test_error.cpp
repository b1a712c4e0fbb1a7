// util/error.hpp: errors carry a kind; fail() and with_kind() set it.
#include "util/error.hpp"

#include <gtest/gtest.h>

namespace korch {
namespace {

TEST(Error, FailDefaultsToFailureKind) {
  Result<int> r = fail("disk full");
  ASSERT_FALSE(r);
  EXPECT_EQ(r.error().message, "disk full");
  EXPECT_EQ(r.error().kind, ErrorKind::failure);
}

TEST(Error, FailWithKindKeepsKindAndMessage) {
  Result<void> r = fail(ErrorKind::unavailable, "http://h:1: cannot connect");
  ASSERT_FALSE(r);
  EXPECT_EQ(r.error().kind, ErrorKind::unavailable);
  EXPECT_EQ(r.error().message, "http://h:1: cannot connect");
}

TEST(Error, WithKindRelabelsOnlyTheKind) {
  Error e = with_kind(Error{"bad key 'x'"}, ErrorKind::invalid);
  EXPECT_EQ(e.kind, ErrorKind::invalid);
  EXPECT_EQ(e.message, "bad key 'x'");
}

TEST(Error, EveryKindHasAName) {
  EXPECT_STREQ(to_string(ErrorKind::failure), "failure");
  EXPECT_STREQ(to_string(ErrorKind::invalid), "invalid");
  EXPECT_STREQ(to_string(ErrorKind::unavailable), "unavailable");
  EXPECT_STREQ(to_string(ErrorKind::interrupted), "interrupted");
}

}  // namespace
}  // namespace korch
