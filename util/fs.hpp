#pragma once
#include <filesystem>
#include <string>

#include "util/error.hpp"

namespace korch {

// Reads a whole file. Fails with "<path>: <reason>".
Result<std::string> read_file(const std::filesystem::path& path);

// Writes a file atomically (temp file + fsync + rename).
Result<void> write_file_atomic(const std::filesystem::path& path, std::string_view data);

// Seconds since the Unix epoch, as a double (wall clock).
double now_unix();

// Seconds from a monotonic clock.
double now_mono();

}  // namespace korch
