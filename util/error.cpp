#include "util/error.hpp"

namespace korch {

const char* to_string(ErrorKind kind) {
  switch (kind) {
    case ErrorKind::failure: return "failure";
    case ErrorKind::invalid: return "invalid";
    case ErrorKind::unavailable: return "unavailable";
    case ErrorKind::interrupted: return "interrupted";
  }
  return "?";
}

}  // namespace korch
