#pragma once
// The database's lock is korch's one FileLock (util/file_lock.hpp).
#include "util/file_lock.hpp"

namespace korch::store {
using FileLock = ::korch::FileLock;
}  // namespace korch::store
