#include "util/file_lock.hpp"

#include <fcntl.h>
#include <sys/file.h>
#include <unistd.h>

#include <cerrno>
#include <cstring>
#include <utility>

namespace korch {
namespace {

// Reads the pid the holder wrote ("" when unreadable or empty).
std::string read_holder(int fd) {
  char buf[64] = {};
  auto n = ::pread(fd, buf, sizeof(buf) - 1, 0);
  if (n <= 0) return {};
  std::string text(buf, static_cast<std::size_t>(n));
  while (!text.empty() && (text.back() == '\n' || text.back() == ' ')) text.pop_back();
  return text;
}

}  // namespace

Result<FileLock> FileLock::acquire(const std::string& path) {
  int fd = ::open(path.c_str(), O_RDWR | O_CREAT | O_CLOEXEC, 0644);
  if (fd < 0) return fail(path + ": cannot open lock file: " + std::strerror(errno));
  while (::flock(fd, LOCK_EX | LOCK_NB) != 0) {
    if (errno == EINTR) continue;
    int err = errno;
    std::string holder = err == EWOULDBLOCK ? read_holder(fd) : std::string();
    ::close(fd);
    if (err != EWOULDBLOCK) return fail(path + ": cannot lock: " + std::strerror(err));
    return fail(path + ": locked by " +
                (holder.empty() ? std::string("another process") : "pid " + holder) +
                " (another korch process uses this database)");
  }
  std::string pid = std::to_string(::getpid()) + "\n";
  if (::ftruncate(fd, 0) != 0 ||
      ::pwrite(fd, pid.data(), pid.size(), 0) != static_cast<ssize_t>(pid.size())) {
    int err = errno;
    ::close(fd);
    return fail(path + ": cannot write pid to lock file: " + std::strerror(err));
  }
  return FileLock(path, fd);
}

Result<FileLock> FileLock::acquire_blocking(const std::string& path) {
  int fd = ::open(path.c_str(), O_RDWR | O_CREAT | O_CLOEXEC, 0600);
  if (fd < 0) return fail(path + ": cannot open lock file: " + std::strerror(errno));
  while (::flock(fd, LOCK_EX) != 0) {
    if (errno == EINTR) continue;
    int err = errno;
    ::close(fd);
    return fail(path + ": cannot lock: " + std::strerror(err));
  }
  return FileLock(path, fd);
}

FileLock::FileLock(FileLock&& other) noexcept
    : m_path(std::move(other.m_path)), m_fd(std::exchange(other.m_fd, -1)) {}

FileLock& FileLock::operator=(FileLock&& other) noexcept {
  if (this != &other) {
    release();
    m_path = std::move(other.m_path);
    m_fd = std::exchange(other.m_fd, -1);
  }
  return *this;
}

FileLock::~FileLock() { release(); }

void FileLock::release() {
  if (m_fd < 0) return;
  ::close(m_fd);  // drops the flock
  m_fd = -1;
}

}  // namespace korch
