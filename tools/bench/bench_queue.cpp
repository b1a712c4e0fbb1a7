// korch-bench-queue: the evaluation work queue on PostgreSQL (store/work_queue.hpp).
//
//   korch-bench-queue [--store URL] [--claimers 64] [--rows 20000] [--scaling 1,2,4,8]
//                     [--per-worker 16] [--latency-s 1]
//
// 1. Claim latency: `claimers` threads, each with its own connections, claim
//    and complete as fast as they can (every claim races the others through
//    FOR UPDATE SKIP LOCKED); then the same threads poll an empty queue.
//    Prints p50/p99/max of one claim() call.
// 2. Scaling: for each worker count k, k real `korch worker` processes (mock
//    evaluator, latency-s per evaluation, one slot each) run k * per-worker
//    queued evaluations; evaluations/s from the first claim to the last result.
// Without --store a throwaway server is started (scripts/pg-test-server.sh).
#include <fmt/format.h>
#include <signal.h>
#include <sys/wait.h>
#include <unistd.h>

#include <algorithm>
#include <atomic>
#include <chrono>
#include <cstdlib>
#include <string>
#include <thread>
#include <vector>

#include "daemon/queue_evaluator.hpp"
#include "store/work_queue.hpp"
#include "tests/support/postgres_server.hpp"

namespace {

using Clock = std::chrono::steady_clock;
using korch::store::WorkQueue;

struct Args {
  std::string store;
  int claimers = 64;
  int rows = 20000;
  std::vector<int> scaling = {1, 2, 4, 8};
  int per_worker = 16;
  double latency_s = 1;
};

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
  return korch::daemon::encode_request(r);
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
          (void)(*mine)->complete((*got)->request_id, (*got)->lease_token, id, "{}");
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
  const std::string version = korch::daemon::queue_version_for(cfg);
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
  if (a.store.empty()) {
    auto& pg = korch::testing::PostgresServer::shared();
    if (!pg.ok()) {
      fmt::print(stderr, "no PostgreSQL: {}\n", pg.error());
      return 1;
    }
    a.store = pg.fresh_database();
  }
  claim_latency(a);
  if (!a.scaling.empty() && a.scaling[0] > 0) scaling(a, KORCH_BIN);
  return 0;
}
