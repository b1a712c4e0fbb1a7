// Tests for util/file_lock.cpp (the store's lock and the compile cache's),
// across real processes (fork).
#include <gtest/gtest.h>
#include <sys/wait.h>
#include <unistd.h>

#include <atomic>
#include <chrono>
#include <filesystem>
#include <thread>

#include "util/file_lock.hpp"

namespace korch::store {
namespace {

namespace fs = std::filesystem;

class FileLockTest : public ::testing::Test {
 protected:
  void SetUp() override {
    std::string tmpl = (fs::temp_directory_path() / "korch-lock-XXXXXX").string();
    ASSERT_NE(::mkdtemp(tmpl.data()), nullptr);
    m_dir = tmpl;
    m_path = FileLock::path_for_db((m_dir / "korch.db").string());
  }
  void TearDown() override {
    std::error_code ec;
    fs::remove_all(m_dir, ec);
  }
  fs::path m_dir;
  std::string m_path;
};

// The compile cache's wait: a blocking acquire returns only once the holder
// has released. (The pause before the release only gives the waiter time to
// reach flock; a waiter that did not wait fails however the threads run.)
TEST_F(FileLockTest, BlockingAcquireWaitsForTheHolder) {
  auto first = FileLock::acquire_blocking(m_path);
  ASSERT_TRUE(first.has_value()) << first.error().message;
  std::atomic<bool> released{false}, started{false}, saw_released{false};
  std::thread waiter([&] {
    started = true;
    auto second = FileLock::acquire_blocking(m_path);
    saw_released = released.load();
    EXPECT_TRUE(second.has_value());
  });
  while (!started) std::this_thread::yield();
  std::this_thread::sleep_for(std::chrono::milliseconds(50));
  released = true;
  first->release();
  waiter.join();
  EXPECT_TRUE(saw_released);
}

TEST_F(FileLockTest, PathForDbAppendsLock) {
  EXPECT_EQ(FileLock::path_for_db("/x/korch.db"), "/x/korch.db.lock");
}

TEST_F(FileLockTest, SecondAcquireInSameProcessFailsUntilReleased) {
  auto first = FileLock::acquire(m_path);
  ASSERT_TRUE(first.has_value()) << first.error().message;
  EXPECT_TRUE(first->held());
  auto second = FileLock::acquire(m_path);
  ASSERT_FALSE(second.has_value());
  EXPECT_NE(second.error().message.find("pid " + std::to_string(::getpid())), std::string::npos)
      << second.error().message;
  EXPECT_NE(second.error().message.find(m_path), std::string::npos);

  FileLock moved = std::move(*first);
  EXPECT_TRUE(moved.held());
  EXPECT_FALSE(FileLock::acquire(m_path).has_value());
  moved.release();
  EXPECT_TRUE(FileLock::acquire(m_path).has_value());
}

TEST_F(FileLockTest, ForkedChildCannotTakeParentsLock) {
  auto lock = FileLock::acquire(m_path);
  ASSERT_TRUE(lock.has_value());
  pid_t pid = ::fork();
  ASSERT_GE(pid, 0);
  if (pid == 0) {
    auto r = FileLock::acquire(m_path);
    bool names_parent =
        !r && r.error().message.find("pid " + std::to_string(::getppid())) != std::string::npos;
    ::_exit(names_parent ? 0 : 1);
  }
  int status = 0;
  ASSERT_EQ(::waitpid(pid, &status, 0), pid);
  ASSERT_TRUE(WIFEXITED(status));
  EXPECT_EQ(WEXITSTATUS(status), 0) << "child could take the lock or did not name the holder";
}

TEST_F(FileLockTest, ParentCannotTakeChildsLockUntilChildExits) {
  int ready[2], finish[2];
  ASSERT_EQ(::pipe(ready), 0);
  ASSERT_EQ(::pipe(finish), 0);
  pid_t pid = ::fork();
  ASSERT_GE(pid, 0);
  if (pid == 0) {
    auto r = FileLock::acquire(m_path);
    char c = r ? 'y' : 'n';
    (void)!::write(ready[1], &c, 1);
    (void)!::read(finish[0], &c, 1);  // hold until the parent says so
    ::_exit(0);
  }
  char c = 0;
  ASSERT_EQ(::read(ready[0], &c, 1), 1);
  ASSERT_EQ(c, 'y');
  auto refused = FileLock::acquire(m_path);
  ASSERT_FALSE(refused.has_value());
  EXPECT_NE(refused.error().message.find("pid " + std::to_string(pid)), std::string::npos)
      << refused.error().message;
  ASSERT_EQ(::write(finish[1], "x", 1), 1);
  int status = 0;
  ASSERT_EQ(::waitpid(pid, &status, 0), pid);
  auto taken = FileLock::acquire(m_path);  // the kernel released the dead child's lock
  EXPECT_TRUE(taken.has_value()) << (taken ? "" : taken.error().message);
  for (int fd : {ready[0], ready[1], finish[0], finish[1]}) ::close(fd);
}

}  // namespace
}  // namespace korch::store
