#include "llm_clients/retry_policy.hpp"
#include "util/strings.hpp"

#include <algorithm>
#include <array>
#include <cctype>
#include <charconv>
#include <cmath>
#include <ctime>
#include <string>

namespace korch::llm {

namespace {

// Phrases providers use when a prompt does not fit the context window
// (OpenAI, vLLM, SGLang, Anthropic-compatible proxies, OpenRouter, Ollama).
constexpr std::array<std::string_view, 9> k_context_overflow_phrases = {
    "maximum context length", "context_length_exceeded", "prompt is too long",
    "context length",         "context window",          "too many tokens",
    "reduce the length",      "input is too long",       "maximum input length",
};

std::optional<double> parse_number(std::string_view s) {
  s = trim(s);
  if (s.empty()) return std::nullopt;
  double value = 0;
  auto [ptr, ec] = std::from_chars(s.data(), s.data() + s.size(), value);
  if (ec != std::errc() || ptr != s.data() + s.size()) return std::nullopt;
  if (!std::isfinite(value)) return std::nullopt;
  return std::max(0.0, value);
}

std::optional<std::time_t> parse_http_date(std::string_view value) {
  // IMF-fixdate, RFC 850 and asctime formats (RFC 9110 §5.6.7).
  static constexpr std::array<const char*, 3> k_formats = {
      "%a, %d %b %Y %H:%M:%S GMT", "%A, %d-%b-%y %H:%M:%S GMT", "%a %b %e %H:%M:%S %Y"};
  std::string text(trim(value));
  for (const char* format : k_formats) {
    std::tm tm{};
    const char* end = strptime(text.c_str(), format, &tm);
    if (end != nullptr && *end == '\0') return timegm(&tm);
  }
  return std::nullopt;
}

}  // namespace

const char* to_string(TransportError e) {
  switch (e) {
    case TransportError::none: return "none";
    case TransportError::connect: return "connect";
    case TransportError::timeout: return "timeout";
    case TransportError::reset: return "reset";
    case TransportError::protocol: return "protocol";
  }
  return "?";
}

const char* to_string(RetryAction a) {
  switch (a) {
    case RetryAction::retry: return "retry";
    case RetryAction::context_overflow: return "context_overflow";
    case RetryAction::permanent: return "permanent";
    case RetryAction::exhausted: return "exhausted";
  }
  return "?";
}

bool is_transient(int http_status, TransportError transport) {
  if (transport != TransportError::none) return true;
  if (http_status == 408 || http_status == 409 || http_status == 429) return true;
  if (http_status >= 500 && http_status <= 599) return true;
  // No status at all without a transport error cannot happen; be safe.
  return http_status == 0;
}

bool is_context_overflow_body(std::string_view body) {
  if (body.empty()) return false;
  const std::string text = lower(body);
  return std::any_of(
      k_context_overflow_phrases.begin(), k_context_overflow_phrases.end(),
      [&](std::string_view phrase) { return text.find(phrase) != std::string::npos; });
}

std::optional<double> parse_retry_after(std::string_view value,
                                        std::chrono::system_clock::time_point now) {
  if (auto seconds = parse_number(value)) return seconds;
  if (auto when = parse_http_date(value)) {
    const auto now_s = std::chrono::duration<double>(now.time_since_epoch()).count();
    return std::max(0.0, static_cast<double>(*when) - now_s);
  }
  return std::nullopt;
}

RetryDecision decide_retry(const AttemptFailure& failure, int attempts_made,
                           const RetryLimits& limits, const std::function<double()>& uniform01,
                           std::chrono::system_clock::time_point now) {
  RetryDecision decision;
  const int status = failure.http_status;
  if (failure.transport == TransportError::none && (status == 400 || status == 413) &&
      is_context_overflow_body(failure.body)) {
    decision.action = RetryAction::context_overflow;
    return decision;
  }
  if (!is_transient(status, failure.transport)) {
    decision.action = RetryAction::permanent;
    return decision;
  }
  if (attempts_made >= std::max(1, limits.max_attempts)) {
    decision.action = RetryAction::exhausted;
    return decision;
  }
  decision.action = RetryAction::retry;
  const double cap = std::max(0.0, limits.cap_s);

  std::optional<double> hint;
  if (!failure.retry_after_ms.empty()) {
    if (auto ms = parse_number(failure.retry_after_ms)) hint = *ms / 1000.0;
  }
  if (!hint && !failure.retry_after.empty()) hint = parse_retry_after(failure.retry_after, now);
  if (hint) {
    decision.delay_s = std::min(cap, *hint);
    decision.server_hinted = true;
    return decision;
  }
  const int exponent = std::clamp(attempts_made - 1, 0, 30);
  const double backoff =
      std::min(cap, std::max(0.0, limits.base_delay_s) * std::ldexp(1.0, exponent));
  const double u = std::clamp(uniform01 ? uniform01() : 0.5, 0.0, 1.0);
  decision.delay_s = backoff * (0.5 + 0.5 * u);
  return decision;
}

}  // namespace korch::llm
