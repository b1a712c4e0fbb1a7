#pragma once
// The retry policy of the chat client as a pure function (STYLE habit 6):
// given what one HTTP attempt produced, how many attempts were made and a
// random source, decide whether to retry, after how long, or how the call
// ends. No clock, no I/O: `now` and the random draw are injected so the
// policy is table-testable.
#include <chrono>
#include <functional>
#include <optional>
#include <string>
#include <string_view>

namespace korch::llm {

// What went wrong below HTTP (or in the payload) on one attempt.
enum class TransportError {
  none,      // a complete HTTP response arrived
  connect,   // could not connect / resolve
  timeout,   // connect, first-byte, stall or total timeout
  reset,     // connection reset or closed mid-response
  protocol,  // 2xx but unusable payload: malformed JSON, empty choices,
             // truncated SSE stream, mid-stream error event
};
const char* to_string(TransportError e);

// Everything the policy looks at for one failed attempt.
struct AttemptFailure {
  int http_status = 0;  // 0 when no status line was received
  TransportError transport = TransportError::none;
  std::string_view body;            // response body (error JSON), may be empty
  std::string_view retry_after;     // "Retry-After" header value, "" if absent
  std::string_view retry_after_ms;  // "retry-after-ms" header value, "" if absent
};

struct RetryLimits {
  int max_attempts = 6;       // attempts per call including the first (>= 1)
  double base_delay_s = 0.5;  // first exponential backoff step
  double cap_s = 60;          // longest backoff or Retry-After honoured
};

enum class RetryAction {
  retry,             // wait delay_s, then try again
  context_overflow,  // permanent: the prompt is too long for the model
  permanent,         // permanent: do not retry (4xx other than 408/409/429)
  exhausted,         // transient, but max_attempts attempts have been made
};
const char* to_string(RetryAction a);

struct RetryDecision {
  RetryAction action = RetryAction::permanent;
  double delay_s = 0;          // only for retry
  bool server_hinted = false;  // delay came from Retry-After / retry-after-ms
};

// Whether a status / transport error is worth another attempt (connect
// errors, timeouts, resets, protocol errors, 408, 409, 429, 5xx).
bool is_transient(int http_status, TransportError transport);

// Whether an error body says the prompt exceeded the context window
// ("maximum context length", "context_length_exceeded", "prompt is too
// long", ...). Case-insensitive.
bool is_context_overflow_body(std::string_view body);

// Parses a Retry-After value: delta-seconds (integer or decimal) or an
// HTTP date (IMF-fixdate, RFC 850, asctime) relative to `now`. Returns the
// delay in seconds (>= 0), or nullopt if unparsable.
std::optional<double> parse_retry_after(std::string_view value,
                                        std::chrono::system_clock::time_point now);

// Decides what happens after failed attempt number `attempts_made`
// (1-based: the first attempt failing gives 1). `uniform01` returns a
// uniformly distributed double in [0, 1) and is called at most once.
// Order: context overflow (400/413 with a context-length body) >
// permanent 4xx > exhausted (attempts_made >= max_attempts) > retry with
// delay = min(cap, server hint) when the server sent retry-after-ms /
// Retry-After, else min(cap, base * 2^(attempts_made-1)) * (0.5 + 0.5*u)
// ("equal jitter").
RetryDecision decide_retry(const AttemptFailure& failure, int attempts_made,
                           const RetryLimits& limits, const std::function<double()>& uniform01,
                           std::chrono::system_clock::time_point now);

}  // namespace korch::llm
