// korch-bench-store: how many durable turns per second the store commits
// (synchronous=FULL, group commit) and how fast a campaign resumes.
//
//   korch-bench-store [--db PATH] [--quick] [--only-producers N] [--seconds S]
//
// --db PATH   database file to use; it is deleted and recreated for every
//             scenario (default: a fresh temp dir, removed at the end).
// --quick     shorter runs and a 1,000-episode resume (for CI smoke tests).
// --only-producers N  run only the group-commit scenario with N producers
//             (for profiling: `perf record -g -- korch-bench-store --only-producers 1000`).
// --seconds S length of each scenario (default 5, or 1.5 with --quick).
// --synchronous MODE  for the turn scenarios (default FULL); OFF shows what
//             the writer does when the disk is not the limit.
// --verbose   debug logging: the writer's counters at each close (commits,
//             batches, WAL frames written, the waits for a checkpoint and their time).
//
// A "turn" is what the engine commits for one model reply and its evaluation
// (agent/episode.cpp's on_llm_result and on_eval_result, in one batch as when
// the evaluation is instant or cached): the finished LlmCallRow (no text: the
// reply is stored once, as the assistant message), the assistant message
// (~6 KB), the EvaluationRow with its report (~1.5 KB), the TurnRow with the
// code (~5 KB, a copy of the reply's code block), the feedback message
// (~2 KB), the next turn's intent LlmCallRow and an EpisodeUpdate. Each row
// is reported with the bytes the process wrote to disk per turn
// (/proc/self/io write_bytes: WAL frames, checkpoints).
// Producers are episodes: each waits for its turn's commit before sending the
// next, as the write-ahead rule demands. A few driver threads build and submit
// the batches for all episodes, like the campaign scheduler.
#include <unistd.h>

#include <algorithm>
#include <atomic>
#include <chrono>
#include <condition_variable>
#include <cstdio>
#include <cstdlib>
#include <deque>
#include <filesystem>
#include <mutex>
#include <random>
#include <string>
#include <thread>
#include <type_traits>
#include <utility>
#include <variant>
#include <vector>

#include "store/store.hpp"
#include "tools/bench/store_bench.hpp"
#include "util/allocator/allocator.hpp"
#include "util/log.hpp"

namespace {

namespace fs = std::filesystem;
using korch::store::Options;
using korch::store::Store;
using korch::store::WriteBatch;

constexpr std::size_t k_code_bytes = 5 * 1024;
constexpr std::size_t k_reply_bytes = 6 * 1024;
constexpr std::size_t k_user_bytes = 2 * 1024;
constexpr std::size_t k_report_bytes = 1536;
constexpr int k_max_driver_threads = 4;
constexpr const char* k_campaign = "c-bench";

using korch::bench::disk_write_bytes;
using korch::bench::now_s;
using korch::bench::text;

struct Payloads {
  std::string reply = text(k_reply_bytes, 2);
  std::string code = reply.substr(512, k_code_bytes);  // the reply's code block
  std::string user = text(k_user_bytes, 3);
  std::string report = text(k_report_bytes, 4);
};

const Payloads& payloads() {
  static const Payloads p;
  return p;
}

std::string episode_id(int i) { return "e-" + std::to_string(i); }

std::unique_ptr<Store> open_fresh(const std::string& path, Options options) {
  for (const char* suffix : {"", "-wal", "-shm"}) fs::remove(path + suffix);
  options.path = path;
  auto store = Store::open(options);
  if (!store) {
    std::fprintf(stderr, "korch-bench-store: %s\n", store.error().message.c_str());
    std::exit(1);
  }
  return std::move(*store);
}

void check(const korch::Result<korch::store::CommitInfo>& r) {
  if (!r) {
    std::fprintf(stderr, "korch-bench-store: commit failed: %s\n", r.error().message.c_str());
    std::exit(1);
  }
}

// Campaign, task and `episodes` episodes, committed in chunks.
void seed(Store& store, int episodes) {
  WriteBatch b;
  b.put(korch::store::CampaignRow{
      .id = k_campaign, .name = "bench", .config_json = "{}", .created_at = 1});
  b.put(korch::store::TaskRow{.campaign_id = k_campaign,
                              .task_id = "L1/1",
                              .level = 1,
                              .number = 1,
                              .name = "matmul",
                              .path = "1_matmul.py",
                              .source = "class Model: ..."});
  for (int i = 0; i < episodes; ++i) {
    b.put(korch::store::EpisodeRow{
        korch::store::EpisodeSummary{.id = episode_id(i),
                                     .campaign_id = k_campaign,
                                     .task_id = "L1/1",
                                     .model_id = "model-a",
                                     .sample_index = i,
                                     .status = korch::store::EpisodeStatus::running,
                                     .created_at = static_cast<double>(i)},
        payloads().user});
    if (b.size() >= 2000) check(store.commit_sync(std::exchange(b, WriteBatch{})));
  }
  check(store.commit_sync(std::move(b)));
}

// The rows one episode commits for one turn (see the header comment).
WriteBatch turn_batch(const std::string& ep, int turn) {
  const auto& p = payloads();
  WriteBatch b;
  auto llm_id = [&](int t) { return "llm|" + ep + "|" + std::to_string(t) + "|model-a"; };
  std::string eval_id = "check|" + ep + "|" + std::to_string(turn);
  b.put(korch::store::LlmCallRow{.request_id = llm_id(turn),
                                 .episode_id = ep,
                                 .turn = turn,
                                 .model_id = "model-a",
                                 .state = korch::store::CallState::done,
                                 .started_at = 1e9,
                                 .finished_at = 1e9 + 21.5,
                                 .finish_reason = "stop",
                                 .prompt_tokens = 12000,
                                 .completion_tokens = 1800,
                                 .cost_usd = 0.02,
                                 .latency_s = 21.5,
                                 .http_attempts = 1,
                                 .attempts_json = R"([{"status":200,"latency_s":21.5,"error":""}])",
                                 .sends = 1});
  b.put(korch::store::MessageRow{.episode_id = ep,
                                 .epoch = 0,
                                 .seq = 2 * turn,
                                 .role = korch::store::Role::assistant,
                                 .kind = korch::store::MessageKind::reply,
                                 .turn = turn,
                                 .content = p.reply});
  b.put(korch::store::EvaluationRow{.request_id = eval_id,
                                    .episode_id = ep,
                                    .kind = "check",
                                    .code_sha = "0123456789abcdef01234567",
                                    .state = korch::store::EvalState::done,
                                    .attempts = 1,
                                    .verdict = "correct",
                                    .report_json = p.report,
                                    .evaluator_version = "v1",
                                    .created_at = 1e9,
                                    .finished_at = 1e9 + 2});
  b.put(korch::store::TurnRow{.episode_id = ep,
                              .turn = turn,
                              .model_id = "model-a",
                              .llm_request_id = llm_id(turn),
                              .action = "check",
                              .parse_status = "code",
                              .code = p.code,
                              .code_sha = "0123456789abcdef01234567",
                              .eval_request_id = eval_id,
                              .eval_status = "correct",
                              .finish_reason = "stop",
                              .prompt_tokens = 12000,
                              .completion_tokens = 1800,
                              .llm_latency_s = 21.5,
                              .at = 1e9});
  b.put(korch::store::MessageRow{.episode_id = ep,
                                 .epoch = 0,
                                 .seq = 2 * turn + 1,
                                 .role = korch::store::Role::user,
                                 .kind = korch::store::MessageKind::feedback,
                                 .turn = turn,
                                 .content = p.user});
  b.put(korch::store::LlmCallRow{.request_id = llm_id(turn + 1),
                                 .episode_id = ep,
                                 .turn = turn + 1,
                                 .model_id = "model-a",
                                 .state = korch::store::CallState::started,
                                 .started_at = 1e9 + 23,
                                 .sends = 1});
  b.update(
      korch::store::EpisodeUpdate{.id = ep, .active_s = 21.5 * turn, .tokens_used = 13800 * turn});
  return b;
}

struct RunResult {
  std::int64_t commits = 0;
  std::int64_t disk_bytes = -1;  // written to storage during the run
  double seconds = 0;
  double p50_ms = 0;
  double p99_ms = 0;
};

double percentile(std::vector<double>& v, double q) {
  if (v.empty()) return 0;
  auto k = static_cast<std::size_t>(q * static_cast<double>(v.size() - 1));
  std::nth_element(v.begin(), v.begin() + static_cast<std::ptrdiff_t>(k), v.end());
  return v[k];
}

// `producers` episodes each commit turn after turn for `duration_s`, waiting
// for each commit before building the next. `make` builds a batch.
template <typename Make>
RunResult run_producers(Store& store, int producers, double duration_s, Make make) {
  std::mutex mutex;
  std::condition_variable cv;       // drivers: an episode is ready
  std::condition_variable done_cv;  // main: the run has drained
  std::deque<int> ready;            // episodes whose last commit has returned
  std::vector<int> next_turn(static_cast<std::size_t>(producers), 1);
  std::vector<double> latencies;  // appended by callbacks (writer thread)
  latencies.reserve(1 << 20);
  int in_flight = 0;
  bool stopping = false;
  for (int i = 0; i < producers; ++i) ready.push_back(i);

  std::int64_t disk0 = disk_write_bytes();
  double start = now_s();
  double deadline = start + duration_s;
  int drivers = std::min(producers, k_max_driver_threads);
  std::vector<std::thread> threads;
  for (int d = 0; d < drivers; ++d) {
    threads.emplace_back([&] {
      for (;;) {
        int ep;
        {
          std::unique_lock lock(mutex);
          cv.wait(lock, [&] { return !ready.empty() || stopping; });
          if (stopping) return;
          ep = ready.front();
          ready.pop_front();
          ++in_flight;
        }
        int turn = next_turn[static_cast<std::size_t>(ep)]++;
        WriteBatch batch = make(ep, turn);
        double t0 = now_s();
        store.commit(std::move(batch), [&, ep, t0](korch::Result<korch::store::CommitInfo> r) {
          check(r);
          double t1 = now_s();
          std::lock_guard lock(mutex);
          latencies.push_back((t1 - t0) * 1000);
          --in_flight;
          if (t1 >= deadline) stopping = true;
          if (!stopping) ready.push_back(ep);
          if (stopping) {
            cv.notify_all();
            done_cv.notify_all();
          } else {
            cv.notify_one();
          }
        });
      }
    });
  }
  {
    std::unique_lock lock(mutex);
    done_cv.wait(lock, [&] { return stopping && in_flight == 0; });
  }
  double end = now_s();
  for (auto& t : threads) t.join();
  RunResult r;
  r.commits = static_cast<std::int64_t>(latencies.size());
  if (disk0 >= 0) r.disk_bytes = disk_write_bytes() - disk0;
  r.seconds = end - start;
  r.p50_ms = percentile(latencies, 0.50);
  r.p99_ms = percentile(latencies, 0.99);
  return r;
}

void print_row(const char* scenario, const RunResult& r) {
  double kb_per_commit =
      r.disk_bytes < 0 || r.commits == 0
          ? -1
          : static_cast<double>(r.disk_bytes) / 1024.0 / static_cast<double>(r.commits);
  std::printf("%-50s %9lld %7.2f %11.0f %9.2f %9.2f %9.1f\n", scenario,
              static_cast<long long>(r.commits), r.seconds,
              static_cast<double>(r.commits) / r.seconds, r.p50_ms, r.p99_ms, kb_per_commit);
  std::fflush(stdout);
}

}  // namespace

int main(int argc, char** argv) {
  std::string db;
  bool quick = false;
  int only_producers = 0;
  double seconds = 0;
  std::string synchronous = "FULL";
  for (int i = 1; i < argc; ++i) {
    std::string arg = argv[i];
    if (arg == "--db" && i + 1 < argc) {
      db = argv[++i];
    } else if (arg == "--quick") {
      quick = true;
    } else if (arg == "--only-producers" && i + 1 < argc) {
      only_producers = std::atoi(argv[++i]);
    } else if (arg == "--seconds" && i + 1 < argc) {
      seconds = std::atof(argv[++i]);
    } else if (arg == "--synchronous" && i + 1 < argc) {
      synchronous = argv[++i];
    } else if (arg == "--verbose") {
      korch::log::init("debug");
    } else {
      std::fprintf(
          stderr,
          "usage: korch-bench-store [--db PATH] [--quick] [--only-producers N] [--seconds S] "
          "[--synchronous MODE] [--verbose]\n");
      return 2;
    }
  }
  fs::path temp_dir;
  if (db.empty()) {
    std::string tmpl = (fs::temp_directory_path() / "korch-bench-store-XXXXXX").string();
    if (::mkdtemp(tmpl.data()) == nullptr) {
      std::perror("mkdtemp");
      return 1;
    }
    temp_dir = tmpl;
    db = (temp_dir / "korch.db").string();
  }
  const double duration_s = seconds > 0 ? seconds : (quick ? 1.5 : 5.0);
  const int resume_episodes = quick ? 1000 : 10000;
  constexpr int k_resume_turns = 3;

  std::printf(
      "korch-bench-store: db %s, synchronous=%s unless noted, %.1f s per scenario, allocator %s\n",
      db.c_str(), synchronous.c_str(), duration_s, korch::allocator_name().c_str());
  std::printf(
      "turn = LlmCallRow done + assistant msg (6 KB) + EvaluationRow (1.5 KB report) + TurnRow "
      "(5 KB code) + user msg (2 KB) + next LlmCallRow intent + EpisodeUpdate\n"
      "disk KB = bytes written to storage per commit (WAL, checkpoints)\n\n");
  std::printf("%-50s %9s %7s %11s %9s %9s %9s\n", "scenario", "commits", "secs", "commits/s",
              "p50 ms", "p99 ms", "disk KB");

  std::vector<int> producer_counts = {1, 64, 1000};
  if (only_producers > 0) producer_counts = {only_producers};
  for (int producers : producer_counts) {
    auto store = open_fresh(db, Options{.synchronous = synchronous});
    seed(*store, producers);
    auto r = run_producers(*store, producers, duration_s,
                           [](int ep, int turn) { return turn_batch(episode_id(ep), turn); });
    std::string label = "turns, group commit, " + std::to_string(producers) + " producer" +
                        (producers == 1 ? "" : "s");
    print_row(label.c_str(), r);
  }
  if (only_producers > 0) {
    if (!temp_dir.empty()) fs::remove_all(temp_dir);
    return 0;
  }
  {
    auto store = open_fresh(db, Options{.synchronous = synchronous, .max_batches_per_txn = 1});
    seed(*store, 64);
    auto r = run_producers(*store, 64, duration_s,
                           [](int ep, int turn) { return turn_batch(episode_id(ep), turn); });
    print_row("turns, no grouping (1 batch/txn), 64 producers", r);
  }
  {
    auto store = open_fresh(db, Options{.synchronous = synchronous, .max_batches_per_txn = 1});
    seed(*store, 1);
    auto r = run_producers(*store, 1, duration_s, [](int, int turn) {
      WriteBatch b;
      b.put(korch::store::EventRow{
          .episode_id = episode_id(0), .turn = turn, .kind = "bench", .at = 1});
      return b;
    });
    print_row("single-row commits, no grouping, 1 producer", r);
  }
  {
    auto store = open_fresh(db, Options{.synchronous = synchronous, .max_batches_per_txn = 1});
    seed(*store, 64);
    auto r = run_producers(*store, 64, duration_s, [](int ep, int turn) {
      WriteBatch b;
      b.put(korch::store::EventRow{
          .episode_id = episode_id(ep), .turn = turn, .kind = "bench", .at = 1});
      return b;
    });
    print_row("single-row commits, no grouping, 64 producers", r);
  }

  // Resume: N episodes with 3 turns each (plus the task prompt message), then a cold open and
  // load_unfinished.
  {
    auto store = open_fresh(db, Options{.synchronous = "OFF"});
    seed(*store, resume_episodes);
    WriteBatch b;
    for (int i = 0; i < resume_episodes; ++i) {
      std::string ep = episode_id(i);
      b.put(korch::store::MessageRow{.episode_id = ep,
                                     .epoch = 0,
                                     .seq = 1,
                                     .role = korch::store::Role::user,
                                     .kind = korch::store::MessageKind::task,
                                     .content = payloads().user});
      for (int t = 1; t <= k_resume_turns; ++t) {
        WriteBatch one = turn_batch(ep, t);
        for (const auto& op : one.ops())
          std::visit(
              [&](const auto& row) {
                using T = std::decay_t<decltype(row)>;
                if constexpr (std::is_same_v<T, korch::store::EpisodeUpdate>) {
                  b.update(row);
                } else {
                  b.put(row);
                }
              },
              op);
      }
      if (b.size() >= 20000) check(store->commit_sync(std::exchange(b, WriteBatch{})));
    }
    check(store->commit_sync(std::move(b)));
    store->close();
    store.reset();

    auto reopened = Store::open(Options{.path = db});
    if (!reopened) {
      std::fprintf(stderr, "korch-bench-store: %s\n", reopened.error().message.c_str());
      return 1;
    }
    for (int pass = 1; pass <= 2; ++pass) {
      double t0 = now_s();
      auto snaps = (*reopened)->load_unfinished(k_campaign);
      double secs = now_s() - t0;
      if (!snaps) {
        std::fprintf(stderr, "korch-bench-store: %s\n", snaps.error().message.c_str());
        return 1;
      }
      std::size_t bytes = 0, turns = 0, messages = 0;
      for (const auto& s : *snaps) {
        turns += s.turns.size();
        messages += s.messages.size();
        for (const auto& m : s.messages) bytes += m.content.size();
        for (const auto& t : s.turns) bytes += t.code.size();
        for (const auto& l : s.llm_calls) bytes += l.content.size();
      }
      std::printf(
          "\nload_unfinished pass %d: %zu episodes, %zu turns, %zu messages, %.0f MB of text in "
          "%.2f s",
          pass, snaps->size(), turns, messages, static_cast<double>(bytes) / 1e6, secs);
    }
    std::printf("\n");
    std::error_code ec;
    std::printf("database size: %.0f MB\n", static_cast<double>(fs::file_size(db, ec)) / 1e6);
  }

  if (!temp_dir.empty()) {
    std::error_code ec;
    fs::remove_all(temp_dir, ec);
  }
  return 0;
}
