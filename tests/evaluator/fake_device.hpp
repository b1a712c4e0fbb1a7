#pragma once
// The GPU host on a CPU (issue #49): a fake device layer under the real
// protected evaluator. FakeGpuJudge answers jobs as korch-worker's GPU judge
// would (rules, warm-up, measure, the GPU health check), from a script per
// role; FakeClock is time injected, so the pipeline's pauses are observed
// without sleeping; fake_gpu_facts() are the facts the gpuinfo job reports.
// The pool, the leases, the stages, the retry loops and their cap are the
// evaluator's own code.
#include <chrono>
#include <condition_variable>
#include <deque>
#include <map>
#include <mutex>
#include <optional>
#include <string>
#include <vector>

#include <nlohmann/json.hpp>

#include "evaluator/job_protocol.hpp"
#include "evaluator/stages/context.hpp"
#include "evaluator/zygote.hpp"

namespace korch::testing {

using nlohmann::json;
namespace ev = korch::evaluator;

class FakeClock final : public ev::stages::Clock {
 public:
  time_point now() override {
    std::lock_guard lk(m_mu);
    return m_now;
  }
  // Takes no real time; a pause ends early (false) when stop was requested.
  bool pause(std::chrono::milliseconds d, const ev::stages::StopFlag& stop) override {
    std::lock_guard lk(m_mu);
    m_pauses.push_back(d);
    m_now += d;
    return !stop.requested();
  }
  std::vector<std::chrono::milliseconds> pauses() const {
    std::lock_guard lk(m_mu);
    return m_pauses;
  }

 private:
  mutable std::mutex m_mu;
  time_point m_now{std::chrono::hours(1)};
  std::vector<std::chrono::milliseconds> m_pauses;
};

// The facts a gpuinfo job reports on an H100 (count GPUs).
inline ev::protocol::GpuInfo fake_gpu_facts(int count) {
  json j = {{"ok", true},           {"health", true},  {"name", "NVIDIA H100 80GB HBM3"},
            {"capability", "9.0"},  {"sms", 132},      {"count", count},
            {"memory_bytes", 85e9}, {"l2_bytes", 5e7}, {"torch", "fake"},
            {"cuda", "12.4"}};
  return ev::protocol::parse_gpuinfo(j.dump());
}

// One answer of the fake judge.
struct FakeAnswer {
  json result;                    // result.json; null: the job left none
  bool started = true;            // false: the job never started (a zygote restarting)
  bool block_until_stop = false;  // the job runs until the evaluator stops (then is killed)
};

// Answers as a GPU judge would.
namespace answer {
inline FakeAnswer rules_ok() {
  return {{{"ok", true},
           {"violations", json::array()},
           {"rules_version", "fake"},
           {"protections", {"fake_sandbox"}},
           {"language", "torch"},
           {"load_inline", json::array()}}};
}
// The rules found a load_inline whose arguments are not static: the compile
// stage decides compile_error.
inline FakeAnswer rules_unresolved_load_inline() {
  FakeAnswer a = rules_ok();
  a.result["load_inline"] = {
      {{"entry", {{"name", "ext"}}}, {"key", "k"}, {"lineno", 7}, {"unresolved", "a variable"}}};
  return a;
}
inline FakeAnswer measured_ok(double ref_ms = 2.0, double cand_ms = 1.0) {
  return {{{"verdict", "ok"},
           {"correct", true},
           {"speedup", ref_ms / cand_ms},
           {"ref_time_ms", ref_ms},
           {"cand_time_ms", cand_ms},
           {"protections", {"fake_sandbox"}},
           {"evidence", {{"timing", {{"health", {{"ok", true}}}}}}}}};
}
// The judge blamed the host (memory held outside the evaluation).
inline FakeAnswer host_fault() {
  return {{{"verdict", "worker_crash"},
           {"correct", false},
           {"error", "infrastructure: 20.0 GiB held by processes outside the evaluation"},
           {"infrastructure", "20.0 GiB held by processes outside the evaluation"},
           {"evidence", json::object()}}};
}
// The measure job died without a result (a crash that may have broken the GPU).
inline FakeAnswer crashed() { return {json()}; }
inline FakeAnswer healthy() { return {{{"ok", true}, {"health", true}, {"name", "fake"}}}; }
inline FakeAnswer unhealthy() {
  return {{{"ok", true}, {"health", false}, {"error", "the sum on the GPU was wrong"}}};
}
inline FakeAnswer not_run() { return {json(), false}; }
}  // namespace answer

class FakeGpuJudge final : public ev::JobRunner {
 public:
  struct Job {
    ev::JobRole role;
    int gpu = -1;
  };

  // Jobs started after stop() are killed at once (started, no result)
  // instead of never starting.
  bool kill_after_stop = false;

  // The next answers to jobs of `role`, in order; then the default one.
  void script(ev::JobRole role, std::vector<FakeAnswer> answers) {
    std::lock_guard lk(m_mu);
    for (auto& a : answers) m_script[role].push_back(std::move(a));
  }

  ev::JobOutcome run(ev::JobRole role, const std::string&, const std::string& spawn,
                     std::optional<std::uint64_t>, double) override {
    std::unique_lock lk(m_mu);
    const json sp = json::parse(spawn, nullptr, false);
    m_jobs.push_back({role, sp.is_object() ? sp.value("gpu", -1) : -1});
    ev::JobOutcome o;
    if (m_stopped) {
      if (kill_after_stop) {  // the job starts and is killed at once
        o.started = true;
        o.exit_code = 137;
        o.signal = 9;
      } else {  // as the zygote: later runs fail at once, never started
        o.error = "the worker zygote is not running";
      }
      return o;
    }
    FakeAnswer a = default_answer(role);
    if (auto& q = m_script[role]; !q.empty()) {
      a = std::move(q.front());
      q.pop_front();
    }
    if (a.block_until_stop) {
      ++m_blocked;
      m_cv.notify_all();
      m_cv.wait(lk, [&] { return m_stopped; });
      o.started = true;  // killed in flight
      o.exit_code = 137;
      o.signal = 9;
      return o;
    }
    o.started = a.started;
    o.exit_code = a.result.is_null() ? 1 : 0;
    if (!a.result.is_null()) o.result_json = a.result.dump();
    return o;
  }
  std::string versions_json() const override {
    return R"({"torch": "fake", "python": "3", "arch": "sm90"})";
  }
  void stop() override {
    std::lock_guard lk(m_mu);
    m_stopped = true;
    m_cv.notify_all();
  }

  std::vector<Job> jobs(std::optional<ev::JobRole> role = std::nullopt) const {
    std::lock_guard lk(m_mu);
    std::vector<Job> out;
    for (const auto& j : m_jobs)
      if (!role || j.role == *role) out.push_back(j);
    return out;
  }
  // Waits (bounded) until a job blocks until stop.
  bool wait_blocked(std::chrono::milliseconds limit) {
    std::unique_lock lk(m_mu);
    return m_cv.wait_for(lk, limit, [&] { return m_blocked > 0; });
  }

 private:
  static FakeAnswer default_answer(ev::JobRole role) {
    switch (role) {
      case ev::JobRole::rules: return answer::rules_ok();
      case ev::JobRole::measure: return answer::measured_ok();
      case ev::JobRole::gpuinfo: return answer::healthy();
      case ev::JobRole::warm: return {{{"ok", true}}};
      default: return {json()};
    }
  }

  mutable std::mutex m_mu;
  std::condition_variable m_cv;
  std::map<ev::JobRole, std::deque<FakeAnswer>> m_script;
  std::vector<Job> m_jobs;
  bool m_stopped = false;
  int m_blocked = 0;
};

}  // namespace korch::testing
