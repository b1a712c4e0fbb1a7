// Tests of the libcurl ChatClient against the in-process fake server
// (tests/support/fake_openai_server.hpp).
#include "llm_clients/client.hpp"

#include <gtest/gtest.h>
#include <spdlog/sinks/ostream_sink.h>
#include <spdlog/spdlog.h>

#include <chrono>
#include <condition_variable>
#include <cstdlib>
#include <future>
#include <mutex>
#include <nlohmann/json.hpp>
#include <sstream>
#include <thread>

#include "tests/llm_clients/client_test_util.hpp"
#include "tests/support/fake_openai_server.hpp"
#include "util/log.hpp"

namespace korch::llm {
namespace {

using korch::testing::FakeOpenAIServer;
using korch::testing::FakeServerOptions;
using korch::testing::Fault;
using korch::testing::ScriptedReply;
using testing_util::fast_model;
using testing_util::run_one;

constexpr const char* k_key_env = "KORCH_TEST_LLM_KEY";
constexpr const char* k_key = "sk-test-SECRET-0123456789abcdef";

class ClientTest : public ::testing::Test {
 protected:
  void SetUp() override { setenv(k_key_env, k_key, 1); }

  void start_server(FakeServerOptions options = {}) {
    m_server = std::make_unique<FakeOpenAIServer>(std::move(options));
    ASSERT_TRUE(m_server->start());
  }
  config::ModelConfig model(const std::string& id = "m", bool stream = false) {
    auto m = fast_model(id, m_server->base_url(), stream);
    m.api_key_env = k_key_env;
    return m;
  }
  std::unique_ptr<ChatClient> client_with(const config::ModelConfig& m) {
    auto c = make_curl_client();
    EXPECT_TRUE(c->add_model(m));
    return c;
  }
  // Starts a server whose replies take `latency`; a client on model() "m"
  // with `concurrency` slots.
  std::unique_ptr<ChatClient> concurrent_client(int concurrency,
                                                std::chrono::milliseconds latency = {}) {
    FakeServerOptions opts;
    opts.latency = latency;
    start_server(opts);
    auto m = model();
    m.concurrency = concurrency;
    return client_with(m);
  }
  // Submits `n` requests "<prefix>-<i>" to `model_id` at once: each ends ok.
  static void expect_all_ok(ChatClient& client, const std::string& model_id,
                            const std::string& prefix, int n) {
    for (auto& r : testing_util::run_many(client, model_id, prefix, n))
      EXPECT_EQ(r.outcome, Outcome::ok) << prefix << ": " << r.error;
  }

  std::unique_ptr<FakeOpenAIServer> m_server;
};

TEST_F(ClientTest, NonStreamingSuccessRecordsEverything) {
  FakeServerOptions opts;
  opts.reply = [](const std::string&, const std::vector<Message>&) {
    ScriptedReply r;
    r.content = "hello there";
    r.reasoning = "thinking hard";
    r.prompt_tokens = 1000;
    r.completion_tokens = 200;
    return r;
  };
  start_server(opts);
  auto m = model();
  m.price_prompt_per_mtok = 2.0;
  m.price_cached_per_mtok = 1.0;
  m.price_completion_per_mtok = 10.0;
  auto client = client_with(m);
  ChatResult r = run_one(*client, {"m", "req-1", {{"system", "s"}, {"user", "u"}}});
  ASSERT_EQ(r.outcome, Outcome::ok) << r.error;
  // The fake reports a quarter of the prompt as cached.
  testing_util::expect_reply(r, "hello there", "thinking hard", "stop", 1000, 200, 250);
  EXPECT_GT(r.usage.reasoning_tokens, 0);
  EXPECT_NEAR(r.cost_usd, (750 * 2.0 + 250 * 1.0 + 200 * 10.0) / 1e6, 1e-12);
  ASSERT_EQ(r.attempts.size(), 1u);
  EXPECT_EQ(r.attempts[0].http_status, 200);
  EXPECT_TRUE(r.attempts[0].error.empty());
  EXPECT_TRUE(r.provider_request_id.starts_with("srv-")) << r.provider_request_id;
  EXPECT_GT(r.latency_s, 0);

  auto req = m_server->last_request();
  ASSERT_TRUE(req);
  EXPECT_EQ(req->request_id, "req-1");
  EXPECT_EQ(req->authorization, std::string("Bearer ") + k_key);
  auto body = nlohmann::json::parse(req->body);
  EXPECT_EQ(body["model"], "fake-model");
  EXPECT_EQ(body["messages"][1]["content"], "u");
  EXPECT_EQ(body["stream"], false);
  auto s = client->stats();
  EXPECT_EQ(s.submitted, 1);
  EXPECT_EQ(s.completed, 1);
  EXPECT_EQ(s.in_flight, 0);
  EXPECT_EQ(s.http_attempts, 1);
}

TEST_F(ClientTest, StreamingAssemblesContentReasoningAndUsage) {
  FakeServerOptions opts;
  opts.stream_chunk_delay = std::chrono::milliseconds(5);
  opts.reply = [](const std::string&, const std::vector<Message>&) {
    ScriptedReply r;
    r.content = "The quick brown fox jumps over the lazy dog";
    r.reasoning = "let me see";
    r.prompt_tokens = 40;
    r.completion_tokens = 9;
    return r;
  };
  start_server(opts);
  auto client = client_with(model("s", true));
  ChatResult r = run_one(*client, {"s", "stream-1", {{"user", "go"}}});
  ASSERT_EQ(r.outcome, Outcome::ok) << r.error;
  testing_util::expect_reply(r, "The quick brown fox jumps over the lazy dog", "let me see", "stop",
                             40, 9, 10);
  auto body = nlohmann::json::parse(m_server->last_request()->body);
  EXPECT_EQ(body["stream"], true);
  EXPECT_EQ(body["stream_options"]["include_usage"], true);
  EXPECT_EQ(m_server->last_request()->headers["accept"], "text/event-stream");
}

TEST_F(ClientTest, FinishReasonLengthIsSurfaced) {
  start_server();
  for (bool stream : {false, true}) {
    auto client = client_with(model("m", stream));
    m_server->fail_next(1, Fault::finish_length);
    ChatResult r = run_one(*client, {"m", stream ? "len-s" : "len", {{"user", "u"}}});
    ASSERT_EQ(r.outcome, Outcome::ok) << r.error;
    EXPECT_EQ(r.finish_reason, "length");
  }
}

TEST_F(ClientTest, RetriesTransientFailuresWithTheSameRequestId) {
  start_server();
  auto client = client_with(model());
  m_server->fail_next(2, Fault::http_503);
  ChatResult r = run_one(*client, {"m", "retry-1", {{"user", "u"}}});
  ASSERT_EQ(r.outcome, Outcome::ok) << r.error;
  ASSERT_EQ(r.attempts.size(), 3u);
  EXPECT_EQ(r.attempts[0].http_status, 503);
  EXPECT_EQ(r.attempts[1].http_status, 503);
  EXPECT_EQ(r.attempts[2].http_status, 200);
  EXPECT_NE(r.attempts[0].error.find("503"), std::string::npos);
  EXPECT_EQ(m_server->attempts("retry-1"), 3);
  for (const auto& req : m_server->recent_requests()) EXPECT_EQ(req.request_id, "retry-1");
  EXPECT_EQ(client->stats().retries, 2);
  EXPECT_EQ(client->stats().limit_changes, 0);  // 5xx does not shrink the limit
}

// `--log-level debug` shows the client's debug lines: the level is set at run
// time and a retry's debug line reaches a capturing sink (KLOG_DEBUG used to
// be compiled out).
TEST_F(ClientTest, RetryDebugLineReachesSinkWhenLevelSetAtRunTime) {
  auto stream = std::make_shared<std::ostringstream>();
  auto sink = std::make_shared<spdlog::sinks::ostream_sink_mt>(*stream);
  auto previous = spdlog::default_logger();
  const auto previous_level = spdlog::get_level();
  spdlog::set_default_logger(std::make_shared<spdlog::logger>("capture", sink));
  log::set_level("debug");

  start_server();
  auto client = client_with(model());
  m_server->fail_next(1, Fault::http_503);
  ChatResult r = run_one(*client, {"m", "debug-1", {{"user", "u"}}});
  client->shutdown();
  spdlog::set_default_logger(previous);
  spdlog::set_level(previous_level);

  ASSERT_EQ(r.outcome, Outcome::ok) << r.error;
  const std::string text = stream->str();
  EXPECT_NE(text.find("[llm m] request debug-1 attempt 1 failed (HTTP 503"), std::string::npos)
      << text;
  EXPECT_NE(text.find("retry in"), std::string::npos) << text;
}

TEST_F(ClientTest, EveryTransientFaultKindIsRetried) {
  FakeServerOptions opts;
  opts.slow_first_byte = std::chrono::milliseconds(800);
  start_server(opts);
  for (bool stream : {false, true}) {
    auto m = model("m", stream);
    m.first_byte_timeout_s = 0.3;
    auto client = client_with(m);
    for (Fault f :
         {Fault::rate_limit, Fault::rate_limit_retry_after, Fault::rate_limit_retry_after_ms,
          Fault::http_500, Fault::http_502, Fault::http_504, Fault::reset_mid_body,
          Fault::slow_first_byte, Fault::truncated_stream, Fault::stream_error_event,
          Fault::malformed_json, Fault::empty_choices}) {
      const std::string id = fmt::format("{}-{}", korch::testing::to_string(f), stream);
      m_server->fail_next(1, f);
      ChatResult r = run_one(*client, {"m", id, {{"user", "u"}}});
      ASSERT_EQ(r.outcome, Outcome::ok) << id << ": " << r.error;
      ASSERT_EQ(r.attempts.size(), 2u) << id;
      EXPECT_FALSE(r.attempts[0].error.empty()) << id;
      EXPECT_EQ(m_server->attempts(id), 2) << id;
    }
  }
}

TEST_F(ClientTest, ContextOverflowIsClassifiedAndNotRetried) {
  start_server();
  auto client = client_with(model());
  m_server->fail_next(1, Fault::context_overflow);
  ChatResult r = run_one(*client, {"m", "ctx", {{"user", "u"}}});
  EXPECT_EQ(r.outcome, Outcome::context_overflow);
  EXPECT_EQ(r.attempts.size(), 1u);
  EXPECT_EQ(r.attempts[0].http_status, 400);
  EXPECT_NE(r.error.find("maximum context length"), std::string::npos);
  EXPECT_EQ(m_server->attempts("ctx"), 1);
}

TEST_F(ClientTest, UnauthorizedIsPermanent) {
  start_server();
  auto client = client_with(model());
  m_server->fail_next(1, Fault::unauthorized);
  ChatResult r = run_one(*client, {"m", "auth", {{"user", "u"}}});
  EXPECT_EQ(r.outcome, Outcome::permanent);
  EXPECT_EQ(r.attempts.size(), 1u);
  EXPECT_EQ(r.attempts[0].http_status, 401);
}

TEST_F(ClientTest, ExhaustsAfterMaxAttempts) {
  start_server();
  auto m = model();
  m.max_attempts = 3;
  auto client = client_with(m);
  m_server->fail_next(10, Fault::http_500);
  ChatResult r = run_one(*client, {"m", "ex", {{"user", "u"}}});
  EXPECT_EQ(r.outcome, Outcome::exhausted);
  EXPECT_EQ(r.attempts.size(), 3u);
  EXPECT_EQ(m_server->attempts("ex"), 3);
  EXPECT_NE(r.error.find("after 3 attempts"), std::string::npos) << r.error;
  EXPECT_EQ(r.usage.prompt_tokens, 0);
}

TEST_F(ClientTest, FirstByteTimeoutAbortsTheAttempt) {
  FakeServerOptions opts;
  opts.slow_first_byte = std::chrono::milliseconds(3000);
  start_server(opts);
  auto m = model();
  m.first_byte_timeout_s = 0.2;
  auto client = client_with(m);
  m_server->fail_next(1, Fault::slow_first_byte);
  auto t0 = std::chrono::steady_clock::now();
  ChatResult r = run_one(*client, {"m", "slow", {{"user", "u"}}});
  const double elapsed =
      std::chrono::duration<double>(std::chrono::steady_clock::now() - t0).count();
  ASSERT_EQ(r.outcome, Outcome::ok) << r.error;
  ASSERT_EQ(r.attempts.size(), 2u);
  EXPECT_NE(r.attempts[0].error.find("first byte"), std::string::npos) << r.attempts[0].error;
  EXPECT_LT(elapsed, 2.0);
}

TEST_F(ClientTest, StalledStreamIsAborted) {
  FakeServerOptions opts;
  opts.stream_chunk_delay = std::chrono::milliseconds(600);
  start_server(opts);
  auto m = model("s", true);
  m.stall_timeout_s = 0.15;
  m.max_attempts = 2;
  auto client = client_with(m);
  ChatResult r = run_one(*client, {"s", "stall", {{"user", "u"}}});
  EXPECT_EQ(r.outcome, Outcome::exhausted);
  ASSERT_EQ(r.attempts.size(), 2u);
  EXPECT_NE(r.attempts[0].error.find("stalled"), std::string::npos) << r.attempts[0].error;
}

TEST_F(ClientTest, TotalTimeoutBoundsAnAttempt) {
  FakeServerOptions opts;
  opts.latency = std::chrono::milliseconds(1500);
  start_server(opts);
  auto m = model();
  m.total_timeout_s = 0.2;
  m.max_attempts = 1;
  auto client = client_with(m);
  ChatResult r = run_one(*client, {"m", "total", {{"user", "u"}}});
  EXPECT_EQ(r.outcome, Outcome::exhausted);
  EXPECT_LT(r.latency_s, 1.0);
}

TEST_F(ClientTest, ConnectionRefusedIsTransient) {
  start_server();
  const int port = m_server->port();
  m_server->stop();
  auto m = fast_model("gone", fmt::format("http://127.0.0.1:{}/v1", port), false);
  m.max_attempts = 2;
  auto client = client_with(m);
  ChatResult r = run_one(*client, {"gone", "refused", {{"user", "u"}}});
  EXPECT_EQ(r.outcome, Outcome::exhausted);
  ASSERT_EQ(r.attempts.size(), 2u);
  EXPECT_EQ(r.attempts[0].http_status, 0);
  EXPECT_FALSE(r.attempts[0].error.empty());
}

TEST_F(ClientTest, AddModelFailsWhenKeyVariableIsUnset) {
  auto client = make_curl_client();
  config::ModelConfig m = fast_model("k", "http://127.0.0.1:1/v1", false);
  m.api_key_env = "KORCH_TEST_SURELY_UNSET_VARIABLE";
  unsetenv(m.api_key_env.c_str());
  auto r = client->add_model(m);
  ASSERT_FALSE(r);
  EXPECT_NE(r.error().message.find("KORCH_TEST_SURELY_UNSET_VARIABLE"), std::string::npos);
}

TEST_F(ClientTest, UnknownModelFailsAtOnce) {
  auto client = make_curl_client();
  ChatResult r = run_one(*client, {"nope", "x", {{"user", "u"}}});
  EXPECT_EQ(r.outcome, Outcome::permanent);
  EXPECT_TRUE(r.attempts.empty());
}

TEST_F(ClientTest, ConcurrencyLimitIsRespected) {
  auto client = concurrent_client(4, std::chrono::milliseconds(50));
  expect_all_ok(*client, "m", "conc", 24);
  EXPECT_LE(m_server->stats().max_concurrent, 4);
  EXPECT_GE(m_server->stats().max_concurrent, 2);
}

TEST_F(ClientTest, RateLimitBurstShrinksTheLimitThenItGrowsBack) {
  auto client = concurrent_client(8, std::chrono::milliseconds(20));
  m_server->fail_next(16, Fault::rate_limit);
  expect_all_ok(*client, "m", "burst", 40);
  const auto after_burst = client->stats().limit_changes;
  // One burst inside the cooldown window shrinks once (8 -> 4); successes then grow it back.
  EXPECT_GE(after_burst, 2);
  expect_all_ok(*client, "m", "after", 60);
  EXPECT_LE(m_server->stats().max_concurrent, 8);
}

TEST_F(ClientTest, ServerErrorsDoNotShrinkTheLimit) {
  auto client = concurrent_client(8);
  m_server->fail_next(16, Fault::http_503);
  expect_all_ok(*client, "m", "e5xx", 30);
  EXPECT_EQ(client->stats().limit_changes, 0);
}

TEST_F(ClientTest, HostNameIsResolvedOnceNotPerRequest) {
  start_server();
  auto m = fast_model("h", fmt::format("http://localhost:{}/v1", m_server->port()), false);
  auto client = client_with(m);
  expect_all_ok(*client, "h", "dns", 50);
  EXPECT_EQ(client->stats().resolver_starts, 0);
}

TEST_F(ClientTest, ShutdownCancelsEverythingAndLaterSubmitsToo) {
  auto client = concurrent_client(2, std::chrono::milliseconds(5000));
  std::vector<std::future<ChatResult>> futures;
  std::vector<std::shared_ptr<std::promise<ChatResult>>> promises;
  for (int i = 0; i < 6; ++i) {
    auto p = std::make_shared<std::promise<ChatResult>>();
    futures.push_back(p->get_future());
    client->submit({"m", fmt::format("cancel-{}", i), {{"user", "u"}}},
                   [p](ChatResult r) { p->set_value(std::move(r)); });
  }
  std::this_thread::sleep_for(std::chrono::milliseconds(200));
  const auto t0 = std::chrono::steady_clock::now();
  client->shutdown();
  EXPECT_LT(std::chrono::duration<double>(std::chrono::steady_clock::now() - t0).count(), 2.0);
  for (auto& f : futures) {
    ASSERT_EQ(f.wait_for(std::chrono::seconds(1)), std::future_status::ready);
    EXPECT_EQ(f.get().outcome, Outcome::cancelled);
  }
  client->shutdown();  // idempotent
  ChatResult late = run_one(*client, {"m", "late", {{"user", "u"}}});
  EXPECT_EQ(late.outcome, Outcome::cancelled);
  EXPECT_EQ(late.error, "client is shut down");
  EXPECT_EQ(client->stats().in_flight, 0);
}

TEST_F(ClientTest, CallbacksMaySubmitMoreWork) {
  start_server();
  auto client = client_with(model());
  std::promise<ChatResult> second;
  client->submit({"m", "chain-1", {{"user", "u"}}}, [&](ChatResult first) {
    EXPECT_EQ(first.outcome, Outcome::ok);
    client->submit({"m", "chain-2", {{"user", "u"}}},
                   [&](ChatResult r) { second.set_value(std::move(r)); });
  });
  auto f = second.get_future();
  ASSERT_EQ(f.wait_for(std::chrono::seconds(10)), std::future_status::ready);
  EXPECT_EQ(f.get().outcome, Outcome::ok);
}

// The API key must never appear in results, errors or logs, whatever fails.
TEST_F(ClientTest, ApiKeyNeverAppearsInErrorsOrLogs) {
  auto stream = std::make_shared<std::ostringstream>();
  auto sink = std::make_shared<spdlog::sinks::ostream_sink_mt>(*stream);
  auto logger = std::make_shared<spdlog::logger>("capture", sink);
  logger->set_level(spdlog::level::trace);
  auto previous = spdlog::default_logger();
  const auto previous_level = spdlog::get_level();
  spdlog::set_default_logger(logger);
  spdlog::set_level(spdlog::level::trace);

  FakeServerOptions opts;
  opts.slow_first_byte = std::chrono::milliseconds(1000);
  start_server(opts);
  std::vector<ChatResult> results;
  for (bool s : {false, true}) {
    auto m = model("m", s);
    m.max_attempts = 2;
    m.first_byte_timeout_s = 0.2;
    auto client = client_with(m);
    for (Fault f : {Fault::unauthorized, Fault::http_500, Fault::rate_limit_retry_after,
                    Fault::reset_mid_body, Fault::malformed_json, Fault::slow_first_byte,
                    Fault::context_overflow, Fault::stream_error_event, Fault::truncated_stream}) {
      m_server->fail_next(2, f);
      results.push_back(run_one(
          *client,
          {"m", fmt::format("leak-{}-{}", korch::testing::to_string(f), s), {{"user", "u"}}}));
    }
    // The unauthorized body really echoed the key: the client must have redacted it.
    m_server->fail_next(1, Fault::unauthorized);
    ChatResult r = run_one(*client, {"m", fmt::format("leak-echo-{}", s), {{"user", "u"}}});
    EXPECT_NE(r.error.find("****"), std::string::npos) << r.error;
    results.push_back(std::move(r));
  }
  {  // Connection refused and an unknown host.
    auto m = fast_model("dead", "http://127.0.0.1:1/v1", false);
    m.api_key_env = k_key_env;
    m.max_attempts = 2;
    auto client = client_with(m);
    results.push_back(run_one(*client, {"dead", "leak-dead", {{"user", "u"}}}));
    auto h = fast_model("nohost", "http://no-such-host.invalid:9/v1", false);
    h.api_key_env = k_key_env;
    h.max_attempts = 1;
    auto client2 = client_with(h);
    results.push_back(run_one(*client2, {"nohost", "leak-nohost", {{"user", "u"}}}));
  }
  spdlog::set_default_logger(previous);
  spdlog::set_level(previous_level);

  int failures = 0;
  for (const auto& r : results) {
    if (r.outcome != Outcome::ok) ++failures;
    EXPECT_EQ(r.error.find(k_key), std::string::npos) << r.error;
    EXPECT_EQ(r.content.find(k_key), std::string::npos);
    EXPECT_EQ(r.provider_request_id.find(k_key), std::string::npos);
    for (const auto& a : r.attempts) EXPECT_EQ(a.error.find(k_key), std::string::npos) << a.error;
  }
  EXPECT_GE(failures, 6);
  const std::string logs = stream->str();
  EXPECT_FALSE(logs.empty());
  EXPECT_EQ(logs.find(k_key), std::string::npos) << logs;
  EXPECT_EQ(logs.find("SECRET"), std::string::npos);
}

}  // namespace
}  // namespace korch::llm
