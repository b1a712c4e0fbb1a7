// korch-bench-llm: throughput, threads, CPU and client overhead of the curl
// ChatClient with thousands of concurrent slow requests (DESIGN §4).
//   korch-bench-llm [--concurrency 5000] [--latency-ms 1000] [--duration-s 10]
//                   [--warmup-s 3] [--host localhost] [--peer PATH] [--port N]
// Starts korch-bench-peer (next to this executable unless --peer/--port say
// otherwise) with the given latency, reaches it through a host name (so the
// resolver path is exercised), keeps `concurrency` requests in flight
// (closed loop: each completion submits the next), and reports for the
// measurement window: requests/s, the most threads this process had
// (/proc/self/status), CPU time per request (getrusage), and client overhead
// percentiles = client latency minus the peer's hold time (x-request-id:
// peer-hold-<us>).
#include <signal.h>
#include <sys/resource.h>
#include <sys/wait.h>
#include <unistd.h>

#include <algorithm>
#include <atomic>
#include <chrono>
#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <filesystem>
#include <fstream>
#include <mutex>
#include <string>
#include <thread>
#include <vector>

#include <fmt/format.h>

#include "llm_clients/client.hpp"
#include "util/allocator/allocator.hpp"
#include "util/log.hpp"

namespace {

using Clock = std::chrono::steady_clock;

int thread_count() {
  std::ifstream in("/proc/self/status");
  std::string line;
  while (std::getline(in, line)) {
    if (line.rfind("Threads:", 0) == 0) return std::atoi(line.c_str() + 8);
  }
  return -1;
}

double cpu_seconds() {
  rusage u{};
  getrusage(RUSAGE_SELF, &u);
  return static_cast<double>(u.ru_utime.tv_sec + u.ru_stime.tv_sec) +
         static_cast<double>(u.ru_utime.tv_usec + u.ru_stime.tv_usec) / 1e6;
}

double percentile(std::vector<double>& v, double p) {
  if (v.empty()) return 0;
  const auto k = static_cast<std::size_t>(p * static_cast<double>(v.size() - 1));
  std::nth_element(v.begin(), v.begin() + static_cast<std::ptrdiff_t>(k), v.end());
  return v[k];
}

struct Peer {
  pid_t pid = -1;
  int port = 0;
};

Peer start_peer(const std::string& path, int latency_ms) {
  int fds[2];
  if (pipe(fds) != 0) return {};
  Peer peer;
  peer.pid = fork();
  if (peer.pid == 0) {
    dup2(fds[1], STDOUT_FILENO);
    close(fds[0]);
    close(fds[1]);
    const std::string latency = std::to_string(latency_ms);
    execl(path.c_str(), path.c_str(), "--port", "0", "--latency-ms", latency.c_str(),
          static_cast<char*>(nullptr));
    _exit(127);
  }
  close(fds[1]);
  FILE* out = fdopen(fds[0], "r");
  char line[128] = {};
  if (out != nullptr && std::fgets(line, sizeof line, out) != nullptr)
    std::sscanf(line, "PORT %d", &peer.port);
  if (out != nullptr) std::fclose(out);
  return peer;
}

}  // namespace

int main(int argc, char** argv) {
  int concurrency = 5000;
  int latency_ms = 1000;
  double duration_s = 10;
  double warmup_s = 3;
  std::string host = "localhost";
  std::string peer_path;
  int port = 0;
  for (int i = 1; i + 1 < argc; i += 2) {
    std::string_view a = argv[i];
    if (a == "--concurrency")
      concurrency = std::atoi(argv[i + 1]);
    else if (a == "--latency-ms")
      latency_ms = std::atoi(argv[i + 1]);
    else if (a == "--duration-s")
      duration_s = std::atof(argv[i + 1]);
    else if (a == "--warmup-s")
      warmup_s = std::atof(argv[i + 1]);
    else if (a == "--host")
      host = argv[i + 1];
    else if (a == "--peer")
      peer_path = argv[i + 1];
    else if (a == "--port")
      port = std::atoi(argv[i + 1]);
    else {
      std::fprintf(stderr, "korch-bench-llm: unknown flag %s\n", argv[i]);
      return 2;
    }
  }
  spdlog::set_level(spdlog::level::warn);
  rlimit lim{};
  if (getrlimit(RLIMIT_NOFILE, &lim) == 0) {
    lim.rlim_cur = lim.rlim_max;
    setrlimit(RLIMIT_NOFILE, &lim);
  }
  if (static_cast<rlim_t>(concurrency) + 64 > lim.rlim_cur) {
    std::fprintf(stderr, "korch-bench-llm: open-file limit %llu is too low for %d connections\n",
                 static_cast<unsigned long long>(lim.rlim_cur), concurrency);
    return 1;
  }

  Peer peer;
  if (port == 0) {
    if (peer_path.empty()) {
      peer_path =
          (std::filesystem::read_symlink("/proc/self/exe").parent_path() / "korch-bench-peer")
              .string();
    }
    peer = start_peer(peer_path, latency_ms);
    if (peer.port == 0) {
      std::fprintf(stderr, "korch-bench-llm: could not start %s\n", peer_path.c_str());
      return 1;
    }
    port = peer.port;
  }

  korch::config::ModelConfig model;
  model.id = "bench";
  model.base_url = fmt::format("http://{}:{}/v1", host, port);
  model.model = "peer";
  model.concurrency = concurrency;
  model.max_attempts = 3;
  model.retry_cap_s = 0.1;
  model.first_byte_timeout_s = 30;
  model.total_timeout_s = 60;
  auto client = korch::llm::make_curl_client();
  if (auto r = client->add_model(model); !r) {
    std::fprintf(stderr, "korch-bench-llm: %s\n", r.error().message.c_str());
    return 1;
  }

  const auto t0 = Clock::now();
  const auto measure_from =
      t0 + std::chrono::duration_cast<Clock::duration>(std::chrono::duration<double>(warmup_s));
  const auto measure_to = measure_from + std::chrono::duration_cast<Clock::duration>(
                                             std::chrono::duration<double>(duration_s));
  std::atomic<bool> stopping{false};
  std::atomic<std::int64_t> next_id{0};
  std::atomic<std::int64_t> failures{0};
  std::atomic<std::int64_t> measured{0};
  std::vector<double> overheads_ms;  // touched only by the event-loop thread
  std::vector<double> queue_ms;      // submit() to the start of the last attempt
  overheads_ms.reserve(
      static_cast<std::size_t>(concurrency * (duration_s + 2) * 1000.0 / std::max(1, latency_ms)));

  std::function<void()> submit_one;
  submit_one = [&] {
    const std::int64_t id = next_id.fetch_add(1);
    client->submit({"bench", fmt::format("bench-{}", id), {{"user", "Write a fast ReLU kernel."}}},
                   [&](korch::llm::ChatResult r) {
                     const auto now = Clock::now();
                     if (r.outcome != korch::llm::Outcome::ok) {
                       if (r.outcome != korch::llm::Outcome::cancelled) failures.fetch_add(1);
                     } else if (now >= measure_from && now < measure_to) {
                       measured.fetch_add(1);
                       double held_s = 0;
                       if (r.provider_request_id.rfind("peer-hold-", 0) == 0) {
                         held_s = std::atof(r.provider_request_id.c_str() + 10) / 1e6;
                       }
                       overheads_ms.push_back((r.latency_s - held_s) * 1000.0);
                       const double attempt_s =
                           r.attempts.empty() ? 0.0 : r.attempts.back().latency_s;
                       queue_ms.push_back((r.latency_s - attempt_s) * 1000.0);
                     }
                     if (!stopping.load()) submit_one();
                   });
  };

  // Ramp up over one latency period so the load is smooth, not in waves.
  const double ramp_s = latency_ms / 1000.0;
  for (int i = 0; i < concurrency; ++i) {
    const auto due = t0 + std::chrono::duration_cast<Clock::duration>(
                              std::chrono::duration<double>(ramp_s * i / concurrency));
    std::this_thread::sleep_until(due);
    submit_one();
  }

  int max_threads = thread_count();
  double cpu_start = -1;
  double cpu_end = 0;
  while (Clock::now() < measure_to) {
    std::this_thread::sleep_for(std::chrono::milliseconds(100));
    max_threads = std::max(max_threads, thread_count());
    if (cpu_start < 0 && Clock::now() >= measure_from) cpu_start = cpu_seconds();
  }
  cpu_end = cpu_seconds();
  const auto stats_at_end = client->stats();
  stopping = true;
  client->shutdown();  // in-flight calls are cancelled; overheads_ms is final now
  if (peer.pid > 0) {
    kill(peer.pid, SIGTERM);
    waitpid(peer.pid, nullptr, 0);
  }

  const double n = static_cast<double>(measured.load());
  std::vector<double> v = overheads_ms;
  std::printf(
      "korch-bench-llm: %d concurrent requests to %s, server latency %d ms, window %.1f s after "
      "%.1f s warm-up; allocator %s\n",
      concurrency, model.base_url.c_str(), latency_ms, duration_s, warmup_s,
      korch::allocator_name().c_str());
  std::printf("  throughput        %.0f req/s (%lld completed in window)\n", n / duration_s,
              static_cast<long long>(measured.load()));
  std::printf("  threads (max)     %d\n", max_threads);
  std::printf("  cpu per request   %.1f us (user+sys, whole process)\n",
              n > 0 ? (cpu_end - cpu_start) / n * 1e6 : 0.0);
  std::printf("  client overhead   p50 %.2f ms, p99 %.2f ms, max %.2f ms\n", percentile(v, 0.50),
              percentile(v, 0.99), v.empty() ? 0.0 : *std::max_element(v.begin(), v.end()));
  std::printf("  of which queued   p50 %.2f ms, p99 %.2f ms (submit to attempt start)\n",
              percentile(queue_ms, 0.50), percentile(queue_ms, 0.99));
  std::printf(
      "  failures %lld, http attempts %lld, retries %lld, resolver starts %lld, limit changes "
      "%lld\n",
      static_cast<long long>(failures.load()), static_cast<long long>(stats_at_end.http_attempts),
      static_cast<long long>(stats_at_end.retries),
      static_cast<long long>(stats_at_end.resolver_starts),
      static_cast<long long>(stats_at_end.limit_changes));
  return 0;
}
