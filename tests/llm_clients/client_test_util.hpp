#pragma once
// Helpers shared by the ChatClient tests: a ModelConfig with small timeouts
// and backoffs, blocking wrappers around submit(), and the checks of a reply.
#include <chrono>
#include <condition_variable>
#include <future>
#include <mutex>
#include <string>
#include <vector>

#include <fmt/format.h>
#include <gtest/gtest.h>

#include "llm_clients/client.hpp"

namespace korch::llm::testing_util {

// A model on `base_url` with test-sized timeouts and backoffs.
inline config::ModelConfig fast_model(const std::string& id, const std::string& base_url,
                                      bool stream) {
  return {.id = id,
          .base_url = base_url,
          .model = "fake-model",
          .concurrency = 32,
          .stream = stream,
          .max_attempts = 6,
          .retry_cap_s = 0.02,
          .connect_timeout_s = 2,
          .first_byte_timeout_s = 5,
          .total_timeout_s = 20,
          .stall_timeout_s = 5};
}

// Submits one request and waits for its result (at most 60 s).
inline ChatResult run_one(ChatClient& client, ChatRequest request) {
  auto promise = std::make_shared<std::promise<ChatResult>>();
  auto future = promise->get_future();
  client.submit(std::move(request), [promise](ChatResult r) { promise->set_value(std::move(r)); });
  if (future.wait_for(std::chrono::seconds(60)) != std::future_status::ready) {
    ChatResult r;
    r.error = "test timeout: no callback within 60 s";
    return r;
  }
  return future.get();
}

// Submits `n` requests "<prefix>-<i>" at once and waits for all of them.
inline std::vector<ChatResult> run_many(ChatClient& client, const std::string& model_id,
                                        const std::string& prefix, int n,
                                        std::chrono::seconds limit = std::chrono::seconds(60)) {
  std::mutex mutex;
  std::condition_variable cv;
  std::vector<ChatResult> results(static_cast<std::size_t>(n));
  int done = 0;
  for (int i = 0; i < n; ++i) {
    client.submit(
        {model_id, fmt::format("{}-{}", prefix, i), {{"user", fmt::format("request {}", i)}}},
        [&, i](ChatResult r) {
          std::lock_guard lock(mutex);
          results[static_cast<std::size_t>(i)] = std::move(r);
          ++done;
          cv.notify_all();
        });
  }
  std::unique_lock lock(mutex);
  if (!cv.wait_for(lock, limit, [&] { return done == n; })) {
    // Do not return while callbacks may still write into `results`.
    lock.unlock();
    client.shutdown();
    lock.lock();
    cv.wait(lock, [&] { return done == n; });
  }
  return results;
}

// A reply's text and token counts: a ChatResult or a parsed completion.
template <class Reply>
void expect_reply(const Reply& r, const std::string& content, const std::string& reasoning,
                  const std::string& finish_reason, std::int64_t prompt_tokens,
                  std::int64_t completion_tokens, std::int64_t cached_tokens) {
  EXPECT_EQ(r.content, content);
  EXPECT_EQ(r.reasoning, reasoning);
  EXPECT_EQ(r.finish_reason, finish_reason);
  EXPECT_EQ(r.usage.prompt_tokens, prompt_tokens);
  EXPECT_EQ(r.usage.completion_tokens, completion_tokens);
  EXPECT_EQ(r.usage.cached_tokens, cached_tokens);
}

}  // namespace korch::llm::testing_util
