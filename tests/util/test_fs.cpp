// util/fs.hpp: whole-file reads, atomic writes, clocks.
#include "util/fs.hpp"

#include <gtest/gtest.h>

#include <filesystem>
#include <string>

#include "tests/support/temp_dir.hpp"

namespace korch {
namespace {

class FsTest : public ::testing::Test {
 protected:
  korch::testing::TempDir m_dir;
};

TEST_F(FsTest, WriteAtomicThenReadRoundTripsBinaryData) {
  const std::string data("line 1\n\0binary\xff", 15);
  auto path = m_dir.file("out.bin");
  ASSERT_TRUE(write_file_atomic(path, data));
  auto back = read_file(path);
  ASSERT_TRUE(back) << back.error().message;
  EXPECT_EQ(*back, data);
}

TEST_F(FsTest, WriteAtomicReplacesAndLeavesNoTempFile) {
  auto path = m_dir.file("f.txt");
  ASSERT_TRUE(write_file_atomic(path, "old"));
  ASSERT_TRUE(write_file_atomic(path, "new"));
  EXPECT_EQ(*read_file(path), "new");
  int entries = 0;
  for ([[maybe_unused]] auto& e : std::filesystem::directory_iterator(m_dir.path())) ++entries;
  EXPECT_EQ(entries, 1);
}

TEST_F(FsTest, ReadMissingFileNamesThePath) {
  auto path = m_dir.file("missing.txt");
  auto r = read_file(path);
  ASSERT_FALSE(r);
  EXPECT_EQ(r.error().message.rfind(path.string() + ": ", 0), 0u) << r.error().message;
}

TEST_F(FsTest, WriteIntoMissingDirectoryFails) {
  auto r = write_file_atomic(m_dir.file("no-such-dir/f.txt"), "x");
  ASSERT_FALSE(r);
  EXPECT_NE(r.error().message.find("no-such-dir"), std::string::npos);
}

TEST(Clocks, WallClockIsUnixSecondsAndMonotonicClockDoesNotGoBack) {
  EXPECT_GT(now_unix(), 1.6e9);  // after 2020
  const double a = now_mono();
  const double b = now_mono();
  EXPECT_LE(a, b);
}

}  // namespace
}  // namespace korch
