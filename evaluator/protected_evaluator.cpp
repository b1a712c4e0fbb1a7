// The protected evaluator, cpu and gpu modes (DESIGN §5): rules → compile →
// (gpu: Triton warm-up) → measure, each stage a sandboxed job forked from the
// korch-worker zygote. gpu mode adds: facts about the GPU read from the device
// at start (prompt, roofline, L2 size), a memory cgroup per job, the roofline
// check (impossible_timing) and a GPU health check after a crash.
//
// Builds go through the compile cache (compile_cache.hpp: identical code is
// never compiled twice); this file decides where and when its compile jobs
// run (run_compile_role).
//
// Threads: evaluate() only enqueues. Pipeline threads each run one
// evaluation at a time, end to end.
//   cpu mode: cfg.workers threads. Compile jobs take m_timing shared; a
//     submit-mode measure job (which times) takes it exclusively, so no
//     compiler runs while anything is being timed.
//   gpu mode: compiles run on a CPU pool (compile slots, on cores no GPU's
//     measure job uses) and never hold a GPU; the Triton warm-up, the
//     measurement, the roofline re-measure and the health check run under a
//     GpuPool lease (one evaluation per GPU, SUBMIT first). A GPU that fails
//     its health check after a crash leaves the pool and the evaluation runs
//     again on another lease. Threads: enough for every compile slot and two
//     evaluations per GPU to be in flight, so the next candidates compile
//     while the GPUs measure.
#include "evaluator/protected_evaluator.hpp"

#include <fcntl.h>
#include <sys/prctl.h>
#include <unistd.h>

#include <fmt/format.h>
#include <sched.h>
#include <sys/sysinfo.h>
#include <algorithm>
#include <atomic>
#include <chrono>
#include <condition_variable>
#include <cstdlib>
#include <deque>
#include <filesystem>
#include <map>
#include <mutex>
#include <nlohmann/json.hpp>
#include <random>
#include <semaphore>
#include <shared_mutex>
#include <thread>

#include "config/gpus.hpp"
#include "evaluator/compile_cache.hpp"
#include "evaluator/gpu_facts.hpp"
#include "evaluator/gpu_pool.hpp"
#include "evaluator/job_dir.hpp"
#include "evaluator/job_protocol.hpp"
#include "evaluator/knobs.hpp"
#include "evaluator/roofline.hpp"
#include "evaluator/zygote.hpp"
#include "util/file_lock.hpp"
#include "util/fs.hpp"
#include "util/log.hpp"
#include "util/sha256.hpp"

namespace korch::evaluator {
namespace {

using json = nlohmann::json;
namespace fs = std::filesystem;

constexpr const char* k_version = schema::k_evaluator_version.data();  // protocol.json
// The GPU health check: tries before a GPU leaves the pool, and the pause
// between them (gpu_healthy).
constexpr int k_health_tries = 3;
constexpr auto k_health_pause = std::chrono::seconds(3);
constexpr double k_warm_timeout_s = 900;  // Triton compiles + autotuning of one candidate
constexpr double k_rules_timeout_s = 60;
constexpr double k_compile_timeout_s = 900;  // a cold CPU compile is ~30 s, more under load
constexpr double k_measure_grace_s = 15;     // the judge's own deadline comes first
constexpr int k_timing_remeasures = 2;       // cpu: measure jobs again after distrusted timing
constexpr int k_timing_pause_s = 5;  // cpu: before a re-measure the host is blamed for (5, 10 s)
constexpr int k_gpu_runners_a_side = 4;  // gpu: a measure job's runners of each side
constexpr int k_gpu_attempts = 2;        // runs of one evaluation on GPUs that then failed
// Runs of one evaluation that the host's state failed (the judge's
// `infrastructure`: memory held by processes outside korch, a device that
// refused a context), and the pause before the next: 5, 10, 20, 40, 60 s.
constexpr int k_infra_attempts = 6;
constexpr int k_infra_pause_max_s = 60;
constexpr std::int64_t k_compile_host_mb =
    4096;  // one nvcc/g++ of a torch extension, with headroom

double seconds_since(std::chrono::steady_clock::time_point t0) {
  return std::chrono::duration<double>(std::chrono::steady_clock::now() - t0).count();
}

// The cores this process may use, in order.
std::vector<int> usable_cpus() {
  std::vector<int> v;
  cpu_set_t set;
  CPU_ZERO(&set);
  if (sched_getaffinity(0, sizeof set, &set) == 0)
    for (int c = 0; c < CPU_SETSIZE; ++c)
      if (CPU_ISSET(c, &set)) v.push_back(c);
  return v;
}

// Where every korch process on this host keeps its per-GPU locks:
// `configured` (KORCH_GPU_LOCK_DIR), else /run/lock/korch (a tmpfs every
// user may write on Debian and Ubuntu), else /tmp/korch-gpu-locks.
std::string host_gpu_lock_dir(const std::string& configured) {
  if (!configured.empty()) return configured;
  std::error_code ec;
  if (fs::is_directory("/run/lock", ec)) return "/run/lock/korch";
  return "/tmp/korch-gpu-locks";
}

class ProtectedEvaluator final : public Evaluator {
 public:
  ProtectedEvaluator(config::EvaluatorConfig cfg, std::string cache_dir, std::unique_ptr<Zygote> z,
                     bool daemon_nondumpable, json gpu, std::vector<int> gpus, EnvKnobs knobs)
      : m_cfg(std::move(cfg)),
        m_cache(std::move(cache_dir)),
        m_zygote(std::move(z)),
        m_daemon_nondumpable(daemon_nondumpable),
        m_gpu(std::move(gpu)),
        m_gpu_mode(m_cfg.mode == config::EvalMode::gpu),
        m_compile_cache(m_cache,
                        [this](const JobDir& job, const std::string& build_dir) {
                          return run_compile_role(job, build_dir);
                        }),
        m_knobs(std::move(knobs)) {
    if (!m_knobs.recorded.empty())
      KLOG_WARN("[eval] evaluator knobs from the environment: {}", m_knobs.recorded.dump());
    json v = json::parse(m_zygote->versions_json(), nullptr, false);
    if (!v.is_discarded()) m_versions = v;
    if (const json pw = m_versions.value("prewarm", json::object()); pw.value("done", false)) {
      // The zygote imported the work counter's dispatch machinery once, for
      // every judge it forks (korch_worker._prewarm_counting). CUDA touched
      // or threads started there would make its forked children unsafe.
      if (pw.value("cuda_initialized", false) || pw.value("threads", 1) > 1)
        KLOG_WARN("[eval] the worker zygote's prewarm left it unsafe to fork: {}", pw.dump());
      else
        KLOG_INFO("[eval] worker zygote: work counter prewarmed in {:.2f} s", pw.value("s", 0.0));
    } else if (pw.contains("error")) {
      KLOG_WARN("[eval] worker zygote: prewarm failed ({}); judges count the work themselves",
                pw.value("error", ""));
    }
    int n = std::max(1, m_cfg.workers);
    if (m_gpu_mode) {
      m_peaks = roofline::find_gpu(m_gpu.value("name", ""));
      plan_gpu_host(gpus);
      n = std::max(n, m_compile_slot_count + 2 * static_cast<int>(gpus.size()));
      GpuPool::Options po;
      po.host_lock_dir = host_gpu_lock_dir(m_knobs.gpu_lock_dir);
      m_pool = std::make_unique<GpuPool>(
          gpus, [this](int g) { return gpu_healthy(g); }, po);
    }
    for (int i = 0; i < n; ++i) m_threads.emplace_back([this] { loop(); });
  }
  ~ProtectedEvaluator() override { shutdown(); }

  void evaluate(Request request, Callback done) override {
    {
      std::lock_guard lk(m_mu);
      if (!m_stopping) {
        m_queue.emplace_back(std::move(request), std::move(done));
        m_cv.notify_one();
        return;
      }
    }
    Report r = base_report(request);
    r.status = Verdict::worker_crash;
    r.error = "the evaluator is shut down";
    r.interrupted = true;
    done(std::move(r));
  }

  std::string version() const override { return k_version; }
  config::EvalMode mode() const override {
    return m_gpu_mode ? config::EvalMode::gpu : config::EvalMode::cpu;
  }

  std::string device_description() const override {
    if (m_gpu_mode) {
      char buf[512];
      std::snprintf(
          buf, sizeof buf,
          "%s (compute capability %s, %d SMs, %.0f MB L2, %.0f GB memory%s); torch %s, "
          "CUDA %s, Triton %s, Python %s. Kernels: Triton, or CUDA C++ built with "
          "torch.utils.cpp_extension.load_inline.",
          m_gpu.value("name", "GPU").c_str(), m_gpu.value("capability", "?").c_str(),
          m_gpu.value("sms", 0), m_gpu.value("l2_bytes", 0.0) / 1e6,
          m_gpu.value("memory_bytes", 0.0) / 1e9,
          m_peaks ? (", " + std::to_string(static_cast<int>(m_peaks->mem_bw_bytes_s / 1e9)) +
                     " GB/s by its datasheet")
                        .c_str()
                  : "",
          m_versions.value("torch", "?").c_str(), m_versions.value("cuda", "?").c_str(),
          m_versions.value("triton", "?").c_str(), m_versions.value("python", "?").c_str());
      return buf;
    }
    return "CPU (x86_64), one thread per side; torch " + m_versions.value("torch", "?") +
           ", Python " + m_versions.value("python", "?") +
           ", compiler: " + m_versions.value("compiler", "?") +
           ". Kernels are C++ built with torch.utils.cpp_extension.load_inline (CPU only).";
  }

  void shutdown() override {
    std::deque<std::pair<Request, Callback>> left;
    {
      std::lock_guard lk(m_mu);
      if (m_stopping && m_threads.empty()) return;
      m_stopping = true;
      left.swap(m_queue);
    }
    m_cv.notify_all();
    if (m_pool) m_pool->stop();  // evaluations waiting for a GPU end as interrupted
    // Jobs in flight are killed; their evaluations end as worker_crash.
    if (m_zygote) m_zygote->stop();
    for (auto& t : m_threads)
      if (t.joinable()) t.join();
    m_threads.clear();
    for (auto& [req, cb] : left) {
      Report r = base_report(req);
      r.error = "the evaluator shut down before this evaluation started";
      r.interrupted = true;
      try {
        cb(std::move(r));
      } catch (...) {}
    }
  }

 private:
  void loop() {
    while (true) {
      std::pair<Request, Callback> item;
      {
        std::unique_lock lk(m_mu);
        m_cv.wait(lk, [&] { return m_stopping || !m_queue.empty(); });
        if (m_stopping) return;
        item = std::move(m_queue.front());
        m_queue.pop_front();
      }
      Report r;
      try {
        r = run(item.first);
      } catch (const std::exception& e) {
        r = base_report(item.first);
        r.status = Verdict::worker_crash;
        r.error = std::string("evaluator error: ") + e.what();
      }
      {
        // shutdown() kills the workers of evaluations in flight: what such a
        // run reports (a crash, or a verdict about a killed candidate) is not
        // a result.
        std::lock_guard lk(m_mu);
        if (m_stopping) r.interrupted = true;
      }
      try {
        item.second(std::move(r));
      } catch (const std::exception& e) {
        KLOG_ERROR("[eval {}] callback threw: {}", item.first.request_id, e.what());
      } catch (...) {}
    }
  }

  Report base_report(const Request& req) const {
    Report r;
    r.request_id = req.request_id;
    r.evaluator_version = k_version;
    r.mode = m_gpu_mode ? "gpu" : "cpu";
    r.rules_skipped = !req.rules;
    return r;
  }

  protocol::Settings settings(const Request& req) const {
    protocol::Settings st;
    st.tolerance = m_cfg.tolerance;
    st.torch_ops = m_cfg.torch_ops;
    st.memory_budget_mb = budget_mb();
    st.gpu = m_gpu_mode;
    // The knobs (knobs.hpp) override what is chosen here.
    // Runners a side: 2 on the CPU, 4 for a GPU SUBMIT, where a 3.8 us
    // kernel's time moves by up to 5% from one process to another (sd
    // 1.45-2%; the speedup carries sd * sqrt(1/n_ref + 1/n_cand) of it;
    // issue #7), and 1 for a GPU CHECK (it times nothing; each idle runner
    // would still start up on the measure job's cores).
    if (m_gpu_mode) {
      st.reference_runners = st.candidate_runners =
          req.mode == Mode::submit ? k_gpu_runners_a_side : 1;
    }
    const EnvKnobs& k = m_knobs;
    if (k.reference_runners) st.reference_runners = *k.reference_runners;
    if (k.candidate_runners) st.candidate_runners = *k.candidate_runners;
    if (k.judge_shares_core) st.judge_shares_core = *k.judge_shares_core;
    if (k.timing_batched_cap) st.timing_batched_cap = *k.timing_batched_cap;
    if (k.timing_block_ms) st.timing_block_ms = *k.timing_block_ms;
    if (k.timing_calibrations) st.timing_calibrations = *k.timing_calibrations;
    if (k.timing_batch_us) st.timing_batch_us = *k.timing_batch_us;
    if (k.timing_spin_us) st.timing_spin_us = *k.timing_spin_us;
    if (k.timing_heap_only) st.timing_heap_only = *k.timing_heap_only;
    if (k.timing_max_s) st.timing_max_s = *k.timing_max_s;
    st.profile_first_call = k.profile_first_call;
    st.fake_cuda = k.fake_cuda;
    if (m_gpu_mode) {
      st.l2_bytes = m_gpu.value("l2_bytes", 0);
      st.runner_env = runner_env(req.code);
      // KORCH_RUNNER_EXEC=1 lets every runner exec; by default only a
      // Triton candidate's runners may (see measure()).
      st.runner_exec = k.runner_exec;
    }
    return st;
  }

  // gpu: the budget is of GPU memory (gpu_facts.hpp).
  std::int64_t budget_mb() const {
    if (!m_gpu_mode) return m_cfg.memory_budget_mb;
    return gpu_memory_budget_mb(m_cfg.memory_budget_mb, m_gpu.value("memory_bytes", 0.0));
  }

  // Triton's cache is per candidate (content-addressed by its code) and per
  // GPU kind; the runners must not exec ldconfig to find libcuda.
  std::string triton_dir(const std::string& code) const {
    return m_cache + "/triton/" + m_versions.value("arch", "gpu") + "-" +
           sha256_hex(code).substr(0, 24);
  }
  // Written by the daemon (not the candidate) after a warm-up succeeded: the
  // candidate's kernels and autotuning choices are in its cache, so a later
  // evaluation of the same code (CHECK then SUBMIT, a repeat) skips the
  // warm-up job and times the same kernels.
  std::string warmed_marker(const std::string& code) const { return triton_dir(code) + ".warmed"; }

  json runner_env(const std::string& code) const {
    const std::string dir = triton_dir(code);
    json env;
    env["TRITON_CACHE_DIR"] = dir;
    env["TRITON_HOME"] = dir;
    env["TRITON_CACHE_AUTOTUNING"] = "1";
    const std::string libcuda = m_versions.value("libcuda_dir", "");
    if (!libcuda.empty()) env["TRITON_LIBCUDA_PATH"] = libcuda;
    return env;
  }

  // gpu >= 0: the job's only GPU (its lease); the job runs on that GPU's
  // reserved cores. gpu < 0 in gpu mode: a CPU job (compile, rules), kept
  // off every GPU's cores.
  protocol::Spawn spawn(int gpu = -1) const {
    protocol::Spawn sp;
    sp.memory_budget_mb = m_cfg.memory_budget_mb;
    // gpu: a cgroup caps the job's host memory; a measure job has up to
    // 1 + 2 * k_gpu_runners_a_side CUDA processes (the judge and its runners).
    if (m_gpu_mode) {
      sp.memory_limit_mb =
          gpu_job_host_limit_mb(1 + 2 * k_gpu_runners_a_side, m_cfg.memory_budget_mb);
      if (gpu >= 0) {
        sp.gpu = gpu;
        if (auto it = m_gpu_cpus.find(gpu); it != m_gpu_cpus.end()) sp.cpus = it->second;
      } else {
        sp.cpus = m_cpu_job_cpus;
      }
    }
    return sp;
  }

  // gpu mode: two cores per GPU for its measure jobs (the judge and two
  // runners take turns: the protocol is synchronous), the rest for compiles;
  // compile slots by cores and host memory unless configured.
  // Cores are reserved by GPU index for every GPU of the host, not only
  // the configured ones (GpuPool::plan_cores), so two korch processes given
  // different GPUs of one host never time on the same cores nor compile on
  // the other's.
  void plan_gpu_host(const std::vector<int>& gpus) {
    const int host_gpus =
        std::max(m_gpu.value("count", 1), *std::max_element(gpus.begin(), gpus.end()) + 1);
    const GpuPool::CorePlan plan = GpuPool::plan_cores(usable_cpus(), host_gpus);
    const std::vector<int>& rest = plan.rest;
    if (plan.per_gpu > 0) {
      for (int g : gpus) m_gpu_cpus[g] = plan.per_gpu_cores.at(g);
      m_cpu_job_cpus = rest;
    }
    int slots = m_cfg.compile_jobs;
    if (slots <= 0) {
      struct sysinfo si {};
      std::int64_t mem_mb = 0;
      if (sysinfo(&si) == 0) mem_mb = static_cast<std::int64_t>(si.totalram) * si.mem_unit >> 20;
      const auto by_mem = static_cast<int>(std::max<std::int64_t>(1, mem_mb / k_compile_host_mb));
      slots = std::max(1, std::min(static_cast<int>(rest.size()), by_mem));
    }
    m_compile_slot_count = slots;
    m_compile_slots = std::make_unique<std::counting_semaphore<>>(slots);
    KLOG_INFO("[eval] gpu mode: {} GPU(s), {} compile slot(s), {} core(s) for compiles",
              gpus.size(), slots, rest.size());
  }

  void finish(Report& r, const std::chrono::steady_clock::time_point t0) const {
    r.wall_s = std::chrono::duration<double>(std::chrono::steady_clock::now() - t0).count();
    if (m_daemon_nondumpable) r.evidence["daemon_nondumpable"] = true;
    if (!m_knobs.recorded.empty()) r.evidence["env_knobs"] = m_knobs.recorded;
    r.reward = reward_for(m_cfg.reward, r);
  }

  // The stage outcome did not produce a result: name why, honestly.
  static void job_failed(Report& r, const JobOutcome& o, const char* stage) {
    if (o.timed_out) {
      r.status = Verdict::timeout;
      r.error = std::string(stage) + " exceeded the wall-clock limit and was killed";
    } else {
      r.status = Verdict::worker_crash;
      r.error = std::string("the ") + stage + " worker ended without a result" +
                (o.error.empty() ? "" : ": " + o.error) + " (exit code " +
                std::to_string(o.exit_code) +
                (o.signal ? ", signal " + std::to_string(o.signal) : "") + ")";
    }
    r.runtime_detail = tail(
        o.worker_log + (o.candidate_log.empty() ? "" : "\n--- candidate ---\n" + o.candidate_log));
  }

  Report run(const Request& req) {
    const auto t0 = std::chrono::steady_clock::now();
    Report r = base_report(req);
    json& evidence = r.evidence;
    json& stages = evidence["stages"] = json::object();  // seconds per stage
    const std::string jobs_root = m_cache + "/jobs";

    if (req.device && *req.device != (m_gpu_mode ? config::EvalMode::gpu : config::EvalMode::cpu)) {
      r.status = Verdict::worker_crash;
      r.error = "the " + std::string(to_string(mode())) + " evaluator cannot evaluate on device '" +
                std::string(to_string(*req.device)) + "'";
      finish(r, t0);
      return r;
    }

    // 1. Rules (also run with rules off: they resolve the load_inline arguments).
    protocol::RulesResult rules;
    {
      JobDir dir(jobs_root, "rules");
      (void)dir.write_job(protocol::rules_job(settings(req), req.code));
      JobOutcome o = m_zygote->run(JobRole::rules, dir.path(), spawn().dump(), std::nullopt,
                                   k_rules_timeout_s);
      auto parsed = protocol::parse_rules(o.result_json);
      if (!parsed || !parsed->error.empty()) {
        if (parsed) {
          r.status = Verdict::worker_crash;
          r.error = parsed->error;
          r.runtime_detail = tail(parsed->detail);
        } else {
          job_failed(r, o, "rule");
        }
        finish(r, t0);
        return r;
      }
      rules = std::move(*parsed);
      r.protections = rules.protections;
      stages["rules_s"] = o.wall_s;
      evidence["rules"] = {{"ok", rules.ok},
                           {"violations", rules.violations_json},
                           {"rules_version", rules.rules_version},
                           {"wall_s", o.wall_s},
                           {"skipped", !req.rules}};
      if (req.rules && !rules.ok) {
        r.status = Verdict::rule_violation;
        if (!rules.violations.empty()) {
          r.rule_id = rules.violations[0].rule;
          std::string msg;
          for (auto& v : rules.violations)
            msg += "line " + std::to_string(v.line) + ": [" + v.rule + "] " + v.message + "\n";
          r.error = tail(msg);
        } else {
          r.error = "the static rules rejected the candidate";
        }
        finish(r, t0);
        return r;
      }
    }

    // gpu, KORCH_EVAL_COMPILE_UNDER_LEASE=1: the GPU is held from here, as in
    // harnesses that compile inside the evaluation (the benchmark's baseline).
    std::optional<GpuPool::Lease> early;
    if (m_gpu_mode && m_knobs.compile_under_lease) {
      early = wait_for_gpu(req, stages, r);
      if (!early) {
        finish(r, t0);
        return r;
      }
    }
    const auto held_since = std::chrono::steady_clock::now();

    // 2. Compile every statically resolved load_inline into the cache.
    const auto c0 = std::chrono::steady_clock::now();
    json prebuilt = json::object();
    json compile_ev = json::array();
    json allow_extra = json::array();
    if (!rules.load_inline.empty() && rules.glue_probe) {
      // What load_inline's own binding glue imports (built once per versions).
      auto probe = m_compile_cache.get(rules.glue_probe->entry, rules.glue_probe->key, compile_ev,
                                       json::array(), true, "");
      if (probe) allow_extra = probe->undefined;
    }
    // A cached build's symbol verdict holds only under the allowlist (and
    // glue allowance) it was made under.
    const std::string policy =
        rules.symbol_policy + "+glue-" + sha256_hex(allow_extra.dump()).substr(0, 16);
    for (const auto& li : rules.load_inline) {
      if (!li.unresolved.empty()) {
        r.status = Verdict::compile_error;
        r.error = "line " + std::to_string(li.lineno) +
                  ": load_inline arguments are not statically resolvable (" + li.unresolved + ")";
        finish(r, t0);
        return r;
      }
      auto c = m_compile_cache.get(li.entry, li.key, compile_ev, allow_extra, false, policy);
      if (!c) {
        r.status = Verdict::worker_crash;
        r.error = c.error().message;
        evidence["compile"] = compile_ev;
        finish(r, t0);
        return r;
      }
      const protocol::CompileManifest& m = *c;
      if (m.status == protocol::CompileStatus::compile_error) {
        r.status = Verdict::compile_error;
        r.error = "the load_inline extension '" + li.name() + "' failed to compile";
        r.compile_log = tail(m.log);
        evidence["compile"] = compile_ev;
        finish(r, t0);
        return r;
      }
      if (m.status == protocol::CompileStatus::rule_violation && req.rules) {
        r.status = Verdict::rule_violation;
        r.rule_id =
            m.violations.empty() || m.violations[0].rule.empty() ? "symbols" : m.violations[0].rule;
        std::string msg;
        for (auto& v : m.violations) msg += v.message + "\n";
        r.error =
            tail(msg.empty() ? "the built library calls functions outside the allowlist" : msg);
        evidence["compile"] = compile_ev;
        finish(r, t0);
        return r;
      }
      prebuilt[li.key] = {
          {"dir", m_cache + "/cache/" + li.key}, {"module", m.module}, {"so", m.so}};
    }
    evidence["compile"] = compile_ev;
    stages["compile_s"] = seconds_since(c0);
    const bool triton = rules.language == protocol::CandidateLanguage::triton;

    if (m_gpu_mode) {
      on_gpu(req, prebuilt, triton, std::move(early), held_since, r, evidence);
    } else {
      // 4. Measure: the judge and its runners (two a side).
      const auto m0 = std::chrono::steady_clock::now();
      auto res = measure(req, prebuilt, r, evidence, -1, triton);
      // Runner processes whose times the judge distrusts: measured again
      // with a fresh judge and fresh runners, at most k_timing_remeasures
      // times. A reference-side reason is the host's (the reference's code
      // is the task's): the next run waits for the load to pass, and if it
      // stays the outcome is infrastructure (worker_crash, run again by the
      // episode, never the candidate's verdict). Only the candidate's own
      // runners disagreeing ends in impossible_timing.
      for (int again = 0; res && again < k_timing_remeasures; ++again) {
        const std::string why = res->timing_distrust();
        if (why.empty()) break;
        const bool machine = res->timing_distrust_is_machine();
        KLOG_WARN("[eval {}] timing distrusted ({}), measuring again: {}", req.request_id,
                  machine ? "the host" : "the candidate's runners", why);
        evidence["timing_remeasured"].push_back(why);
        if (machine && !pause_unless_stopping(std::chrono::seconds(k_timing_pause_s << again))) {
          r.error = "the evaluator shut down while waiting to measure again";
          r.interrupted = true;
          finish(r, t0);
          return r;
        }
        res = measure(req, prebuilt, r, evidence, -1, triton);
      }
      stages["measure_s"] = seconds_since(m0);
      if (res) apply_measure(*res, r, evidence);
      if (res && r.status == Verdict::ok) {
        if (const std::string why = res->timing_distrust(); !why.empty()) {
          const int n = k_timing_remeasures + 1;
          r.correct = false;
          if (res->timing_distrust_is_machine()) {
            r.status = Verdict::worker_crash;
            r.error = fmt::format(
                "infrastructure: the runners' times could not be trusted in {} measurements "
                "(the host, not the candidate's fault): {}",
                n, why);
            evidence["infrastructure"].push_back({{"run", n}, {"why", why}});
          } else {
            r.status = Verdict::impossible_timing;
            r.error = fmt::format("the runners' times could not be trusted in {} measurements: {}",
                                  n, why);
          }
        }
      }
    }
    if (m_daemon_nondumpable && evidence.contains("measure"))
      r.protections.push_back("daemon_nondumpable");
    finish(r, t0);
    return r;
  }

  // Sleeps for `d` unless the evaluator stops first; false when it stopped.
  bool pause_unless_stopping(std::chrono::seconds d) {
    std::unique_lock lk(m_mu);
    return !m_cv.wait_for(lk, d, [&] { return m_stopping; });
  }

  static GpuPool::Priority priority_of(const Request& req) {
    return req.mode == Mode::submit ? GpuPool::Priority::submit : GpuPool::Priority::check;
  }

  // Waits for a GPU lease (SUBMIT first), adding the wait to stages.lease_wait_s;
  // nullopt, with r marked interrupted, when the evaluator stops first.
  std::optional<GpuPool::Lease> wait_for_gpu(const Request& req, json& stages, Report& r) {
    const auto w0 = std::chrono::steady_clock::now();
    auto lease = m_pool->acquire(priority_of(req));
    stages["lease_wait_s"] = stages.value("lease_wait_s", 0.0) + seconds_since(w0);
    // Of that, the wait for other korch processes on this host (one GPU,
    // one measurement, host-wide).
    if (lease)
      stages["host_lease_wait_s"] = stages.value("host_lease_wait_s", 0.0) + lease->host_wait_s();
    if (!lease) {
      r.error = "the evaluator shut down before a GPU was free";
      r.interrupted = true;
    }
    return lease;
  }

  // A crash or hang that may have left the GPU itself broken.
  static bool gpu_suspect(const Report& r) {
    if (r.status == Verdict::worker_crash || r.status == Verdict::timeout) return true;
    if (r.status != Verdict::runtime_error) return false;
    for (const std::string* t : {&r.error, &r.runtime_detail})
      if (t->find("CUDA") != std::string::npos || t->find("cuda") != std::string::npos ||
          t->find("device-side") != std::string::npos)
        return true;
    return false;
  }

  // gpu mode, stages 3-5 under one lease: the Triton warm-up, the measure
  // job, the roofline check and (after a crash) the GPU's health check. A
  // GPU that fails the check leaves the pool and the evaluation runs again
  // on the next lease (at most k_gpu_attempts runs); the report of a run on
  // a failed GPU is never the verdict while another attempt remains.
  void on_gpu(const Request& req, const json& prebuilt, bool triton,
              std::optional<GpuPool::Lease> lease, std::chrono::steady_clock::time_point held_since,
              Report& r, json& evidence) {
    const Report before = r;
    for (int attempt = 1;; ++attempt) {
      json& stages = evidence["stages"];  // evidence is rebuilt after a failed GPU
      if (!lease) {
        lease = wait_for_gpu(req, stages, r);
        if (!lease) return;
        held_since = std::chrono::steady_clock::now();
      }
      const auto l0 = held_since;
      const int gpu = lease->gpu();
      evidence["gpu"] = gpu;
      evidence["gpu_lock"] = m_pool->lock_path(gpu);

      // 3. Triton compiles (and autotunes) the candidate's kernels in a
      //    sandboxed warm-up before anything is timed.
      if (triton && fs::exists(warmed_marker(req.code))) {
        evidence["warm"] = {{"ok", true}, {"cached", true}};
      } else if (triton) {
        const auto w0 = std::chrono::steady_clock::now();
        warm(req, prebuilt, gpu, evidence);
        stages["warm_s"] = seconds_since(w0);
      }
      // 4. Measure: the judge and its runners (two a side).
      const auto m0 = std::chrono::steady_clock::now();
      auto res = measure(req, prebuilt, r, evidence, gpu, triton);
      if (res && !res->infrastructure.empty()) {
        // The host's fault, not the candidate's: never its verdict while
        // another run remains. The lease goes back during the pause.
        stages["measure_s"] = stages.value("measure_s", 0.0) + seconds_since(m0);
        stages["lease_s"] = stages.value("lease_s", 0.0) + seconds_since(l0);
        const int n = static_cast<int>(evidence["infrastructure"].size()) + 1;
        const int pause = std::min(k_infra_pause_max_s, 5 << std::min(n - 1, 4));
        evidence["infrastructure"].push_back(
            {{"gpu", gpu}, {"run", n}, {"why", res->infrastructure}, {"pause_s", pause}});
        if (n < k_infra_attempts) {
          KLOG_WARN("[eval {}] GPU {}: {}; running it again in {} s (run {} of {})", req.request_id,
                    gpu, res->infrastructure, pause, n, k_infra_attempts);
          lease.reset();
          --attempt;  // not a GPU failure
          if (!pause_unless_stopping(std::chrono::seconds(pause))) {
            r.error = "the evaluator shut down while waiting to run the evaluation again";
            r.interrupted = true;
            return;
          }
          continue;
        }
        apply_measure(*res, r, evidence);
        r.error =
            fmt::format("infrastructure: {} ({} runs over {:.0f} s; not the candidate's fault)",
                        res->infrastructure, n, seconds_since(held_since));
        return;
      }
      if (res) {
        remember_work(req.task.source, res->work());
        apply_measure(*res, r, evidence);
        // 5. The roofline: a time under k_impossible_fraction * t_min is
        //    measured again; under it twice, the timing is what is broken.
        roofline_check(req, prebuilt, *res, r, evidence, gpu, triton);
      }
      stages["measure_s"] = seconds_since(m0);
      bool healthy = true;
      if (gpu_suspect(r)) {
        const auto h0 = std::chrono::steady_clock::now();
        healthy = lease->check_health();  // on failure the GPU leaves the pool
        stages["health_s"] = seconds_since(h0);
        evidence["gpu_health_after"] = healthy ? "ok" : "failed";
      }
      stages["lease_s"] = stages.value("lease_s", 0.0) + seconds_since(l0);
      if (healthy) return;
      KLOG_ERROR("[eval {}] GPU {} failed its health check after this evaluation (attempt {})",
                 req.request_id, gpu, attempt);
      evidence["gpu_failures"].push_back(
          {{"gpu", gpu}, {"attempt", attempt}, {"verdict", to_string(r.status)}});
      if (attempt >= k_gpu_attempts) return;  // the verdict stands, with the evidence
      lease.reset();
      const json failures = evidence["gpu_failures"];
      const json rules_ev = evidence.value("rules", json::object());
      const json compile_ev = evidence.value("compile", json::array());
      const json stages_ev = stages;
      r = before;
      evidence = json::object();
      evidence["rules"] = rules_ev;
      evidence["compile"] = compile_ev;
      evidence["stages"] = stages_ev;
      evidence["gpu_failures"] = failures;
    }
  }

  void warm(const Request& req, const json& prebuilt, int gpu, json& evidence) {
    JobDir dir(m_cache + "/jobs", "warm");
    const protocol::Settings st = settings(req);
    (void)dir.write_job(protocol::warm_job(st, req.code, req.task.source, prebuilt,
                                           st.runner_env.value("TRITON_CACHE_DIR", "")));
    JobOutcome o =
        m_zygote->run(JobRole::warm, dir.path(), spawn(gpu).dump(), std::nullopt, k_warm_timeout_s);
    const protocol::WarmResult w = protocol::parse_warm(o.result_json);
    evidence["warm"] = {{"ok", w.ok}, {"wall_s", o.wall_s}, {"timed_out", o.timed_out}};
    if (w.ok) (void)write_file_atomic(warmed_marker(req.code), "");
    // A failed warm-up is not a verdict: the measure job meets the same
    // error and reports it with the judge's evidence.
    if (!w.ok && !w.error.empty()) evidence["warm"]["error"] = tail(w.error, 1500);
  }

  // Runs the measure job; null (with r filled in) when it left no result.
  // triton: the runners may exec. Measured on the H200 (Triton 3.6): even
  // after the sandboxed warm-up filled the candidate's cache, Triton's
  // launcher build in the runner ran gcc again ("Operation not permitted:
  // /usr/bin/gcc"), so a no-exec runner cannot run Triton there yet. The
  // rules already keep subprocess/os/ctypes out of the candidate's Python and
  // the symbol allowlist keeps exec out of native code; uid, namespaces, no
  // network and no_new_privs still hold. The report says "runner_may_exec".
  std::optional<protocol::MeasureResult> measure(const Request& req, const json& prebuilt,
                                                 Report& r, json& evidence, int gpu, bool triton) {
    JobDir dir(m_cache + "/jobs", "measure");
    protocol::Settings st = settings(req);
    if (m_gpu_mode && triton) st.runner_exec = true;
    if (st.runner_exec) evidence["runner_may_exec"] = true;
    protocol::MeasureJob mj;
    mj.mode = req.mode;
    mj.code = req.code;
    mj.task_source = req.task.source;
    mj.task_name = req.task.name;
    mj.prebuilt = prebuilt;
    mj.timeout_s = m_cfg.timeout_s;
    if (m_gpu_mode) mj.work = known_work(req.task.source);
    (void)dir.write_job(protocol::measure_job(st, mj));
    const double limit = m_cfg.timeout_s + k_measure_grace_s;
    std::optional<std::uint64_t> seed;
    if (req.mode == Mode::submit) seed = req.secret_seed;
    JobOutcome o;
    if (m_gpu_mode) {
      // The caller holds the GPU's lease.
      o = m_zygote->run(JobRole::measure, dir.path(), spawn(gpu).dump(), seed, limit);
    } else if (req.mode == Mode::submit) {
      std::unique_lock timing(m_timing);  // no compile while timing
      o = m_zygote->run(JobRole::measure, dir.path(), spawn().dump(), seed, limit);
    } else {
      std::shared_lock shared(m_timing);
      o = m_zygote->run(JobRole::measure, dir.path(), spawn().dump(), seed, limit);
    }
    evidence["measure_wall_s"] = o.wall_s;
    if (!protocol::has_result(o.result_json)) {
      job_failed(r, o, "measure");
      return std::nullopt;
    }
    auto m = protocol::parse_measure(o.result_json);
    if (!m) {
      // A verdict the daemon does not know is a protocol error, said plainly.
      r.status = Verdict::worker_crash;
      r.error = m.error().message;
      return std::nullopt;
    }
    m->candidate_log = tail(o.candidate_log);
    return std::move(*m);
  }

  void apply_measure(const protocol::MeasureResult& m, Report& r, json& evidence) const {
    r.status = m.verdict;
    r.correct = m.correct && r.status == Verdict::ok;
    static_cast<Measured&>(r) = m;
    r.error = m.error;
    r.notes = m.notes;
    std::string detail = m.runtime_detail;
    if (r.status != Verdict::ok && !m.candidate_log.empty())
      detail += "\n--- candidate output ---\n" + m.candidate_log;
    r.runtime_detail = tail(detail);
    // The candidate runner's protections are the ones a cheat meets.
    r.protections = m.candidate_protections.empty() ? m.protections : m.candidate_protections;
    evidence["measure"] = m.evidence;
    evidence["judge_protections"] = m.protections;
  }

  void roofline_check(const Request& req, const json& prebuilt, const protocol::MeasureResult& res,
                      Report& r, json& evidence, int gpu, bool triton) {
    if (!m_peaks) return;
    const json work = res.work();
    if (!work.contains("flops")) return;
    auto prec = roofline::precision_from(work.value("dtype", "float32"), m_cfg.tolerance);
    if (!prec) return;
    roofline::WorkEstimate w{work.value("flops", 0.0), work.value("bytes", 0.0)};
    const double t_min = roofline::t_min_s(w, *m_peaks, *prec);
    if (!(t_min > 0)) return;
    r.t_min_ms = t_min * 1e3;
    evidence["roofline"] = {{"gpu", m_peaks->name},
                            {"precision", roofline::to_string(*prec)},
                            {"flops", w.flops},
                            {"bytes", w.bytes},
                            {"t_min_ms", t_min * 1e3}};
    if (r.status != Verdict::ok || !r.cand_time_ms) return;
    if (roofline::classify(*r.cand_time_ms / 1e3, t_min) == roofline::Classification::ok) return;
    // Suspicious: measure again (a fresh judge, fresh runners).
    json again_ev = json::object();
    Report again = r;
    auto res2 = measure(req, prebuilt, again, again_ev, gpu, triton);
    double t2 = 0;
    if (res2 && res2->cand_time_ms) t2 = *res2->cand_time_ms / 1e3;
    evidence["roofline"]["remeasured_ms"] = t2 * 1e3;
    if (t2 > 0 && roofline::classify(t2, t_min) == roofline::Classification::ok) return;
    r.status = Verdict::impossible_timing;
    r.correct = false;
    r.error = "measured " + std::to_string(*r.cand_time_ms) + " ms (and again " +
              std::to_string(t2 * 1e3) + " ms), under " +
              std::to_string(roofline::k_impossible_fraction) + " x the roofline bound " +
              std::to_string(t_min * 1e3) + " ms of " + m_peaks->name +
              ": the timing, not the kernel, is broken";
  }

  // The work (flops, bytes, dtype) of a task's reference: a function of the
  // task's source (KernelBench input shapes are fixed), torch (which ops a
  // module dispatches to) and the counter's own code, counted once by the
  // judge and kept under that key, in memory and in <cache>/work/, so later
  // evaluations of the task do not count again under the GPU lease. A
  // changed task file, torch or counter counts again.
  std::string work_path(const std::string& task_source) const {
    const std::string key = task_source + '\0' + m_versions.value("torch", "?") + '\0' +
                            m_versions.value("flops_counter", "?");
    return m_cache + "/work/" + sha256_hex(key).substr(0, 32) + ".json";
  }
  std::optional<json> known_work(const std::string& task_source) {
    const std::string path = work_path(task_source);
    std::lock_guard lk(m_work_mu);
    if (auto it = m_work.find(path); it != m_work.end()) return it->second;
    auto text = read_file(path);
    if (!text) return std::nullopt;
    json w = json::parse(*text, nullptr, false);
    if (w.is_discarded() || !w.is_object() || !w.contains("flops")) return std::nullopt;
    m_work[path] = w;
    return w;
  }
  void remember_work(const std::string& task_source, const json& w) {
    if (!w.is_object() || !w.contains("flops") || w.value("cached", false)) return;
    const std::string path = work_path(task_source);
    std::lock_guard lk(m_work_mu);
    m_work[path] = w;
    std::error_code ec;
    fs::create_directories(m_cache + "/work", ec);
    (void)write_file_atomic(path, w.dump());
  }

  // The GPU pool's health check: a small allocation and a sum on that GPU,
  // in a sandboxed job of its own.
  //
  // It runs after the job that made the GPU suspect has exited, but a PID
  // namespace's other processes (the runners, holding CUDA contexts) are
  // still being torn down by the kernel and driver when its PID 1's exit is
  // reported. A check that fails once is therefore tried again after a
  // pause: a GPU left broken (a hung GPU, a context the driver cannot
  // recover) fails every try; one that was busy tearing down passes the next.
  bool gpu_healthy(int gpu) {
    std::string why;
    for (int attempt = 1; attempt <= k_health_tries; ++attempt) {
      const GpuHealth h = gpu_health_check(*m_zygote, m_cache + "/jobs", spawn(gpu).dump(), &why);
      if (h == GpuHealth::ok) {
        if (attempt > 1)
          KLOG_WARN("[eval] GPU {} passed its health check on try {} (try 1: {})", gpu, attempt,
                    why);
        return true;
      }
      if (h == GpuHealth::not_run && stopping()) {
        // The evaluator is stopping: its evaluations end interrupted and
        // nothing about this GPU is known; it stays in the pool.
        KLOG_INFO("[eval] GPU {} health check not run: the evaluator is stopping ({})", gpu, why);
        return true;
      }
      KLOG_WARN("[eval] GPU {} health check try {} of {} {}: {}", gpu, attempt, k_health_tries,
                h == GpuHealth::not_run ? "could not run" : "failed", why);
      if (attempt < k_health_tries) std::this_thread::sleep_for(k_health_pause);
    }
    KLOG_ERROR("[eval] GPU {} failed its health check {} times: {}", gpu, k_health_tries, why);
    return false;
  }

  bool stopping() {
    std::lock_guard lk(m_mu);
    return m_stopping;
  }

  // Runs a compile-role job (a compile, or a symbol re-check) building into
  // `build_dir`: in gpu mode on a compile slot of the CPU pool (the GPUs keep
  // measuring meanwhile; the slot is returned however the job ends), in cpu
  // mode never while a timing job runs.
  JobOutcome run_compile_role(const JobDir& jdir, const std::string& build_dir) {
    protocol::Spawn sp = spawn();
    sp.build_dir = build_dir;
    if (m_gpu_mode) {
      m_compile_slots->acquire();
      struct Slot {
        std::counting_semaphore<>& slots;
        ~Slot() { slots.release(); }
      } slot{*m_compile_slots};
      return m_zygote->run(JobRole::compile, jdir.path(), sp.dump(), std::nullopt,
                           k_compile_timeout_s);
    }
    std::shared_lock shared(m_timing);
    return m_zygote->run(JobRole::compile, jdir.path(), sp.dump(), std::nullopt,
                         k_compile_timeout_s);
  }

  config::EvaluatorConfig m_cfg;
  std::string m_cache;
  std::unique_ptr<Zygote> m_zygote;
  bool m_daemon_nondumpable;
  json m_versions = json::object();
  json m_gpu;  // gpu mode: facts read from the device
  bool m_gpu_mode = false;
  std::optional<roofline::GpuPeaks> m_peaks;  // datasheet peaks of that GPU, when known
  std::shared_mutex m_timing;                 // cpu mode: timing excludes compiles
  CompileCache m_compile_cache;  // builds by content; compiles run through run_compile_role
  // gpu mode
  std::unique_ptr<GpuPool> m_pool;
  std::map<int, std::vector<int>> m_gpu_cpus;  // GPU -> the cores of its measure jobs
  std::vector<int> m_cpu_job_cpus;             // cores of compile and rules jobs
  int m_compile_slot_count = 1;
  std::unique_ptr<std::counting_semaphore<>> m_compile_slots;
  std::mutex m_work_mu;
  std::map<std::string, json> m_work;  // work_path -> the task's counted work

  std::mutex m_mu;
  std::condition_variable m_cv;
  bool m_stopping = false;
  const EnvKnobs m_knobs;  // read once, by make_protected_evaluator
  std::deque<std::pair<Request, Callback>> m_queue;
  std::vector<std::thread> m_threads;
};

}  // namespace

Result<std::unique_ptr<Evaluator>> make_protected_evaluator(const config::EvaluatorConfig& cfg,
                                                            const std::string& cache_dir) {
  std::error_code ec;
  fs::create_directories(cache_dir + "/cache", ec);
  fs::create_directories(cache_dir + "/jobs", ec);
  fs::create_directories(cache_dir + "/run", ec);
  fs::create_directories(cache_dir + "/triton", ec);
  if (ec) return fail("cannot create the evaluator cache at " + cache_dir + ": " + ec.message());
  const std::string abs = fs::absolute(cache_dir, ec).lexically_normal().string();
  // Sandboxed workers run as unprivileged uids: every folder above the cache
  // must be searchable by "others" (a cache under a 0700 home is not).
  if (::geteuid() == 0) {
    for (fs::path p = fs::path(abs).parent_path(); !p.empty(); p = p.parent_path()) {
      auto st = fs::status(p, ec);
      if (!ec && (st.permissions() & fs::perms::others_exec) == fs::perms::none) {
        return fail(
            "the evaluator cache " + abs +
            " is not reachable by the sandbox's unprivileged user: " + p.string() +
            " is not searchable by others; set evaluator.cache_dir (or --cache-dir) elsewhere");
      }
      if (p == p.root_path()) break;
    }
  }
  // The candidate runner (uid nobody) must reach the built libraries.
  fs::permissions(abs + "/cache",
                  fs::perms::owner_all | fs::perms::group_read | fs::perms::group_exec |
                      fs::perms::others_read | fs::perms::others_exec,
                  ec);
  // The daemon holds API keys: no ptrace, no /proc/<pid>/mem, no core dumps.
  const bool nondumpable = prctl(PR_SET_DUMPABLE, 0) == 0;
  const int reaped = reap_orphans(abs + "/run");
  if (reaped > 0) KLOG_WARN("[eval] reaped {} worker zygote(s) left by a killed daemon", reaped);
  EnvKnobs knobs = EnvKnobs::read();
  // The workers' GLIBC_TUNABLES. CPU mode: no per-thread cache of small
  // freed blocks (tcache). The timing processes keep the memory they free in
  // their heap (korch_runner.keep_freed_memory), but torch's 64-byte-aligned
  // allocations leave a small trailing block behind each large one, and
  // while tcache holds it (as in use) the large block freed before it cannot
  // merge back into the heap's top: each call of ReLU at 4096^2 then took a
  // new 64 MB block and faulted it in (16,384 pages: ~180 ms a call, for a
  // ReLU of ~3 ms on the dev VM) for the first seven calls, until such
  // trailers filled tcache's bin, and the heap grew by 64 MB a call
  // meanwhile (strace: brk), blocks that stayed behind in each runner.
  // KORCH_WORKER_GLIBC_TUNABLES replaces it, for A/B runs (tried: huge pages
  // behind malloc, glibc.malloc.hugetlb=1: equal work at 4096^2 improved,
  // at 64x256 and 1024^2 it got worse -- whether a process gets huge pages
  // is one more per-process difference).
  std::string tunables = cfg.mode == config::EvalMode::cpu ? "glibc.malloc.tcache_count=0" : "";
  if (knobs.worker_glibc_tunables) tunables = *knobs.worker_glibc_tunables;
  auto z = Zygote::start(find_worker_path(), abs + "/run", knobs.fresh_process, tunables);
  if (!z) return std::unexpected(z.error());
  json gpu = json::object();
  std::vector<int> gpus;
  if (cfg.mode == config::EvalMode::gpu) {
    // Multi-GPU hosts: NVLink multicast off in this process and everything it
    // starts (the zygote's own environment sets them too).
    setenv("NCCL_NVLS_ENABLE", "0", 1);
    setenv("TORCH_SYMM_MEM_DISABLE_MULTICAST", "1", 1);
    setenv("NVSHMEM_DISABLE_NVLS", "1", 1);
    // The GPU's facts come from the device itself, in a sandboxed job.
    auto facts = query_gpu_facts(**z, abs + "/jobs");
    if (!facts) return fail("evaluator.mode = \"gpu\": " + facts.error().message);
    gpu = json::parse(*facts);
    auto list = config::parse_gpu_list(cfg.gpus, gpu.value("count", 1));
    if (!list) return fail("evaluator.gpus: " + list.error().message);
    gpus = *list;
  }
  return std::unique_ptr<Evaluator>(new ProtectedEvaluator(cfg, abs, std::move(*z), nondumpable,
                                                           gpu, std::move(gpus), std::move(knobs)));
}

}  // namespace korch::evaluator
