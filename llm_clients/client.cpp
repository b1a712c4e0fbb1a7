// The libcurl implementation of ChatClient, its event loop: one multi
// handle driven by one event-loop thread through curl_multi_socket_action +
// epoll (the "hiperfifo" pattern), so thousands of transfers cost one
// thread. Every mutable structure below is touched only by that thread,
// except the submission queue (m_mutex) and the endpoint registry (its own
// lock; endpoint.hpp). Pricing is cost.hpp, URL parsing url.hpp.
#include "llm_clients/client.hpp"

#include <sys/epoll.h>
#include <sys/eventfd.h>
#include <unistd.h>

#include <algorithm>
#include <atomic>
#include <cerrno>
#include <chrono>
#include <cmath>
#include <cstdio>
#include <cstring>
#include <mutex>
#include <queue>
#include <random>
#include <thread>
#include <unordered_map>
#include <unordered_set>

#include "llm_clients/cost.hpp"
#include "llm_clients/curl_handles.hpp"
#include "llm_clients/endpoint.hpp"
#include "llm_clients/openai_wire.hpp"
#include "llm_clients/retry_policy.hpp"
#include "util/log.hpp"
#include "util/strings.hpp"

namespace korch::llm {

namespace {

// First exponential backoff step; ModelConfig::retry_cap_s caps it.
constexpr double k_backoff_base_s = 0.5;
// How often in-flight transfers are checked for first-byte / stall timeouts.
constexpr double k_sweep_interval_s = 0.02;
// Longest the loop sleeps when nothing is scheduled.
constexpr int k_max_wait_ms = 1000;
// Largest response body kept (a completion is far smaller).
constexpr std::size_t k_max_body_bytes = 64u << 20;
constexpr int k_epoll_batch = 256;

double now_s() {
  return std::chrono::duration<double>(std::chrono::steady_clock::now().time_since_epoch()).count();
}

// Response headers that carry the provider's id for a request.
bool is_request_id_header(std::string_view name) {
  return name == "x-request-id" || name == "request-id" || name == "x-amzn-requestid" ||
         name == "openai-request-id" || name == "x-oneapi-request-id" || name == "cf-ray";
}

TransportError classify_curl(CURLcode code) {
  switch (code) {
    case CURLE_COULDNT_RESOLVE_HOST:
    case CURLE_COULDNT_RESOLVE_PROXY:
    case CURLE_COULDNT_CONNECT: return TransportError::connect;
    case CURLE_OPERATION_TIMEDOUT: return TransportError::timeout;
    default: return TransportError::reset;
  }
}

// libcurl's receive buffer per easy handle (its default is 16 KB). The pool
// keeps one handle per in-flight call, so at thousands of calls this is
// memory per episode; replies arrive in a few more reads instead. Measured
// (korch-bench-engine, tools/bench/README.md): heap per added in-flight
// episode 105 -> 90 KiB, turns/s unchanged within noise.
constexpr long k_receive_buffer_bytes = 4096;

}  // namespace

// One chat call, from submit() to its callback. Owned by the loop.
struct Call {
  ChatRequest request;
  ChatCallback done;
  Endpoint* ep = nullptr;
  std::string body;
  curl::Slist headers;
  ChatResult result;
  double submit_s = 0;

  // The attempt in progress.
  curl::Easy easy;  // from the client's pool; returned when the attempt ends
  double attempt_start_s = 0;
  double last_byte_s = 0;
  bool got_first_byte = false;
  bool mode_decided = false;
  bool is_sse = false;
  std::string response;
  std::unique_ptr<StreamAssembler> stream;
  std::string retry_after;
  std::string retry_after_ms;
  std::string provider_request_id;
  std::string content_type;
  std::string abort_reason;  // set when the loop aborts the transfer
  char errbuf[CURL_ERROR_SIZE] = {};
};

namespace {

class CurlChatClient final : public ChatClient {
 public:
  CurlChatClient();
  ~CurlChatClient() override;

  Result<void> add_model(const config::ModelConfig& model) override;
  void submit(ChatRequest request, ChatCallback done) override;
  ClientStats stats() const override;
  void shutdown() override;

 private:
  // libcurl callbacks (loop thread).
  static int on_socket(CURL* easy, curl_socket_t fd, int what, void* self, void* socketp);
  static int on_timer(CURLM* multi, long timeout_ms, void* self);
  static size_t on_header(char* data, size_t size, size_t n, void* call);
  static size_t on_write(char* data, size_t size, size_t n, void* call);

  void run();
  void loop_once();
  void take_incoming(std::vector<std::unique_ptr<Call>>& batch);
  void start_ready();
  void start_attempt(Call* call);
  void fire_retry_timers(double now);
  void sweep_timeouts(double now);
  void drain_done();
  void abort_transfer(Call* call, std::string reason);
  void finish_attempt(Call* call, CURLcode code);
  void complete(Call* call, Outcome outcome, std::string error);
  void cancel_everything();
  curl::Easy acquire_easy();
  void release_easy(curl::Easy easy);
  void note_limit_change(Endpoint* ep, int before, const char* why);

  // Declaration order is destruction order reversed: the easy handles go
  // first, then the multi handle, then the endpoints' connection pools.
  EndpointRegistry m_endpoints;
  curl::Fd m_epoll;
  curl::Fd m_wake;
  curl::Multi m_multi;
  std::thread m_thread;

  // Submission queue.
  mutable std::mutex m_mutex;
  std::vector<std::unique_ptr<Call>> m_incoming;
  bool m_stopping = false;
  std::once_flag m_join_once;

  // Loop-thread state.
  std::unordered_map<Call*, std::unique_ptr<Call>> m_calls;
  std::unordered_set<Call*> m_active;
  using Timer = std::pair<double, Call*>;
  std::priority_queue<Timer, std::vector<Timer>, std::greater<>> m_retry_timers;
  double m_curl_deadline_s = -1;  // < 0: no curl timer
  double m_next_sweep_s = 0;
  std::vector<curl::Easy> m_easy_pool;
  std::mt19937_64 m_rng{std::random_device{}()};

  std::atomic<std::int64_t> m_submitted{0};
  std::atomic<std::int64_t> m_completed{0};
  std::atomic<std::int64_t> m_http_attempts{0};
  std::atomic<std::int64_t> m_retries{0};
  std::atomic<std::int64_t> m_limit_changes{0};
  std::atomic<std::int64_t> m_resolver_starts{0};
};

// The global init must precede the first handle; a function-local once_flag
// makes it safe from any thread.
CURLM* init_multi() {
  static std::once_flag global_init;
  std::call_once(global_init, [] { curl_global_init(CURL_GLOBAL_ALL); });
  return curl_multi_init();
}

// Every handle is owned by a member, so a throw below releases what was
// already created; the loop thread starts last.
CurlChatClient::CurlChatClient()
    : m_epoll(epoll_create1(EPOLL_CLOEXEC)),
      m_wake(eventfd(0, EFD_NONBLOCK | EFD_CLOEXEC)),
      m_multi(init_multi()) {
  if (m_multi == nullptr || !m_epoll.valid() || !m_wake.valid()) {
    throw Fatal("llm client: cannot create curl multi / epoll / eventfd");
  }
  epoll_event ev{};
  ev.events = EPOLLIN;
  ev.data.ptr = nullptr;  // nullptr marks the wake-up eventfd
  epoll_ctl(m_epoll.get(), EPOLL_CTL_ADD, m_wake.get(), &ev);
  curl_multi_setopt(m_multi.get(), CURLMOPT_SOCKETFUNCTION, &CurlChatClient::on_socket);
  curl_multi_setopt(m_multi.get(), CURLMOPT_SOCKETDATA, this);
  curl_multi_setopt(m_multi.get(), CURLMOPT_TIMERFUNCTION, &CurlChatClient::on_timer);
  curl_multi_setopt(m_multi.get(), CURLMOPT_TIMERDATA, this);
  m_thread = std::thread([this] { run(); });
}

// shutdown() removes every transfer from the multi handle and joins the
// loop; the members then release the handles (see their declaration).
CurlChatClient::~CurlChatClient() { shutdown(); }

Result<void> CurlChatClient::add_model(const config::ModelConfig& model) {
  return m_endpoints.add(model);
}

void CurlChatClient::submit(ChatRequest request, ChatCallback done) {
  m_submitted.fetch_add(1, std::memory_order_relaxed);
  auto call = std::make_unique<Call>();
  call->submit_s = now_s();
  call->ep = m_endpoints.find(request.model_id);
  auto reject = [this](ChatCallback& callback, Outcome outcome, std::string error) {
    ChatResult result;
    result.outcome = outcome;
    result.error = std::move(error);
    m_completed.fetch_add(1, std::memory_order_relaxed);
    try {
      callback(std::move(result));
    } catch (const std::exception& e) {
      KLOG_ERROR("[llm] callback threw: {}", e.what());
    } catch (...) {
      KLOG_ERROR("[llm] callback threw");
    }
  };
  if (call->ep == nullptr) {
    reject(done, Outcome::permanent, fmt::format("unknown model '{}'", request.model_id));
    return;
  }
  const auto& cfg = call->ep->cfg;
  call->body = build_request_body(cfg, request.messages);
  call->headers.append("Content-Type: application/json");
  call->headers.append(cfg.stream ? "Accept: text/event-stream" : "Accept: application/json");
  call->headers.append("Expect:");
  if (!request.request_id.empty()) {
    call->headers.append(("X-Request-Id: " + request.request_id).c_str());
  }
  if (!call->ep->api_key.empty()) {
    call->headers.append(("Authorization: Bearer " + call->ep->api_key).c_str());
  }
  // The body is all that is sent (and re-sent on a retry): the messages, a
  // copy of the conversation, are not kept for the call's lifetime.
  std::vector<Message>().swap(request.messages);
  call->request = std::move(request);
  call->done = std::move(done);
  {
    std::lock_guard lock(m_mutex);
    if (!m_stopping) {
      m_incoming.push_back(std::move(call));
      call = nullptr;
    }
  }
  if (call != nullptr) {
    reject(call->done, Outcome::cancelled, "client is shut down");
    return;
  }
  const std::uint64_t one = 1;
  [[maybe_unused]] auto n = write(m_wake.get(), &one, sizeof one);
}

ClientStats CurlChatClient::stats() const {
  ClientStats s;
  s.submitted = m_submitted.load();
  s.completed = m_completed.load();
  s.in_flight = s.submitted - s.completed;
  s.http_attempts = m_http_attempts.load();
  s.retries = m_retries.load();
  s.limit_changes = m_limit_changes.load();
  s.resolver_starts = m_resolver_starts.load();
  return s;
}

void CurlChatClient::shutdown() {
  {
    std::lock_guard lock(m_mutex);
    m_stopping = true;
  }
  const std::uint64_t one = 1;
  [[maybe_unused]] auto n = write(m_wake.get(), &one, sizeof one);
  if (std::this_thread::get_id() == m_thread.get_id())
    return;  // from a callback: the loop exits by itself
  std::call_once(m_join_once, [this] {
    if (m_thread.joinable()) m_thread.join();
  });
}

// ------------------------------------------------------------ event loop

void CurlChatClient::run() {
  for (;;) {
    bool stopping = false;
    try {
      std::vector<std::unique_ptr<Call>> batch;
      {
        std::lock_guard lock(m_mutex);
        batch.swap(m_incoming);
        stopping = m_stopping;
      }
      take_incoming(batch);
      if (stopping) {
        cancel_everything();
        return;
      }
      loop_once();
    } catch (const std::exception& e) {
      KLOG_ERROR("[llm] event loop error: {}", e.what());
    } catch (...) {
      KLOG_ERROR("[llm] event loop error (unknown exception)");
    }
  }
}

void CurlChatClient::take_incoming(std::vector<std::unique_ptr<Call>>& batch) {
  for (auto& call : batch) {
    Call* raw = call.get();
    raw->ep->waiting.push_back(raw);
    m_calls.emplace(raw, std::move(call));
  }
}

void CurlChatClient::loop_once() {
  double now = now_s();
  fire_retry_timers(now);
  start_ready();

  // How long to sleep: the nearest of curl's timer, a retry, a sweep.
  double wait_s = k_max_wait_ms / 1000.0;
  if (m_curl_deadline_s >= 0) wait_s = std::min(wait_s, m_curl_deadline_s - now);
  if (!m_retry_timers.empty()) wait_s = std::min(wait_s, m_retry_timers.top().first - now);
  if (!m_active.empty()) wait_s = std::min(wait_s, m_next_sweep_s - now);
  const int wait_ms = wait_s <= 0 ? 0 : static_cast<int>(std::ceil(wait_s * 1000.0));

  epoll_event events[k_epoll_batch];
  const int n = epoll_wait(m_epoll.get(), events, k_epoll_batch, wait_ms);
  int running = 0;
  for (int i = 0; i < n; ++i) {
    if (events[i].data.ptr == nullptr) {
      std::uint64_t value = 0;
      [[maybe_unused]] auto r = read(m_wake.get(), &value, sizeof value);
      continue;
    }
    int flags = 0;
    if (events[i].events & EPOLLIN) flags |= CURL_CSELECT_IN;
    if (events[i].events & EPOLLOUT) flags |= CURL_CSELECT_OUT;
    if (events[i].events & (EPOLLERR | EPOLLHUP)) flags |= CURL_CSELECT_ERR;
    const int fd = static_cast<int>(reinterpret_cast<std::intptr_t>(events[i].data.ptr) - 1);
    curl_multi_socket_action(m_multi.get(), fd, flags, &running);
  }
  now = now_s();
  if (m_curl_deadline_s >= 0 && now >= m_curl_deadline_s) {
    m_curl_deadline_s = -1;
    curl_multi_socket_action(m_multi.get(), CURL_SOCKET_TIMEOUT, 0, &running);
  }
  drain_done();
  if (!m_active.empty() && now >= m_next_sweep_s) {
    sweep_timeouts(now);
    m_next_sweep_s = now + k_sweep_interval_s;
  }
}

int CurlChatClient::on_socket(CURL*, curl_socket_t fd, int what, void* self_ptr, void* socketp) {
  auto* self = static_cast<CurlChatClient*>(self_ptr);
  // The epoll payload is fd + 1 so that 0/nullptr stays the wake-up marker.
  epoll_event ev{};
  ev.data.ptr = reinterpret_cast<void*>(static_cast<std::intptr_t>(fd) + 1);
  if (what == CURL_POLL_REMOVE) {
    if (socketp != nullptr) epoll_ctl(self->m_epoll.get(), EPOLL_CTL_DEL, fd, nullptr);
    curl_multi_assign(self->m_multi.get(), fd, nullptr);
    return 0;
  }
  ev.events = 0;
  if (what & CURL_POLL_IN) ev.events |= EPOLLIN;
  if (what & CURL_POLL_OUT) ev.events |= EPOLLOUT;
  if (socketp == nullptr) {
    if (epoll_ctl(self->m_epoll.get(), EPOLL_CTL_ADD, fd, &ev) != 0 && errno == EEXIST) {
      epoll_ctl(self->m_epoll.get(), EPOLL_CTL_MOD, fd, &ev);
    }
    curl_multi_assign(self->m_multi.get(), fd, self);  // non-null: registered
  } else {
    epoll_ctl(self->m_epoll.get(), EPOLL_CTL_MOD, fd, &ev);
  }
  return 0;
}

int CurlChatClient::on_timer(CURLM*, long timeout_ms, void* self_ptr) {
  auto* self = static_cast<CurlChatClient*>(self_ptr);
  self->m_curl_deadline_s =
      timeout_ms < 0 ? -1 : now_s() + static_cast<double>(timeout_ms) / 1000.0;
  return 0;
}

// Every header line and body chunk shows the attempt alive (first-byte and
// stall timeouts, sweep_timeouts).
Call* mark_alive(void* call_ptr) {
  auto* call = static_cast<Call*>(call_ptr);
  call->got_first_byte = true;
  call->last_byte_s = now_s();
  return call;
}

size_t CurlChatClient::on_header(char* data, size_t size, size_t n, void* call_ptr) {
  const size_t len = size * n;
  try {
    Call* call = mark_alive(call_ptr);
    std::string_view line(data, len);
    if (line.starts_with("HTTP/")) {  // a new response (e.g. after 100 Continue)
      call->retry_after.clear();
      call->retry_after_ms.clear();
      call->content_type.clear();
      return len;
    }
    auto colon = line.find(':');
    if (colon == std::string_view::npos) return len;
    const std::string name = lower(trim(line.substr(0, colon)));
    const std::string_view value = trim(line.substr(colon + 1));
    if (name == "retry-after") {
      call->retry_after.assign(value);
    } else if (name == "retry-after-ms") {
      call->retry_after_ms.assign(value);
    } else if (name == "content-type") {
      call->content_type = lower(value);
    } else if (is_request_id_header(name) && call->provider_request_id.empty()) {
      call->provider_request_id.assign(value.substr(0, 200));
    }
  } catch (...) {
    return 0;
  }
  return len;
}

size_t CurlChatClient::on_write(char* data, size_t size, size_t n, void* call_ptr) {
  const size_t len = size * n;
  try {
    Call* call = mark_alive(call_ptr);
    if (!call->mode_decided) {
      call->mode_decided = true;
      long status = 0;
      curl_easy_getinfo(call->easy.get(), CURLINFO_RESPONSE_CODE, &status);
      call->is_sse =
          status >= 200 && status < 300 && call->content_type.starts_with("text/event-stream");
      if (call->is_sse) call->stream = std::make_unique<StreamAssembler>();
    }
    if (call->is_sse) {
      call->stream->feed(std::string_view(data, len));
    } else {
      if (call->response.size() + len > k_max_body_bytes) return 0;
      call->response.append(data, len);
    }
  } catch (...) {
    return 0;
  }
  return len;
}

// --------------------------------------------------------------- attempts

void CurlChatClient::fire_retry_timers(double now) {
  while (!m_retry_timers.empty() && m_retry_timers.top().first <= now) {
    Call* call = m_retry_timers.top().second;
    m_retry_timers.pop();
    call->ep->waiting.push_front(call);  // retries go ahead of new work
  }
}

void CurlChatClient::start_ready() {
  // Endpoints are never removed, so the pointers stay valid.
  for (Endpoint* ep : m_endpoints.all()) {
    while (!ep->waiting.empty() && ep->in_flight < ep->limit.limit()) {
      Call* call = ep->waiting.front();
      ep->waiting.pop_front();
      start_attempt(call);
    }
  }
}

curl::Easy CurlChatClient::acquire_easy() {
  if (m_easy_pool.empty()) return curl::Easy(curl_easy_init());
  curl::Easy easy = std::move(m_easy_pool.back());
  m_easy_pool.pop_back();
  curl_easy_reset(easy.get());
  return easy;
}

void CurlChatClient::release_easy(curl::Easy easy) { m_easy_pool.push_back(std::move(easy)); }

static int on_resolver_start(void*, void*, void* counter) {
  static_cast<std::atomic<std::int64_t>*>(counter)->fetch_add(1, std::memory_order_relaxed);
  return 0;
}

void CurlChatClient::start_attempt(Call* call) {
  Endpoint* ep = call->ep;
  const auto& cfg = ep->cfg;
  call->easy = acquire_easy();
  CURL* easy = call->easy.get();
  if (easy == nullptr) {
    complete(call, Outcome::permanent, "curl_easy_init failed");
    return;
  }
  call->attempt_start_s = now_s();
  call->last_byte_s = call->attempt_start_s;
  call->got_first_byte = false;
  call->mode_decided = false;
  call->is_sse = false;
  call->response.clear();
  call->stream.reset();
  call->retry_after.clear();
  call->retry_after_ms.clear();
  call->provider_request_id.clear();
  call->content_type.clear();
  call->abort_reason.clear();
  call->errbuf[0] = '\0';

  curl_easy_setopt(easy, CURLOPT_URL, ep->url.c_str());
  curl_easy_setopt(easy, CURLOPT_PRIVATE, call);
  curl_easy_setopt(easy, CURLOPT_NOSIGNAL, 1L);
  curl_easy_setopt(easy, CURLOPT_TCP_NODELAY, 1L);
  curl_easy_setopt(easy, CURLOPT_BUFFERSIZE, k_receive_buffer_bytes);
  curl_easy_setopt(easy, CURLOPT_POST, 1L);
  curl_easy_setopt(easy, CURLOPT_POSTFIELDS, call->body.data());
  curl_easy_setopt(easy, CURLOPT_POSTFIELDSIZE_LARGE, static_cast<curl_off_t>(call->body.size()));
  curl_easy_setopt(easy, CURLOPT_HTTPHEADER, call->headers.get());
  curl_easy_setopt(easy, CURLOPT_ACCEPT_ENCODING, "");
  curl_easy_setopt(easy, CURLOPT_HEADERFUNCTION, &CurlChatClient::on_header);
  curl_easy_setopt(easy, CURLOPT_HEADERDATA, call);
  curl_easy_setopt(easy, CURLOPT_WRITEFUNCTION, &CurlChatClient::on_write);
  curl_easy_setopt(easy, CURLOPT_WRITEDATA, call);
  curl_easy_setopt(easy, CURLOPT_ERRORBUFFER, call->errbuf);
  curl_easy_setopt(easy, CURLOPT_CONNECTTIMEOUT_MS,
                   static_cast<long>(cfg.connect_timeout_s * 1000));
  if (cfg.total_timeout_s > 0) {
    curl_easy_setopt(easy, CURLOPT_TIMEOUT_MS, static_cast<long>(cfg.total_timeout_s * 1000));
  }
  curl_easy_setopt(easy, CURLOPT_RESOLVER_START_FUNCTION, &on_resolver_start);
  curl_easy_setopt(easy, CURLOPT_RESOLVER_START_DATA, &m_resolver_starts);
  if (!ep->resolve.empty()) curl_easy_setopt(easy, CURLOPT_RESOLVE, ep->resolve.get());
  if (CURLSH* share = ep->next_share(); share != nullptr)
    curl_easy_setopt(easy, CURLOPT_SHARE, share);

  ++ep->in_flight;
  m_active.insert(call);
  m_http_attempts.fetch_add(1, std::memory_order_relaxed);
  if (m_active.size() == 1) m_next_sweep_s = call->attempt_start_s + k_sweep_interval_s;
  const CURLMcode rc = curl_multi_add_handle(m_multi.get(), easy);
  if (rc != CURLM_OK) {
    std::snprintf(call->errbuf, sizeof call->errbuf, "curl_multi_add_handle: %s",
                  curl_multi_strerror(rc));
    finish_attempt(call, CURLE_FAILED_INIT);
  }
}

void CurlChatClient::sweep_timeouts(double now) {
  std::vector<std::pair<Call*, std::string>> expired;
  for (Call* call : m_active) {
    const auto& cfg = call->ep->cfg;
    if (!call->got_first_byte) {
      if (cfg.first_byte_timeout_s > 0 && now - call->attempt_start_s > cfg.first_byte_timeout_s) {
        expired.emplace_back(call,
                             fmt::format("no first byte within {}s", cfg.first_byte_timeout_s));
      }
    } else if (cfg.stall_timeout_s > 0 && now - call->last_byte_s > cfg.stall_timeout_s) {
      expired.emplace_back(call, fmt::format("stalled: no bytes for {}s", cfg.stall_timeout_s));
    }
  }
  for (auto& [call, reason] : expired) abort_transfer(call, std::move(reason));
}

void CurlChatClient::abort_transfer(Call* call, std::string reason) {
  call->abort_reason = std::move(reason);
  finish_attempt(call, CURLE_OPERATION_TIMEDOUT);
}

void CurlChatClient::drain_done() {
  // Read every message first: curl_multi_remove_handle scans the messages
  // still queued, so removing while many are queued would be quadratic.
  std::vector<std::pair<Call*, CURLcode>> done;
  int pending = 0;
  while (CURLMsg* msg = curl_multi_info_read(m_multi.get(), &pending)) {
    if (msg->msg != CURLMSG_DONE) continue;
    Call* call = nullptr;
    curl_easy_getinfo(msg->easy_handle, CURLINFO_PRIVATE, &call);
    if (call != nullptr) done.emplace_back(call, msg->data.result);
  }
  for (auto& [call, code] : done) finish_attempt(call, code);
}

void CurlChatClient::note_limit_change(Endpoint* ep, int before, const char* why) {
  m_limit_changes.fetch_add(1, std::memory_order_relaxed);
  if (ep->limit.limit() < before) {
    KLOG_WARN("[llm {}] concurrency limit {} -> {} ({})", ep->cfg.id, before, ep->limit.limit(),
              why);
  } else {
    KLOG_DEBUG("[llm {}] concurrency limit {} -> {} ({})", ep->cfg.id, before, ep->limit.limit(),
               why);
  }
}

void CurlChatClient::finish_attempt(Call* call, CURLcode code) {
  Endpoint* ep = call->ep;
  const auto& cfg = ep->cfg;
  long status = 0;
  curl_easy_getinfo(call->easy.get(), CURLINFO_RESPONSE_CODE, &status);
  curl_multi_remove_handle(m_multi.get(), call->easy.get());
  release_easy(std::move(call->easy));
  --ep->in_flight;
  m_active.erase(call);

  const double now = now_s();
  Attempt attempt;
  attempt.http_status = static_cast<int>(status);
  attempt.latency_s = now - call->attempt_start_s;
  call->result.provider_request_id = call->provider_request_id;

  AttemptFailure failure;
  failure.http_status = attempt.http_status;
  ParsedCompletion parsed;
  if (!call->abort_reason.empty()) {
    failure.transport = TransportError::timeout;
    attempt.error = call->abort_reason;
  } else if (code != CURLE_OK) {
    failure.transport = classify_curl(code);
    attempt.error = call->errbuf[0] != '\0'
                        ? fmt::format("{}: {}", curl_easy_strerror(code), call->errbuf)
                        : std::string(curl_easy_strerror(code));
  } else if (status >= 200 && status < 300) {
    parsed =
        call->is_sse && call->stream ? call->stream->finish() : parse_completion(call->response);
    if (!parsed.ok) {
      failure.transport = TransportError::protocol;
      attempt.error = parsed.error;
    }
  } else {
    const std::string summary = summarize_error_body(call->response);
    attempt.error = summary.empty() ? fmt::format("HTTP {}", status)
                                    : fmt::format("HTTP {}: {}", status, summary);
    failure.body = call->response;
    failure.retry_after = call->retry_after;
    failure.retry_after_ms = call->retry_after_ms;
  }
  attempt.error = ep->redact(std::move(attempt.error));
  const bool success = attempt.error.empty();
  call->result.attempts.push_back(attempt);

  if (success) {
    // Usage comes from this (the successful) attempt only.
    ChatResult& r = call->result;
    r.content = std::move(parsed.content);
    r.reasoning = std::move(parsed.reasoning);
    r.finish_reason = std::move(parsed.finish_reason);
    r.usage = parsed.usage;
    r.cost_usd = cost_usd(cfg, r.usage);
    const int before = ep->limit.limit();
    if (ep->limit.on_success()) note_limit_change(ep, before, "success");
    if (hit_max_tokens(r.finish_reason)) {
      KLOG_DEBUG("[llm {}] request {} hit max_tokens (finish_reason=length)", cfg.id,
                 call->request.request_id);
    }
    complete(call, Outcome::ok, "");
    return;
  }

  if (attempt.http_status == 429) {
    const int before = ep->limit.limit();
    if (ep->limit.on_rate_limited(now)) note_limit_change(ep, before, "429");
  }
  RetryLimits limits;
  limits.max_attempts = cfg.max_attempts;
  limits.base_delay_s = k_backoff_base_s;
  limits.cap_s = cfg.retry_cap_s;
  std::uniform_real_distribution<double> uniform(0.0, 1.0);
  const RetryDecision decision = decide_retry(
      failure, static_cast<int>(call->result.attempts.size()), limits,
      [&] { return uniform(m_rng); }, std::chrono::system_clock::now());
  switch (decision.action) {
    case RetryAction::retry:
      m_retries.fetch_add(1, std::memory_order_relaxed);
      KLOG_DEBUG("[llm {}] request {} attempt {} failed ({}); retry in {:.3f}s", cfg.id,
                 call->request.request_id, call->result.attempts.size(), attempt.error,
                 decision.delay_s);
      m_retry_timers.emplace(now + decision.delay_s, call);
      return;
    case RetryAction::context_overflow:
      complete(call, Outcome::context_overflow, attempt.error);
      return;
    case RetryAction::permanent: complete(call, Outcome::permanent, attempt.error); return;
    case RetryAction::exhausted:
      complete(call, Outcome::exhausted,
               fmt::format("gave up after {} attempts: {}", call->result.attempts.size(),
                           attempt.error));
      return;
  }
}

void CurlChatClient::complete(Call* call, Outcome outcome, std::string error) {
  auto it = m_calls.find(call);
  std::unique_ptr<Call> owned = std::move(it->second);
  m_calls.erase(it);
  ChatResult result = std::move(call->result);
  result.outcome = outcome;
  result.error = call->ep->redact(std::move(error));
  result.latency_s = now_s() - call->submit_s;
  if (outcome != Outcome::ok && outcome != Outcome::cancelled) {
    KLOG_WARN("[llm {}] request {} {} after {} attempt(s): {}", call->ep->cfg.id,
              call->request.request_id, to_string(outcome), result.attempts.size(), result.error);
  }
  m_completed.fetch_add(1, std::memory_order_relaxed);
  try {
    call->done(std::move(result));
  } catch (const std::exception& e) {
    KLOG_ERROR("[llm {}] callback for {} threw: {}", call->ep->cfg.id, call->request.request_id,
               e.what());
  } catch (...) {
    KLOG_ERROR("[llm {}] callback for {} threw", call->ep->cfg.id, call->request.request_id);
  }
}

void CurlChatClient::cancel_everything() {
  for (Call* call : std::vector<Call*>(m_active.begin(), m_active.end())) {
    curl_multi_remove_handle(m_multi.get(), call->easy.get());
    release_easy(std::move(call->easy));
    --call->ep->in_flight;
  }
  m_active.clear();
  m_retry_timers = {};
  for (Endpoint* ep : m_endpoints.all()) ep->waiting.clear();
  std::vector<Call*> calls;
  calls.reserve(m_calls.size());
  for (auto& [raw, owned] : m_calls) calls.push_back(raw);
  for (Call* call : calls) complete(call, Outcome::cancelled, "client shut down");
}

}  // namespace

std::unique_ptr<ChatClient> make_curl_client() { return std::make_unique<CurlChatClient>(); }

}  // namespace korch::llm
