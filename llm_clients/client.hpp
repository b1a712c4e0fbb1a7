#pragma once
// Asynchronous OpenAI-compatible chat client (DESIGN §4). All requests of the
// process share one libcurl multi handle driven by one event-loop thread;
// submit() never blocks on the network, so thousands of requests can be in
// flight on a few threads. Callbacks run on the event-loop thread: keep them
// short (post to your own queue).
#include <cstdint>
#include <functional>
#include <memory>
#include <string>
#include <vector>

#include "config/campaign.hpp"
#include "util/error.hpp"

namespace korch::llm {

struct Message {
  std::string role;     // system | user | assistant
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
  int http_status = 0;       // 0 when no HTTP status was received
  std::string error;         // "" on success; curl or protocol error otherwise
  double latency_s = 0;
};

enum class Outcome {
  ok,                 // a completion arrived (finish_reason may be "length")
  context_overflow,   // provider rejected the prompt as too long (400): compact and retry
  permanent,          // 400/401/403/404/422 or malformed beyond retry
  exhausted,          // transient failures until max_attempts
  cancelled,          // client shut down
};
const char* to_string(Outcome o);

struct ChatRequest {
  std::string model_id;          // a model registered with add_model()
  std::string request_id;        // deterministic; sent as X-Request-Id
  std::vector<Message> messages;
};

struct ChatResult {
  Outcome outcome = Outcome::cancelled;
  std::string content;
  std::string reasoning;         // reasoning_content / reasoning, if any
  std::string finish_reason;     // "stop", "length", ...
  Usage usage;
  double cost_usd = 0;
  double latency_s = 0;          // submit() to completion
  std::vector<Attempt> attempts;
  std::string provider_request_id;
  std::string error;             // one line, never contains the API key
};

using ChatCallback = std::function<void(ChatResult)>;

struct ClientStats {
  std::int64_t submitted = 0;
  std::int64_t completed = 0;
  std::int64_t in_flight = 0;
  std::int64_t http_attempts = 0;
  std::int64_t retries = 0;
  std::int64_t limit_changes = 0;   // adaptive-concurrency adjustments
  std::int64_t resolver_starts = 0; // libcurl name lookups started (each may be a thread)
};

class ChatClient {
 public:
  virtual ~ChatClient() = default;
  // Registers a model; reads its API key from the environment variable it
  // names. Fails if that variable is named but unset.
  virtual Result<void> add_model(const config::ModelConfig& model) = 0;
  // Queues a request; `done` is called exactly once. Thread-safe. Normally
  // `done` runs on the event-loop thread; for an unknown model (Outcome::
  // permanent) or after shutdown() (Outcome::cancelled) it runs at once on
  // the caller's thread. Timeouts (ModelConfig): connect, first byte and
  // stall apply to each HTTP attempt; total_timeout_s bounds one attempt.
  virtual void submit(ChatRequest request, ChatCallback done) = 0;
  virtual ClientStats stats() const = 0;
  // Cancels everything in flight (callbacks get Outcome::cancelled) and joins
  // the event loop. Idempotent. Called from a callback it only requests the
  // stop (the loop cannot join itself); never destroy the client from a
  // callback.
  virtual void shutdown() = 0;
};

// The libcurl implementation.
std::unique_ptr<ChatClient> make_curl_client();

}  // namespace korch::llm
