#include "tests/support/fake_openai_server.hpp"

#include <cstdio>

#include <httplib.h>
#include <sys/socket.h>

#include <algorithm>
#include <atomic>
#include <condition_variable>
#include <deque>
#include <mutex>
#include <nlohmann/json.hpp>
#include <thread>

#include <fmt/format.h>

namespace korch::testing {

using nlohmann::json;

namespace {

// Listen backlog set after httplib's bind (see FakeOpenAIServer::start).
constexpr int k_listen_backlog = 4096;

std::uint64_t splitmix64(std::uint64_t x) {
  x += 0x9e3779b97f4a7c15ULL;
  x = (x ^ (x >> 30)) * 0xbf58476d1ce4e5b9ULL;
  x = (x ^ (x >> 27)) * 0x94d049bb133111ebULL;
  return x ^ (x >> 31);
}

std::uint64_t fnv1a(std::string_view s) {
  std::uint64_t h = 0xcbf29ce484222325ULL;
  for (unsigned char c : s) {
    h ^= c;
    h *= 0x100000001b3ULL;
  }
  return h;
}

double to_unit(std::uint64_t h) { return static_cast<double>(h >> 11) * 0x1.0p-53; }

std::string lower(std::string s) {
  for (char& c : s) c = static_cast<char>(std::tolower(static_cast<unsigned char>(c)));
  return s;
}

std::int64_t estimate_tokens(std::size_t chars) { return static_cast<std::int64_t>(chars / 4 + 1); }

// Splits `text` into about `parts` pieces (at least one, possibly empty).
std::vector<std::string> split(const std::string& text, std::size_t parts) {
  std::vector<std::string> out;
  if (text.empty()) return {""};
  const std::size_t step = std::max<std::size_t>(1, (text.size() + parts - 1) / parts);
  for (std::size_t pos = 0; pos < text.size(); pos += step) out.push_back(text.substr(pos, step));
  return out;
}

}  // namespace

const char* to_string(Fault f) {
  switch (f) {
    case Fault::none: return "none";
    case Fault::rate_limit: return "rate_limit";
    case Fault::rate_limit_retry_after: return "rate_limit_retry_after";
    case Fault::rate_limit_retry_after_ms: return "rate_limit_retry_after_ms";
    case Fault::http_500: return "http_500";
    case Fault::http_502: return "http_502";
    case Fault::http_503: return "http_503";
    case Fault::http_504: return "http_504";
    case Fault::reset_mid_body: return "reset_mid_body";
    case Fault::slow_first_byte: return "slow_first_byte";
    case Fault::truncated_stream: return "truncated_stream";
    case Fault::stream_error_event: return "stream_error_event";
    case Fault::malformed_json: return "malformed_json";
    case Fault::empty_choices: return "empty_choices";
    case Fault::finish_length: return "finish_length";
    case Fault::context_overflow: return "context_overflow";
    case Fault::unauthorized: return "unauthorized";
  }
  return "?";
}

bool is_failure(Fault f) { return f != Fault::none && f != Fault::finish_length; }

std::vector<std::pair<Fault, double>> default_fault_weights() {
  return {{Fault::rate_limit, 1},
          {Fault::rate_limit_retry_after, 1},
          {Fault::rate_limit_retry_after_ms, 1},
          {Fault::http_500, 1},
          {Fault::http_502, 1},
          {Fault::http_503, 1},
          {Fault::http_504, 1},
          {Fault::reset_mid_body, 1},
          {Fault::slow_first_byte, 1},
          {Fault::truncated_stream, 1},
          {Fault::stream_error_event, 1},
          {Fault::malformed_json, 1},
          {Fault::empty_choices, 1},
          {Fault::finish_length, 1}};
}

ScriptedReply default_reply(const std::string& model, const std::vector<llm::Message>& messages) {
  ScriptedReply r;
  std::string last = messages.empty() ? "" : messages.back().content.substr(0, 40);
  r.content = fmt::format("Reply from {} to: {}", model, last);
  return r;
}

struct FakeOpenAIServer::Impl {
  FakeServerOptions options;
  httplib::Server server;
  std::thread thread;
  int port = 0;
  std::atomic<bool> stopping{false};
  std::atomic<bool> started{false};
  std::mutex sleep_mutex;
  std::condition_variable sleep_cv;

  mutable std::mutex mutex;  // guards everything below
  std::chrono::milliseconds latency{0};
  FaultPlan plan;
  int fail_next_count = 0;
  Fault fail_next_fault = Fault::none;
  std::map<std::string, std::vector<AttemptRecord>> attempts;
  ServerStats stats;
  std::deque<RecordedRequest> recent;
  std::uint64_t anonymous_requests = 0;
  std::atomic<std::uint64_t> response_counter{0};
  std::int64_t running = 0;  // guarded by `mutex`
  std::atomic<int> listen_fd{-1};

  // Sleeps up to `d`; returns false when the server is stopping.
  bool sleep_for(std::chrono::milliseconds d) {
    if (d.count() <= 0) return !stopping;
    std::unique_lock lock(sleep_mutex);
    return !sleep_cv.wait_for(lock, d, [&] { return stopping.load(); });
  }

  Fault pick_fault(const std::string& request_id, int attempt_no) {
    // Caller holds `mutex`.
    if (fail_next_count > 0) {
      --fail_next_count;
      return fail_next_fault;
    }
    if (plan.rate <= 0) return Fault::none;
    const std::uint64_t h = splitmix64(plan.seed ^ fnv1a(request_id) ^
                                       (static_cast<std::uint64_t>(attempt_no) * 0x9e37ULL));
    if (to_unit(h) >= plan.rate) return Fault::none;
    const auto weights = plan.weights.empty() ? default_fault_weights() : plan.weights;
    double total = 0;
    for (auto& [f, w] : weights) total += w;
    double pick = to_unit(splitmix64(h)) * total;
    for (auto& [f, w] : weights) {
      if (pick < w) return f;
      pick -= w;
    }
    return weights.back().first;
  }

  void handle_chat(const httplib::Request& req, httplib::Response& res);
};

namespace {

json usage_json(const llm::Usage& u) {
  return {{"prompt_tokens", u.prompt_tokens},
          {"completion_tokens", u.completion_tokens},
          {"total_tokens", u.prompt_tokens + u.completion_tokens},
          {"prompt_tokens_details", {{"cached_tokens", u.cached_tokens}}},
          {"completion_tokens_details", {{"reasoning_tokens", u.reasoning_tokens}}}};
}

std::string sse(const json& chunk) { return "data: " + chunk.dump() + "\n\n"; }

}  // namespace

void FakeOpenAIServer::Impl::handle_chat(const httplib::Request& req, httplib::Response& res) {
  {
    std::lock_guard lock(mutex);
    stats.max_concurrent = std::max(stats.max_concurrent, ++running);
  }
  struct Leave {
    Impl* impl;
    ~Leave() {
      std::lock_guard lock(impl->mutex);
      --impl->running;
    }
  } leave{this};
  RecordedRequest record;
  record.path = req.path;
  record.body = req.body;
  for (auto& [name, value] : req.headers) record.headers[lower(name)] = value;
  record.request_id = req.get_header_value("X-Request-Id");
  record.authorization = req.get_header_value("Authorization");

  json body = json::parse(req.body, nullptr, false);
  std::vector<llm::Message> messages;
  std::string model;
  bool stream = false;
  bool include_usage = false;
  bool valid = body.is_object() && body.contains("messages") && body["messages"].is_array();
  if (valid) {
    model = body.value("model", "");
    stream = body.value("stream", false);
    if (auto it = body.find("stream_options"); it != body.end() && it->is_object()) {
      include_usage = it->value("include_usage", false);
    }
    for (const auto& m : body["messages"]) {
      if (!m.is_object()) continue;
      llm::Message msg;
      msg.role = m.value("role", "");
      if (m.contains("content") && m["content"].is_string())
        msg.content = m["content"].get<std::string>();
      messages.push_back(std::move(msg));
    }
  }

  Fault fault = Fault::none;
  std::chrono::milliseconds delay{0};
  AttemptRecord attempt;
  std::string key;
  std::size_t attempt_index = 0;
  {
    std::lock_guard lock(mutex);
    if (!options.request_log.empty()) {
      double now =
          std::chrono::duration<double>(std::chrono::system_clock::now().time_since_epoch())
              .count();
      if (std::FILE* f = std::fopen(options.request_log.c_str(), "a")) {
        std::fprintf(f, "%.6f %s\n", now, record.request_id.c_str());
        std::fclose(f);
      }
    }
    recent.push_back(record);
    while (recent.size() > options.recorded_requests) recent.pop_front();
    key = record.request_id.empty() ? fmt::format("anonymous-{}", anonymous_requests++)
                                    : record.request_id;
    auto& log = attempts[key];
    const int attempt_no = static_cast<int>(log.size()) + 1;
    fault = valid ? pick_fault(key, attempt_no) : Fault::none;
    if (!stream && fault == Fault::truncated_stream) fault = Fault::reset_mid_body;
    attempt.fault = fault;
    attempt.stream = stream;
    log.push_back(attempt);
    attempt_index = log.size() - 1;
    ++stats.requests;
    ++stats.faults[fault];
    delay = latency;
  }
  auto finish_record = [&](int status, bool delivered, const llm::Usage& usage) {
    std::lock_guard lock(mutex);
    auto& a = attempts[key][attempt_index];
    a.http_status = status;
    a.delivered = delivered;
    if (delivered) {
      a.usage = usage;
      ++stats.delivered;
    }
  };

  if (!valid) {
    res.status = 400;
    res.set_content(
        R"({"error":{"message":"invalid request body","type":"invalid_request_error"}})",
        "application/json");
    finish_record(400, false, {});
    return;
  }
  if (!sleep_for(delay)) return;
  if (fault == Fault::slow_first_byte && !sleep_for(options.slow_first_byte)) return;

  const std::uint64_t seq = response_counter.fetch_add(1) + 1;
  res.set_header("x-request-id", fmt::format("srv-{}", seq));

  auto error_reply = [&](int status, const std::string& message, const std::string& type) {
    res.status = status;
    res.set_content(json{{"error", {{"message", message}, {"type", type}, {"code", type}}}}.dump(),
                    "application/json");
    finish_record(status, false, {});
  };
  switch (fault) {
    case Fault::rate_limit: return error_reply(429, "Rate limit reached", "rate_limit_exceeded");
    case Fault::rate_limit_retry_after:
      res.set_header("Retry-After", "1");
      return error_reply(429, "Rate limit reached, retry after 1s", "rate_limit_exceeded");
    case Fault::rate_limit_retry_after_ms:
      res.set_header("retry-after-ms", "30");
      return error_reply(429, "Rate limit reached, retry after 30ms", "rate_limit_exceeded");
    case Fault::http_500: return error_reply(500, "internal error", "server_error");
    case Fault::http_502:
      res.status = 502;
      res.set_content("<html><body>502 Bad Gateway</body></html>", "text/html");
      return finish_record(502, false, {});
    case Fault::http_503: return error_reply(503, "overloaded", "server_error");
    case Fault::http_504: return error_reply(504, "gateway timeout", "server_error");
    case Fault::context_overflow:
      return error_reply(
          400,
          "This model's maximum context length is 8192 tokens. However, your messages "
          "resulted in 9000 tokens.",
          "context_length_exceeded");
    case Fault::unauthorized: {
      std::string token = record.authorization;
      if (token.starts_with("Bearer ")) token = token.substr(7);
      return error_reply(401, "Incorrect API key provided: " + token, "invalid_api_key");
    }
    default: break;
  }

  ScriptedReply reply = options.reply_with_id
                            ? options.reply_with_id(model, messages, record.request_id)
                        : options.reply ? options.reply(model, messages)
                                        : default_reply(model, messages);
  if (fault == Fault::finish_length) reply.finish_reason = "length";
  llm::Usage usage;
  std::size_t prompt_chars = 0;
  for (const auto& m : messages) prompt_chars += m.content.size();
  usage.prompt_tokens =
      reply.prompt_tokens > 0 ? reply.prompt_tokens : estimate_tokens(prompt_chars);
  usage.completion_tokens =
      reply.completion_tokens > 0 ? reply.completion_tokens : estimate_tokens(reply.content.size());
  usage.cached_tokens = usage.prompt_tokens / 4;
  usage.reasoning_tokens = reply.reasoning.empty() ? 0 : estimate_tokens(reply.reasoning.size());
  const std::string id = fmt::format("chatcmpl-{}", seq);

  if (!stream) {
    json message = {{"role", "assistant"}, {"content", reply.content}};
    if (!reply.reasoning.empty()) message["reasoning_content"] = reply.reasoning;
    json choices = json::array(
        {json{{"index", 0}, {"message", message}, {"finish_reason", reply.finish_reason}}});
    if (fault == Fault::empty_choices) choices = json::array();
    json out = {{"id", id},       {"object", "chat.completion"}, {"created", 1700000000},
                {"model", model}, {"choices", choices},          {"usage", usage_json(usage)}};
    if (fault == Fault::stream_error_event)
      out = {{"error", {{"message", "upstream failure"}, {"type", "server_error"}}}};
    std::string text = out.dump();
    if (fault == Fault::malformed_json) text = text.substr(0, text.size() / 2) + "<<garbage";
    if (fault == Fault::reset_mid_body) {
      auto shared = std::make_shared<std::string>(std::move(text));
      res.status = 200;
      res.set_content_provider(shared->size(), "application/json",
                               [shared](size_t offset, size_t, httplib::DataSink& sink) {
                                 if (offset == 0) sink.write(shared->data(), shared->size() / 2);
                                 return false;  // drops the connection mid-body
                               });
      return finish_record(200, false, {});
    }
    res.status = 200;
    res.set_content(text, "application/json");
    return finish_record(200, fault == Fault::none || fault == Fault::finish_length, usage);
  }

  // Streaming.
  auto frames = std::make_shared<std::vector<std::string>>();
  frames->push_back(": fake-openai keep-alive comment\n\n");
  auto chunk = [&](json delta, json finish) {
    return json{{"id", id},
                {"object", "chat.completion.chunk"},
                {"created", 1700000000},
                {"model", model},
                {"choices", json::array({json{{"index", 0},
                                              {"delta", std::move(delta)},
                                              {"finish_reason", std::move(finish)}}})}};
  };
  frames->push_back(sse(chunk({{"role", "assistant"}, {"content", ""}}, nullptr)));
  if (!reply.reasoning.empty())
    frames->push_back(sse(chunk({{"reasoning_content", reply.reasoning}}, nullptr)));
  for (const auto& piece : split(reply.content, 3))
    frames->push_back(sse(chunk({{"content", piece}}, nullptr)));
  const std::size_t body_frames = frames->size();
  if (fault == Fault::empty_choices) {
    // A stream whose only data is an empty-choices chunk: no finish frame, no [DONE].
    frames->resize(1);
    frames->push_back(
        sse(json{{"id", id}, {"object", "chat.completion.chunk"}, {"choices", json::array()}}));
  }
  frames->push_back(sse(chunk(json::object(), reply.finish_reason)));
  if (include_usage) {
    frames->push_back(sse(json{{"id", id},
                               {"object", "chat.completion.chunk"},
                               {"choices", json::array()},
                               {"usage", usage_json(usage)}}));
  }
  frames->push_back("data: [DONE]\n\n");
  if (fault == Fault::empty_choices) frames->resize(2);
  bool abort_connection = false;
  bool delivered = false;
  switch (fault) {
    case Fault::truncated_stream: frames->resize(std::min<std::size_t>(body_frames, 3)); break;
    case Fault::reset_mid_body:
      frames->resize(std::min<std::size_t>(body_frames, 3));
      abort_connection = true;
      break;
    case Fault::stream_error_event:
      frames->resize(std::min<std::size_t>(body_frames, 3));
      frames->push_back(
          sse(json{{"error", {{"message", "upstream model crashed"}, {"type", "server_error"}}}}));
      break;
    case Fault::malformed_json:
      frames->resize(std::min<std::size_t>(body_frames, 3));
      frames->push_back("data: {\"id\": \"broken\", \"choices\": [\n\n");
      frames->push_back("data: [DONE]\n\n");
      break;
    case Fault::none:
    case Fault::finish_length: delivered = true; break;
    default: break;
  }
  res.status = 200;
  res.set_header("Cache-Control", "no-cache");
  const auto chunk_delay = options.stream_chunk_delay;
  // Delivered only with the last frame: a client that gave up on a slow
  // stream (and retried) did not get this completion, so the soak must not
  // count it (the retry's is the one delivered). It is recorded just before
  // that frame is written, not after: a client finishes its call on the
  // last frame ([DONE]), and a soak that read the log as soon as its last
  // call finished found the record not yet written (CI, a loaded 2-core
  // host: "delivered 0" for an ok call). A last write that fails takes the
  // record back; the client then fails that attempt and retries, and the
  // soak reads the log only after the retry.
  finish_record(200, false, {});
  res.set_chunked_content_provider(
      "text/event-stream", [this, frames, abort_connection, chunk_delay, delivered, usage, key,
                            attempt_index](size_t, httplib::DataSink& sink) {
        auto record = [&](bool yes) {
          std::lock_guard lock(mutex);
          auto& a = attempts[key][attempt_index];
          a.delivered = yes;
          a.usage = yes ? usage : llm::Usage{};
          stats.delivered += yes ? 1 : -1;
        };
        const bool delivers = delivered && !abort_connection;
        for (std::size_t i = 0; i < frames->size(); ++i) {
          if (!sleep_for(chunk_delay)) return false;
          const bool last = i + 1 == frames->size();
          if (last && delivers) record(true);
          if (!sink.write((*frames)[i].data(), (*frames)[i].size())) {
            if (last && delivers) record(false);
            return false;
          }
        }
        if (abort_connection) return false;
        sink.done();
        return true;
      });
}

FakeOpenAIServer::FakeOpenAIServer(FakeServerOptions options) : m_impl(std::make_unique<Impl>()) {
  m_impl->options = std::move(options);
  m_impl->latency = m_impl->options.latency;
  m_impl->plan = m_impl->options.faults;
}

FakeOpenAIServer::~FakeOpenAIServer() { stop(); }

Result<void> FakeOpenAIServer::start() {
  Impl* impl = m_impl.get();
  auto& svr = impl->server;
  const int threads = std::max(8, impl->options.threads);
  svr.new_task_queue = [threads] { return new httplib::ThreadPool(static_cast<size_t>(threads)); };
  svr.set_keep_alive_max_count(100000);
  svr.set_keep_alive_timeout(5);
  svr.set_read_timeout(30, 0);
  svr.set_write_timeout(30, 0);
  svr.set_payload_max_length(64u << 20);
  svr.set_exception_handler(
      [](const httplib::Request&, httplib::Response& res, std::exception_ptr ep) {
        std::string what = "unknown";
        try {
          if (ep) std::rethrow_exception(ep);
        } catch (const std::exception& e) {
          what = e.what();
        } catch (...) {}
        res.status = 500;
        res.set_content(json{{"error", {{"message", "fake server exception: " + what}}}}.dump(),
                        "application/json");
      });
  svr.Get("/health", [](const httplib::Request&, httplib::Response& res) {
    res.set_content(R"({"status":"ok"})", "application/json");
  });
  svr.Get("/v1/models", [](const httplib::Request&, httplib::Response& res) {
    res.set_content(R"({"object":"list","data":[{"id":"fake-model","object":"model"}]})",
                    "application/json");
  });
  svr.Post("/v1/chat/completions", [impl](const httplib::Request& req, httplib::Response& res) {
    impl->handle_chat(req, res);
  });
  svr.Post("/chat/completions", [impl](const httplib::Request& req, httplib::Response& res) {
    impl->handle_chat(req, res);
  });

  // httplib 0.11 (compiled) listens with a backlog of 5, which drops SYNs
  // when a client opens dozens of connections at once. Remember the
  // listening socket and raise its backlog after bind (listen() may be
  // called again on a listening socket).
  svr.set_socket_options([impl](socket_t sock) {
    httplib::default_socket_options(sock);
    impl->listen_fd = sock;
  });
  const auto& host = impl->options.host;
  if (impl->options.port == 0) {
    impl->port = svr.bind_to_any_port(host);
    if (impl->port <= 0) return fail("fake server: cannot bind to a free port on " + host);
  } else {
    if (!svr.bind_to_port(host, impl->options.port)) {
      return fail(fmt::format("fake server: cannot bind {}:{}", host, impl->options.port));
    }
    impl->port = impl->options.port;
  }
  if (impl->listen_fd >= 0) ::listen(impl->listen_fd, k_listen_backlog);
  impl->thread = std::thread([impl] { impl->server.listen_after_bind(); });
  impl->started = true;
  httplib::Client probe(host, impl->port);
  probe.set_connection_timeout(1, 0);
  for (int i = 0; i < 500; ++i) {
    if (auto r = probe.Get("/health"); r && r->status == 200) return {};
    std::this_thread::sleep_for(std::chrono::milliseconds(10));
  }
  return fail("fake server: /health did not answer");
}

void FakeOpenAIServer::stop() {
  if (!m_impl->started.exchange(false)) return;
  m_impl->stopping = true;
  m_impl->sleep_cv.notify_all();
  m_impl->server.stop();
  if (m_impl->thread.joinable()) m_impl->thread.join();
}

int FakeOpenAIServer::port() const { return m_impl->port; }

std::string FakeOpenAIServer::base_url() const {
  return fmt::format("http://{}:{}/v1", m_impl->options.host, m_impl->port);
}

void FakeOpenAIServer::fail_next(int n, Fault fault) {
  std::lock_guard lock(m_impl->mutex);
  m_impl->fail_next_count = n;
  m_impl->fail_next_fault = fault;
}

void FakeOpenAIServer::set_latency(std::chrono::milliseconds latency) {
  std::lock_guard lock(m_impl->mutex);
  m_impl->latency = latency;
}

void FakeOpenAIServer::set_fault_plan(FaultPlan plan) {
  std::lock_guard lock(m_impl->mutex);
  m_impl->plan = std::move(plan);
}

int FakeOpenAIServer::attempts(const std::string& request_id) const {
  std::lock_guard lock(m_impl->mutex);
  auto it = m_impl->attempts.find(request_id);
  return it == m_impl->attempts.end() ? 0 : static_cast<int>(it->second.size());
}

std::vector<AttemptRecord> FakeOpenAIServer::attempt_log(const std::string& request_id) const {
  std::lock_guard lock(m_impl->mutex);
  auto it = m_impl->attempts.find(request_id);
  return it == m_impl->attempts.end() ? std::vector<AttemptRecord>{} : it->second;
}

std::map<std::string, std::vector<AttemptRecord>> FakeOpenAIServer::all_attempts() const {
  std::lock_guard lock(m_impl->mutex);
  return m_impl->attempts;
}

ServerStats FakeOpenAIServer::stats() const {
  std::lock_guard lock(m_impl->mutex);
  return m_impl->stats;
}

std::vector<RecordedRequest> FakeOpenAIServer::recent_requests() const {
  std::lock_guard lock(m_impl->mutex);
  return {m_impl->recent.begin(), m_impl->recent.end()};
}

std::optional<RecordedRequest> FakeOpenAIServer::last_request() const {
  std::lock_guard lock(m_impl->mutex);
  if (m_impl->recent.empty()) return std::nullopt;
  return m_impl->recent.back();
}

}  // namespace korch::testing
