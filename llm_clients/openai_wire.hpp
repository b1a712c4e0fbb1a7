#pragma once
// The OpenAI chat-completions wire format, parsed into typed structs at the
// edge (STYLE habit 8): request bodies, non-streaming responses, and SSE
// streams. nlohmann::json stays inside openai_wire.cpp. Pure functions and
// single-threaded objects; no I/O.
#include <cstdint>
#include <functional>
#include <optional>
#include <string>
#include <string_view>
#include <vector>

#include "config/campaign.hpp"
#include "llm_clients/types.hpp"

namespace korch::llm {

// The JSON body of POST /chat/completions for `model` (model name,
// temperature, top_p, max_tokens, stream and stream_options.include_usage
// when streaming).
std::string build_request_body(const config::ModelConfig& model,
                               const std::vector<Message>& messages);

// Appends `s` to `out` as a JSON string literal, escaped exactly as
// nlohmann::json::dump() escapes it (no ASCII-only escaping, control
// characters as \u00xx). Returns false, with `out` partly written, when `s`
// is not valid UTF-8 (the caller decides how to replace it).
bool append_json_string(std::string& out, std::string_view s);

// A completion (or the reason it is unusable). `ok` is false for malformed
// JSON, an `error` object, empty `choices` or a missing message.
struct ParsedCompletion {
  bool ok = false;
  std::string error;  // one line when !ok
  std::string content;
  std::string reasoning;  // reasoning_content or reasoning
  std::string finish_reason;
  Usage usage;
  bool has_usage = false;
};

// Parses a non-streaming 2xx response body: parse_completion_fast where it
// can answer, else parse_completion_reference.
ParsedCompletion parse_completion(std::string_view body);
// The nlohmann path: every body, every error message.
ParsedCompletion parse_completion_reference(std::string_view body);
// simdjson (completion_fast.cpp): the ordinary reply only; nullopt where its
// answer might differ from parse_completion_reference's.
std::optional<ParsedCompletion> parse_completion_fast(std::string_view body);

// A short one-line description of an error body ({"error":{"message":..}}
// or the first bytes of the text), at most `max_len` characters.
std::string summarize_error_body(std::string_view body, std::size_t max_len = 200);

// Incremental Server-Sent Events parser (WHATWG rules: \n, \r\n or \r line
// ends; lines starting with ':' are comments; "data:" lines of one event
// are joined with '\n'; a blank line dispatches). `on_event(event, data)`.
class SseParser {
 public:
  using EventFn = std::function<void(std::string_view event, std::string_view data)>;
  explicit SseParser(EventFn on_event) : m_on_event(std::move(on_event)) {}
  void feed(std::string_view bytes);
  // End of stream: dispatches an event left without its blank line.
  void finish();
  std::int64_t comments() const { return m_comments; }

 private:
  void line(std::string_view text);
  void dispatch();
  EventFn m_on_event;
  std::string m_line;
  bool m_last_was_cr = false;
  std::string m_event;
  std::string m_data;
  bool m_has_data = false;
  std::int64_t m_comments = 0;
};

// Assembles a streamed chat completion from SSE bytes: delta content and
// reasoning are appended, finish_reason and the usage chunk recorded,
// "[DONE]" noted, and the first `error` event or malformed chunk turns the
// stream into a failure.
class StreamAssembler {
 public:
  StreamAssembler();
  void feed(std::string_view bytes);
  // Call once the transfer ended; returns the completion, with ok=false when
  // the stream failed or ended without a finish frame / [DONE].
  ParsedCompletion finish();
  bool failed() const { return !m_error.empty(); }

 private:
  void on_event(std::string_view event, std::string_view data);
  SseParser m_parser;
  ParsedCompletion m_result;
  bool m_done = false;
  bool m_saw_chunk = false;
  std::string m_error;
};

}  // namespace korch::llm
