// The client against an independent OpenAI-compatible mock server that this
// project did not write: @dwmkerr/mock-llm from npm (pinned in
// tests/llm_clients/mock-llm/package-lock.json, installed by
// scripts/install-test-npm.sh). Skipped when node or the package is absent.
#include <gtest/gtest.h>
#include <httplib.h>
#include <netinet/in.h>
#include <signal.h>
#include <sys/socket.h>
#include <sys/wait.h>
#include <unistd.h>

#include <chrono>
#include <cstdlib>
#include <filesystem>
#include <fstream>
#include <thread>

#include "llm_clients/client.hpp"
#include "tests/llm_clients/client_test_util.hpp"
#include "tests/support/required.hpp"
#include "tests/support/temp_dir.hpp"

#ifndef KORCH_MOCK_LLM_DIR
#define KORCH_MOCK_LLM_DIR "tests/llm_clients/mock-llm"
#endif

namespace korch::llm {
namespace {

namespace fs = std::filesystem;
using testing_util::fast_model;
using testing_util::run_one;

constexpr const char* k_key_env = "KORCH_TEST_MOCK_LLM_KEY";
constexpr const char* k_key = "sk-mock-llm-key-42";

// Rules are evaluated in order and the last match wins (mock-llm README).
constexpr const char* k_config = R"YAML(
streaming:
  chunkSize: 8
  chunkIntervalMs: 2
rules:
  - path: "/v1/chat/completions"
    method: "POST"
    match: "@"
    response:
      status: 200
      content: |
        {"id": "chatcmpl-{{timestamp}}", "object": "chat.completion", "created": 1, "model": "{{jmes request body.model}}",
         "choices": [{"index": 0, "message": {"role": "assistant", "content": "echo: {{jmes request body.messages[-1].content}}"}, "finish_reason": "stop"}],
         "usage": {"prompt_tokens": 11, "completion_tokens": 7, "total_tokens": 18, "prompt_tokens_details": {"cached_tokens": 3}}}
  - path: "/v1/chat/completions"
    match: "contains(body.messages[-1].content, 'whoami') && headers.authorization == 'Bearer sk-mock-llm-key-42'"
    response:
      status: 200
      content: |
        {"id": "chatcmpl-who", "object": "chat.completion", "created": 1, "model": "m",
         "choices": [{"index": 0, "message": {"role": "assistant", "content": "authorized rid={{jmes request headers."x-request-id"}}"}, "finish_reason": "stop"}]}
  - path: "/v1/chat/completions"
    match: "contains(body.messages[-1].content, 'error-401')"
    response:
      status: 401
      content: '{"error": {"message": "Incorrect API key provided.", "type": "invalid_request_error", "param": null, "code": "invalid_api_key"}}'
  - path: "/v1/chat/completions"
    match: "contains(body.messages[-1].content, 'too-long')"
    response:
      status: 400
      content: '{"error": {"message": "This model''s maximum context length is 4096 tokens.", "type": "invalid_request_error", "param": "messages", "code": "context_length_exceeded"}}'
  - path: "/v1/chat/completions"
    match: "contains(body.messages[-1].content, 'flaky')"
    sequence: 0
    response:
      status: 503
      content: '{"error": {"message": "overloaded", "type": "server_error"}}'
  - path: "/v1/chat/completions"
    match: "contains(body.messages[-1].content, 'flaky')"
    sequence: 1
    response:
      status: 503
      content: '{"error": {"message": "overloaded", "type": "server_error"}}'
)YAML";

bool on_path(const std::string& program) {
  const char* path = std::getenv("PATH");
  if (path == nullptr) return false;
  std::string_view rest = path;
  while (!rest.empty()) {
    auto colon = rest.find(':');
    fs::path dir(std::string(rest.substr(0, colon)));
    if (access((dir / program).c_str(), X_OK) == 0) return true;
    if (colon == std::string_view::npos) break;
    rest.remove_prefix(colon + 1);
  }
  return false;
}

int free_port() {
  int fd = socket(AF_INET, SOCK_STREAM, 0);
  sockaddr_in addr{};
  addr.sin_family = AF_INET;
  addr.sin_addr.s_addr = htonl(INADDR_LOOPBACK);
  addr.sin_port = 0;
  socklen_t len = sizeof addr;
  int port = 0;
  if (bind(fd, reinterpret_cast<sockaddr*>(&addr), sizeof addr) == 0 &&
      getsockname(fd, reinterpret_cast<sockaddr*>(&addr), &len) == 0) {
    port = ntohs(addr.sin_port);
  }
  close(fd);
  return port;
}

class MockLlmTest : public ::testing::Test {
 protected:
  static void SetUpTestSuite() {
    s_skip.clear();
    const fs::path main_js =
        fs::path(KORCH_MOCK_LLM_DIR) / "node_modules/@dwmkerr/mock-llm/dist/main.js";
    if (!on_path("node")) {
      s_skip = "node is not installed; skipping the @dwmkerr/mock-llm tests";
      return;
    }
    if (!fs::exists(main_js)) {
      s_skip = "@dwmkerr/mock-llm is not installed (run scripts/install-test-npm.sh); skipping";
      return;
    }
    s_dir = new korch::testing::TempDir();
    const fs::path config = s_dir->file("mock-llm.yaml");
    std::ofstream(config) << k_config;
    const fs::path log = s_dir->file("mock-llm.log");
    s_port = free_port();
    s_pid = fork();
    if (s_pid == 0) {
      const std::string port = std::to_string(s_port);
      setenv("PORT", port.c_str(), 1);
      setenv("HOST", "127.0.0.1", 1);
      FILE* out = std::freopen(log.c_str(), "w", stdout);
      if (out != nullptr) dup2(fileno(stdout), STDERR_FILENO);
      chdir(s_dir->path().c_str());
      execlp("node", "node", main_js.c_str(), "--config", config.c_str(),
             static_cast<char*>(nullptr));
      _exit(127);
    }
    httplib::Client probe("127.0.0.1", s_port);
    probe.set_connection_timeout(0, 200000);
    for (int i = 0; i < 300; ++i) {
      if (auto r = probe.Get("/health"); r && r->status == 200) return;
      int status = 0;
      if (waitpid(s_pid, &status, WNOHANG) == s_pid) break;
      std::this_thread::sleep_for(std::chrono::milliseconds(50));
    }
    std::ifstream in(log);
    std::string text((std::istreambuf_iterator<char>(in)), std::istreambuf_iterator<char>());
    s_skip = "mock-llm did not become healthy; its log:\n" + text;
    TearDownTestSuite();
  }

  static void TearDownTestSuite() {
    if (s_pid > 0) {
      kill(s_pid, SIGTERM);
      int status = 0;
      for (int i = 0; i < 50 && waitpid(s_pid, &status, WNOHANG) == 0; ++i) {
        std::this_thread::sleep_for(std::chrono::milliseconds(20));
      }
      if (waitpid(s_pid, &status, WNOHANG) == 0) {
        kill(s_pid, SIGKILL);
        waitpid(s_pid, &status, 0);
      }
      s_pid = -1;
    }
    delete s_dir;
    s_dir = nullptr;
  }

  void SetUp() override {
    if (!s_skip.empty()) KORCH_SKIP_OR_FAIL(s_skip);
    setenv(k_key_env, k_key, 1);
  }

  std::unique_ptr<ChatClient> client(bool stream, int max_attempts = 4) {
    auto m = fast_model(stream ? "mock-sse" : "mock", fmt::format("http://127.0.0.1:{}/v1", s_port),
                        stream);
    m.model = "gpt-4";
    m.api_key_env = k_key_env;
    m.max_attempts = max_attempts;
    auto c = make_curl_client();
    EXPECT_TRUE(c->add_model(m));
    return c;
  }
  static std::string model_id(bool stream) { return stream ? "mock-sse" : "mock"; }

  static inline std::string s_skip;
  static inline pid_t s_pid = -1;
  static inline int s_port = 0;
  static inline korch::testing::TempDir* s_dir = nullptr;
};

// Runs first (gtest keeps declaration order): mock-llm's sequence counter is
// per path, so the two 503s go to the first two "flaky" requests.
TEST_F(MockLlmTest, RetriesTwo503sThenSucceeds) {
  auto c = client(false);
  ChatResult r = run_one(*c, {model_id(false), "mock-flaky", {{"user", "flaky please"}}});
  ASSERT_EQ(r.outcome, Outcome::ok) << r.error;
  ASSERT_EQ(r.attempts.size(), 3u);
  EXPECT_EQ(r.attempts[0].http_status, 503);
  EXPECT_EQ(r.attempts[1].http_status, 503);
  EXPECT_EQ(r.content, "echo: flaky please");
}

TEST_F(MockLlmTest, NonStreamingEchoWithUsage) {
  auto c = client(false);
  ChatResult r =
      run_one(*c, {model_id(false), "mock-1", {{"system", "s"}, {"user", "hello world"}}});
  ASSERT_EQ(r.outcome, Outcome::ok) << r.error;
  EXPECT_EQ(r.content, "echo: hello world");
  EXPECT_EQ(r.finish_reason, "stop");
  EXPECT_EQ(r.usage.prompt_tokens, 11);
  EXPECT_EQ(r.usage.completion_tokens, 7);
  EXPECT_EQ(r.usage.cached_tokens, 3);
  EXPECT_EQ(r.attempts.size(), 1u);
}

TEST_F(MockLlmTest, SendsBearerKeyAndRequestId) {
  for (bool stream : {false, true}) {
    auto c = client(stream);
    ChatResult r = run_one(*c, {model_id(stream), "rid-777", {{"user", "whoami"}}});
    ASSERT_EQ(r.outcome, Outcome::ok) << r.error;
    EXPECT_EQ(r.content, "authorized rid=rid-777") << "stream=" << stream;
  }
}

TEST_F(MockLlmTest, StreamingAssemblesChunks) {
  auto c = client(true);
  const std::string text = "a longer message that spans several eight-character chunks";
  ChatResult r = run_one(*c, {model_id(true), "mock-stream", {{"user", text}}});
  ASSERT_EQ(r.outcome, Outcome::ok) << r.error;
  EXPECT_EQ(r.content, "echo: " + text);
  EXPECT_EQ(r.finish_reason, "stop");
}

TEST_F(MockLlmTest, UnauthorizedIsPermanentAndContextOverflowClassified) {
  auto c = client(false);
  ChatResult r401 = run_one(*c, {model_id(false), "mock-401", {{"user", "error-401"}}});
  EXPECT_EQ(r401.outcome, Outcome::permanent);
  EXPECT_EQ(r401.attempts.size(), 1u);
  EXPECT_NE(r401.error.find("Incorrect API key"), std::string::npos) << r401.error;
  EXPECT_EQ(r401.error.find(k_key), std::string::npos);
  ChatResult ctx = run_one(*c, {model_id(false), "mock-ctx", {{"user", "too-long"}}});
  EXPECT_EQ(ctx.outcome, Outcome::context_overflow) << ctx.error;
  EXPECT_EQ(ctx.attempts.size(), 1u);
}

// mock-llm reports errors of a streaming request as a 200 stream carrying an
// error event: the client must not take that as a completion.
TEST_F(MockLlmTest, ErrorInsideAStreamIsAFailure) {
  auto c = client(true, 2);
  ChatResult r = run_one(*c, {model_id(true), "mock-sse-401", {{"user", "error-401"}}});
  EXPECT_EQ(r.outcome, Outcome::exhausted);
  ASSERT_EQ(r.attempts.size(), 2u);
  EXPECT_EQ(r.attempts[0].http_status, 200);
  EXPECT_NE(r.attempts[0].error.find("Incorrect API key"), std::string::npos)
      << r.attempts[0].error;
  EXPECT_TRUE(r.content.empty());
}

TEST_F(MockLlmTest, ManyConcurrentRequests) {
  auto c = client(false);
  auto results = testing_util::run_many(*c, model_id(false), "mock-many", 200);
  for (const auto& r : results) {
    ASSERT_EQ(r.outcome, Outcome::ok) << r.error;
    EXPECT_TRUE(r.content.starts_with("echo: request ")) << r.content;
  }
}

}  // namespace
}  // namespace korch::llm
