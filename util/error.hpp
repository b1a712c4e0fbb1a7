#pragma once
// Two-tier error handling (STYLE.md habit 4):
//  - anticipated failures are returned as std::expected<T, korch::Error>;
//  - everything else throws korch::Fatal, caught at thread and handler
//    boundaries.
#include <expected>
#include <stdexcept>
#include <string>

namespace korch {

// A failure the caller is expected to handle. `message` is one line, meant
// for a human, and never contains secrets.
struct Error {
  std::string message;
};

template <typename T>
using Result = std::expected<T, Error>;

inline std::unexpected<Error> fail(std::string message) {
  return std::unexpected<Error>(Error{std::move(message)});
}

// An unrecoverable failure (broken invariant, unusable database).
class Fatal : public std::runtime_error {
 public:
  using std::runtime_error::runtime_error;
};

}  // namespace korch
