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

struct Case {
  const char* name;
  int status;
  TransportError transport;
  const char* body;
  const char* retry_after;
  const char* retry_after_ms;
  int attempts_made;
  double u;  // the injected uniform draw
  RetryAction expected;
  double expected_delay;  // checked when expected == retry
  bool hinted;
};

std::ostream& operator<<(std::ostream& os, const Case& c) { return os << c.name; }

class RetryPolicyTable : public ::testing::TestWithParam<Case> {};

TEST_P(RetryPolicyTable, Decides) {
  const Case& c = GetParam();
  AttemptFailure f;
  f.http_status = c.status;
  f.transport = c.transport;
  f.body = c.body;
  f.retry_after = c.retry_after;
  f.retry_after_ms = c.retry_after_ms;
  RetryLimits limits{.max_attempts = 4, .base_delay_s = 0.5, .cap_s = 10};
  int draws = 0;
  auto rng = [&] {
    ++draws;
    return c.u;
  };
  RetryDecision d = decide_retry(f, c.attempts_made, limits, rng, fixed_now());
  EXPECT_EQ(d.action, c.expected) << to_string(d.action);
  EXPECT_LE(draws, 1);
  if (c.expected == RetryAction::retry) {
    EXPECT_NEAR(d.delay_s, c.expected_delay, 1e-9);
    EXPECT_EQ(d.server_hinted, c.hinted);
  }
}

constexpr auto N = TransportError::none;
constexpr auto R = RetryAction::retry;

INSTANTIATE_TEST_SUITE_P(
    Table, RetryPolicyTable,
    ::testing::Values(
        // Transient statuses: exponential backoff base*2^(n-1) * (0.5 + 0.5u).
        Case{"429_first", 429, N, "", "", "", 1, 0.0, R, 0.25, false},
        Case{"429_second_u1", 429, N, "", "", "", 2, 1.0, R, 1.0, false},
        Case{"500_third_mid", 500, N, "", "", "", 3, 0.5, R, 1.5, false},
        Case{"502", 502, N, "", "", "", 1, 1.0, R, 0.5, false},
        Case{"503", 503, N, "", "", "", 1, 1.0, R, 0.5, false},
        Case{"504", 504, N, "", "", "", 1, 1.0, R, 0.5, false},
        Case{"408", 408, N, "", "", "", 1, 1.0, R, 0.5, false},
        Case{"409", 409, N, "", "", "", 1, 1.0, R, 0.5, false},
        Case{"599", 599, N, "", "", "", 1, 1.0, R, 0.5, false},
        // Transport errors are transient.
        Case{"connect", 0, TransportError::connect, "", "", "", 1, 1.0, R, 0.5, false},
        Case{"timeout", 0, TransportError::timeout, "", "", "", 1, 1.0, R, 0.5, false},
        Case{"reset_after_200", 200, TransportError::reset, "", "", "", 1, 1.0, R, 0.5, false},
        Case{"malformed_200", 200, TransportError::protocol, "", "", "", 1, 1.0, R, 0.5, false},
        Case{"third_u1", 500, N, "", "", "", 3, 1.0, R, 2.0, false},
        // Server hints: retry-after-ms wins over Retry-After; both capped.
        Case{"retry_after_seconds", 429, N, "", "3", "", 1, 0.9, R, 3.0, true},
        Case{"retry_after_decimal", 503, N, "", "0.25", "", 1, 0.9, R, 0.25, true},
        Case{"retry_after_ms", 429, N, "", "", "1500", 1, 0.9, R, 1.5, true},
        Case{"retry_after_ms_beats_seconds", 429, N, "", "7", "20", 1, 0.9, R, 0.02, true},
        Case{"retry_after_capped", 429, N, "", "3600", "", 1, 0.9, R, 10.0, true},
        Case{"retry_after_http_date", 429, N, "", "Mon, 01 Jan 2024 00:00:04 GMT", "", 1, 0.9, R,
             4.0, true},
        Case{"retry_after_past_date", 429, N, "", "Sun, 31 Dec 2023 23:00:00 GMT", "", 1, 0.9, R,
             0.0, true},
        Case{"retry_after_garbage", 429, N, "", "soon", "", 1, 1.0, R, 0.5, false},
        // Never retried.
        Case{"400", 400, N, R"({"error":{"message":"bad field"}})", "", "", 1, 0,
             RetryAction::permanent, 0, false},
        Case{"401", 401, N, "", "", "", 1, 0, RetryAction::permanent, 0, false},
        Case{"403", 403, N, "", "", "", 1, 0, RetryAction::permanent, 0, false},
        Case{"404", 404, N, "", "", "", 1, 0, RetryAction::permanent, 0, false},
        Case{"422", 422, N, "", "", "", 1, 0, RetryAction::permanent, 0, false},
        Case{"401_with_retry_after", 401, N, "", "1", "", 1, 0, RetryAction::permanent, 0, false},
        // Context overflow (400 with a context-length body).
        Case{
            "ctx_openai", 400, N,
            R"({"error":{"message":"This model's maximum context length is 8192 tokens","code":"context_length_exceeded"}})",
            "", "", 1, 0, RetryAction::context_overflow, 0, false},
        Case{"ctx_code_only", 400, N, R"({"error":{"code":"context_length_exceeded"}})", "", "", 1,
             0, RetryAction::context_overflow, 0, false},
        Case{"ctx_anthropic", 400, N,
             R"({"error":{"message":"prompt is too long: 210000 tokens > 200000"}})", "", "", 1, 0,
             RetryAction::context_overflow, 0, false},
        Case{"ctx_vllm_case", 400, N, "Maximum Context Length exceeded", "", "", 1, 0,
             RetryAction::context_overflow, 0, false},
        Case{"ctx_on_500_is_transient", 500, N, "maximum context length", "", "", 1, 1.0, R, 0.5,
             false},
        // Exhaustion (max_attempts 4).
        Case{"exhausted_429", 429, N, "", "", "", 4, 0, RetryAction::exhausted, 0, false},
        Case{"exhausted_connect", 0, TransportError::connect, "", "", "", 5, 0,
             RetryAction::exhausted, 0, false},
        Case{"permanent_beats_exhausted", 404, N, "", "", "", 4, 0, RetryAction::permanent, 0,
             false}),
    [](const ::testing::TestParamInfo<Case>& info) { return std::string(info.param.name); });

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
