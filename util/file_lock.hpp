#pragma once
// An exclusive, process-lifetime lock on a file, the one korch uses
// everywhere (DESIGN §3 "one owner at a time": korch takes
// FileLock::acquire(FileLock::path_for_db(db)) before it drives a database, so
// two korch processes never drive the same korch.db; the evaluator's compile
// cache takes acquire_blocking() per cache key).
// The lock is a non-blocking flock(2); the holder writes its pid into the
// file so a refused process can say who holds it. The kernel drops the lock
// when the holder exits, even after kill -9, so a stale file never blocks.
#include <string>

#include "util/error.hpp"

namespace korch {

class FileLock {
 public:
  // Takes the lock on `path` (created if missing) without waiting. Fails with
  // one line naming the path and, when known, the pid of the holder:
  // "<path>: locked by pid 1234 (another korch process uses this database)".
  static Result<FileLock> acquire(const std::string& path);
  // Takes the lock on `path` (created if missing, mode 0600), waiting for
  // the holder to release it. Fails only when the file cannot be opened or
  // locked.
  static Result<FileLock> acquire_blocking(const std::string& path);

  // The lock file korch uses for a database: "<db_path>.lock".
  static std::string path_for_db(const std::string& db_path) { return db_path + ".lock"; }

  FileLock(FileLock&& other) noexcept;
  FileLock& operator=(FileLock&& other) noexcept;
  FileLock(const FileLock&) = delete;
  FileLock& operator=(const FileLock&) = delete;
  // Releases the lock (closes the descriptor). The file itself stays.
  ~FileLock();

  // Releases the lock now. Idempotent.
  void release();
  const std::string& path() const { return m_path; }
  bool held() const { return m_fd >= 0; }

 private:
  FileLock(std::string path, int fd) : m_path(std::move(path)), m_fd(fd) {}

  std::string m_path;
  int m_fd = -1;
};

}  // namespace korch
