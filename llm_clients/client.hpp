#pragma once
// Asynchronous OpenAI-compatible chat client (DESIGN §4). All requests of the
// process share one libcurl multi handle driven by one event-loop thread;
// submit() never blocks on the network, so thousands of requests can be in
// flight on a few threads. Callbacks run on the event-loop thread: keep them
// short (post to your own queue).
#include <memory>

#include "config/campaign.hpp"
#include "llm_clients/types.hpp"
#include "util/error.hpp"

namespace korch::llm {

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
