// The protected evaluator, cpu and gpu modes (DESIGN §5): rules → compile →
// (gpu: lease → Triton warm-up) → measure → (gpu: roofline → health), each a
// stage (evaluator/stages/) whose jobs are sandboxed and forked from the
// korch-worker zygote. This file keeps the queue, the threads, the order of
// the stages and the retry loops; where jobs run is the host (stages/host.hpp:
// the CPU, or GPUs under leases).
//
// Threads: evaluate() only enqueues. Pipeline threads each run one
// evaluation at a time, end to end (Host::threads: cpu, cfg.workers; gpu,
// enough for every compile slot and two evaluations per GPU in flight, so
// the next candidates compile while the GPUs measure).
//
// Runs again (retries.hpp, one cap for evaluator, queue and episode): an
// outcome that is not a result about the candidate -- the host's fault (the
// judge's `infrastructure`), a GPU that failed its health check after a
// crash -- runs again on the next lease, after a pause for the host's
// fault, at most k_max_runs runs in all.
#include "evaluator/protected_evaluator.hpp"

#include <fcntl.h>
#include <sys/prctl.h>
#include <unistd.h>

#include <fmt/format.h>
#include <algorithm>
#include <condition_variable>
#include <deque>
#include <filesystem>
#include <mutex>
#include <nlohmann/json.hpp>
#include <thread>

#include "config/gpus.hpp"
#include "evaluator/compile_cache.hpp"
#include "evaluator/gpu_facts.hpp"
#include "evaluator/job_dir.hpp"
#include "evaluator/retries.hpp"
#include "evaluator/stages/host.hpp"
#include "util/log.hpp"

namespace korch::evaluator {
namespace {

using json = nlohmann::json;
namespace fs = std::filesystem;
using stages::Next;

constexpr const char* k_version = schema::k_evaluator_version.data();  // protocol.json
constexpr double k_compile_timeout_s = 900;  // a cold CPU compile is ~30 s, more under load

class ProtectedEvaluator final : public Evaluator {
 public:
  ProtectedEvaluator(config::EvaluatorConfig cfg, std::string cache_dir, EvaluatorParts parts)
      : m_cfg(std::move(cfg)),
        m_cache(std::move(cache_dir)),
        m_jobs(std::move(parts.jobs)),
        m_clock(parts.clock ? std::move(parts.clock) : stages::real_clock()),
        m_knobs(std::move(parts.knobs)),
        m_daemon_nondumpable(parts.daemon_nondumpable),
        m_compile_cache(m_cache, [this](const JobDir& job, const std::string& build_dir) {
          return m_host->run_compile(*m_jobs, job.path(), build_dir, k_compile_timeout_s);
        }) {
    if (!m_knobs.recorded.empty())
      KLOG_WARN("[eval] evaluator knobs from the environment: {}", m_knobs.recorded.dump());
    json v = json::parse(m_jobs->versions_json(), nullptr, false);
    if (!v.is_discarded() && v.is_object()) m_versions = v;
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
    if (m_cfg.mode == config::EvalMode::gpu)
      m_host = stages::make_gpu_host(m_cfg, m_cache, parts.gpu, parts.gpus, m_versions, m_knobs,
                                     *m_jobs, *m_clock, m_stop);
    else
      m_host = stages::make_cpu_host(m_cfg);
    const int n = m_host->threads(m_cfg.workers);
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
  config::EvalMode mode() const override { return m_host->mode(); }
  std::string device_description() const override { return m_host->describe(m_versions); }

  void shutdown() override {
    std::deque<std::pair<Request, Callback>> left;
    {
      std::lock_guard lk(m_mu);
      if (m_stopping && m_threads.empty()) return;
      m_stopping = true;
      left.swap(m_queue);
    }
    m_stop.request();  // pauses end; health checks decide nothing
    m_cv.notify_all();
    m_host->stop();  // evaluations waiting for a GPU end as interrupted
    // Jobs in flight are killed; their evaluations end as worker_crash.
    if (m_jobs) m_jobs->stop();
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
    r.mode = m_cfg.mode == config::EvalMode::gpu ? "gpu" : "cpu";
    r.rules_skipped = !req.rules;
    return r;
  }

  void finish(Report& r, stages::Clock::time_point t0) const {
    r.wall_s = m_clock->seconds_since(t0);
    if (m_daemon_nondumpable) r.evidence["daemon_nondumpable"] = true;
    if (!m_knobs.recorded.empty()) r.evidence["env_knobs"] = m_knobs.recorded;
    r.reward = reward_for(m_cfg.reward, r);
  }

  Report run(const Request& req) {
    const auto t0 = m_clock->now();
    Report r = base_report(req);
    r.evidence["stages"] = json::object();  // seconds per stage
    stages::StageContext ctx{req,     m_cfg,      m_cache, *m_jobs,  *m_host, m_compile_cache,
                             m_knobs, m_versions, m_stop,  *m_clock, r};
    Next n = run_stage(ctx, nullptr, stages::device_check);
    if (n == Next::go_on) n = run_stage(ctx, "rules_s", stages::rules);
    // KORCH_EVAL_COMPILE_UNDER_LEASE=1: the GPU is held from here, as in
    // harnesses that compile inside the evaluation (the benchmark's baseline).
    if (n == Next::go_on && m_host->compiles_under_lease())
      n = run_stage(ctx, "lease_wait_s", stages::lease);
    if (n == Next::go_on) n = run_stage(ctx, "compile_s", stages::compile);
    if (n == Next::go_on) on_device(ctx);
    release(ctx);
    if (m_daemon_nondumpable && r.evidence.contains("measure"))
      r.protections.push_back("daemon_nondumpable");
    finish(r, t0);
    return r;
  }

  // The device goes back (the lease's time into stages.lease_s).
  void release(stages::StageContext& ctx) const {
    if (!ctx.device.lease) return;
    json& st = ctx.stages();
    st["lease_s"] = st.value("lease_s", 0.0) + m_clock->seconds_since(ctx.device.held_since);
    ctx.device = stages::Device{};
  }

  // Stages 3-6 on a device, run again while an outcome is not a result (the
  // host's fault, a GPU that failed its health check) and runs remain. A run
  // on a failed GPU, or one the host failed, is never the verdict while
  // another run remains.
  void on_device(stages::StageContext& ctx) {
    const Report before = ctx.report;
    stages::Clock::time_point first_held{};
    for (int run = 1;; ++run) {
      Next n = run_stage(ctx, "lease_wait_s", stages::lease);
      if (n != Next::go_on) return;
      if (run == 1) first_held = ctx.device.held_since;
      const int gpu = ctx.device.gpu;
      ctx.measured.reset();
      ctx.device_failed = false;
      n = run_stage(ctx, "warm_s", stages::warm);
      if (n == Next::go_on) n = run_stage(ctx, "measure_s", stages::measure);
      if (n == Next::go_on) n = run_stage(ctx, "measure_s", stages::roofline);
      if (n == Next::go_on) n = run_stage(ctx, "health_s", stages::health);
      release(ctx);
      if (n != Next::run_again || !again(ctx, before, run, gpu, first_held)) return;
    }
  }

  // After run `run` ended in Next::run_again: whether another run follows
  // (after its pause); if not, the report holds the outcome.
  bool again(stages::StageContext& ctx, const Report& before, int run, int gpu,
             stages::Clock::time_point first_held) {
    Report& r = ctx.report;
    json& evidence = r.evidence;
    const std::string& id = ctx.req.request_id;
    if (ctx.device_failed) {
      KLOG_ERROR("[eval {}] GPU {} failed its health check after this evaluation (run {} of {})",
                 id, gpu, run, k_max_runs);
      evidence["gpu_failures"].push_back(
          {{"gpu", gpu}, {"attempt", run}, {"verdict", to_string(r.status)}});
      if (run >= k_max_runs) return false;  // the verdict stands, with the evidence
      // A fresh report; what the runs so far found stays in the evidence.
      json kept = json::object();
      for (const char* key : {"rules", "compile", "stages", "gpu_failures", "infrastructure"})
        if (evidence.contains(key)) kept[key] = evidence[key];
      r = before;
      r.evidence = std::move(kept);
      return true;
    }
    // The host's fault, not the candidate's: the lease went back; the next
    // run waits for the host first.
    const protocol::MeasureResult& res = *ctx.measured;
    const auto pause = pause_before_run(run + 1);
    evidence["infrastructure"].push_back(
        {{"gpu", gpu}, {"run", run}, {"why", res.infrastructure}, {"pause_s", pause.count()}});
    if (run < k_max_runs) {
      KLOG_WARN("[eval {}] GPU {}: {}; running it again in {} s (run {} of {})", id, gpu,
                res.infrastructure, pause.count(), run, k_max_runs);
      if (ctx.clock.pause(pause, ctx.stop)) return true;
      r.error = "the evaluator shut down while waiting to run the evaluation again";
      r.interrupted = true;
      return false;
    }
    stages::apply_measure(res, r, evidence);
    r.error = fmt::format("infrastructure: {} ({} runs over {:.0f} s; not the candidate's fault)",
                          res.infrastructure, run, ctx.clock.seconds_since(first_held));
    return false;
  }

  const config::EvaluatorConfig m_cfg;
  const std::string m_cache;
  std::unique_ptr<JobRunner> m_jobs;  // the worker zygote
  std::shared_ptr<stages::Clock> m_clock;
  const EnvKnobs m_knobs;  // read once, by make_protected_evaluator
  const bool m_daemon_nondumpable;
  json m_versions = json::object();
  stages::StopFlag m_stop;
  std::unique_ptr<stages::Host> m_host;  // cpu or gpu
  CompileCache m_compile_cache;          // builds by content; compiles run on the host

  std::mutex m_mu;
  std::condition_variable m_cv;
  bool m_stopping = false;
  std::deque<std::pair<Request, Callback>> m_queue;
  std::vector<std::thread> m_threads;
};

}  // namespace

std::unique_ptr<Evaluator> assemble_protected_evaluator(const config::EvaluatorConfig& cfg,
                                                        const std::string& cache_dir,
                                                        EvaluatorParts parts) {
  return std::make_unique<ProtectedEvaluator>(cfg, cache_dir, std::move(parts));
}

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
  EvaluatorParts parts;
  parts.jobs = std::move(*z);
  parts.knobs = std::move(knobs);
  parts.daemon_nondumpable = nondumpable;
  if (cfg.mode == config::EvalMode::gpu) {
    // Multi-GPU hosts: NVLink multicast off in this process and everything it
    // starts (the zygote's own environment sets them too).
    setenv("NCCL_NVLS_ENABLE", "0", 1);
    setenv("TORCH_SYMM_MEM_DISABLE_MULTICAST", "1", 1);
    setenv("NVSHMEM_DISABLE_NVLS", "1", 1);
    // The GPU's facts come from the device itself, in a sandboxed job.
    auto facts = query_gpu_facts(*parts.jobs, abs + "/jobs");
    if (!facts) return fail("evaluator.mode = \"gpu\": " + facts.error().message);
    parts.gpu = std::move(*facts);
    auto list = config::parse_gpu_list(cfg.gpus, std::max(1, parts.gpu.count));
    if (!list) return fail("evaluator.gpus: " + list.error().message);
    parts.gpus = *list;
  }
  return assemble_protected_evaluator(cfg, abs, std::move(parts));
}

}  // namespace korch::evaluator
