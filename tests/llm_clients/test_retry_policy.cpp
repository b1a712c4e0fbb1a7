// Table-driven tests of the pure retry policy (llm_clients/retry_policy.hpp).
#include "llm_clients/retry_policy.hpp"

#include <gtest/gtest.h>

#include <chrono>
#include <cmath>
#include <ctime>

namespace korch::llm {
namespace {

using std::chrono::system_clock;

// A fixed "now": 2024-01-01T00:00:00Z.
system_clock::time_point fixed_now() { return system_clock::from_time_t(1704067200); }

// What decide_retry says of `f` after `attempts_made` attempts (max_attempts
// 4, base 0.5 s, cap 10 s) when the injected uniform draw is `u`; it draws at
// most once.
RetryDecision decide(const AttemptFailure& f, int attempts_made, double u) {
  RetryLimits limits{.max_attempts = 4, .base_delay_s = 0.5, .cap_s = 10};
  int draws = 0;
  auto rng = [&] {
    ++draws;
    return u;
  };
  RetryDecision d = decide_retry(f, attempts_made, limits, rng, fixed_now());
  EXPECT_LE(draws, 1);
  return d;
}

struct Case {
  const char* name;
  AttemptFailure failure;
  int attempts_made = 1;
  double u = 1.0;  // the injected uniform draw
  RetryAction expected = RetryAction::retry;
  double expected_delay = 0.5;  // checked when expected == retry
  bool hinted = false;
};

std::ostream& operator<<(std::ostream& os, const Case& c) { return os << c.name; }

class RetryPolicyTable : public ::testing::TestWithParam<Case> {};

TEST_P(RetryPolicyTable, Decides) {
  const Case& c = GetParam();
  RetryDecision d = decide(c.failure, c.attempts_made, c.u);
  EXPECT_EQ(d.action, c.expected) << to_string(d.action);
  if (c.expected == RetryAction::retry) {
    EXPECT_NEAR(d.delay_s, c.expected_delay, 1e-9);
    EXPECT_EQ(d.server_hinted, c.hinted);
  }
}

constexpr auto R = RetryAction::retry;

INSTANTIATE_TEST_SUITE_P(
    Table, RetryPolicyTable,
    ::testing::Values(
        // Transient statuses: exponential backoff base*2^(n-1) * (0.5 + 0.5u).
        Case{
            .name = "429_first", .failure = {.http_status = 429}, .u = 0.0, .expected_delay = 0.25},
        Case{.name = "429_second_u1",
             .failure = {.http_status = 429},
             .attempts_made = 2,
             .expected_delay = 1.0},
        Case{.name = "500_third_mid",
             .failure = {.http_status = 500},
             .attempts_made = 3,
             .u = 0.5,
             .expected_delay = 1.5},
        // Transport errors are transient.
        Case{.name = "connect", .failure = {.transport = TransportError::connect}},
        Case{.name = "timeout", .failure = {.transport = TransportError::timeout}},
        Case{.name = "reset_after_200",
             .failure = {.http_status = 200, .transport = TransportError::reset}},
        Case{.name = "malformed_200",
             .failure = {.http_status = 200, .transport = TransportError::protocol}},
        Case{.name = "third_u1",
             .failure = {.http_status = 500},
             .attempts_made = 3,
             .expected_delay = 2.0},
        // An unreadable Retry-After is no hint (the server hints: ServerHint).
        Case{.name = "retry_after_garbage", .failure = {.http_status = 429, .retry_after = "soon"}},
        // Never retried.
        Case{.name = "400",
             .failure = {.http_status = 400, .body = R"({"error":{"message":"bad field"}})"},
             .u = 0,
             .expected = RetryAction::permanent},
        Case{.name = "401_with_retry_after",
             .failure = {.http_status = 401, .retry_after = "1"},
             .u = 0,
             .expected = RetryAction::permanent},
        Case{.name = "ctx_on_500_is_transient",
             .failure = {.http_status = 500, .body = "maximum context length"}},
        // Exhaustion (max_attempts 4).
        Case{.name = "exhausted_429",
             .failure = {.http_status = 429},
             .attempts_made = 4,
             .u = 0,
             .expected = RetryAction::exhausted},
        Case{.name = "exhausted_connect",
             .failure = {.transport = TransportError::connect},
             .attempts_made = 5,
             .u = 0,
             .expected = RetryAction::exhausted},
        Case{.name = "permanent_beats_exhausted",
             .failure = {.http_status = 404},
             .attempts_made = 4,
             .u = 0,
             .expected = RetryAction::permanent}),
    [](const ::testing::TestParamInfo<Case>& info) { return std::string(info.param.name); });

// Server hints: retry-after-ms wins over Retry-After; both capped (10 s).
struct Hint {
  const char* name;
  AttemptFailure failure;
  double expected_delay;
};

std::ostream& operator<<(std::ostream& os, const Hint& h) { return os << h.name; }

class ServerHint : public ::testing::TestWithParam<Hint> {};

TEST_P(ServerHint, SetsTheDelay) {
  const Hint& h = GetParam();
  RetryDecision d = decide(h.failure, 1, 0.9);
  EXPECT_EQ(d.action, R) << to_string(d.action);
  EXPECT_NEAR(d.delay_s, h.expected_delay, 1e-9);
  EXPECT_TRUE(d.server_hinted);
}

INSTANTIATE_TEST_SUITE_P(
    Table, ServerHint,
    ::testing::Values(Hint{"retry_after_seconds", {.http_status = 429, .retry_after = "3"}, 3.0},
                      Hint{
                          "retry_after_decimal", {.http_status = 503, .retry_after = "0.25"}, 0.25},
                      Hint{"retry_after_ms", {.http_status = 429, .retry_after_ms = "1500"}, 1.5},
                      Hint{"retry_after_ms_beats_seconds",
                           {.http_status = 429, .retry_after = "7", .retry_after_ms = "20"},
                           0.02},
                      Hint{"retry_after_capped", {.http_status = 429, .retry_after = "3600"}, 10.0},
                      Hint{"retry_after_http_date",
                           {.http_status = 429, .retry_after = "Mon, 01 Jan 2024 00:00:04 GMT"},
                           4.0},
                      Hint{"retry_after_past_date",
                           {.http_status = 429, .retry_after = "Sun, 31 Dec 2023 23:00:00 GMT"},
                           0.0}),
    [](const auto& info) { return std::string(info.param.name); });

// Context overflow: a 400 whose body says the prompt is too long (a 500 with
// such a body stays transient: the table's ctx_on_500_is_transient).
struct Overflow {
  const char* name;
  const char* body;
};

std::ostream& operator<<(std::ostream& os, const Overflow& o) { return os << o.name; }

class ContextOverflow : public ::testing::TestWithParam<Overflow> {};

TEST_P(ContextOverflow, OnA400) {
  RetryDecision d = decide({.http_status = 400, .body = GetParam().body}, 1, 0);
  EXPECT_EQ(d.action, RetryAction::context_overflow) << to_string(d.action);
}

INSTANTIATE_TEST_SUITE_P(
    Table, ContextOverflow,
    ::testing::Values(
        Overflow{
            "ctx_openai",
            R"({"error":{"message":"This model's maximum context length is 8192 tokens","code":"context_length_exceeded"}})"},
        Overflow{"ctx_code_only", R"({"error":{"code":"context_length_exceeded"}})"},
        Overflow{"ctx_anthropic",
                 R"({"error":{"message":"prompt is too long: 210000 tokens > 200000"}})"},
        Overflow{"ctx_vllm_case", "Maximum Context Length exceeded"}),
    [](const auto& info) { return std::string(info.param.name); });

// Statuses that are transient whatever their body: the first retry waits one
// full backoff step (u = 1), with no server hint.
class TransientStatus : public ::testing::TestWithParam<int> {};

TEST_P(TransientStatus, RetriedAfterTheFirstStep) {
  RetryDecision d = decide({.http_status = GetParam()}, 1, 1.0);
  EXPECT_EQ(d.action, R) << to_string(d.action);
  EXPECT_NEAR(d.delay_s, 0.5, 1e-9);
  EXPECT_FALSE(d.server_hinted);
}

INSTANTIATE_TEST_SUITE_P(Table, TransientStatus, ::testing::Values(502, 503, 504, 408, 409, 599),
                         [](const auto& info) { return std::to_string(info.param); });

// Statuses never retried.
class PermanentStatus : public ::testing::TestWithParam<int> {};

TEST_P(PermanentStatus, NeverRetried) {
  RetryDecision d = decide({.http_status = GetParam()}, 1, 0);
  EXPECT_EQ(d.action, RetryAction::permanent) << to_string(d.action);
}

INSTANTIATE_TEST_SUITE_P(Table, PermanentStatus, ::testing::Values(401, 403, 404, 422),
                         [](const auto& info) { return std::to_string(info.param); });

TEST(RetryPolicy, ParsesRetryAfterForms) {
  const auto now = fixed_now();
  EXPECT_EQ(parse_retry_after("120", now), 120.0);
  EXPECT_EQ(parse_retry_after(" 2 ", now), 2.0);
  EXPECT_EQ(parse_retry_after("Mon, 01 Jan 2024 00:01:00 GMT", now), 60.0);
  EXPECT_EQ(parse_retry_after("Monday, 01-Jan-24 00:00:30 GMT", now), 30.0);
  EXPECT_EQ(parse_retry_after("Mon Jan  1 00:00:10 2024", now), 10.0);
  EXPECT_FALSE(parse_retry_after("", now));
  EXPECT_FALSE(parse_retry_after("tomorrow", now));
  EXPECT_EQ(parse_retry_after("-5", now), 0.0);
}

TEST(RetryPolicy, JitterStaysWithinHalfToFullBackoff) {
  RetryLimits limits{.max_attempts = 10, .base_delay_s = 1, .cap_s = 100};
  AttemptFailure f;
  f.http_status = 503;
  for (int attempt = 1; attempt <= 6; ++attempt) {
    const double full = std::min(100.0, std::ldexp(1.0, attempt - 1));
    for (double u : {0.0, 0.25, 0.999}) {
      auto d = decide_retry(
          f, attempt, limits, [u] { return u; }, fixed_now());
      ASSERT_EQ(d.action, RetryAction::retry);
      EXPECT_GE(d.delay_s, full * 0.5 - 1e-12);
      EXPECT_LE(d.delay_s, full + 1e-12);
    }
  }
}

TEST(RetryPolicy, CapLimitsExponentialBackoff) {
  RetryLimits limits{.max_attempts = 50, .base_delay_s = 1, .cap_s = 3};
  AttemptFailure f;
  f.transport = TransportError::timeout;
  EXPECT_DOUBLE_EQ(decide_retry(
                       f, 10, limits, [] { return 1.0; }, fixed_now())
                       .delay_s,
                   3.0);
  EXPECT_DOUBLE_EQ(decide_retry(
                       f, 40, limits, [] { return 0.0; }, fixed_now())
                       .delay_s,
                   1.5);
}

TEST(RetryPolicy, MaxAttemptsOfOneNeverRetries) {
  RetryLimits limits{.max_attempts = 1, .base_delay_s = 1, .cap_s = 1};
  AttemptFailure f;
  f.http_status = 429;
  EXPECT_EQ(decide_retry(
                f, 1, limits, [] { return 0.5; }, fixed_now())
                .action,
            RetryAction::exhausted);
}

}  // namespace
}  // namespace korch::llm
