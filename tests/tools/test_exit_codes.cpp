// tools/korch/cli.hpp: each error kind maps to the exit code `korch --help`
// documents, in one place.
#include <gtest/gtest.h>

#include "tools/korch/cli.hpp"

namespace korch::cli {
namespace {

TEST(ExitCodes, EachErrorKindHasItsDocumentedCode) {
  EXPECT_EQ(exit_code(ErrorKind::failure), 1);
  EXPECT_EQ(exit_code(ErrorKind::invalid), 2);
  EXPECT_EQ(exit_code(ErrorKind::unavailable), 3);
  EXPECT_EQ(exit_code(ErrorKind::interrupted), 130);
  EXPECT_EQ(exit_code(Error{"x"}.kind), k_exit_error);  // an Error is a failure unless labelled
}

}  // namespace
}  // namespace korch::cli
