#include "llm_clients/openai_wire.hpp"

#include <cstdint>
#include <cstring>

#include <nlohmann/json.hpp>

namespace korch::llm {

using nlohmann::json;

namespace {

std::string one_line(std::string text, std::size_t max_len) {
  for (char& c : text) {
    if (c == '\n' || c == '\r' || c == '\t') c = ' ';
  }
  if (text.size() > max_len) {
    text.resize(max_len);
    text += "...";
  }
  return text;
}

std::int64_t int_at(const json& obj, const char* key) {
  auto it = obj.find(key);
  if (it == obj.end() || !it->is_number()) return 0;
  return it->get<std::int64_t>();
}

// Reads a `usage` object into `out`; returns false when absent or null.
bool read_usage(const json& root, Usage& out) {
  auto it = root.find("usage");
  if (it == root.end() || !it->is_object()) return false;
  const json& u = *it;
  out.prompt_tokens = int_at(u, "prompt_tokens");
  out.completion_tokens = int_at(u, "completion_tokens");
  out.cached_tokens = 0;
  out.reasoning_tokens = 0;
  if (auto d = u.find("prompt_tokens_details"); d != u.end() && d->is_object()) {
    out.cached_tokens = int_at(*d, "cached_tokens");
  }
  if (auto d = u.find("completion_tokens_details"); d != u.end() && d->is_object()) {
    out.reasoning_tokens = int_at(*d, "reasoning_tokens");
  }
  return true;
}

// Appends a string field of `obj` (if it is a string) to `out`.
void append_string(const json& obj, const char* key, std::string& out) {
  auto it = obj.find(key);
  if (it != obj.end() && it->is_string()) out += it->get_ref<const std::string&>();
}

std::string error_text(const json& err) {
  if (err.is_string()) return err.get<std::string>();
  if (err.is_object()) {
    auto it = err.find("message");
    if (it != err.end() && it->is_string()) return it->get<std::string>();
  }
  return err.dump();
}

// True when none of the 8 bytes of `w` needs the slow path: each is printable
// ASCII other than '"' and '\\' (SWAR: each test is exact about whether any
// byte matches, which is all the caller needs).
constexpr bool plain8(std::uint64_t w) {
  constexpr std::uint64_t k_ones = 0x0101010101010101ull;
  constexpr std::uint64_t k_high = 0x8080808080808080ull;
  auto has_zero = [](std::uint64_t v) { return ((v - k_ones) & ~v & k_high) != 0; };
  const bool high = (w & k_high) != 0;
  const bool control = ((w - 0x20 * k_ones) & ~w & k_high) != 0;  // a byte < 0x20
  return !high && !control && !has_zero(w ^ (0x22 * k_ones)) && !has_zero(w ^ (0x5C * k_ones));
}

}  // namespace

bool append_json_string(std::string& out, std::string_view s) {
  static constexpr char k_hex[] = "0123456789abcdef";
  const auto* p = reinterpret_cast<const unsigned char*>(s.data());
  const std::size_t n = s.size();
  out += '"';
  std::size_t run = 0;  // start of the bytes not yet copied
  std::size_t i = 0;
  while (i < n) {
    // Most of a conversation is plain text: skip it 8 bytes at a time.
    if (i + 8 <= n) {
      std::uint64_t w;
      std::memcpy(&w, p + i, 8);
      if (plain8(w)) {
        i += 8;
        continue;
      }
    }
    const unsigned char c = p[i];
    if (c >= 0x20 && c != '"' && c != '\\' && c < 0x80) {
      ++i;
      continue;
    }
    if (c >= 0x80) {
      // A UTF-8 sequence: well formed (RFC 3629: no overlongs, no surrogates,
      // at most U+10FFFF) or the caller falls back.
      std::size_t len = c >= 0xF0 ? 4 : c >= 0xE0 ? 3 : c >= 0xC2 ? 2 : 0;
      if (len == 0 || c > 0xF4 || i + len > n) return false;
      for (std::size_t k = 1; k < len; ++k)
        if ((p[i + k] & 0xC0) != 0x80) return false;
      if (c == 0xE0 && p[i + 1] < 0xA0) return false;   // overlong
      if (c == 0xED && p[i + 1] >= 0xA0) return false;  // surrogate
      if (c == 0xF0 && p[i + 1] < 0x90) return false;   // overlong
      if (c == 0xF4 && p[i + 1] >= 0x90) return false;  // above U+10FFFF
      i += len;
      continue;
    }
    out.append(s.data() + run, i - run);
    switch (c) {
      case '"': out += "\\\""; break;
      case '\\': out += "\\\\"; break;
      case '\b': out += "\\b"; break;
      case '\f': out += "\\f"; break;
      case '\n': out += "\\n"; break;
      case '\r': out += "\\r"; break;
      case '\t': out += "\\t"; break;
      default:
        out += "\\u00";
        out += k_hex[c >> 4];
        out += k_hex[c & 0xF];
    }
    run = ++i;
  }
  out.append(s.data() + run, n - run);
  out += '"';
  return true;
}

// The conversation is most of a request (every earlier turn is resent), so
// the messages are written straight into the body: no DOM copy of each
// content string, one escaping pass over bytes that rarely need it. The rest
// of the body, and any message that is not valid UTF-8 (nlohmann replaces its
// bad bytes with U+FFFD), go through nlohmann, so the bytes are exactly what
// dumping the whole body as one json value gives (tests/llm_clients).
std::string build_request_body(const config::ModelConfig& model,
                               const std::vector<Message>& messages) {
  static const std::string k_slot = "\x01korch-messages\x01";
  json body;
  body["model"] = model.model;
  body["messages"] = k_slot;
  body["temperature"] = model.temperature;
  body["top_p"] = model.top_p;
  if (model.max_tokens > 0) body["max_tokens"] = model.max_tokens;
  body["stream"] = model.stream;
  if (model.stream) body["stream_options"] = {{"include_usage", true}};
  const std::string head = body.dump(-1, ' ', false, json::error_handler_t::replace);
  const std::string slot = json(k_slot).dump();
  const std::size_t at = head.find(slot);

  std::size_t size = head.size() + 2;
  for (const auto& m : messages) size += m.content.size() + m.role.size() + 32;
  std::string out;
  out.reserve(size + size / 16);
  out.append(head, 0, at);
  out += '[';
  for (std::size_t i = 0; i < messages.size(); ++i) {
    if (i) out += ',';
    // nlohmann orders object keys: "content" before "role".
    out += "{\"content\":";
    const std::size_t mark = out.size();
    if (!append_json_string(out, messages[i].content)) {
      out.resize(mark);
      out += json(messages[i].content).dump(-1, ' ', false, json::error_handler_t::replace);
    }
    out += ",\"role\":";
    const std::size_t mark2 = out.size();
    if (!append_json_string(out, messages[i].role)) {
      out.resize(mark2);
      out += json(messages[i].role).dump(-1, ' ', false, json::error_handler_t::replace);
    }
    out += '}';
  }
  out += ']';
  out.append(head, at + slot.size(), std::string::npos);
  return out;
}

ParsedCompletion parse_completion(std::string_view body) {
  if (auto fast = parse_completion_fast(body)) return std::move(*fast);
  return parse_completion_reference(body);
}

ParsedCompletion parse_completion_reference(std::string_view body) {
  ParsedCompletion out;
  json root = json::parse(body, nullptr, /*allow_exceptions=*/false);
  if (root.is_discarded() || !root.is_object()) {
    out.error = "malformed JSON in response";
    return out;
  }
  if (auto it = root.find("error"); it != root.end() && !it->is_null()) {
    out.error = "error in response: " + one_line(error_text(*it), 200);
    return out;
  }
  auto choices = root.find("choices");
  if (choices == root.end() || !choices->is_array() || choices->empty()) {
    out.error = "response has no choices";
    return out;
  }
  const json& choice = (*choices)[0];
  auto message = choice.find("message");
  if (!choice.is_object() || message == choice.end() || !message->is_object()) {
    out.error = "response choice has no message";
    return out;
  }
  append_string(*message, "content", out.content);
  append_string(*message, "reasoning_content", out.reasoning);
  if (out.reasoning.empty()) append_string(*message, "reasoning", out.reasoning);
  append_string(choice, "finish_reason", out.finish_reason);
  out.has_usage = read_usage(root, out.usage);
  out.ok = true;
  return out;
}

std::string summarize_error_body(std::string_view body, std::size_t max_len) {
  if (body.empty()) return "";
  json root = json::parse(body, nullptr, false);
  if (!root.is_discarded() && root.is_object()) {
    if (auto it = root.find("error"); it != root.end()) return one_line(error_text(*it), max_len);
    if (auto it = root.find("message"); it != root.end() && it->is_string()) {
      return one_line(it->get<std::string>(), max_len);
    }
  }
  return one_line(std::string(body.substr(0, max_len + 1)), max_len);
}

// ---------------------------------------------------------------- SseParser

void SseParser::feed(std::string_view bytes) {
  for (char c : bytes) {
    if (c == '\n') {
      if (m_last_was_cr) {  // the \n of a \r\n pair
        m_last_was_cr = false;
        continue;
      }
      line(m_line);
      m_line.clear();
    } else if (c == '\r') {
      m_last_was_cr = true;
      line(m_line);
      m_line.clear();
      continue;
    } else {
      m_line.push_back(c);
    }
    m_last_was_cr = false;
  }
}

void SseParser::finish() {
  if (!m_line.empty()) {
    line(m_line);
    m_line.clear();
  }
  dispatch();
}

void SseParser::line(std::string_view text) {
  if (text.empty()) {
    dispatch();
    return;
  }
  if (text.front() == ':') {
    ++m_comments;
    return;
  }
  std::string_view field = text;
  std::string_view value;
  if (auto colon = text.find(':'); colon != std::string_view::npos) {
    field = text.substr(0, colon);
    value = text.substr(colon + 1);
    if (!value.empty() && value.front() == ' ') value.remove_prefix(1);
  }
  if (field == "data") {
    if (m_has_data) m_data.push_back('\n');
    m_data.append(value);
    m_has_data = true;
  } else if (field == "event") {
    m_event.assign(value);
  }
  // "id" and "retry" are irrelevant for chat completions.
}

void SseParser::dispatch() {
  if (m_has_data) m_on_event(m_event, m_data);
  m_event.clear();
  m_data.clear();
  m_has_data = false;
}

// ---------------------------------------------------------- StreamAssembler

StreamAssembler::StreamAssembler()
    : m_parser([this](std::string_view event, std::string_view data) { on_event(event, data); }) {}

void StreamAssembler::feed(std::string_view bytes) {
  if (!failed()) m_parser.feed(bytes);
}

void StreamAssembler::on_event(std::string_view event, std::string_view data) {
  if (failed() || m_done) return;
  if (data == "[DONE]") {
    m_done = true;
    return;
  }
  json chunk = json::parse(data, nullptr, false);
  if (event == "error") {
    m_error = "stream error event: " +
              (chunk.is_discarded()
                   ? one_line(std::string(data), 200)
                   : one_line(error_text(chunk.contains("error") ? chunk["error"] : chunk), 200));
    return;
  }
  if (chunk.is_discarded() || !chunk.is_object()) {
    m_error = "malformed JSON in stream chunk";
    return;
  }
  if (auto it = chunk.find("error"); it != chunk.end() && !it->is_null()) {
    m_error = "stream error event: " + one_line(error_text(*it), 200);
    return;
  }
  m_saw_chunk = true;
  if (read_usage(chunk, m_result.usage)) m_result.has_usage = true;
  auto choices = chunk.find("choices");
  if (choices == chunk.end() || !choices->is_array()) return;
  for (const json& choice : *choices) {
    if (!choice.is_object()) continue;
    if (auto idx = choice.find("index"); idx != choice.end() && idx->is_number() && *idx != 0)
      continue;
    if (auto delta = choice.find("delta"); delta != choice.end() && delta->is_object()) {
      append_string(*delta, "content", m_result.content);
      append_string(*delta, "reasoning_content", m_result.reasoning);
      append_string(*delta, "reasoning", m_result.reasoning);
    }
    if (auto fr = choice.find("finish_reason"); fr != choice.end() && fr->is_string()) {
      m_result.finish_reason = fr->get<std::string>();
    }
  }
}

ParsedCompletion StreamAssembler::finish() {
  if (!failed()) m_parser.finish();
  ParsedCompletion out = m_result;
  if (failed()) {
    out.ok = false;
    out.error = m_error;
  } else if (m_result.finish_reason.empty() && !m_done) {
    out.ok = false;
    out.error = m_saw_chunk ? "stream ended without a finish frame or [DONE]"
                            : "stream ended before any chunk";
  } else {
    out.ok = true;
  }
  return out;
}

}  // namespace korch::llm
