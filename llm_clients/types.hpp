#pragma once
// The chat client's value types: requests, results, usage and outcomes.
// Plain data with no I/O, shared by the client (client.hpp), the wire format
// (openai_wire.hpp) and the pricing (cost.hpp), so none of those has to
// include another's header.
#include <cstdint>
#include <functional>
#include <string>
#include <string_view>
#include <vector>

namespace korch::llm {

struct Message {
  std::string role;  // system | user | assistant
  std::string content;
};

struct Usage {
  std::int64_t prompt_tokens = 0;
  std::int64_t completion_tokens = 0;
  std::int64_t cached_tokens = 0;
  std::int64_t reasoning_tokens = 0;
};

// One HTTP attempt of a call.
struct Attempt {
  int http_status = 0;  // 0 when no HTTP status was received
  std::string error;    // "" on success; curl or protocol error otherwise
  double latency_s = 0;
};

enum class Outcome {
  ok,                // a completion arrived (finish_reason may be "length")
  context_overflow,  // provider rejected the prompt as too long (400): compact and retry
  permanent,         // 400/401/403/404/422 or malformed beyond retry
  exhausted,         // transient failures until max_attempts
  cancelled,         // client shut down
};
const char* to_string(Outcome o);

struct ChatRequest {
  std::string model_id;    // a model registered with add_model()
  std::string request_id;  // deterministic; sent as X-Request-Id
  std::vector<Message> messages;
};

struct ChatResult {
  Outcome outcome = Outcome::cancelled;
  std::string content;
  std::string reasoning;      // reasoning_content / reasoning, if any
  std::string finish_reason;  // "stop", "length", ...
  Usage usage;
  double cost_usd = 0;
  double latency_s = 0;  // submit() to completion
  std::vector<Attempt> attempts;
  std::string provider_request_id;
  std::string error;  // one line, never contains the API key
};

// True when a reply stopped at its max_tokens: finish_reason "length" on the
// OpenAI wire (an open set of provider words, stored verbatim; this is the one
// place korch reads a meaning into one of them).
inline bool hit_max_tokens(std::string_view finish_reason) { return finish_reason == "length"; }

using ChatCallback = std::function<void(ChatResult)>;

struct ClientStats {
  std::int64_t submitted = 0;
  std::int64_t completed = 0;
  std::int64_t in_flight = 0;
  std::int64_t http_attempts = 0;
  std::int64_t retries = 0;
  std::int64_t limit_changes = 0;    // adaptive-concurrency adjustments
  std::int64_t resolver_starts = 0;  // libcurl name lookups started (each may be a thread)
};

}  // namespace korch::llm
