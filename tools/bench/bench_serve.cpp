// korch-bench-serve: load on a real `korch serve` (issue 11).
//   korch-bench-serve [--clients 200] [--duration-s 60] [--think-ms 0]
//                     [--env-sessions 64] [--env-duration-s 60] [--samples 100]
//                     [--korch PATH] [--peer PATH] [--http-threads N]
//                     [--sse-max-clients N] [--keep]
// Starts korch-bench-peer (a fake LLM, 100 ms per reply) and `korch serve`
// (a bearer token, the OpenEnv port on, the mock evaluator), submits a
// campaign long enough to run through the measurement, then:
//   1. `clients` API clients, each holding a progress stream (GET /api/events)
//      and calling the list endpoints in a closed loop (GET /api/campaigns,
//      GET /api/campaigns/{id}/episodes, GET /api/campaigns/{id}) for
//      duration-s: errors (any non-200, a failed connection, a stream refused
//      or ended early), latency percentiles per endpoint, progress events
//      received, the daemon's threads and RSS (/proc/<pid>/status, sampled
//      every 250 ms) and CPU time.
//   2. `env-sessions` OpenEnv WebSocket sessions (Boost.Beast client), each
//      resetting on a task and sending CHECK steps (reset again when an
//      episode ends) for env-duration-s: errors, step latency percentiles,
//      steps/s, daemon threads and RSS.
// A daemon serves one connection per pool thread, and a progress stream holds
// its connection: the daemon is started with http_threads = 2 x clients + 16
// (a stream and a keep-alive API connection per client) and sse_max_clients =
// clients unless the flags say otherwise. Exit status 0 when both phases had
// zero errors and the daemon stopped cleanly on SIGTERM.
#include <signal.h>
#include <sys/wait.h>
#include <unistd.h>

#include <algorithm>
#include <atomic>
#include <boost/asio/connect.hpp>
#include <boost/asio/ip/tcp.hpp>
#include <boost/beast/core.hpp>
#include <boost/beast/websocket.hpp>
#include <chrono>
#include <cstdio>
#include <cstdlib>
#include <filesystem>
#include <fstream>
#include <map>
#include <mutex>
#include <sstream>
#include <string>
#include <thread>
#include <vector>

#include <fmt/format.h>
#include <httplib.h>

#include <nlohmann/json.hpp>

namespace {

using Clock = std::chrono::steady_clock;
using nlohmann::json;
constexpr const char* k_token = "bench-serve-token-0123456789abcdef";

double seconds_since(Clock::time_point t0) {
  return std::chrono::duration<double>(Clock::now() - t0).count();
}

std::string slurp(const std::string& path) {
  std::ifstream in(path, std::ios::binary);
  std::stringstream s;
  s << in.rdbuf();
  return s.str();
}

double percentile(std::vector<double> v, double p) {
  if (v.empty()) return 0;
  std::sort(v.begin(), v.end());
  auto k = static_cast<std::size_t>(p * static_cast<double>(v.size() - 1) + 0.5);
  return v[std::min(k, v.size() - 1)];
}

// A child process with stdout/stderr to files.
struct Child {
  pid_t pid = -1;
  bool start(const std::vector<std::string>& argv, const std::string& out, const std::string& err,
             const std::map<std::string, std::string>& env = {}) {
    std::fflush(nullptr);
    pid = ::fork();
    if (pid == 0) {
      if (!std::freopen(out.c_str(), "w", stdout) || !std::freopen(err.c_str(), "w", stderr))
        ::_exit(126);
      for (auto& [k, v] : env) ::setenv(k.c_str(), v.c_str(), 1);
      std::vector<char*> args;
      for (auto& a : argv) args.push_back(const_cast<char*>(a.c_str()));
      args.push_back(nullptr);
      ::execv(args[0], args.data());
      ::_exit(127);
    }
    return pid > 0;
  }
  int stop(int sig, double timeout_s, double* took = nullptr) {
    if (pid <= 0) return -1;
    auto t0 = Clock::now();
    ::kill(pid, sig);
    int status = 0;
    while (::waitpid(pid, &status, WNOHANG) == 0) {
      if (seconds_since(t0) > timeout_s) {
        ::kill(pid, SIGKILL);
        ::waitpid(pid, &status, 0);
        pid = -1;
        return -2;
      }
      std::this_thread::sleep_for(std::chrono::milliseconds(10));
    }
    if (took) *took = seconds_since(t0);
    pid = -1;
    return WIFEXITED(status) ? WEXITSTATUS(status) : 128 + WTERMSIG(status);
  }
  ~Child() {
    if (pid > 0) stop(SIGKILL, 5);
  }
};

// Threads and resident memory of a process.
struct ProcSample {
  int threads = 0;
  double rss_mb = 0;
};
ProcSample sample_proc(pid_t pid) {
  std::ifstream in("/proc/" + std::to_string(pid) + "/status");
  std::string line;
  ProcSample s;
  while (std::getline(in, line)) {
    if (line.rfind("Threads:", 0) == 0) s.threads = std::atoi(line.c_str() + 8);
    if (line.rfind("VmRSS:", 0) == 0) s.rss_mb = std::atof(line.c_str() + 6) / 1024.0;
  }
  return s;
}
double cpu_seconds(pid_t pid) {
  std::ifstream in("/proc/" + std::to_string(pid) + "/stat");
  std::string text((std::istreambuf_iterator<char>(in)), std::istreambuf_iterator<char>());
  auto p = text.rfind(')');
  if (p == std::string::npos) return 0;
  std::istringstream fields(text.substr(p + 2));
  std::string f;
  double utime = 0, stime = 0;
  for (int i = 3; fields >> f; ++i) {
    if (i == 14) utime = std::stod(f);
    if (i == 15) {
      stime = std::stod(f);
      break;
    }
  }
  return (utime + stime) / static_cast<double>(::sysconf(_SC_CLK_TCK));
}

// Samples a process every 250 ms while running.
class Sampler {
 public:
  explicit Sampler(pid_t pid) : m_pid(pid), m_thread([this] { run(); }) {}
  ~Sampler() { stop(); }
  void stop() {
    m_stop = true;
    if (m_thread.joinable()) m_thread.join();
  }
  int max_threads() const { return m_max_threads; }
  double max_rss_mb() const { return m_max_rss; }
  ProcSample last() const { return m_last; }

 private:
  void run() {
    while (!m_stop) {
      auto s = sample_proc(m_pid);
      m_last = s;
      m_max_threads = std::max(m_max_threads, s.threads);
      m_max_rss = std::max(m_max_rss, s.rss_mb);
      std::this_thread::sleep_for(std::chrono::milliseconds(250));
    }
  }
  pid_t m_pid;
  std::atomic<bool> m_stop{false};
  int m_max_threads = 0;
  double m_max_rss = 0;
  ProcSample m_last;
  std::thread m_thread;
};

struct Errors {
  std::mutex mutex;
  std::map<std::string, int> by_kind;
  void add(const std::string& kind) {
    std::lock_guard lock(mutex);
    ++by_kind[kind];
  }
  int total() {
    std::lock_guard lock(mutex);
    int n = 0;
    for (auto& [k, v] : by_kind) n += v;
    return n;
  }
  std::string describe() {
    std::lock_guard lock(mutex);
    std::string s;
    for (auto& [k, v] : by_kind) s += fmt::format("{}{} x{}", s.empty() ? "" : ", ", k, v);
    return s.empty() ? "none" : s;
  }
};

std::string campaign_toml(const std::string& tasks_dir, int peer_port, int samples) {
  std::ostringstream s;
  s << "name = \"bench-serve\"\nsamples_per_task = " << samples
    << "\nmax_turns = 4\nmax_inflight_episodes = 8\n"
    << "log_level = \"warn\"\n[tasks]\nkernelbench_dir = \"" << tasks_dir << "\"\nids = \"1-4\"\n"
    << "[evaluator]\nmode = \"mock\"\nmock_latency_s = 0.25\n"
    << "[[models]]\nid = \"m1\"\nbase_url = \"http://127.0.0.1:" << peer_port
    << "/v1\"\nmodel = \"peer\"\n"
    << "concurrency = 8\nprice_prompt_per_mtok = 1.0\nprice_completion_per_mtok = 2.0\n";
  return s.str();
}

std::string reply_text() {
  return "One pass over memory.\n\n```python\nimport torch\nclass ModelNew(torch.nn.Module):\n"
         "    def forward(self, x):\n        return torch.relu(x)\n```\n\nACTION: CHECK\n";
}

struct Options {
  int clients = 200;
  double duration_s = 60;
  int think_ms = 0;
  int env_sessions = 64;
  double env_duration_s = 60;
  int samples = 100;
  int http_threads = 0;     // 0: 2 x clients + 16
  int sse_max_clients = 0;  // 0: clients
  bool keep = false;
  std::string korch = KORCH_BIN;
  std::string peer = KORCH_PEER_BIN;
};

// --- phase 1: API clients with progress streams ---------------------------------
struct ApiResult {
  std::map<std::string, std::vector<double>> latency_ms;  // by endpoint
  std::atomic<long> requests{0};
  std::atomic<long> sse_events{0}, sse_keepalives{0}, sse_open{0};
};

void api_phase(const Options& o, int port, pid_t daemon, const std::string& campaign_id,
               Errors& errors) {
  ApiResult res;
  std::atomic<bool> stop{false};
  std::vector<std::thread> streams;
  streams.reserve(static_cast<std::size_t>(o.clients));
  for (int i = 0; i < o.clients; ++i) {
    streams.emplace_back([&] {
      httplib::Client c("127.0.0.1", port);
      c.set_bearer_token_auth(k_token);
      c.set_connection_timeout(10, 0);
      c.set_read_timeout(60, 0);
      bool counted = false;
      std::string buf;
      auto r = c.Get("/api/events", [&](const char* data, std::size_t n) {
        if (!counted) {
          counted = true;
          ++res.sse_open;
        }
        buf.append(data, n);
        for (std::size_t p; (p = buf.find("\n\n")) != std::string::npos; buf.erase(0, p + 2)) {
          if (buf.rfind("event: progress", 0) == 0)
            ++res.sse_events;
          else if (buf.rfind(":", 0) == 0)
            ++res.sse_keepalives;
          else if (buf.rfind("event: shutdown", 0) == 0 && !stop)
            errors.add("sse: shutdown during the run");
        }
        return !stop.load();
      });
      if (!stop.load()) {
        errors.add(r ? fmt::format("sse: ended early (HTTP {})", r->status)
                     : "sse: " + httplib::to_string(r.error()));
      }
    });
  }
  // Every stream open before the clients start calling.
  auto t_open = Clock::now();
  while (res.sse_open.load() < o.clients && seconds_since(t_open) < 30) {
    std::this_thread::sleep_for(std::chrono::milliseconds(20));
  }
  fmt::print("  {} progress streams open after {:.2f} s\n", res.sse_open.load(),
             seconds_since(t_open));

  Sampler sampler(daemon);
  double cpu0 = cpu_seconds(daemon);
  const std::vector<std::pair<std::string, std::string>> endpoints = {
      {"GET /api/campaigns", "/api/campaigns"},
      {"GET /api/campaigns/{id}/episodes", "/api/campaigns/" + campaign_id + "/episodes"},
      {"GET /api/campaigns/{id}", "/api/campaigns/" + campaign_id}};
  std::mutex merge;
  auto t0 = Clock::now();
  std::vector<std::thread> clients;
  for (int i = 0; i < o.clients; ++i) {
    clients.emplace_back([&, i] {
      httplib::Client c("127.0.0.1", port);
      c.set_bearer_token_auth(k_token);
      c.set_keep_alive(true);
      c.set_connection_timeout(10, 0);
      c.set_read_timeout(30, 0);
      std::map<std::string, std::vector<double>> mine;
      for (std::size_t k = static_cast<std::size_t>(i); seconds_since(t0) < o.duration_s; ++k) {
        auto& [name, path] = endpoints[k % endpoints.size()];
        auto t = Clock::now();
        auto r = c.Get(path);
        double ms = seconds_since(t) * 1000;
        if (!r) {
          errors.add(name + ": " + httplib::to_string(r.error()));
        } else if (r->status != 200) {
          errors.add(fmt::format("{}: HTTP {}", name, r->status));
        } else {
          mine[name].push_back(ms);
        }
        ++res.requests;
        if (o.think_ms > 0) std::this_thread::sleep_for(std::chrono::milliseconds(o.think_ms));
      }
      std::lock_guard lock(merge);
      for (auto& [k, v] : mine)
        res.latency_ms[k].insert(res.latency_ms[k].end(), v.begin(), v.end());
    });
  }
  for (auto& t : clients) t.join();
  double wall = seconds_since(t0);
  double cpu = cpu_seconds(daemon) - cpu0;
  auto during = sampler.last();
  sampler.stop();
  stop = true;
  for (auto& t : streams) t.join();  // each ends at its next event or keep-alive

  fmt::print("  {} clients x {:.0f} s: {} requests ({:.0f}/s), think time {} ms\n", o.clients, wall,
             res.requests.load(), static_cast<double>(res.requests.load()) / wall, o.think_ms);
  for (auto& [name, v] : res.latency_ms) {
    fmt::print("  {:<36} n={:<7} p50 {:7.2f} ms  p90 {:7.2f} ms  p99 {:7.2f} ms  max {:7.2f} ms\n",
               name, v.size(), percentile(v, 0.5), percentile(v, 0.9), percentile(v, 0.99),
               percentile(v, 1.0));
  }
  fmt::print("  progress streams: {} open, {} progress events, {} keep-alives\n",
             res.sse_open.load(), res.sse_events.load(), res.sse_keepalives.load());
  fmt::print(
      "  daemon: threads {} (max {}), RSS {:.1f} MiB (max {:.1f}), CPU {:.1f} s ({:.0f}% of one "
      "core)\n",
      during.threads, sampler.max_threads(), during.rss_mb, sampler.max_rss_mb(), cpu,
      100 * cpu / wall);
}

// --- phase 2: OpenEnv sessions ------------------------------------------------------
namespace beast = boost::beast;
namespace websocket = beast::websocket;
namespace net = boost::asio;

void env_phase(const Options& o, int env_port, pid_t daemon, const std::string& task_file,
               Errors& errors) {
  std::atomic<long> steps{0}, resets{0}, done_episodes{0};
  std::atomic<int> connected{0};
  std::mutex merge;
  std::vector<double> step_ms;
  Sampler sampler(daemon);
  double cpu0 = cpu_seconds(daemon);
  auto t0 = Clock::now();
  std::vector<std::thread> sessions;
  const std::string code =
      "import torch\nclass ModelNew(torch.nn.Module):\n    def forward(self, x):\n        return "
      "torch.relu(x)\n";
  for (int i = 0; i < o.env_sessions; ++i) {
    sessions.emplace_back([&, i] {
      std::vector<double> mine;
      try {
        net::io_context ioc;
        net::ip::tcp::resolver resolver(ioc);
        websocket::stream<net::ip::tcp::socket> ws(ioc);
        net::connect(ws.next_layer(), resolver.resolve("127.0.0.1", std::to_string(env_port)));
        ws.set_option(websocket::stream_base::decorator([](websocket::request_type& req) {
          req.set(beast::http::field::authorization, std::string("Bearer ") + k_token);
        }));
        ws.handshake("127.0.0.1:" + std::to_string(env_port), "/ws");
        ws.text(true);
        ++connected;
        auto call = [&](const json& frame) {
          ws.write(net::buffer(frame.dump()));
          beast::flat_buffer buf;
          ws.read(buf);
          return json::parse(beast::buffers_to_string(buf.data()), nullptr, false);
        };
        auto reset = [&] {
          auto r = call({{"type", "reset"}, {"data", {{"seed", i}, {"task_id", task_file}}}});
          ++resets;
          if (!r.is_object() || r.value("type", "") != "observation") {
            errors.add("env reset: " +
                       (r.is_object() ? r.dump().substr(0, 200) : std::string("bad frame")));
            return false;
          }
          return true;
        };
        if (!reset()) return;
        for (int k = 0; seconds_since(t0) < o.env_duration_s; ++k) {
          auto t = Clock::now();
          auto r = call(
              {{"type", "step"},
               {"data", {{"code", code + "# " + std::to_string(k) + "\n"}, {"action", "CHECK"}}}});
          double ms = seconds_since(t) * 1000;
          if (!r.is_object() || r.value("type", "") != "observation") {
            errors.add("env step: " +
                       (r.is_object() ? r.dump().substr(0, 200) : std::string("bad frame")));
            break;
          }
          mine.push_back(ms);
          ++steps;
          if (r["data"].value("done", false)) {
            ++done_episodes;
            if (!reset()) break;
          }
        }
        ws.write(net::buffer(json{{"type", "close"}}.dump()));
        beast::error_code ec;
        ws.close(websocket::close_code::normal, ec);
      } catch (const std::exception& e) {
        errors.add(std::string("env: ") + e.what());
      }
      std::lock_guard lock(merge);
      step_ms.insert(step_ms.end(), mine.begin(), mine.end());
    });
  }
  for (auto& t : sessions) t.join();
  double wall = seconds_since(t0);
  double cpu = cpu_seconds(daemon) - cpu0;
  sampler.stop();
  fmt::print(
      "  {} sessions connected; {} CHECK steps in {:.0f} s ({:.1f}/s), {} resets, {} episodes "
      "ended\n",
      connected.load(), steps.load(), wall, static_cast<double>(steps.load()) / wall, resets.load(),
      done_episodes.load());
  fmt::print("  step latency: p50 {:.1f} ms  p90 {:.1f} ms  p99 {:.1f} ms  max {:.1f} ms\n",
             percentile(step_ms, 0.5), percentile(step_ms, 0.9), percentile(step_ms, 0.99),
             percentile(step_ms, 1.0));
  fmt::print("  daemon: threads max {}, RSS max {:.1f} MiB, CPU {:.1f} s\n", sampler.max_threads(),
             sampler.max_rss_mb(), cpu);
}

int usage() {
  std::fprintf(
      stderr,
      "usage: korch-bench-serve [--clients N] [--duration-s S] [--think-ms N] [--env-sessions N]\n"
      "                         [--env-duration-s S] [--samples N] [--korch PATH] [--peer PATH]\n"
      "                         [--http-threads N] [--sse-max-clients N] [--keep]\n");
  return 2;
}

}  // namespace

int main(int argc, char** argv) {
  Options o;
  for (int i = 1; i < argc; ++i) {
    std::string a = argv[i];
    auto next = [&]() -> std::string { return i + 1 < argc ? argv[++i] : ""; };
    if (a == "--clients")
      o.clients = std::atoi(next().c_str());
    else if (a == "--duration-s")
      o.duration_s = std::atof(next().c_str());
    else if (a == "--think-ms")
      o.think_ms = std::atoi(next().c_str());
    else if (a == "--env-sessions")
      o.env_sessions = std::atoi(next().c_str());
    else if (a == "--env-duration-s")
      o.env_duration_s = std::atof(next().c_str());
    else if (a == "--samples")
      o.samples = std::atoi(next().c_str());
    else if (a == "--korch")
      o.korch = next();
    else if (a == "--peer")
      o.peer = next();
    else if (a == "--http-threads")
      o.http_threads = std::atoi(next().c_str());
    else if (a == "--sse-max-clients")
      o.sse_max_clients = std::atoi(next().c_str());
    else if (a == "--keep")
      o.keep = true;
    else
      return usage();
  }
  if (o.clients < 1 || o.duration_s <= 0 || o.env_sessions < 0) return usage();
  if (o.http_threads <= 0) o.http_threads = 2 * o.clients + 16;
  if (o.sse_max_clients <= 0) o.sse_max_clients = o.clients;
  ::signal(SIGPIPE, SIG_IGN);

  char tmpl[] = "/tmp/korch-bench-serve-XXXXXX";
  if (!::mkdtemp(tmpl)) return 1;
  std::string dir = tmpl;
  const std::string tasks_dir = KORCH_SOURCE_DIR "/examples/tasks";
  std::ofstream(dir + "/reply.txt") << reply_text();

  Child peer;
  peer.start({o.peer, "--port", "0", "--latency-ms", "100", "--reply-file", dir + "/reply.txt"},
             dir + "/peer.out", dir + "/peer.err");
  int peer_port = 0;
  for (int i = 0; i < 500 && !peer_port; ++i) {
    auto t = slurp(dir + "/peer.out");
    if (auto p = t.find("PORT "); p != std::string::npos && t.find('\n', p) != std::string::npos) {
      peer_port = std::stoi(t.substr(p + 5));
    }
    std::this_thread::sleep_for(std::chrono::milliseconds(10));
  }
  if (!peer_port) {
    std::fprintf(stderr, "korch-bench-serve: the peer did not start (%s)\n", o.peer.c_str());
    return 1;
  }

  Child serve;
  std::vector<std::string> args = {o.korch,
                                   "serve",
                                   "--db",
                                   dir + "/serve.db",
                                   "--listen",
                                   "127.0.0.1:0",
                                   "--env-listen",
                                   "127.0.0.1:0",
                                   "--log-level",
                                   "warn",
                                   "--http-threads",
                                   std::to_string(o.http_threads),
                                   "--http-queue",
                                   std::to_string(o.http_threads),
                                   "--sse-max-clients",
                                   std::to_string(o.sse_max_clients),
                                   "--sse-keepalive-s",
                                   "2",
                                   "--env-max-sessions",
                                   std::to_string(std::max(1, o.env_sessions)),
                                   "--evaluator-mode",
                                   "mock",
                                   "--evaluator-mock-latency-s",
                                   "0.05",
                                   "--evaluator-workers",
                                   "16"};
  serve.start(args, dir + "/serve.out", dir + "/serve.err", {{"KORCH_API_TOKEN", k_token}});
  int port = 0, env_port = 0;
  for (int i = 0; i < 1500 && !(port && env_port); ++i) {
    auto t = slurp(dir + "/serve.out");
    if (auto p = t.find("LISTEN api ");
        p != std::string::npos && t.find('\n', p) != std::string::npos) {
      port = std::stoi(t.substr(p + 11));
    }
    if (auto p = t.find("LISTEN env ");
        p != std::string::npos && t.find('\n', p) != std::string::npos) {
      env_port = std::stoi(t.substr(p + 11));
    }
    std::this_thread::sleep_for(std::chrono::milliseconds(20));
  }
  if (!port || !env_port) {
    std::fprintf(stderr, "korch-bench-serve: korch serve did not start:\n%s\n",
                 slurp(dir + "/serve.err").c_str());
    return 1;
  }
  auto idle = sample_proc(serve.pid);
  fmt::print(
      "korch serve: http_threads {}, sse_max_clients {}, env.max_sessions {}; idle: threads {}, "
      "RSS {:.1f} MiB\n",
      o.http_threads, o.sse_max_clients, o.env_sessions, idle.threads, idle.rss_mb);

  httplib::Client admin("127.0.0.1", port);
  admin.set_bearer_token_auth(k_token);
  admin.set_read_timeout(30, 0);
  auto r = admin.Post("/api/campaigns", campaign_toml(tasks_dir, peer_port, o.samples),
                      "application/toml");
  if (!r || r->status != 201) {
    std::fprintf(stderr, "korch-bench-serve: submit failed: %s\n",
                 r ? r->body.c_str() : "no reply");
    return 1;
  }
  std::string id = json::parse(r->body)["id"];
  auto state_of = [&] {
    auto g = admin.Get("/api/campaigns/" + id);
    auto j = g ? json::parse(g->body, nullptr, false) : json();
    return j.is_object() ? j : json::object();
  };
  for (int i = 0; i < 500 && state_of().value("phase", "") != "running"; ++i) {
    std::this_thread::sleep_for(std::chrono::milliseconds(20));
  }

  Errors api_errors, env_errors;
  fmt::print(
      "\n1. {} API clients, each with a progress stream, for {:.0f} s against a running campaign\n",
      o.clients, o.duration_s);
  auto before = state_of();
  api_phase(o, port, serve.pid, id, api_errors);
  auto after = state_of();
  fmt::print(
      "  campaign during the run: phase {} -> {}, final episodes {} -> {} of {}, turns {} -> {}\n",
      before.value("phase", "?"), after.value("phase", "?"), before["progress"].value("final", 0),
      after["progress"].value("final", 0), after["progress"].value("episodes", 0),
      before["progress"].value("turns", 0), after["progress"].value("turns", 0));
  fmt::print("  errors: {}\n", api_errors.describe());

  if (o.env_sessions > 0) {
    fmt::print("\n2. {} OpenEnv sessions doing CHECK steps (mock evaluator, 50 ms) for {:.0f} s\n",
               o.env_sessions, o.env_duration_s);
    env_phase(o, env_port, serve.pid, tasks_dir + "/1_ReLU_small.py", env_errors);
    fmt::print("  errors: {}\n", env_errors.describe());
  }

  double took = 0;
  int rc = serve.stop(SIGTERM, 60, &took);
  fmt::print("\nSIGTERM: korch serve exited {} after {:.2f} s\n", rc, took);
  peer.stop(SIGTERM, 5);
  if (!o.keep) {
    std::error_code ec;
    std::filesystem::remove_all(dir, ec);
  } else {
    fmt::print("kept {}\n", dir);
  }
  return api_errors.total() == 0 && env_errors.total() == 0 && rc == 0 ? 0 : 1;
}
