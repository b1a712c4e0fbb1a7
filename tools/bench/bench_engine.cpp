// korch-bench-engine: end-to-end throughput of the campaign engine (store +
// LLM client + episode state machine + mock evaluator) against
// korch-bench-peer, an event-driven fake LLM in its own process.
//
//   korch-bench-engine [--kernelbench DIR] [--quick] [--skip-slow] [--keep DIR] [--only-episodes N]
//                      [--only-slow] [--slow-episodes N]
//
// --only-episodes N runs scenario 1 with N episodes only (for profiling).
// --only-slow runs scenario 2 only, in a process that has run nothing before
// it: an allocator that keeps freed memory for reuse (tcmalloc) would
// otherwise carry scenario 1's heap into scenario 2's "RSS before".
// --slow-episodes N puts N episodes in flight in scenario 2 (default 1,000):
// two runs with --only-slow give the RSS per added episode without the
// process's fixed costs (page caches, thread stacks, the allocator's own).
//
// Scenarios (DESIGN/issue 2 targets in brackets):
//   1. durable turns/s and p99 orchestration overhead per turn at 1, 100 and
//      1,000 concurrent episodes, zero-latency peer, ~6 KB replies [>= 5,000
//      turns/s at 1,000 episodes]
//   2. threads and peak RSS with 1,000 episodes in flight against a peer with
//      5 s latency [<= 64 threads; RSS per episode <= conversation + 64 KiB]
//   3. time to resume 10,000 unfinished episodes [<= 5 s]
// Overhead per turn = time from a reply's arrival (client callback) to the
// next request of that episode leaving (submit): two durable commits, the
// mock evaluation and the orchestration in between.
#include <fmt/format.h>
#include <signal.h>
#include <sys/wait.h>
#include <unistd.h>

#include <algorithm>
#include <atomic>
#include <chrono>
#include <cstdio>
#include <filesystem>
#include <fstream>
#include <mutex>
#include <sstream>
#include <string>
#include <thread>
#include <unordered_map>
#include <vector>

#include "agent/campaign_runner.hpp"
#include "agent/episode.hpp"
#include "agent/runner.hpp"
#include "config/tasks.hpp"
#include "llm_clients/client.hpp"
#include "store/store.hpp"
#include "util/allocator/allocator.hpp"
#include "util/fs.hpp"
#include "util/ids.hpp"
#include "util/log.hpp"

namespace fs = std::filesystem;
using namespace korch;

namespace {

double mono() { return now_mono(); }

long status_field(const char* key) {
  std::ifstream in("/proc/self/status");
  std::string line;
  while (std::getline(in, line)) {
    if (line.rfind(key, 0) == 0) return std::atol(line.c_str() + std::strlen(key));
  }
  return -1;
}

// A reply shaped like a real model's: prose, a ~5 KB python block, ACTION.
std::string six_kb_reply() {
  std::string code =
      "import torch\nimport torch.nn as nn\nfrom torch.utils.cpp_extension import load_inline\n\n"
      "cpp_src = r'''\n#include <torch/extension.h>\n"
      "torch::Tensor relu_fwd(torch::Tensor x) {\n  auto out = torch::empty_like(x);\n"
      "  const float* px = x.data_ptr<float>();\n  float* po = out.data_ptr<float>();\n"
      "  for (int64_t i = 0; i < x.numel(); ++i) po[i] = px[i] > 0 ? px[i] : 0.f;\n  return "
      "out;\n}\n'''\n";
  while (code.size() < 5200)
    code += "# tuning note: unrolled by 4, vectorised loads, bounds checked on the tail\n";
  code +=
      "ext = load_inline(name='relu_ext', cpp_sources=cpp_src, functions=['relu_fwd'])\n\n"
      "class ModelNew(nn.Module):\n    def __init__(self):\n        super().__init__()\n\n"
      "    def forward(self, x):\n        return ext.relu_fwd(x)\n";
  return "I fuse the activation into one pass over memory; each element is read once and written "
         "once.\n\n"
         "```python\n" +
         code + "```\n\nACTION: CHECK\n";
}

struct Peer {
  pid_t pid = -1;
  int port = 0;
  bool start(const std::string& bin, int latency_ms, const std::string& reply_file,
             const std::string& dir) {
    // One output file per peer: a second peer must not read the first's port.
    auto out = dir + "/peer-" + std::to_string(latency_ms) + ".out";
    std::remove(out.c_str());
    std::fflush(nullptr);  // the child must not inherit unwritten output
    pid = ::fork();
    if (pid == 0) {
      std::freopen(out.c_str(), "w", stdout);
      auto lat = std::to_string(latency_ms);
      ::execl(bin.c_str(), bin.c_str(), "--port", "0", "--latency-ms", lat.c_str(), "--reply-file",
              reply_file.c_str(), static_cast<char*>(nullptr));
      ::_exit(127);
    }
    for (int i = 0; i < 500; ++i) {
      auto text = read_file(out);
      if (text && text->find("PORT ") != std::string::npos &&
          text->find('\n') != std::string::npos) {
        port = std::stoi(text->substr(text->find("PORT ") + 5));
        return true;
      }
      std::this_thread::sleep_for(std::chrono::milliseconds(10));
    }
    return false;
  }
  ~Peer() {
    if (pid > 0) {
      ::kill(pid, SIGTERM);
      ::waitpid(pid, nullptr, 0);
    }
  }
};

// Decorates the real client to time the gap between a reply arriving and the
// same episode's next request leaving. The runner owns it; its gaps land in
// `*sink` when it is destroyed.
class TimingClient final : public llm::ChatClient {
 public:
  TimingClient(std::unique_ptr<llm::ChatClient> inner, std::vector<double>* sink)
      : m_inner(std::move(inner)), m_sink(sink) {}
  ~TimingClient() override {
    std::lock_guard lock(m_mutex);
    *m_sink = std::move(m_overheads);
  }
  Result<void> add_model(const config::ModelConfig& m) override { return m_inner->add_model(m); }
  void submit(llm::ChatRequest req, llm::ChatCallback done) override {
    auto ep = episode_of(req.request_id);
    double now = mono();
    {
      std::lock_guard lock(m_mutex);
      if (auto it = m_last_reply.find(ep); it != m_last_reply.end())
        m_overheads.push_back(now - it->second);
    }
    m_inner->submit(std::move(req), [this, ep, done = std::move(done)](llm::ChatResult r) {
      {
        std::lock_guard lock(m_mutex);
        m_last_reply[ep] = mono();
      }
      done(std::move(r));
    });
  }
  llm::ClientStats stats() const override { return m_inner->stats(); }
  void shutdown() override { m_inner->shutdown(); }

 private:
  static std::string episode_of(const std::string& id) {
    auto a = id.find('|');
    auto b = id.find('|', a + 1);
    return id.substr(a + 1, b - a - 1);
  }
  std::unique_ptr<llm::ChatClient> m_inner;
  std::vector<double>* m_sink;
  std::mutex m_mutex;
  std::unordered_map<std::string, double> m_last_reply;
  std::vector<double> m_overheads;
};

double percentile(std::vector<double> v, double p) {
  if (v.empty()) return 0;
  std::sort(v.begin(), v.end());
  return v[std::min(v.size() - 1, static_cast<std::size_t>(p * (v.size() - 1) + 0.5))];
}

config::CampaignConfig campaign(const std::string& name, const std::string& db,
                                const std::string& tasks_dir, int level, int episodes, int port,
                                int max_turns) {
  config::CampaignConfig cfg;
  cfg.name = name;
  cfg.db_path = db;
  cfg.tasks.kernelbench_dir = tasks_dir;
  cfg.tasks.levels = {level};
  cfg.tasks.ids = level > 0 ? "1-100" : "";
  cfg.max_turns = max_turns;
  cfg.max_inflight_episodes = episodes;
  cfg.evaluator.mode = config::EvalMode::mock;
  config::ModelConfig m;
  m.id = "bench";
  m.base_url = fmt::format("http://127.0.0.1:{}/v1", port);
  m.model = "bench-model";
  m.concurrency = std::max(episodes, 1);
  m.max_attempts = 2;
  m.total_timeout_s = 120;
  m.first_byte_timeout_s = 120;
  cfg.models.push_back(m);
  return cfg;
}

struct RunStats {
  double seconds = 0;
  std::int64_t turns = 0;
  std::vector<double> overheads;
};

Result<RunStats> run_once(config::CampaignConfig cfg, int episodes, std::atomic<bool>* stop,
                          std::function<void()> while_running = {}) {
  auto tasks = config::load_tasks(cfg.tasks);
  if (!tasks) return std::unexpected(tasks.error());
  int n_tasks = static_cast<int>(tasks->size());
  cfg.samples_per_task = std::max(1, (episodes + n_tasks - 1) / n_tasks);
  if (episodes < n_tasks) {
    cfg.tasks.ids = fmt::format("1-{}", episodes);
    cfg.samples_per_task = 1;
  }
  store::Options so;
  so.path = cfg.db_path;
  auto st = store::Store::open(so);
  if (!st) return std::unexpected(st.error());
  agent::RunOptions opts;
  opts.owner = fmt::format("bench:{}:0", ::getpid());
  opts.stop = stop;
  // The same runner as korch run and korch serve; the timing decorator sees
  // every request.
  agent::RunnerHooks hooks;
  hooks.probe_endpoints = false;
  std::vector<double> overheads;
  hooks.wrap_client =
      [&](std::unique_ptr<llm::ChatClient> inner) -> std::unique_ptr<llm::ChatClient> {
    return std::make_unique<TimingClient>(std::move(inner), &overheads);
  };
  std::thread side;
  double t0 = 0;
  hooks.on_ready = [&](const agent::CampaignPlan&, const evaluator::Evaluator&) {
    if (while_running) side = std::thread(while_running);
    t0 = mono();
  };
  auto res = agent::run_campaign_wired(cfg, **st, opts, hooks);
  double t1 = mono();
  if (side.joinable()) side.join();
  (*st)->close();
  if (!res) return std::unexpected(res.error());
  RunStats s;
  s.seconds = t1 - t0;
  s.turns = res->progress.turns;
  s.overheads = std::move(overheads);
  return s;
}

// Writes 10,000 in-progress episodes (two finished turns each, the third
// call started) straight through the store, then times a resume.
void bench_resume(const std::string& dir, const std::string& tasks_dir, int count) {
  auto db = dir + "/resume.db";
  store::Options so;
  so.path = db;
  so.synchronous = "OFF";
  auto st = store::Store::open(so);
  if (!st) {
    fmt::print("resume: {}\n", st.error().message);
    return;
  }
  auto& store = **st;
  auto reply = six_kb_reply();
  std::string campaign_id = ids::campaign_id("resume-bench");
  store::WriteBatch b;
  store::CampaignRow c;
  c.id = campaign_id;
  c.name = "resume-bench";
  b.put(c);
  (void)store.commit_sync(std::move(b));
  std::string task_prompt(2500, 't');
  std::string system(3000, 's');
  for (int i = 0; i < count; ++i) {
    store::WriteBatch w;
    auto ep = fmt::format("e-bench-{:06d}", i);
    store::EpisodeRow e;
    e.id = ep;
    e.campaign_id = campaign_id;
    e.task_id = "L1/1_Square_matrix_multiplication_";
    e.model_id = "bench";
    e.sample_index = i;
    e.system_prompt = system;
    e.status = korch::store::EpisodeStatus::running;
    w.put(e);
    int seq = 0;
    auto msg = [&](store::Role role, store::MessageKind kind, std::string content, int turn) {
      store::MessageRow m;
      m.episode_id = ep;
      m.seq = seq++;
      m.role = role;
      m.kind = kind;
      m.content = std::move(content);
      m.turn = turn;
      w.put(std::move(m));
    };
    msg(store::Role::system, store::MessageKind::system, system, 0);
    msg(store::Role::user, store::MessageKind::task, task_prompt, 1);
    for (int t = 1; t <= 2; ++t) {
      auto rid = ids::llm_request_id(ep, t, "bench");
      store::LlmCallRow l;
      l.request_id = rid;
      l.episode_id = ep;
      l.turn = t;
      l.model_id = "bench";
      l.state = store::CallState::done;
      l.content = reply;
      w.put(l);
      msg(store::Role::assistant, store::MessageKind::reply, reply, t);
      store::TurnRow tr;
      tr.episode_id = ep;
      tr.turn = t;
      tr.model_id = "bench";
      tr.llm_request_id = rid;
      tr.action = "check";
      tr.parse_status = "code";
      tr.code = reply.substr(100, 5000);
      tr.eval_status = "incorrect";
      w.put(tr);
      msg(store::Role::user, store::MessageKind::feedback,
          "CHECK result: incorrect. max_abs_diff 0.5\n\nYou have 3 replies left.", t);
    }
    store::LlmCallRow l3;
    l3.request_id = ids::llm_request_id(ep, 3, "bench");
    l3.episode_id = ep;
    l3.turn = 3;
    l3.model_id = "bench";
    l3.state = store::CallState::started;
    w.put(l3);
    store.commit(std::move(w), [](Result<store::CommitInfo>) {});
  }
  (void)store.commit_sync(store::WriteBatch{});
  double t0 = mono();
  auto snaps = store.load_unfinished(campaign_id);
  double t1 = mono();
  if (!snaps) {
    fmt::print("resume: {}\n", snaps.error().message);
    return;
  }
  auto task = std::make_shared<config::Task>();
  task->id = "L1/1_Square_matrix_multiplication_";
  task->source = task_prompt;
  std::int64_t calls = 0;
  for (auto& snap : *snaps) {
    auto spec = std::make_shared<agent::EpisodeSpec>();
    spec->campaign_id = campaign_id;
    spec->episode_id = snap.episode.id;
    spec->task = task;
    spec->model_id = "bench";
    spec->max_turns = 5;
    agent::EpisodeState state;
    agent::Env env;
    auto step = agent::resume(state, spec, snap, env);
    calls += std::holds_alternative<agent::CallLlm>(step.next);
  }
  double t2 = mono();
  fmt::print("resume of {} unfinished episodes (2 turns each, ~{} KB stored per episode):\n",
             snaps->size(),
             (system.size() * 2 + task_prompt.size() + reply.size() * 4 + 5000 * 2) / 1024);
  fmt::print(
      "  load_unfinished {:.2f} s + rebuild {:.2f} s = {:.2f} s  [target <= 5 s]; {} re-sends "
      "ready\n",
      t1 - t0, t2 - t1, t2 - t0, calls);
}

}  // namespace

int main(int argc, char** argv) {
  std::string kernelbench = std::string(KORCH_SOURCE_DIR) + "/../shared/kernelbench";
  bool quick = false;
  bool skip_slow = false;
  bool only_slow = false;
  int slow_episodes = 1000;
  int only_episodes = 0;
  std::string keep;
  for (int i = 1; i < argc; ++i) {
    std::string a = argv[i];
    if (a == "--kernelbench" && i + 1 < argc)
      kernelbench = argv[++i];
    else if (a == "--quick")
      quick = true;
    else if (a == "--skip-slow")
      skip_slow = true;
    else if (a == "--only-slow")
      only_slow = true;
    else if (a == "--slow-episodes" && i + 1 < argc)
      slow_episodes = std::max(1, std::atoi(argv[++i]));
    else if (a == "--keep" && i + 1 < argc)
      keep = argv[++i];
    else if (a == "--only-episodes" && i + 1 < argc)
      only_episodes = std::atoi(argv[++i]);
    else {
      std::fprintf(
          stderr,
          "usage: korch-bench-engine [--kernelbench DIR] [--quick] [--skip-slow] [--keep DIR] "
          "[--only-episodes N] [--only-slow] [--slow-episodes N]\n");
      return 2;
    }
  }
  log::init("warn");
  std::string tasks_dir = kernelbench;
  int level = 1;
  if (!fs::exists(kernelbench + "/level1")) {
    tasks_dir = std::string(KORCH_SOURCE_DIR) + "/examples/tasks";
    level = 0;
    fmt::print("note: {} not found; using the bundled example tasks\n", kernelbench);
  }
  auto dir = keep.empty() ? fs::temp_directory_path() / fmt::format("korch-bench-{}", ::getpid())
                          : fs::path(keep);
  fs::create_directories(dir);
  auto reply_file = (dir / "reply.txt").string();
  std::ofstream(reply_file) << six_kb_reply();
  fmt::print("korch-bench-engine: reply {} bytes, tasks {}, store synchronous=FULL, dir {}\n",
             six_kb_reply().size(), tasks_dir, dir.string());
  fmt::print("machine: {} cores; allocator {}\n\n", std::thread::hardware_concurrency(),
             allocator_name());

  if (!only_slow) {
    Peer peer;
    if (!peer.start(KORCH_PEER_BIN, 0, reply_file, dir.string())) {
      fmt::print("cannot start {}\n", KORCH_PEER_BIN);
      return 1;
    }
    fmt::print("1. zero-latency peer, 5 turns per episode (4 CHECK + SUBMIT)\n");
    fmt::print("   {:>9} {:>8} {:>10} {:>12} {:>12}\n", "episodes", "turns", "turns/s",
               "p50 ovh ms", "p99 ovh ms");
    std::vector<int> sizes = quick ? std::vector<int>{1, 100} : std::vector<int>{1, 100, 1000};
    if (only_episodes > 0) sizes = {only_episodes};
    for (int n : sizes) {
      int repeat = n == 1 ? 40 : 1;  // one episode alone is too short to time
      RunStats total;
      for (int r = 0; r < repeat; ++r) {
        auto db = (dir / fmt::format("e{}-{}.db", n, r)).string();
        auto cfg =
            campaign(fmt::format("bench-{}-{}", n, r), db, tasks_dir, level, n, peer.port, 5);
        auto s = run_once(cfg, n, nullptr);
        if (!s) {
          fmt::print("   {} episodes: {}\n", n, s.error().message);
          return 1;
        }
        total.seconds += s->seconds;
        total.turns += s->turns;
        total.overheads.insert(total.overheads.end(), s->overheads.begin(), s->overheads.end());
      }
      fmt::print("   {:>9} {:>8} {:>10.0f} {:>12.2f} {:>12.2f}\n", n, total.turns,
                 total.turns / total.seconds, percentile(total.overheads, 0.5) * 1e3,
                 percentile(total.overheads, 0.99) * 1e3);
    }
  }

  if (only_episodes > 0) {
    if (keep.empty()) fs::remove_all(dir);
    return 0;
  }
  if (!skip_slow) {
    Peer peer;
    if (!peer.start(KORCH_PEER_BIN, 5000, reply_file, dir.string())) return 1;
    int n = slow_episodes;
    std::atomic<bool> stop{false};
    long rss_before = status_field("VmRSS:");
    const HeapStats heap_before = heap_stats();
    long peak_threads = 0;
    long rss_loaded = 0;
    HeapStats heap_loaded;  // at the largest heap in use while loaded
    auto cfg =
        campaign("bench-slow", (dir / "slow.db").string(), tasks_dir, level, n, peer.port, 5);
    auto s = run_once(cfg, n, &stop, [&] {
      // Three rounds of 5 s replies: sample while all 1,000 are in flight.
      for (int i = 0; i < 120 && !stop; ++i) {
        std::this_thread::sleep_for(std::chrono::milliseconds(100));
        peak_threads = std::max(peak_threads, status_field("Threads:"));
        if (i >= 60) {
          rss_loaded = std::max(rss_loaded, status_field("VmRSS:"));
          auto h = heap_stats();
          if (h.in_use > heap_loaded.in_use) heap_loaded = h;
        }
      }
      stop = true;
    });
    if (!s) {
      fmt::print("slow: {}\n", s.error().message);
      return 1;
    }
    // What the in-flight conversations hold: system + task + replies + feedback.
    auto db = (dir / "slow.db").string();
    store::Options so;
    so.path = db;
    so.read_only = true;
    auto st = store::Store::open(so);
    double conv_bytes = 0;
    std::size_t inflight = 0;
    if (st) {
      auto snaps = (*st)->load_unfinished(ids::campaign_id("bench-slow"));
      if (snaps) {
        for (auto& sn : *snaps) {
          if (sn.messages.empty()) continue;
          ++inflight;
          for (auto& m : sn.messages) conv_bytes += m.content.size();
        }
      }
    }
    double per_ep_kib = inflight ? (rss_loaded - rss_before) / static_cast<double>(inflight) : 0;
    double conv_kib = inflight ? conv_bytes / inflight / 1024 : 0;
    fmt::print("\n2. {} episodes in flight, peer latency 5 s, {:.0f} s sampled\n", n, s->seconds);
    fmt::print(
        "   peak threads {} [<= 64]; RSS {} MiB -> {} MiB; per in-flight episode {:.1f} KiB vs "
        "conversation "
        "{:.1f} KiB + 64 KiB [target]; turns done {}\n",
        peak_threads, rss_before / 1024, rss_loaded / 1024, per_ep_kib, conv_kib, s->turns);
    fmt::print("   peak RSS of this process (VmHWM) {} MiB\n", status_field("VmHWM:") / 1024);
    // What the episodes hold, without what the allocator keeps free.
    double heap_per_ep_kib =
        inflight ? (heap_loaded.in_use - heap_before.in_use) / 1024.0 / inflight : 0;
    fmt::print(
        "   heap in use {} MiB -> {} MiB ({}): per in-flight episode {:.1f} KiB; the allocator "
        "kept {} MiB free\n",
        heap_before.in_use >> 20, heap_loaded.in_use >> 20, allocator_name(), heap_per_ep_kib,
        heap_loaded.free >> 20);
  }
  if (only_slow) {
    if (keep.empty()) fs::remove_all(dir);
    return 0;
  }

  fmt::print("\n3. ");
  bench_resume(dir.string(), tasks_dir, quick ? 2000 : 10000);
  if (keep.empty()) fs::remove_all(dir);
  return 0;
}
