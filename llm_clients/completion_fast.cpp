// The fast path of parse_completion (openai_wire.hpp): simdjson's DOM parser
// for the ordinary reply. nlohmann's lexer builds every string a character at
// a time and was 12% of the engine's samples (korch-bench-engine, 1,000
// episodes, ~6 KB replies); simdjson validates and unescapes the same body in
// a few microseconds.
//
// The fast path answers only where its answer is provably nlohmann's: a
// well-formed object with a first choice that has a message, no "error", no
// key of interest written twice (nlohmann keeps the last, simdjson finds the
// first), and token counts that are plain int64 numbers. Anything else,
// including every body simdjson rejects, returns nullopt and the caller takes
// the nlohmann path, so errors read exactly as before. test_openai_wire
// compares the two paths on generated and mutated bodies.
#include <simdjson.h>

#include <array>
#include <optional>
#include <string_view>

#include "llm_clients/openai_wire.hpp"

namespace korch::llm {
namespace {

using simdjson::dom::element;
using simdjson::dom::element_type;
using simdjson::dom::object;

// Looks up `N` keys in one pass; false when any of them occurs twice.
template <std::size_t N>
bool find_unique(const object& obj, const std::array<std::string_view, N>& keys,
                 std::array<std::optional<element>, N>& out) {
  for (auto field : obj) {
    for (std::size_t i = 0; i < N; ++i) {
      if (field.key != keys[i]) continue;
      if (out[i]) return false;
      out[i] = field.value;
    }
  }
  return true;
}

// nlohmann's append_string: appends the value when it is a string.
void append_if_string(const std::optional<element>& e, std::string& out) {
  if (!e || e->type() != element_type::STRING) return;
  std::string_view s;
  if (!e->get_string().get(s)) out.append(s);
}

// A token count: 0 when absent or not a number (nlohmann's int_at); false
// for numbers whose int64 conversion would need nlohmann's own rules.
bool count_of(const std::optional<element>& e, std::int64_t& out) {
  out = 0;
  if (!e) return true;
  switch (e->type()) {
    case element_type::INT64: return !e->get_int64().get(out);
    case element_type::UINT64:
    case element_type::DOUBLE: return false;
    default: return true;  // not a number: 0, as nlohmann's path reads it
  }
}

bool read_details(const std::optional<element>& d, std::string_view key, std::int64_t& out) {
  out = 0;
  if (!d || d->type() != element_type::OBJECT) return true;
  std::array<std::optional<element>, 1> v;
  object o;
  if (d->get_object().get(o) || !find_unique(o, std::array<std::string_view, 1>{key}, v)) {
    return false;
  }
  return count_of(v[0], out);
}

// The parser keeps buffers sized for the largest body it has parsed, for the
// life of its thread (the client's event loop); larger bodies take the
// reference path instead of pinning that much memory.
constexpr std::size_t k_fast_max_bytes = std::size_t{1} << 20;

}  // namespace

std::optional<ParsedCompletion> parse_completion_fast(std::string_view body) {
  if (body.size() > k_fast_max_bytes) return std::nullopt;
  thread_local simdjson::dom::parser parser;
  element doc;
  object root;
  if (parser.parse(body.data(), body.size()).get(doc) || doc.get_object().get(root)) {
    return std::nullopt;
  }
  std::array<std::optional<element>, 3> top;
  if (!find_unique(root, std::array<std::string_view, 3>{"error", "choices", "usage"}, top)) {
    return std::nullopt;
  }
  const auto& [error, choices, usage] = top;
  if (error && !error->is_null()) return std::nullopt;
  simdjson::dom::array arr;
  if (!choices || choices->get_array().get(arr) || arr.size() == 0) return std::nullopt;
  object choice;
  if (arr.at(0).get_object().get(choice)) return std::nullopt;
  std::array<std::optional<element>, 2> c;
  if (!find_unique(choice, std::array<std::string_view, 2>{"message", "finish_reason"}, c)) {
    return std::nullopt;
  }
  object message;
  if (!c[0] || c[0]->get_object().get(message)) return std::nullopt;
  std::array<std::optional<element>, 3> m;
  if (!find_unique(message,
                   std::array<std::string_view, 3>{"content", "reasoning_content", "reasoning"},
                   m)) {
    return std::nullopt;
  }
  ParsedCompletion out;
  append_if_string(m[0], out.content);
  append_if_string(m[1], out.reasoning);
  if (out.reasoning.empty()) append_if_string(m[2], out.reasoning);
  append_if_string(c[1], out.finish_reason);
  if (usage && usage->type() == element_type::OBJECT) {
    object u;
    std::array<std::optional<element>, 4> k;
    if (usage->get_object().get(u) ||
        !find_unique(
            u,
            std::array<std::string_view, 4>{"prompt_tokens", "completion_tokens",
                                            "prompt_tokens_details", "completion_tokens_details"},
            k) ||
        !count_of(k[0], out.usage.prompt_tokens) || !count_of(k[1], out.usage.completion_tokens) ||
        !read_details(k[2], "cached_tokens", out.usage.cached_tokens) ||
        !read_details(k[3], "reasoning_tokens", out.usage.reasoning_tokens)) {
      return std::nullopt;
    }
    out.has_usage = true;
  }
  out.ok = true;
  return out;
}

}  // namespace korch::llm
