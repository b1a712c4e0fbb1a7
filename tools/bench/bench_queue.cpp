// korch-bench-queue: the evaluation work queue on PostgreSQL (store/work_queue.hpp).
//
//   korch-bench-queue [--store URL] [--claimers 64] [--rows 20000] [--scaling 1,2,4,8]
//                     [--per-worker 16] [--latency-s 1]
//                     [--backends EPISODES] [--hold WORKERS,EPISODES] [--hold-latency-s S]
//                     [--only backends|hold]
//
// 1. Claim latency: `claimers` threads, each with its own connections, claim
//    and complete as fast as they can (every claim races the others through
//    FOR UPDATE SKIP LOCKED); then the same threads poll an empty queue.
//    Prints p50/p99/max of one claim() call.
// 2. Scaling: for each worker count k, k real `korch worker` processes (mock
//    evaluator, latency-s per evaluation, one slot each) run k * per-worker
//    queued evaluations; evaluations/s from the first claim to the last result.
// 3. Backends (--backends N, default 200): the same campaign (korch-fake-llm,
//    the mock evaluator in-process, N episodes) run by `korch run` on a
//    SQLite file and on PostgreSQL, one after the other; turns/s and
//    evaluations/s of each, from the stores' own rows.
// 4. Hold (--hold W,E, default 64,1000): one coordinator (evaluator.remote)
//    with E episodes in flight and W `korch worker` processes (one slot,
//    --hold-latency-s per evaluation) on one PostgreSQL: whether it held
//    (the campaign finished, every row done, nothing counted twice), the
//    peak of running episodes and of client connections (pg_stat_activity),
//    and claim p50/p99: a probe's claim() round trips during the run, and
//    the queue wait (claimed_at - enqueued_at) of every evaluation.
// --only runs one of 3 and 4 (and neither 1 nor 2).
// Without --store a throwaway server is started (scripts/pg-test-server.sh).
#include <fmt/format.h>
#include <signal.h>
#include <sys/wait.h>
#include <unistd.h>

#include <fcntl.h>

#include <algorithm>
#include <atomic>
#include <chrono>
#include <cstdio>
#include <cstdlib>
#include <fstream>
#include <sstream>
#include <string>
#include <thread>
#include <vector>

#include "evaluator/remote/queue_evaluator.hpp"
#include "store/store.hpp"
#include "store/work_queue.hpp"
#include "tests/support/postgres_server.hpp"

namespace {
namespace remote = korch::evaluator::remote;

using Clock = std::chrono::steady_clock;
using korch::store::WorkQueue;

struct Args {
  std::string store;
  int claimers = 64;
  int rows = 20000;
  std::vector<int> scaling = {1, 2, 4, 8};
  int per_worker = 16;
  double latency_s = 1;
  int backend_episodes = 200;
  int hold_workers = 64;
  int hold_episodes = 1000;
  double hold_latency_s = 1;
  std::string only;
};

double percentile(std::vector<double> v, double p);

// fork + exec with stdout and stderr to `log`.
pid_t spawn(const std::vector<std::string>& argv, const std::string& log) {
  pid_t pid = ::fork();
  if (pid == 0) {
    int fd = ::open(log.c_str(), O_WRONLY | O_CREAT | O_TRUNC, 0644);
    if (fd >= 0) {
      ::dup2(fd, 1);
      ::dup2(fd, 2);
    }
    std::vector<char*> args;
    for (const auto& x : argv) args.push_back(const_cast<char*>(x.c_str()));
    args.push_back(nullptr);
    ::execv(args[0], args.data());
    _exit(127);
  }
  return pid;
}

int wait_exit(pid_t pid) {
  int status = 0;
  ::waitpid(pid, &status, 0);
  return WIFEXITED(status) ? WEXITSTATUS(status) : 128 + WTERMSIG(status);
}

std::string slurp(const std::string& path) {
  std::ifstream f(path);
  std::stringstream ss;
  ss << f.rdbuf();
  return ss.str();
}

// One value from psql (its connection shows in pg_stat_activity too).
std::string psql(const std::string& url, const std::string& sql) {
  std::string cmd = "psql -X -tA '" + url + "' -c \"" + sql + "\" 2>/dev/null";
  std::string out;
  if (FILE* p = ::popen(cmd.c_str(), "r")) {
    char buf[256];
    while (std::fgets(buf, sizeof buf, p) != nullptr) out += buf;
    ::pclose(p);
  }
  while (!out.empty() && (out.back() == '\n' || out.back() == ' ')) out.pop_back();
  return out;
}

// korch-fake-llm on a free port (it prints "PORT <n>"); its base URL.
std::string start_fake_llm(const std::string& dir, pid_t* pid) {
  const std::string out = dir + "/fake-llm.out";
  *pid = spawn({KORCH_FAKE_LLM_BIN, "--port", "0", "--script", "kernel", "--latency-ms", "0"}, out);
  for (int i = 0; i < 500; ++i) {
    auto text = slurp(out);
    if (auto pos = text.find("PORT ");
        pos != std::string::npos && text.find('\n', pos) != std::string::npos)
      return "http://127.0.0.1:" + std::to_string(std::stoi(text.substr(pos + 5))) + "/v1";
    std::this_thread::sleep_for(std::chrono::milliseconds(10));
  }
  fmt::print(stderr, "korch-fake-llm did not start: {}\n", slurp(out));
  std::exit(1);
}

std::string campaign(const std::string& name, const std::string& store_line,
                     const std::string& base_url, int episodes, int inflight, double latency_s,
                     bool remote) {
  return fmt::format(
      "name = \"{}\"\nsamples_per_task = {}\nmax_turns = 3\nlog_level = \"warn\"\n"
      "max_inflight_episodes = {}\n{}\n"
      "[tasks]\nkernelbench_dir = \"{}/examples/tasks\"\nids = \"1-4\"\n"
      "[evaluator]\nmode = \"mock\"\nmock_latency_s = {}\nremote = {}\n"
      "[[models]]\nid = \"m1\"\nbase_url = \"{}\"\nmodel = \"fake-1\"\nconcurrency = {}\n",
      name, std::max(1, episodes / 4), inflight, store_line, KORCH_SOURCE_DIR, latency_s,
      remote ? "true" : "false", base_url, std::min(inflight, 256));
}

// Turns and evaluations of the store's only campaign, read through the Store API.
std::pair<std::int64_t, std::int64_t> turns_and_evaluations(const std::string& location) {
  korch::store::Options o;
  o.path = location;
  o.read_only = true;
  auto st = korch::store::Store::open(o);
  if (!st) {
    fmt::print(stderr, "{}\n", st.error().message);
    std::exit(1);
  }
  auto campaigns = (*st)->list_campaigns();
  std::int64_t turns = 0, evaluations = 0;
  for (const auto& c : *campaigns) {
    turns += (*st)->counts(c.id)->turns;
    evaluations += static_cast<std::int64_t>((*st)->list_evaluations(c.id)->size());
  }
  (*st)->close();
  return {turns, evaluations};
}

void backends(const Args& a) {
  char pattern[] = "/tmp/korch-bench-backends-XXXXXX";
  const std::string dir = ::mkdtemp(pattern);
  pid_t llm = 0;
  const std::string base_url = start_fake_llm(dir, &llm);
  struct Backend {
    const char* name;
    std::string store_line, location;
  };
  const Backend runs[] = {
      {"sqlite", "db_path = \"" + dir + "/bench.db\"", dir + "/bench.db"},
      {"postgres", "[store]\nurl = \"" + a.store + "\"", a.store},
  };
  const int episodes = std::max(1, a.backend_episodes / 4) * 4;
  fmt::print(
      "backends: the same campaign ({} episodes, korch-fake-llm, mock evaluator "
      "in-process, max_turns 3), `korch run` per backend\n",
      episodes);
  for (const auto& b : runs) {
    const std::string toml = dir + "/" + b.name + ".toml";
    std::ofstream(toml) << campaign("bench-backends", b.store_line, base_url, episodes, 64, 0,
                                    false);
    const auto t0 = Clock::now();
    int rc =
        wait_exit(spawn({KORCH_BIN, "run", toml, "--no-progress"}, dir + "/" + b.name + ".log"));
    const double wall = std::chrono::duration<double>(Clock::now() - t0).count();
    if (rc != 0) {
      fmt::print(stderr, "korch run on {} exited {}: {}\n", b.name, rc,
                 slurp(dir + "/" + b.name + ".log"));
      std::exit(1);
    }
    auto [turns, evaluations] = turns_and_evaluations(b.location);
    fmt::print(
        "backend {:8}: {} turns, {} evaluations in {:.2f} s: {:.1f} turns/s, {:.1f} "
        "evaluations/s\n",
        b.name, turns, evaluations, wall, static_cast<double>(turns) / wall,
        static_cast<double>(evaluations) / wall);
  }
  ::kill(llm, SIGTERM);
  wait_exit(llm);
}

void hold(const Args& a) {
  char pattern[] = "/tmp/korch-bench-hold-XXXXXX";
  const std::string dir = ::mkdtemp(pattern);
  pid_t llm = 0;
  const std::string base_url = start_fake_llm(dir, &llm);
  const int episodes = std::max(1, a.hold_episodes / 4) * 4;
  const std::string toml = dir + "/hold.toml";
  std::ofstream(toml) << campaign("bench-hold", "[store]\nurl = \"" + a.store + "\"", base_url,
                                  episodes, episodes, a.hold_latency_s, true);
  korch::config::EvaluatorConfig cfg;
  cfg.mode = korch::config::EvalMode::mock;
  const std::string version = remote::queue_version_for(cfg);
  const std::string latency = fmt::format("{}", a.hold_latency_s);
  // The coordinator first (it migrates the store), then the workers.
  const auto t0 = Clock::now();
  pid_t coordinator = spawn({KORCH_BIN, "run", toml, "--no-progress"}, dir + "/coordinator.log");
  std::vector<pid_t> workers;
  for (int w = 0; w < a.hold_workers; ++w) {
    workers.push_back(
        spawn({KORCH_BIN, "worker", "--store", a.store, "--evaluator", "mock", "--mock-latency-s",
               latency, "--slots", "1", "--id", fmt::format("hold-{}", w), "--log-level", "warn"},
              fmt::format("{}/worker-{}.log", dir, w)));
  }
  // Watch: connections, running episodes; probe claims (another version: never takes work).
  std::atomic<bool> done{false};
  int peak_connections = 0, peak_running = 0;
  std::vector<double> probe_ms;
  std::thread watcher([&] {
    std::unique_ptr<WorkQueue> probe;
    while (!done.load()) {
      if (!probe) {
        if (auto q = WorkQueue::open(a.store, false)) probe = std::move(*q);
      }
      if (probe) {
        auto s = Clock::now();
        (void)probe->claim("probe", "bench-probe", 60);
        probe_ms.push_back(std::chrono::duration<double, std::milli>(Clock::now() - s).count());
      }
      // Less this psql's own connection.
      auto c = psql(a.store,
                    "SELECT count(*) - 1 FROM pg_stat_activity WHERE backend_type = 'client "
                    "backend'");
      if (!c.empty()) peak_connections = std::max(peak_connections, std::stoi(c));
      auto r = psql(a.store, "SELECT count(*) FROM episodes WHERE status = 'running'");
      if (!r.empty() && r.find_first_not_of("0123456789") == std::string::npos)
        peak_running = std::max(peak_running, std::stoi(r));
      std::this_thread::sleep_for(std::chrono::milliseconds(250));
    }
  });
  const int rc = wait_exit(coordinator);
  const double wall = std::chrono::duration<double>(Clock::now() - t0).count();
  done.store(true);
  watcher.join();
  for (pid_t p : workers) ::kill(p, SIGTERM);
  int worker_failures = 0;
  for (pid_t p : workers) worker_failures += wait_exit(p) != 0;
  ::kill(llm, SIGTERM);
  wait_exit(llm);
  const std::string evaluations =
      psql(a.store, "SELECT count(*) FROM eval_queue WHERE campaign_id <> ''");
  const std::string not_done =
      psql(a.store, "SELECT count(*) FROM eval_queue WHERE state <> 'done'");
  const std::string counted = psql(
      a.store, "SELECT COALESCE(SUM(evaluations_done), 0) FROM workers WHERE id LIKE 'hold-%'");
  const std::string wait_p =
      psql(a.store,
           "SELECT round(percentile_cont(0.5) WITHIN GROUP (ORDER BY claimed_at - enqueued_at) * "
           "1000) || ' ' || round(percentile_cont(0.99) WITHIN GROUP (ORDER BY claimed_at - "
           "enqueued_at) * 1000) FROM eval_queue WHERE state = 'done' AND campaign_id <> ''");
  const bool held = rc == 0 && not_done == "0" && counted == evaluations && worker_failures == 0;
  fmt::print(
      "hold: {} workers, {} episodes (max_inflight_episodes {}), evaluations of {:.1f} s: {} "
      "(coordinator exit {}, {} workers exited non-zero); {} evaluations in {:.1f} s "
      "({:.1f}/s), {} not done, {} counted by workers; peak running episodes {}, peak client "
      "connections {}; probe claim() p50 {:.2f} ms, p99 {:.2f} ms ({} probes); queue wait "
      "(claimed_at - enqueued_at) p50/p99 {} ms\n",
      a.hold_workers, episodes, episodes, a.hold_latency_s, held ? "HELD" : "DID NOT HOLD", rc,
      worker_failures, evaluations, wall, evaluations.empty() ? 0.0 : std::stod(evaluations) / wall,
      not_done, counted, peak_running, peak_connections, percentile(probe_ms, 0.5),
      percentile(probe_ms, 0.99), probe_ms.size(), wait_p);
  if (!held) fmt::print("hold: logs in {}\n", dir);
}

double percentile(std::vector<double> v, double p) {
  if (v.empty()) return 0;
  std::sort(v.begin(), v.end());
  auto i = static_cast<std::size_t>(p * static_cast<double>(v.size() - 1));
  return v[i];
}

std::string request_json(const std::string& id) {
  korch::evaluator::Request r;
  r.request_id = id;
  r.task.id = "L1/1_Bench";
  r.task.name = "Bench";
  r.task.source = "class Model: pass\n";
  r.code = "class ModelNew: pass  # " + id + "\n";
  return remote::encode_request(r);
}

void fill(WorkQueue& q, const std::string& campaign, const std::string& version, int n) {
  for (int i = 0; i < n; ++i) {
    korch::store::QueueRow row;
    row.request_id = fmt::format("{}-{:06d}", campaign, i);
    row.campaign_id = campaign;
    row.evaluator_version = version;
    row.request_json = request_json(row.request_id);
    row.enqueued_at = i;
    if (!q.enqueue(row)) std::exit(1);
  }
}

void claim_latency(const Args& a) {
  const std::string version = "bench-claims";
  auto q = WorkQueue::open(a.store);
  if (!q) {
    fmt::print(stderr, "{}\n", q.error().message);
    std::exit(1);
  }
  fill(**q, "claims", version, a.rows);
  for (bool empty : {false, true}) {
    std::vector<std::vector<double>> lat(a.claimers);
    std::atomic<bool> stop{false};
    std::vector<std::thread> threads;
    const auto t0 = Clock::now();
    for (int c = 0; c < a.claimers; ++c) {
      threads.emplace_back([&, c] {
        auto mine = WorkQueue::open(a.store, false);
        if (!mine) return;
        const std::string id = "c" + std::to_string(c);
        for (int polls = 0; !stop.load(); ++polls) {
          auto s = Clock::now();
          auto got = (*mine)->claim(id, version, 600);
          lat[c].push_back(std::chrono::duration<double, std::milli>(Clock::now() - s).count());
          if (!got) break;
          if (!*got) {
            if (!empty || polls >= 200) break;  // polling: 200 empty claims each
            continue;
          }
          (void)(*mine)->complete(**got, id, "{}");
        }
      });
    }
    for (auto& t : threads) t.join();
    const double wall = std::chrono::duration<double>(Clock::now() - t0).count();
    std::vector<double> all;
    for (auto& v : lat) all.insert(all.end(), v.begin(), v.end());
    fmt::print(
        "claim latency, {} claimers, {}: {} claims in {:.1f} s ({:.0f}/s); p50 {:.2f} ms, "
        "p99 {:.2f} ms, max {:.2f} ms\n",
        a.claimers, empty ? "polling an empty queue" : "draining a full queue", all.size(), wall,
        static_cast<double>(all.size()) / wall, percentile(all, 0.5), percentile(all, 0.99),
        percentile(all, 1.0));
  }
}

void scaling(const Args& a, const char* korch_bin) {
  korch::config::EvaluatorConfig cfg;
  cfg.mode = korch::config::EvalMode::mock;
  const std::string version = remote::queue_version_for(cfg);
  auto q = WorkQueue::open(a.store);
  if (!q) std::exit(1);
  double base = 0;
  for (int k : a.scaling) {
    const std::string campaign = "scale" + std::to_string(k);
    const int n = k * a.per_worker;
    fill(**q, campaign, version, n);
    std::vector<pid_t> workers;
    const auto t0 = Clock::now();
    for (int w = 0; w < k; ++w) {
      pid_t pid = ::fork();
      if (pid == 0) {
        std::string latency = fmt::format("{}", a.latency_s);
        std::string id = fmt::format("bench-{}-{}", k, w);
        ::execl(korch_bin, korch_bin, "worker", "--store", a.store.c_str(), "--evaluator", "mock",
                "--mock-latency-s", latency.c_str(), "--slots", "1", "--id", id.c_str(),
                "--log-level", "warn", static_cast<char*>(nullptr));
        _exit(127);
      }
      workers.push_back(pid);
    }
    for (;;) {
      auto c = (*q)->counts(campaign);
      if (c && c->done == n) break;
      std::this_thread::sleep_for(std::chrono::milliseconds(20));
    }
    // From the first claim to the last result, as the rows record them.
    auto rows = (*q)->list(campaign);
    double first = 1e300, last = 0;
    for (auto& r : *rows) {
      first = std::min(first, r.claimed_at);
      last = std::max(last, r.finished_at);
    }
    const double span = last - first;
    const double rate = n / span;
    if (base == 0) base = rate / k;
    fmt::print(
        "scaling: {} worker(s), {} evaluations of {:.1f} s: {:.1f} s, {:.2f} evaluations/s "
        "({:.2f}x one worker; ideal {}x); start-up to done {:.1f} s\n",
        k, n, a.latency_s, span, rate, rate / base, k,
        std::chrono::duration<double>(Clock::now() - t0).count());
    for (pid_t p : workers) ::kill(p, SIGTERM);
    for (pid_t p : workers) ::waitpid(p, nullptr, 0);
  }
}

}  // namespace

int main(int argc, char** argv) {
  Args a;
  for (int i = 1; i + 1 < argc; i += 2) {
    std::string k = argv[i], v = argv[i + 1];
    if (k == "--store")
      a.store = v;
    else if (k == "--claimers")
      a.claimers = std::stoi(v);
    else if (k == "--rows")
      a.rows = std::stoi(v);
    else if (k == "--per-worker")
      a.per_worker = std::stoi(v);
    else if (k == "--latency-s")
      a.latency_s = std::stod(v);
    else if (k == "--backends")
      a.backend_episodes = std::stoi(v);
    else if (k == "--hold") {
      auto comma = v.find(',');
      a.hold_workers = std::stoi(v.substr(0, comma));
      if (comma != std::string::npos) a.hold_episodes = std::stoi(v.substr(comma + 1));
    } else if (k == "--hold-latency-s")
      a.hold_latency_s = std::stod(v);
    else if (k == "--only")
      a.only = v;
    else if (k == "--scaling") {
      a.scaling.clear();
      for (std::size_t p = 0; p < v.size();) {
        auto e = v.find(',', p);
        a.scaling.push_back(std::stoi(v.substr(p, e - p)));
        p = e == std::string::npos ? v.size() : e + 1;
      }
    } else {
      fmt::print(stderr, "unknown flag {}\n", k);
      return 2;
    }
  }
  // Each part its own database when the server is ours (--store: the one given).
  const bool own = a.store.empty();
  auto fresh = [&] {
    if (!own) return;
    auto& pg = korch::testing::PostgresServer::shared();
    if (!pg.ok()) {
      fmt::print(stderr, "no PostgreSQL: {}\n", pg.error());
      std::exit(1);
    }
    a.store = pg.fresh_database();
  };
  if (a.only.empty()) {
    fresh();
    claim_latency(a);
    if (!a.scaling.empty() && a.scaling[0] > 0) scaling(a, KORCH_BIN);
  }
  if (a.only.empty() || a.only == "backends") {
    fresh();
    backends(a);
  }
  if (a.only.empty() || a.only == "hold") {
    fresh();
    hold(a);
  }
  return 0;
}
