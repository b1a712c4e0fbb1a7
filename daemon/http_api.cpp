#include "daemon/http_api.hpp"

#include <fmt/format.h>
#include <httplib.h>
#include <sys/socket.h>

#include <cerrno>
#include <condition_variable>
#include <cstring>
#include <deque>
#include <optional>
#include <regex>
#include <thread>

#include "reports/export.hpp"
#include "reports/report.hpp"
#include "reports/web_assets.hpp"
#include "util/fs.hpp"
#include "util/log.hpp"

namespace korch::daemon {
namespace {

// A fixed pool with a bounded queue. httplib 0.11's enqueue cannot refuse a
// connection (the socket is inside the closure), so a full queue runs the
// connection on the caller — the accept thread — which stops accepting until
// it is done: back-pressure onto the kernel's listen backlog.
class BoundedPool final : public httplib::TaskQueue {
 public:
  BoundedPool(int threads, int queue) : m_max_queue(static_cast<std::size_t>(queue)) {
    for (int i = 0; i < threads; ++i) m_threads.emplace_back([this] { work(); });
  }
  void enqueue(std::function<void()> fn) override {
    {
      std::unique_lock lock(m_mutex);
      if (!m_shutdown && m_queue.size() < m_max_queue) {
        m_queue.push_back(std::move(fn));
        m_cv.notify_one();
        return;
      }
    }
    fn();
  }
  void shutdown() override {
    {
      std::lock_guard lock(m_mutex);
      m_shutdown = true;
    }
    m_cv.notify_all();
    for (auto& t : m_threads) t.join();
  }

 private:
  void work() {
    for (;;) {
      std::function<void()> fn;
      {
        std::unique_lock lock(m_mutex);
        m_cv.wait(lock, [&] { return m_shutdown || !m_queue.empty(); });
        if (m_queue.empty()) return;
        fn = std::move(m_queue.front());
        m_queue.pop_front();
      }
      fn();
    }
  }
  std::size_t m_max_queue;
  std::mutex m_mutex;
  std::condition_variable m_cv;
  std::deque<std::function<void()>> m_queue;
  std::vector<std::thread> m_threads;
  bool m_shutdown = false;
};

// An ostream's buffer that hands the response's chunks to httplib's sink,
// k_chunk bytes at a time (httplib 0.11's DataSink::os has no overflow():
// a single character written to it fails the stream).
class SinkBuf final : public std::streambuf {
 public:
  explicit SinkBuf(httplib::DataSink& sink) : m_sink(sink), m_buf(k_chunk) {
    setp(m_buf.data(), m_buf.data() + m_buf.size());
  }
  ~SinkBuf() override = default;

 protected:
  int overflow(int ch) override {
    if (!flush()) return traits_type::eof();
    if (ch != traits_type::eof()) {
      *pptr() = static_cast<char>(ch);
      pbump(1);
    }
    return ch == traits_type::eof() ? 0 : ch;
  }
  int sync() override { return flush() ? 0 : -1; }

 private:
  bool flush() {
    auto n = static_cast<std::size_t>(pptr() - pbase());
    setp(m_buf.data(), m_buf.data() + m_buf.size());
    return n == 0 || m_sink.write(m_buf.data(), n);
  }
  static constexpr std::size_t k_chunk = 64 * 1024;
  httplib::DataSink& m_sink;
  std::vector<char> m_buf;
};

// "/api/campaigns/{id}" -> R"(/api/campaigns/([^/]+))"
std::string to_regex(const std::string& path) {
  std::string out;
  for (std::size_t i = 0; i < path.size(); ++i) {
    if (path[i] == '{') {
      i = path.find('}', i);
      out += "([^/]+)";
    } else if (path[i] == '.') {
      out += "\\.";
    } else {
      out += path[i];
    }
  }
  return out;
}

// The dashboard's page and files need no token (they hold no data; the page
// asks for the token and sends it with every API call).
bool is_public(const std::string& path) {
  return path == "/health" || path == "/" || path.rfind("/dashboard/", 0) == 0;
}

}  // namespace

const std::vector<Route>& api_routes() {
  static const std::vector<Route> routes = {
      {"GET", "/health", false},
      {"GET", "/metrics", true},
      {"GET", "/api/campaigns", true},
      {"POST", "/api/campaigns", true},
      {"GET", "/api/campaigns/{id}", true},
      {"POST", "/api/campaigns/{id}/pause", true},
      {"POST", "/api/campaigns/{id}/resume", true},
      {"POST", "/api/campaigns/{id}/cancel", true},
      {"GET", "/api/campaigns/{id}/episodes", true},
      {"GET", "/api/episodes/{id}", true},
      {"POST", "/api/evaluations", true},
      {"GET", "/api/workers", true},
      {"GET", "/api/events", true},
      {"GET", "/api/campaigns/{id}/report", true},
      {"GET", "/api/campaigns/{id}/export", true},
      {"GET", "/", false},
      {"GET", "/dashboard/{file}", false},
  };
  return routes;
}

namespace {

// Methods whose requests httplib 0.11 reads a body for.
bool has_body_method(const std::string& method) {
  return method == "POST" || method == "PUT" || method == "PATCH" || method == "DELETE";
}

// The route a request is counted under: its route's OpenAPI path, or
// "unmatched" (no route of that method and path).
std::string route_of(const std::string& method, const std::string& path) {
  static const auto patterns = [] {
    std::vector<std::pair<const Route*, std::regex>> v;
    for (auto& r : api_routes()) v.emplace_back(&r, std::regex(to_regex(r.path)));
    return v;
  }();
  for (auto& [r, re] : patterns) {
    if (r->method == method && std::regex_match(path, re)) return r->path;
  }
  return "unmatched";
}

}  // namespace

struct HttpApi::Impl {
  Daemon& daemon;
  std::string token;
  httplib::Server server;
  int port = 0;
  int listen_fd = -1;
  std::atomic<bool> stopping{false};
  // serve() entered / returned: httplib's Server::stop() does nothing until
  // listen_after_bind() is running, so a stop that came first (SIGTERM right
  // after LISTEN, on a loaded machine) left serve() listening for ever and
  // the daemon's shutdown joining it (seen in a CI run).
  std::atomic<bool> serve_entered{false}, serve_done{false};
  std::atomic<int> sse_clients{0};
  std::mutex sse_mutex;
  std::condition_variable sse_cv;

  explicit Impl(Daemon& d) : daemon(d) {}

  static void send(httplib::Response& res, const Reply& r) {
    res.status = r.status;
    res.set_content(r.body.dump(), "application/json");
  }

  // A handler gets the request and its body (read by read_body for a POST,
  // "" for a GET).
  using Handler = std::function<Reply(const httplib::Request&, const std::string& body)>;

  // The bearer token check; nullopt when the request may go on.
  std::optional<Reply> refuse_unauthorized(const httplib::Request& req) const {
    if (token.empty() || is_public(req.path)) return std::nullopt;
    auto h = req.get_header_value("Authorization");
    if (auto given = bearer_credentials(h); given && token_equal(*given, token))
      return std::nullopt;
    return Reply::error(401, h.empty() ? "missing bearer token" : "wrong bearer token");
  }

  // Reads a POST body as HTTP/1.1 defines it: no Content-Length and no
  // chunked Transfer-Encoding means no body (curl -X POST sends neither;
  // httplib 0.11 would wait read_timeout_s for one). Any Content-Type: the
  // route decides how to read it (httplib's own reader caps a
  // form-urlencoded body, curl's default type, at 8 KiB). Over
  // max_body_bytes: 413, after the whole body was read or skipped, so the
  // connection stays in step.
  std::optional<Reply> read_body(const httplib::Request& req, const httplib::ContentReader& reader,
                                 httplib::Response& res, std::string& body) {
    const bool chunked =
        req.get_header_value("Transfer-Encoding").find("chunked") != std::string::npos;
    if (!chunked && !req.has_header("Content-Length")) return std::nullopt;
    const auto max = static_cast<std::size_t>(daemon.config().max_body_bytes);
    bool too_big = false;
    std::size_t skipped = 0;
    bool ok = reader([&](const char* data, std::size_t n) {
      if (too_big || body.size() + n > max) {
        too_big = true;
        body.clear();
        skipped += n;
        return skipped <= 16 * max;  // a stream without end is cut off
      }
      body.append(data, n);
      return true;
    });
    if (too_big || res.status == 413) {
      body.clear();
      return Reply::error(413, fmt::format("request body too large (max_body_bytes = {})", max));
    }
    if (!ok) return Reply::error(400, "the request body could not be read");
    return std::nullopt;
  }

  void add(const std::string& method, const std::string& path, Handler h) {
    auto run = [this, path, h](const httplib::Request& req, const std::string& body) {
      Reply r;
      try {
        r = h(req, body);
      } catch (const std::exception& e) {
        KLOG_ERROR("serve: {} {}: {}", req.method, path, e.what());
        r = Reply::error(500, "internal error");
      }
      return r;
    };
    auto re = to_regex(path);
    if (method == "GET") {
      server.Get(re, [run](const httplib::Request& req, httplib::Response& res) {
        send(res, run(req, std::string()));
      });
    } else {
      server.Post(re, [this, run](const httplib::Request& req, httplib::Response& res,
                                  const httplib::ContentReader& reader) {
        std::string body;
        auto refused = read_body(req, reader, res, body);
        if (auto denied = refuse_unauthorized(req)) refused = denied;
        send(res, refused ? *refused : run(req, body));
      });
    }
  }

  // Every request, routed or not, answered by a handler or by httplib
  // itself (400, 404, 413, 414), is counted once, by route and status, just
  // before its response is written.
  void count(const httplib::Request& req, const httplib::Response& res) {
    daemon.metrics().count_http(route_of(req.method, req.path), res.status);
  }

  static bool is_json(const httplib::Request& req) {
    auto ct = req.get_header_value("Content-Type");
    return ct.find("json") != std::string::npos;
  }

  void routes() {
    add("GET", "/health", [this](const httplib::Request&, const std::string&) -> Reply {
      return {200, {{"status", daemon.stopping() ? "stopping" : "ok"}, {"version", "0.1.0"}}};
    });
    server.Get("/metrics", [this](const httplib::Request&, httplib::Response& res) {
      (void)daemon.progress_snapshot();  // sets the campaign gauges
      daemon.metrics().set_sse_clients(sse_clients.load());
      res.set_content(daemon.metrics().serialize(), "text/plain; version=0.0.4");
    });
    using Req = const httplib::Request&;
    using Body = const std::string&;
    add("GET", "/api/campaigns", [this](Req, Body) { return daemon.list(); });
    add("POST", "/api/campaigns", [this](Req req, Body body) {
      if (body.empty()) return Reply::error(400, "empty body: send a campaign TOML or JSON");
      return daemon.submit(body, is_json(req));
    });
    // Pause, resume and cancel take no body; one sent is ignored.
    add("GET", "/api/campaigns/{id}", [this](Req req, Body) { return daemon.get(req.matches[1]); });
    add("POST", "/api/campaigns/{id}/pause",
        [this](Req req, Body) { return daemon.pause(req.matches[1]); });
    add("POST", "/api/campaigns/{id}/resume",
        [this](Req req, Body) { return daemon.resume(req.matches[1]); });
    add("POST", "/api/campaigns/{id}/cancel",
        [this](Req req, Body) { return daemon.cancel(req.matches[1]); });
    add("GET", "/api/campaigns/{id}/episodes",
        [this](Req req, Body) { return daemon.episodes(req.matches[1]); });
    add("GET", "/api/episodes/{id}",
        [this](Req req, Body) { return daemon.episode(req.matches[1]); });
    add("POST", "/api/evaluations", [this](Req, Body body) {
      auto j = nlohmann::json::parse(body, nullptr, false);
      if (j.is_discarded()) return Reply::error(400, "malformed JSON");
      return daemon.evaluate(j);
    });
    add("GET", "/api/workers", [this](Req, Body) { return daemon.workers(); });
    server.Get("/api/events",
               [this](const httplib::Request&, httplib::Response& res) { events(res); });
    server.Get(to_regex("/api/campaigns/{id}/report"),
               [this](const httplib::Request& req, httplib::Response& res) { report(req, res); });
    server.Get(to_regex("/api/campaigns/{id}/export"),
               [this](const httplib::Request& req, httplib::Response& res) { export_(req, res); });
    server.Get(
        "/", [this](const httplib::Request&, httplib::Response& res) { asset(res, "index.html"); });
    server.Get(to_regex("/dashboard/{file}"),
               [this](const httplib::Request& req, httplib::Response& res) {
                 asset(res, req.matches[1]);
               });
  }

  // What no route matches: 404, or 405 when the path has a route for
  // another method. Registered last (httplib tries handlers in order); a
  // body is read (or skipped) first, as for a route.
  void fallbacks() {
    auto answer = [this](const httplib::Request& req, httplib::Response& res) {
      std::string allow;  // the path's methods, for the 405's Allow header (RFC 9110)
      for (auto& r : api_routes()) {
        if (r.method != req.method && std::regex_match(req.path, std::regex(to_regex(r.path))) &&
            allow.find(r.method) == std::string::npos)
          allow += (allow.empty() ? "" : ", ") + r.method;
      }
      const bool other_method = !allow.empty();
      if (auto denied = refuse_unauthorized(req); denied && other_method) return send(res, *denied);
      if (other_method) res.set_header("Allow", allow);
      send(res, other_method
                    ? Reply::error(405, "method " + req.method + " not allowed on " + req.path)
                    : Reply::error(404, "no route " + req.method + " " + req.path));
    };
    auto with_body = [this, answer](const httplib::Request& req, httplib::Response& res,
                                    const httplib::ContentReader& reader) {
      std::string body;
      if (auto refused = read_body(req, reader, res, body)) return send(res, *refused);
      answer(req, res);
    };
    server.Post(".*", with_body);
    server.Put(".*", with_body);
    server.Patch(".*", with_body);
    server.Delete(".*", with_body);
    server.Get(".*", answer);
  }

  // GET /api/campaigns/{id}/report[?format=json|html]: `korch report`'s JSON
  // (what the dashboard plots) or its self-contained HTML page.
  void report(const httplib::Request& req, httplib::Response& res) {
    auto format_name = req.has_param("format") ? req.get_param_value("format") : "json";
    auto format = enum_from_name<reports::ReportFormat>(format_name);
    Reply err;
    if (format != reports::ReportFormat::json && format != reports::ReportFormat::html) {
      err = Reply::error(400, "format must be json or html (got '" + format_name + "')");
    } else if (auto id = daemon.campaign_id_of(req.matches[1]); !id) {
      err = Reply::error(404, "no campaign '" + std::string(req.matches[1]) + "'");
    } else if (auto r = reports::build_report(daemon.store(), *id); !r) {
      err = Reply::error(r.error());
    } else {
      res.set_content(reports::render(*r, *format), format == reports::ReportFormat::html
                                                        ? "text/html; charset=utf-8"
                                                        : "application/json");
      return;
    }
    send(res, err);
  }

  // GET /api/campaigns/{id}/export?format=jsonl|csv: `korch export`'s
  // records (docs/export.md), written into the response as they are
  // rendered (chunked), so the daemon never holds the whole file.
  void export_(const httplib::Request& req, httplib::Response& res) {
    auto format_name = req.has_param("format") ? req.get_param_value("format") : "jsonl";
    auto format = enum_from_name<reports::ExportFormat>(format_name);
    if (!format) {
      return send(res,
                  Reply::error(400, "format must be jsonl or csv (got '" + format_name + "')"));
    }
    auto id = daemon.campaign_id_of(req.matches[1]);
    if (!id)
      return send(res, Reply::error(404, "no campaign '" + std::string(req.matches[1]) + "'"));
    const bool csv = *format == reports::ExportFormat::csv;
    res.set_header("Content-Disposition",
                   fmt::format("attachment; filename=\"{}.{}\"", *id, csv ? "csv" : "jsonl"));
    res.set_chunked_content_provider(
        csv ? "text/csv; charset=utf-8" : "application/x-ndjson",
        [this, id = *id, f = *format](std::size_t, httplib::DataSink& sink) {
          SinkBuf buf(sink);
          std::ostream out(&buf);
          auto r = reports::write_export(daemon.store(), id, f, out);
          if (r && !out.flush()) r = fail("the client went away");
          if (!r) {
            KLOG_ERROR("serve: export of {}: {}", id, r.error().message);
            return false;  // the connection is closed: a truncated export never looks whole
          }
          sink.done();
          return true;
        });
  }

  // An embedded file of reports/web/. Scripts and styles come only from this
  // server (the Content-Security-Policy says so: no CDN, no inline script).
  void asset(httplib::Response& res, const std::string& name) {
    auto* a = web::find_asset(name);
    if (!a) {
      send(res, Reply::error(404, "no dashboard file '" + name + "'"));
      return;
    }
    res.set_header(
        "Content-Security-Policy",
        "default-src 'self'; script-src 'self'; style-src 'self'; img-src 'self' data:; "
        "connect-src 'self'; object-src 'none'; base-uri 'none'; frame-ancestors 'none'");
    res.set_header("X-Content-Type-Options", "nosniff");
    res.set_header("Cache-Control", "no-cache");
    res.set_content(std::string(a->data), std::string(a->content_type));
  }

  // Server-sent events: a `progress` event when anything changed (checked
  // every sse_interval_s), a comment line every sse_keepalive_s otherwise.
  void events(httplib::Response& res) {
    auto& cfg = daemon.config();
    if (sse_clients.fetch_add(1) >= cfg.sse_max_clients) {
      sse_clients.fetch_sub(1);
      send(res, Reply::error(503, fmt::format("too many progress streams (sse_max_clients = {})",
                                              cfg.sse_max_clients)));
      return;
    }
    res.set_header("Cache-Control", "no-cache");
    struct State {
      std::uint64_t sent_version = ~0ull;
      double last_write = 0;
    };
    auto state = std::make_shared<State>();
    res.set_chunked_content_provider(
        "text/event-stream",
        [this, state](std::size_t, httplib::DataSink& sink) {
          auto& cfg = daemon.config();
          // Wait one interval (or until stop), without holding anything.
          {
            std::unique_lock lock(sse_mutex);
            if (state->last_write > 0) {
              sse_cv.wait_for(lock, std::chrono::duration<double>(cfg.sse_interval_s),
                              [&] { return stopping.load(); });
            }
          }
          if (stopping.load() || daemon.stopping()) {
            std::string bye = "event: shutdown\ndata: {}\n\n";
            sink.write(bye.data(), bye.size());
            sink.done();
            return true;
          }
          double now = now_mono();
          if (daemon.version() != state->sent_version) {
            state->sent_version = daemon.version();
            auto text = "event: progress\ndata: " + daemon.progress_snapshot().dump() + "\n\n";
            state->last_write = now;
            return sink.write(text.data(), text.size());
          }
          if (now - state->last_write >= cfg.sse_keepalive_s) {
            state->last_write = now;
            std::string ka = ": keep-alive\n\n";
            return sink.write(ka.data(), ka.size());
          }
          return sink.is_writable();
        },
        [this](bool) { sse_clients.fetch_sub(1); });
  }
};

Result<std::unique_ptr<HttpApi>> HttpApi::bind(Daemon& daemon, const std::string& token) {
  auto& cfg = daemon.config();
  const HostPort& at = cfg.api_address;
  auto api = std::unique_ptr<HttpApi>(new HttpApi());
  api->m = std::make_unique<Impl>(daemon);
  auto& m = *api->m;
  m.token = token;
  auto& s = m.server;
  int threads = cfg.http_threads, queue = cfg.http_queue;
  s.new_task_queue = [threads, queue] { return new BoundedPool(threads, queue); };
  s.set_payload_max_length(static_cast<std::size_t>(cfg.max_body_bytes));
  s.set_read_timeout(cfg.read_timeout_s, 0);
  s.set_write_timeout(cfg.write_timeout_s, 0);
  s.set_keep_alive_timeout(cfg.keep_alive_s);
  s.set_keep_alive_max_count(100);
  auto* mp = &m;
  s.set_socket_options([mp](int sock) {
    int yes = 1;
    ::setsockopt(sock, SOL_SOCKET, SO_REUSEADDR, &yes, sizeof(yes));
    mp->listen_fd = sock;  // the last socket set up is the listening one
  });
  // A request with a body is checked once its body was read (its route's
  // handler, or the fallback), so that an unread body never stays on a
  // keep-alive connection.
  s.set_pre_routing_handler([mp](const httplib::Request& req, httplib::Response& res) {
    if (has_body_method(req.method)) return httplib::Server::HandlerResponse::Unhandled;
    auto denied = mp->refuse_unauthorized(req);
    if (!denied) return httplib::Server::HandlerResponse::Unhandled;
    Impl::send(res, *denied);
    return httplib::Server::HandlerResponse::Handled;
  });
  s.set_post_routing_handler([mp](const httplib::Request& req, httplib::Response& res) {
    if (res.status == 401) res.set_header("WWW-Authenticate", "Bearer");
    mp->count(req, res);
  });
  s.set_error_handler(
      httplib::Server::HandlerWithResponse([](const httplib::Request& req, httplib::Response& res) {
        if (!res.body.empty()) return httplib::Server::HandlerResponse::Unhandled;
        std::string msg = res.status == 404   ? "no route " + req.method + " " + req.path
                          : res.status == 413 ? "request body too large"
                          : res.status == 405 ? "method not allowed"
                                              : "bad request";
        res.set_content(nlohmann::json{{"error", msg}}.dump(), "application/json");
        return httplib::Server::HandlerResponse::Handled;
      }));
  m.routes();
  m.fallbacks();
  errno = 0;
  int port = at.port == 0 ? s.bind_to_any_port(at.host)
                          : (s.bind_to_port(at.host, at.port) ? at.port : -1);
  if (port < 0) {
    const int err = errno;  // httplib's bind() left it
    return fail(
        ErrorKind::unavailable,
        "cannot listen on " + cfg.listen + ": " +
            (err ? std::string(std::strerror(err)) : std::string("cannot bind")) +
            (err == EADDRINUSE ? " (another process holds the port; pick one with --listen)" : ""));
  }
  // httplib compiles in a backlog of 5; listen() again on the bound socket
  // raises it (Linux updates the backlog of a listening socket).
  if (m.listen_fd >= 0) ::listen(m.listen_fd, cfg.listen_backlog);
  m.port = port;
  return api;
}

HttpApi::~HttpApi() { stop(); }
int HttpApi::port() const { return m->port; }

void HttpApi::serve() {
  m->serve_entered = true;
  if (!m->stopping) m->server.listen_after_bind();
  m->serve_done = true;
}

void HttpApi::stop() {
  if (!m || m->stopping.exchange(true)) return;
  m->sse_cv.notify_all();
  // A serve() that has begun but is not yet listening would miss the stop:
  // wait until it listens (then stop() reaches it) or has returned. One
  // that has not begun sees `stopping` and does not listen.
  while (m->serve_entered && !m->serve_done && !m->server.is_running())
    std::this_thread::sleep_for(std::chrono::milliseconds(1));
  m->server.stop();
}

}  // namespace korch::daemon
