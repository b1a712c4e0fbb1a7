#include "tests/support/fake_evaluator.hpp"

#include <condition_variable>
#include <cstdlib>
#include <deque>
#include <mutex>
#include <string_view>
#include <thread>

namespace korch::testing {
namespace {

std::optional<std::string> marker(const std::string& code, std::string_view name) {
  auto pos = code.find(name);
  if (pos == std::string::npos) return std::nullopt;
  auto start = code.find_first_not_of(' ', pos + name.size());
  if (start == std::string::npos) return std::nullopt;
  auto end = code.find_first_of(" \n\r\"'", start);
  return code.substr(start, end == std::string::npos ? std::string::npos : end - start);
}

class FakeSpeedupEvaluator final : public evaluator::Evaluator {
 public:
  explicit FakeSpeedupEvaluator(double wall_s) : m_wall_s(wall_s) {
    m_thread = std::thread([this] { run(); });
  }
  ~FakeSpeedupEvaluator() override { shutdown(); }

  void evaluate(evaluator::Request request, evaluator::Callback done) override {
    {
      std::lock_guard lock(m_mutex);
      if (!m_stopping) {
        m_jobs.emplace_back(std::move(request), std::move(done));
        m_cv.notify_one();
        return;
      }
    }
    auto r = report(request);
    r.interrupted = true;
    done(std::move(r));
  }
  std::string version() const override { return "mock-fake-speedup-1"; }
  config::EvalMode mode() const override { return config::EvalMode::mock; }
  std::string device_description() const override {
    return "FAKE evaluator (no code is run; verdicts and speedups are scripted in the code)";
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
  evaluator::Report report(const evaluator::Request& req) const {
    evaluator::Report r;
    r.request_id = req.request_id;
    r.mode = "mock";
    r.mock = true;
    r.evaluator_version = version();
    r.rules_skipped = true;
    r.status = evaluator::Verdict::ok;
    if (auto v = marker(req.code, "MOCK_VERDICT:")) {
      if (auto parsed = evaluator::verdict_from_string(*v)) r.status = *parsed;
    }
    r.correct = r.status == evaluator::Verdict::ok;
    if (r.correct) {
      r.max_abs_diff = 0;
      if (req.mode == evaluator::Mode::submit) {
        double s = 1.0;
        if (auto v = marker(req.code, "FAKE_SPEEDUP:")) s = std::strtod(v->c_str(), nullptr);
        r.speedup = s;
        r.speedup_ci_low = s;
        r.speedup_ci_high = s;
        r.ref_time_ms = 1.0;
        r.cand_time_ms = 1.0 / s;
      }
    } else {
      r.error = "fake: scripted failure";
    }
    r.reward = evaluator::reward_speedup(r.correct, r.speedup);
    r.wall_s = m_wall_s;
    return r;
  }

  void run() {
    std::unique_lock lock(m_mutex);
    while (true) {
      m_cv.wait(lock, [&] { return m_stopping || !m_jobs.empty(); });
      if (m_jobs.empty()) return;
      auto job = std::move(m_jobs.front());
      m_jobs.pop_front();
      bool interrupted = m_stopping;
      lock.unlock();
      auto r = report(job.first);
      r.interrupted = interrupted;
      job.second(std::move(r));
      lock.lock();
    }
  }

  double m_wall_s;
  std::mutex m_mutex;
  std::condition_variable m_cv;
  std::deque<std::pair<evaluator::Request, evaluator::Callback>> m_jobs;
  bool m_stopping = false;
  std::thread m_thread;
};

}  // namespace

std::unique_ptr<evaluator::Evaluator> make_fake_speedup_evaluator(double wall_s) {
  return std::make_unique<FakeSpeedupEvaluator>(wall_s);
}

}  // namespace korch::testing
