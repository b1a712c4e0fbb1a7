#pragma once
// Two-tier error handling (STYLE.md habit 4):
//  - anticipated failures are returned as std::expected<T, korch::Error>;
//  - everything else throws korch::Fatal, caught at thread and handler
//    boundaries.
// An Error carries a kind, so a program's edge (the CLI's exit code, a future
// HTTP status) is decided in one place from the kind, not at each call site.
#include <expected>
#include <stdexcept>
#include <string>

namespace korch {

// What kind of failure an Error is. The CLI maps each kind to one exit code
// (tools/korch/cli.hpp, exit_code).
enum class ErrorKind {
  failure,      // the work failed: store, evaluator, I/O (the default)
  invalid,      // bad arguments or configuration: the user must change the input
  unavailable,  // a service the run needs is unreachable or refuses us (LLM endpoint, API key)
  interrupted,  // stopped by a signal; the work is resumable
};

// "failure", "invalid", "unavailable" or "interrupted".
const char* to_string(ErrorKind kind);

// A failure the caller is expected to handle. `message` is one line, meant
// for a human, and never contains secrets.
struct Error {
  std::string message;
  ErrorKind kind = ErrorKind::failure;
};

template <typename T>
using Result = std::expected<T, Error>;

inline std::unexpected<Error> fail(std::string message) {
  return std::unexpected<Error>(Error{std::move(message)});
}

inline std::unexpected<Error> fail(ErrorKind kind, std::string message) {
  return std::unexpected<Error>(Error{std::move(message), kind});
}

// `error` relabelled as `kind`, for a caller that knows more than the callee
// (every failure of a config loader is invalid input).
inline Error with_kind(Error error, ErrorKind kind) {
  error.kind = kind;
  return error;
}

// An unrecoverable failure (broken invariant, unusable database).
class Fatal : public std::runtime_error {
 public:
  using std::runtime_error::runtime_error;
};

}  // namespace korch
