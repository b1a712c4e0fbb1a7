#pragma once
// An in-process, scripted, fault-injecting OpenAI-compatible server for
// tests (POST /v1/chat/completions, streaming and not; GET /health; GET
// /v1/models). Listens on 127.0.0.1, port 0 = any free port. Reply text
// comes from a pluggable ReplyFn; faults are drawn deterministically from
// (seed, X-Request-Id, attempt number), so a run is reproducible whatever
// the thread interleaving. The server counts every attempt per X-Request-Id
// and records what it did, so tests can compare the client's view with the
// server's. All public methods are thread-safe. cpp-httplib stays in the .cpp.
#include <chrono>
#include <cstdint>
#include <functional>
#include <map>
#include <memory>
#include <optional>
#include <string>
#include <utility>
#include <vector>

#include "llm_clients/client.hpp"
#include "tests/support/scripted_replies.hpp"
#include "util/error.hpp"

namespace korch::testing {

enum class Fault {
  none,
  rate_limit,                 // 429 without Retry-After
  rate_limit_retry_after,     // 429 with "Retry-After: 1" (seconds)
  rate_limit_retry_after_ms,  // 429 with "retry-after-ms: 30"
  http_500,
  http_502,
  http_503,
  http_504,
  reset_mid_body,      // status + headers + part of the body, then the connection drops
  slow_first_byte,     // waits FakeServerOptions::slow_first_byte before answering
  truncated_stream,    // stream ends cleanly without a finish frame or [DONE]
                       // (non-streaming requests: handled as reset_mid_body)
  stream_error_event,  // a mid-stream {"error":...} event (non-streaming: 200 with an error body)
  malformed_json,      // 200 whose body (or one SSE chunk) is not JSON
  empty_choices,       // 200 with "choices": []
  finish_length,       // a normal reply cut at max_tokens (finish_reason "length"): not a failure
  context_overflow,    // 400 "This model's maximum context length is ..."
  unauthorized,        // 401 whose message echoes the bearer token received, as
                       // some providers do (tests check the client redacts it)
};
const char* to_string(Fault f);

// True for every fault except none and finish_length (which deliver a
// usable completion).
bool is_failure(Fault f);

// The transient faults the issue lists, used when FaultPlan::weights is empty.
std::vector<std::pair<Fault, double>> default_fault_weights();

struct FaultPlan {
  double rate = 0;                                // probability that one attempt gets a fault
  std::vector<std::pair<Fault, double>> weights;  // relative; empty = default_fault_weights()
  std::uint64_t seed = 1;
};

using ReplyFn =
    std::function<ScriptedReply(const std::string& model, const std::vector<llm::Message>&)>;
// A reply that may also depend on the request's X-Request-Id ("" when the
// request has none): deterministic ids (llm|<episode>|<turn>|<model>) let a
// script tell apart samples whose conversations are the same.
using ReplyWithIdFn = std::function<ScriptedReply(
    const std::string& model, const std::vector<llm::Message>&, const std::string& request_id)>;

struct FakeServerOptions {
  std::string host = "127.0.0.1";
  int port = 0;                          // 0 = any free port
  int threads = 256;                     // handler pool (replaces httplib's 8)
  std::chrono::milliseconds latency{0};  // before each reply
  std::chrono::milliseconds slow_first_byte{2000};
  std::chrono::milliseconds stream_chunk_delay{0};
  FaultPlan faults;
  ReplyFn reply;                       // default: a short deterministic reply
  ReplyWithIdFn reply_with_id;         // when set, used instead of `reply`
  std::size_t recorded_requests = 64;  // ring of last request bodies/headers
  // When set, one line "<unix seconds> <X-Request-Id>" is appended (and
  // flushed) per chat request as it arrives: the kill test's independent
  // record of what was sent.
  std::string request_log;
};

// One received request as the server saw it.
struct RecordedRequest {
  std::string path;
  std::string body;
  std::string request_id;                      // X-Request-Id ("" if absent)
  std::string authorization;                   // Authorization header ("" if absent)
  std::map<std::string, std::string> headers;  // lower-case names
};

// What the server did with one attempt.
struct AttemptRecord {
  Fault fault = Fault::none;
  int http_status = 0;
  bool stream = false;
  bool delivered = false;  // a complete, usable completion was sent
  llm::Usage usage;        // as reported to the client (when delivered)
};

struct ServerStats {
  std::int64_t requests = 0;        // chat completion attempts
  std::int64_t delivered = 0;       // attempts that delivered a completion
  std::int64_t max_concurrent = 0;  // most chat handlers running at once
  std::map<Fault, std::int64_t> faults;
};

class FakeOpenAIServer {
 public:
  explicit FakeOpenAIServer(FakeServerOptions options = {});
  ~FakeOpenAIServer();
  FakeOpenAIServer(const FakeOpenAIServer&) = delete;
  FakeOpenAIServer& operator=(const FakeOpenAIServer&) = delete;

  // Binds, starts serving and waits until GET /health answers.
  Result<void> start();
  // Stops serving; wakes handlers sleeping in latency/slow faults. Idempotent.
  void stop();

  int port() const;
  // "http://127.0.0.1:<port>/v1" (host as configured).
  std::string base_url() const;

  // The next `n` chat requests (any request id) get `fault`, ahead of the plan.
  void fail_next(int n, Fault fault);
  void set_latency(std::chrono::milliseconds latency);
  void set_fault_plan(FaultPlan plan);

  // Attempts seen for an X-Request-Id, and what happened to each.
  int attempts(const std::string& request_id) const;
  std::vector<AttemptRecord> attempt_log(const std::string& request_id) const;
  std::map<std::string, std::vector<AttemptRecord>> all_attempts() const;
  ServerStats stats() const;
  // The last FakeServerOptions::recorded_requests requests, oldest first.
  std::vector<RecordedRequest> recent_requests() const;
  std::optional<RecordedRequest> last_request() const;

  struct Impl;

 private:
  std::unique_ptr<Impl> m_impl;
};

// The default ReplyFn: "Reply to: <first 40 chars of the last message>".
ScriptedReply default_reply(const std::string& model, const std::vector<llm::Message>& messages);

}  // namespace korch::testing
