#include "evaluator/mock_evaluator.hpp"

#include <chrono>
#include <cmath>
#include <condition_variable>
#include <cstdlib>
#include <map>
#include <mutex>
#include <optional>
#include <queue>
#include <string_view>
#include <thread>

#include <fmt/format.h>

#include "util/ids.hpp"
#include "util/sha256.hpp"

namespace korch::evaluator {
namespace {

// mock-2: a code's MOCK_SPEEDUP marker scripts its verdict (ok) and speedup.
constexpr const char* k_mock_version = "mock-2";
constexpr std::string_view k_verdict_marker = "MOCK_VERDICT:";
constexpr std::string_view k_infrastructure_marker = "MOCK_INFRASTRUCTURE:";
constexpr std::string_view k_speedup_marker = "MOCK_SPEEDUP:";
constexpr int k_ok_percent = 70;  // share of unmarked codes that pass

// The word after the first `name` in the code (up to a space, a line end or a
// quote), if any.
std::optional<std::string> marker(const std::string& code, std::string_view name) {
  auto pos = code.find(name);
  if (pos == std::string::npos) return std::nullopt;
  auto start = code.find_first_not_of(' ', pos + name.size());
  if (start == std::string::npos) return std::nullopt;
  auto end = code.find_first_of(" \n\r\"'", start);
  return code.substr(start, end == std::string::npos ? std::string::npos : end - start);
}

// The speedup a code scripts (a finite number above 0), if any.
std::optional<double> scripted_speedup(const std::string& code) {
  auto v = marker(code, k_speedup_marker);
  if (!v) return std::nullopt;
  char* end = nullptr;
  double s = std::strtod(v->c_str(), &end);
  if (end == v->c_str() || !std::isfinite(s) || s <= 0) return std::nullopt;
  return s;
}

// The verdict a code gets: its MOCK_VERDICT marker if present; else ok for a
// code with a scripted speedup; else hash-based.
Verdict mock_verdict(const std::string& code, std::uint64_t h, bool scripted) {
  if (auto m = marker(code, k_verdict_marker)) {
    if (auto v = verdict_from_string(*m)) return *v;
  }
  if (scripted) return Verdict::ok;
  return h % 100 < k_ok_percent ? Verdict::ok : Verdict::incorrect;
}

Report mock_report(const config::EvaluatorConfig& cfg, const Request& req) {
  auto h = ids::stable_hash64(req.code);
  Report r;
  r.request_id = req.request_id;
  r.mode = "mock";
  r.mock = true;
  r.evaluator_version = k_mock_version;
  r.rules_skipped = true;
  r.protections = {"mock: no code was run"};
  const auto scripted = scripted_speedup(req.code);
  r.status = mock_verdict(req.code, h, scripted.has_value());
  r.correct = r.status == Verdict::ok;
  if (r.correct) {
    r.max_abs_diff = 1e-6 * static_cast<double>(h % 50);
  } else if (r.status == Verdict::incorrect) {
    r.max_abs_diff = 0.5 + static_cast<double>(h % 100) / 10.0;
    r.mismatch_frac = static_cast<double>(h % 97) / 100.0;
    r.error = "mock: output mismatch (fake)";
  } else {
    r.error = std::string("mock: scripted verdict ") + to_string(r.status);
  }
  if (req.mode == Mode::submit && r.correct) {
    // A scripted speedup is exact (no simulated noise around it).
    double speedup = scripted.value_or(0.5 + static_cast<double>((h >> 8) % 300) / 100.0);
    r.ref_time_ms = 1.0;
    r.cand_time_ms = 1.0 / speedup;
    r.speedup = speedup;
    r.speedup_ci_low = scripted ? speedup : speedup * 0.95;
    r.speedup_ci_high = scripted ? speedup : speedup * 1.05;
  }
  r.reward = reward_for(cfg.reward, r);
  r.wall_s = cfg.mock_latency_s;
  // What a real verdict rests on besides the code and the mode, which the
  // mock does not use: echoed as a digest, so that a request that lost its
  // seed, task, rules flag or device on the way to a worker is seen
  // (EvalQueue.TheWorkerEvaluatesTheRequestTheCoordinatorSent, issue #47).
  r.evidence["request_digest"] = sha256_hex(
      std::to_string(req.secret_seed) + '\n' + req.task.id + '\n' + req.task.name + '\n' +
      req.task.path + '\n' + std::to_string(req.task.level) + '.' +
      std::to_string(req.task.number) + '\n' + (req.rules ? "rules" : "no rules") + '\n' +
      (req.device ? std::string(enum_name(*req.device)) : "own device") + '\n' + req.task.source);
  return r;
}

Report interrupted_report(const Request& req) {
  Report r;
  r.request_id = req.request_id;
  r.mode = "mock";
  r.mock = true;
  r.evaluator_version = k_mock_version;
  r.status = Verdict::worker_crash;
  r.error = "mock: the evaluator shut down before this evaluation finished";
  r.interrupted = true;
  return r;
}

// One dispatcher thread delivers reports when their simulated latency has
// elapsed; with zero latency it delivers immediately, in order.
class MockEvaluator final : public Evaluator {
 public:
  explicit MockEvaluator(config::EvaluatorConfig cfg) : m_cfg(std::move(cfg)) {
    m_thread = std::thread([this] { run(); });
  }
  ~MockEvaluator() override { shutdown(); }

  void evaluate(Request request, Callback done) override {
    auto due = std::chrono::steady_clock::now() +
               std::chrono::duration_cast<std::chrono::steady_clock::duration>(
                   std::chrono::duration<double>(m_cfg.mock_latency_s));
    {
      std::lock_guard lock(m_mutex);
      if (!m_stopping) {
        m_jobs.push(Job{due, m_seq++, std::move(request), std::move(done)});
        m_cv.notify_one();
        return;
      }
    }
    done(interrupted_report(request));
  }

  std::string version() const override { return k_mock_version; }
  config::EvalMode mode() const override { return config::EvalMode::mock; }
  std::string device_description() const override {
    return "MOCK evaluator (no code is run; verdicts and timings are fake)";
  }

  void shutdown() override {
    {
      std::lock_guard lock(m_mutex);
      if (m_stopping) return;
      m_stopping = true;
    }
    m_cv.notify_all();
    if (m_thread.joinable()) m_thread.join();
  }

 private:
  struct Job {
    std::chrono::steady_clock::time_point due;
    std::uint64_t seq;
    Request request;
    Callback done;
    bool operator>(const Job& o) const { return due != o.due ? due > o.due : seq > o.seq; }
  };

  void run() {
    std::unique_lock lock(m_mutex);
    while (true) {
      if (m_jobs.empty()) {
        if (m_stopping) return;
        m_cv.wait(lock);
        continue;
      }
      auto due = m_jobs.top().due;
      bool early = std::chrono::steady_clock::now() < due;
      if (!m_stopping && early) {
        m_cv.wait_until(lock, due);
        continue;
      }
      Job job = std::move(const_cast<Job&>(m_jobs.top()));
      m_jobs.pop();
      lock.unlock();
      // On shutdown, evaluations not yet due are answered at once, as
      // interrupted (like a real evaluator's killed workers).
      auto report = early ? interrupted_report(job.request) : mock_report(m_cfg, job.request);
      if (!early) host_fault(job.request, report);
      try {
        job.done(std::move(report));
      } catch (...) {
        // A callback must not kill the dispatcher.
      }
      lock.lock();
    }
  }

  // MOCK_INFRASTRUCTURE: n: the request's first n evaluations here are the
  // host's fault (counted per request id; the dispatcher thread alone).
  void host_fault(const Request& req, Report& r) {
    const auto n = marker(req.code, k_infrastructure_marker);
    if (!n) return;
    const int run = ++m_host_faults[req.request_id];
    if (run > std::atoi(n->c_str())) return;
    r.status = Verdict::worker_crash;
    r.correct = false;
    r.reward = 0;
    r.speedup.reset();
    r.error = fmt::format("infrastructure: mock: the host failed run {}", run);
    r.evidence["infrastructure"].push_back({{"run", run}, {"why", "mock: the host failed"}});
  }

  config::EvaluatorConfig m_cfg;
  std::map<std::string, int> m_host_faults;
  std::mutex m_mutex;
  std::condition_variable m_cv;
  std::priority_queue<Job, std::vector<Job>, std::greater<>> m_jobs;
  std::uint64_t m_seq = 0;
  bool m_stopping = false;
  std::thread m_thread;
};

}  // namespace

std::unique_ptr<Evaluator> make_mock_evaluator(const config::EvaluatorConfig& cfg) {
  return std::make_unique<MockEvaluator>(cfg);
}

}  // namespace korch::evaluator
