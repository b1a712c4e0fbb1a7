// Fault soak (LABELS slow): 2,000 calls against the fake server with a 30%
// per-attempt fault rate mixing every fault kind, through a streaming and a
// non-streaming model at once. Checks that every call ends in success or a
// classified failure, that the client's attempt counts equal what the
// server saw for each X-Request-Id, and that no token is counted twice.
#include <gtest/gtest.h>

#include <chrono>
#include <condition_variable>
#include <map>
#include <mutex>

#include "llm_clients/client.hpp"
#include "tests/llm_clients/client_test_util.hpp"
#include "tests/support/fake_openai_server.hpp"

namespace korch::llm {
namespace {

// The fake server, its faults and its log of attempts.
using namespace korch::testing;

constexpr int k_calls = 2000;
constexpr int k_max_attempts = 6;

TEST(ClientFaults, TwoThousandCallsAtThirtyPercentFaults) {
  FakeServerOptions opts;
  opts.threads = 256;
  opts.slow_first_byte = std::chrono::milliseconds(1200);
  opts.faults.rate = 0.30;
  opts.faults.seed = 20240601;
  opts.faults.weights = default_fault_weights();
  opts.faults.weights.emplace_back(Fault::context_overflow, 0.3);
  opts.faults.weights.emplace_back(Fault::unauthorized, 0.3);
  FakeOpenAIServer server(opts);
  ASSERT_TRUE(server.start());

  auto client = make_curl_client();
  for (bool stream : {false, true}) {
    auto m = testing_util::fast_model(stream ? "sse" : "plain", server.base_url(), stream);
    m.concurrency = 48;
    m.max_attempts = k_max_attempts;
    m.retry_cap_s = 0.02;
    m.first_byte_timeout_s = 0.5;
    m.stall_timeout_s = 2;
    m.price_prompt_per_mtok = 1;
    m.price_completion_per_mtok = 2;
    ASSERT_TRUE(client->add_model(m));
  }

  std::mutex mutex;
  std::condition_variable cv;
  std::map<std::string, ChatResult> results;
  const auto t0 = std::chrono::steady_clock::now();
  for (int i = 0; i < k_calls; ++i) {
    const std::string id = fmt::format("soak-{}", i);
    client->submit({i % 2 == 0 ? "plain" : "sse",
                    id,
                    {{"system", "be brief"}, {"user", fmt::format("task {}", i)}}},
                   [&, id](ChatResult r) {
                     std::lock_guard lock(mutex);
                     results.emplace(id, std::move(r));
                     cv.notify_all();
                   });
  }
  {
    std::unique_lock lock(mutex);
    ASSERT_TRUE(
        cv.wait_for(lock, std::chrono::seconds(90), [&] { return results.size() == k_calls; }))
        << results.size() << " of " << k_calls << " calls finished";
  }
  const double elapsed =
      std::chrono::duration<double>(std::chrono::steady_clock::now() - t0).count();

  const auto server_log = server.all_attempts();
  std::map<Outcome, int> outcomes;
  std::map<Fault, int> faults_seen;
  Usage client_tokens;
  Usage server_tokens;
  int length_results = 0;
  int retried_calls = 0;
  int abandoned_deliveries = 0;  // delivered by the server after the client gave up
  for (const auto& [id, r] : results) {
    ++outcomes[r.outcome];
    ASSERT_NE(r.outcome, Outcome::cancelled) << id;
    auto it = server_log.find(id);
    ASSERT_NE(it, server_log.end()) << id << " never reached the server";
    const std::vector<AttemptRecord>& log = it->second;
    // The client's attempt count is exactly what the server saw.
    if (r.attempts.size() != log.size()) {
      std::string detail;
      for (const auto& a : r.attempts)
        detail += fmt::format(" [client {} {} {:.3f}s]", a.http_status, a.error, a.latency_s);
      for (const auto& a : log)
        detail += fmt::format(" [server {} {}]", korch::testing::to_string(a.fault), a.http_status);
      ADD_FAILURE() << id << ": client attempts " << r.attempts.size() << " != server attempts "
                    << log.size() << detail;
      continue;
    }
    if (log.size() > 1) ++retried_calls;
    for (const auto& a : log) ++faults_seen[a.fault];

    // A server cannot know that its client gave up: under load a clean reply
    // can reach the socket after the client's first-byte or stall timeout
    // fired and the call moved on to a retry. Such a delivery counts only as
    // abandoned, and only where the client's attempt says it timed out.
    int delivered = 0;
    std::vector<bool> counted(log.size());
    for (std::size_t i = 0; i < log.size(); ++i) {
      if (!log[i].delivered) continue;
      const std::string& err = r.attempts[i].error;
      const bool client_gave_up =
          !err.empty() && (err.find("no first byte within") != std::string::npos ||
                           err.find("stalled") != std::string::npos);
      if (client_gave_up) {
        ++abandoned_deliveries;
        continue;
      }
      EXPECT_TRUE(err.empty()) << id << ": the server delivered attempt " << i + 1
                               << " but the client failed it: " << err;
      counted[i] = true;
      ++delivered;
    }
    const AttemptRecord& last = log.back();
    switch (r.outcome) {
      case Outcome::ok:
        // Exactly one completion delivered, on the last attempt, and its usage is what was
        // recorded.
        EXPECT_EQ(delivered, 1) << id;
        EXPECT_TRUE(last.delivered) << id;
        EXPECT_EQ(r.usage.prompt_tokens, last.usage.prompt_tokens) << id;
        EXPECT_EQ(r.usage.completion_tokens, last.usage.completion_tokens) << id;
        EXPECT_EQ(r.usage.cached_tokens, last.usage.cached_tokens) << id;
        EXPECT_FALSE(r.content.empty()) << id;
        EXPECT_EQ(r.finish_reason, last.fault == Fault::finish_length ? "length" : "stop") << id;
        length_results += r.finish_reason == "length" ? 1 : 0;
        EXPECT_GT(r.cost_usd, 0);
        break;
      case Outcome::permanent:
        EXPECT_EQ(last.fault, Fault::unauthorized) << id << ": " << r.error;
        EXPECT_EQ(delivered, 0);
        break;
      case Outcome::context_overflow:
        EXPECT_EQ(last.fault, Fault::context_overflow) << id;
        EXPECT_EQ(delivered, 0);
        break;
      case Outcome::exhausted:
        EXPECT_EQ(static_cast<int>(log.size()), k_max_attempts) << id;
        EXPECT_EQ(delivered, 0);
        for (const auto& a : log) EXPECT_TRUE(korch::testing::is_failure(a.fault)) << id;
        break;
      case Outcome::cancelled: break;
    }
    if (r.outcome != Outcome::ok) {
      EXPECT_EQ(r.usage.prompt_tokens + r.usage.completion_tokens, 0) << id;
    }
    client_tokens.prompt_tokens += r.usage.prompt_tokens;
    client_tokens.completion_tokens += r.usage.completion_tokens;
    for (std::size_t i = 0; i < log.size(); ++i) {
      if (counted[i]) {
        server_tokens.prompt_tokens += log[i].usage.prompt_tokens;
        server_tokens.completion_tokens += log[i].usage.completion_tokens;
      }
    }
  }
  // No token counted twice (or lost): the sums agree.
  EXPECT_EQ(client_tokens.prompt_tokens, server_tokens.prompt_tokens);
  EXPECT_EQ(client_tokens.completion_tokens, server_tokens.completion_tokens);

  const auto stats = client->stats();
  const auto sstats = server.stats();
  EXPECT_EQ(stats.http_attempts, sstats.requests);
  EXPECT_EQ(stats.completed, k_calls);
  EXPECT_EQ(stats.in_flight, 0);
  EXPECT_EQ(stats.resolver_starts, 0);

  // The plan really injected every kind of fault.
  for (Fault f :
       {Fault::rate_limit, Fault::rate_limit_retry_after, Fault::rate_limit_retry_after_ms,
        Fault::http_500, Fault::http_502, Fault::http_503, Fault::http_504, Fault::reset_mid_body,
        Fault::slow_first_byte, Fault::truncated_stream, Fault::stream_error_event,
        Fault::malformed_json, Fault::empty_choices, Fault::finish_length}) {
    EXPECT_GT(faults_seen[f], 0) << korch::testing::to_string(f);
  }
  EXPECT_GT(outcomes[Outcome::ok], k_calls * 9 / 10);
  EXPECT_GT(length_results, 0);
  EXPECT_GT(retried_calls, k_calls / 5);
  std::printf(
      "soak: %d calls in %.1fs; attempts %lld (server %lld); ok %d, permanent %d, context_overflow "
      "%d, "
      "exhausted %d; retried calls %d; limit changes %lld; deliveries the client had given up "
      "on %d\n",
      k_calls, elapsed, static_cast<long long>(stats.http_attempts),
      static_cast<long long>(sstats.requests), outcomes[Outcome::ok], outcomes[Outcome::permanent],
      outcomes[Outcome::context_overflow], outcomes[Outcome::exhausted], retried_calls,
      static_cast<long long>(stats.limit_changes), abandoned_deliveries);
  client->shutdown();
}

}  // namespace
}  // namespace korch::llm
