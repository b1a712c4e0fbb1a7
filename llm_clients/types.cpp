#include "llm_clients/types.hpp"

namespace korch::llm {

const char* to_string(Outcome o) {
  switch (o) {
    case Outcome::ok: return "ok";
    case Outcome::context_overflow: return "context_overflow";
    case Outcome::permanent: return "permanent";
    case Outcome::exhausted: return "exhausted";
    case Outcome::cancelled: return "cancelled";
  }
  return "?";
}

}  // namespace korch::llm
