#include "daemon/http_api.hpp"

#include <fmt/format.h>
#include <httplib.h>
#include <sys/socket.h>

#include <condition_variable>
#include <deque>
#include <thread>

#include "daemon/web_assets.hpp"
#include "tools/reports/report.hpp"
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

bool constant_time_equal(const std::string& a, const std::string& b) {
  if (a.size() != b.size()) return false;
  unsigned char d = 0;
  for (std::size_t i = 0; i < a.size(); ++i) d |= static_cast<unsigned char>(a[i] ^ b[i]);
  return d == 0;
}

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
      {"GET", "/api/events", true},
      {"GET", "/api/campaigns/{id}/report", true},
      {"GET", "/", false},
      {"GET", "/dashboard/{file}", false},
  };
  return routes;
}

struct HttpApi::Impl {
  Daemon& daemon;
  std::string token;
  httplib::Server server;
  int port = 0;
  int listen_fd = -1;
  std::atomic<bool> stopping{false};
  std::atomic<int> sse_clients{0};
  std::mutex sse_mutex;
  std::condition_variable sse_cv;

  explicit Impl(Daemon& d) : daemon(d) {}

  static void send(httplib::Response& res, const Reply& r) {
    res.status = r.status;
    res.set_content(r.body.dump(), "application/json");
  }

  using Handler = std::function<Reply(const httplib::Request&)>;

  void add(const std::string& method, const std::string& path, Handler h) {
    auto wrapped = [this, path, h = std::move(h)](const httplib::Request& req,
                                                  httplib::Response& res) {
      Reply r;
      try {
        r = h(req);
      } catch (const std::exception& e) {
        KLOG_ERROR("serve: {} {}: {}", req.method, req.path, e.what());
        r = Reply::error(500, "internal error");
      }
      send(res, r);
      daemon.metrics().count_http(path, r.status);
    };
    auto re = to_regex(path);
    if (method == "GET") {
      server.Get(re, wrapped);
    } else {
      server.Post(re, wrapped);
    }
  }

  static bool is_json(const httplib::Request& req) {
    auto ct = req.get_header_value("Content-Type");
    return ct.find("json") != std::string::npos;
  }

  void routes() {
    add("GET", "/health", [this](const httplib::Request&) -> Reply {
      return {200, {{"status", daemon.stopping() ? "stopping" : "ok"}, {"version", "0.1.0"}}};
    });
    server.Get("/metrics", [this](const httplib::Request&, httplib::Response& res) {
      (void)daemon.progress_snapshot();  // sets the campaign gauges
      daemon.metrics().set_sse_clients(sse_clients.load());
      res.set_content(daemon.metrics().serialize(), "text/plain; version=0.0.4");
      daemon.metrics().count_http("/metrics", 200);
    });
    add("GET", "/api/campaigns", [this](const httplib::Request&) { return daemon.list(); });
    add("POST", "/api/campaigns", [this](const httplib::Request& req) {
      if (req.body.empty()) return Reply::error(400, "empty body: send a campaign TOML or JSON");
      return daemon.submit(req.body, is_json(req));
    });
    add("GET", "/api/campaigns/{id}",
        [this](const httplib::Request& req) { return daemon.get(req.matches[1]); });
    add("POST", "/api/campaigns/{id}/pause",
        [this](const httplib::Request& req) { return daemon.pause(req.matches[1]); });
    add("POST", "/api/campaigns/{id}/resume",
        [this](const httplib::Request& req) { return daemon.resume(req.matches[1]); });
    add("POST", "/api/campaigns/{id}/cancel",
        [this](const httplib::Request& req) { return daemon.cancel(req.matches[1]); });
    add("GET", "/api/campaigns/{id}/episodes",
        [this](const httplib::Request& req) { return daemon.episodes(req.matches[1]); });
    add("GET", "/api/episodes/{id}",
        [this](const httplib::Request& req) { return daemon.episode(req.matches[1]); });
    add("POST", "/api/evaluations", [this](const httplib::Request& req) {
      auto j = nlohmann::json::parse(req.body, nullptr, false);
      if (j.is_discarded()) return Reply::error(400, "malformed JSON");
      return daemon.evaluate(j);
    });
    server.Get("/api/events",
               [this](const httplib::Request&, httplib::Response& res) { events(res); });
    server.Get(to_regex("/api/campaigns/{id}/report"),
               [this](const httplib::Request& req, httplib::Response& res) { report(req, res); });
    server.Get("/", [this](const httplib::Request&, httplib::Response& res) {
      asset(res, "index.html", "/");
    });
    server.Get(to_regex("/dashboard/{file}"),
               [this](const httplib::Request& req, httplib::Response& res) {
                 asset(res, req.matches[1], "/dashboard/{file}");
               });
  }

  // GET /api/campaigns/{id}/report[?format=json|html]: `korch report`'s JSON
  // (what the dashboard plots) or its self-contained HTML page.
  void report(const httplib::Request& req, httplib::Response& res) {
    const std::string route = "/api/campaigns/{id}/report";
    auto format_name = req.has_param("format") ? req.get_param_value("format") : "json";
    auto format = enum_from_name<reports::ReportFormat>(format_name);
    Reply err;
    if (format != reports::ReportFormat::json && format != reports::ReportFormat::html) {
      err = Reply::error(400, "format must be json or html (got '" + format_name + "')");
    } else if (auto id = daemon.campaign_id_of(req.matches[1]); !id) {
      err = Reply::error(404, "no campaign '" + std::string(req.matches[1]) + "'");
    } else if (auto r = reports::build_report(daemon.store(), *id); !r) {
      err = Reply::error(500, r.error().message);
    } else {
      res.set_content(reports::render(*r, *format), format == reports::ReportFormat::html
                                                        ? "text/html; charset=utf-8"
                                                        : "application/json");
      daemon.metrics().count_http(route, 200);
      return;
    }
    send(res, err);
    daemon.metrics().count_http(route, err.status);
  }

  // An embedded file of daemon/web/. Scripts and styles come only from this
  // server (the Content-Security-Policy says so: no CDN, no inline script).
  void asset(httplib::Response& res, const std::string& name, const std::string& route) {
    auto* a = web::find_asset(name);
    if (!a) {
      send(res, Reply::error(404, "no dashboard file '" + name + "'"));
      daemon.metrics().count_http(route, 404);
      return;
    }
    res.set_header(
        "Content-Security-Policy",
        "default-src 'self'; script-src 'self'; style-src 'self'; img-src 'self' data:; "
        "connect-src 'self'; object-src 'none'; base-uri 'none'; frame-ancestors 'none'");
    res.set_header("X-Content-Type-Options", "nosniff");
    res.set_header("Cache-Control", "no-cache");
    res.set_content(std::string(a->data), std::string(a->content_type));
    daemon.metrics().count_http(route, 200);
  }

  // Server-sent events: a `progress` event when anything changed (checked
  // every sse_interval_s), a comment line every sse_keepalive_s otherwise.
  void events(httplib::Response& res) {
    auto& cfg = daemon.config();
    if (sse_clients.fetch_add(1) >= cfg.sse_max_clients) {
      sse_clients.fetch_sub(1);
      send(res, Reply::error(503, fmt::format("too many progress streams (sse_max_clients = {})",
                                              cfg.sse_max_clients)));
      daemon.metrics().count_http("/api/events", 503);
      return;
    }
    daemon.metrics().count_http("/api/events", 200);
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
  s.set_pre_routing_handler([mp](const httplib::Request& req, httplib::Response& res) {
    if (mp->token.empty() || is_public(req.path))
      return httplib::Server::HandlerResponse::Unhandled;
    auto h = req.get_header_value("Authorization");
    if (h.rfind("Bearer ", 0) != 0 || !constant_time_equal(h.substr(7), mp->token)) {
      res.status = 401;
      res.set_header("WWW-Authenticate", "Bearer");
      res.set_content(
          nlohmann::json{{"error", h.empty() ? "missing bearer token" : "wrong bearer token"}}
              .dump(),
          "application/json");
      mp->daemon.metrics().count_http("auth", 401);
      return httplib::Server::HandlerResponse::Handled;
    }
    return httplib::Server::HandlerResponse::Unhandled;
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
  int port = at.port == 0 ? s.bind_to_any_port(at.host)
                          : (s.bind_to_port(at.host, at.port) ? at.port : -1);
  if (port < 0) return fail(ErrorKind::unavailable, "cannot listen on " + cfg.listen);
  // httplib compiles in a backlog of 5; listen() again on the bound socket
  // raises it (Linux updates the backlog of a listening socket).
  if (m.listen_fd >= 0) ::listen(m.listen_fd, cfg.listen_backlog);
  m.port = port;
  return api;
}

HttpApi::~HttpApi() { stop(); }
int HttpApi::port() const { return m->port; }

void HttpApi::serve() { m->server.listen_after_bind(); }

void HttpApi::stop() {
  if (!m || m->stopping.exchange(true)) return;
  m->sse_cv.notify_all();
  m->server.stop();
}

}  // namespace korch::daemon
