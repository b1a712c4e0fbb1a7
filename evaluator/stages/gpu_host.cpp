// GPUs as the evaluator's host. Compiles run on a CPU pool (compile slots, on
// cores no GPU's measure job uses) and never hold a GPU; the Triton warm-up,
// the measurement, the roofline re-measure and the health check run under a
// GpuPool lease (one evaluation per GPU, SUBMIT first). A GPU that fails its
// health check after a crash leaves the pool. Facts about the GPU were read
// from the device at start (prompt, roofline, L2 size); a memory cgroup caps
// each job's host memory.
#include <sched.h>
#include <sys/sysinfo.h>

#include <algorithm>
#include <cstdio>
#include <filesystem>
#include <map>
#include <semaphore>

#include "evaluator/gpu_facts.hpp"
#include "evaluator/stages/host.hpp"
#include "util/log.hpp"

namespace korch::evaluator::stages {
namespace {

constexpr int k_gpu_runners_a_side = 4;  // a SUBMIT measure job's runners of each side
constexpr std::int64_t k_compile_host_mb =
    4096;  // one nvcc/g++ of a torch extension, with headroom

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
  if (std::filesystem::is_directory("/run/lock", ec)) return "/run/lock/korch";
  return "/tmp/korch-gpu-locks";
}

class GpuHost final : public Host {
 public:
  GpuHost(const config::EvaluatorConfig& cfg, const std::string& cache,
          const protocol::GpuInfo& gpu, const std::vector<int>& gpus, const json& versions,
          const EnvKnobs& knobs, JobRunner& jobs, Clock& clock, const StopFlag& stop)
      : m_cfg(cfg),
        m_cache(cache),
        m_gpu(gpu),
        m_versions(versions),
        m_peaks(roofline::find_gpu(gpu.name)),
        m_work(cache, versions),
        m_compile_under_lease(knobs.compile_under_lease),
        m_gpu_count(static_cast<int>(gpus.size())) {
    plan(gpus);
    GpuPool::Options po;
    po.host_lock_dir = host_gpu_lock_dir(knobs.gpu_lock_dir);
    m_pool = std::make_unique<GpuPool>(
        gpus,
        [this, &jobs, &clock, &stop](int g) {
          return gpu_fit(jobs, m_cache + "/jobs", spawn(g).dump(), g, clock, stop);
        },
        po);
  }

  config::EvalMode mode() const override { return config::EvalMode::gpu; }
  std::string describe(const json& v) const override {
    char buf[512];
    std::snprintf(buf, sizeof buf,
                  "%s (compute capability %s, %d SMs, %.0f MB L2, %.0f GB memory%s); torch %s, "
                  "CUDA %s, Triton %s, Python %s. Kernels: Triton, or CUDA C++ built with "
                  "torch.utils.cpp_extension.load_inline.",
                  m_gpu.name.empty() ? "GPU" : m_gpu.name.c_str(),
                  m_gpu.capability.empty() ? "?" : m_gpu.capability.c_str(), m_gpu.sms,
                  m_gpu.l2_bytes / 1e6, m_gpu.memory_bytes / 1e9,
                  m_peaks
                      ? (", " + std::to_string(static_cast<int>(m_peaks->mem_bw_bytes_s / 1e9)) +
                         " GB/s by its datasheet")
                            .c_str()
                      : "",
                  v.value("torch", "?").c_str(), v.value("cuda", "?").c_str(),
                  v.value("triton", "?").c_str(), v.value("python", "?").c_str());
    return buf;
  }
  int threads(int workers) const override {
    // Enough for every compile slot and two evaluations per GPU in flight, so
    // the next candidates compile while the GPUs measure.
    return std::max(std::max(1, workers), m_compile_slot_count + 2 * m_gpu_count);
  }
  // Runners a side: 4 for a SUBMIT, where a 3.8 us kernel's time moves by up
  // to 5% from one process to another (sd 1.45-2%; the speedup carries
  // sd * sqrt(1/n_ref + 1/n_cand) of it; issue #7), and 1 for a CHECK (it
  // times nothing; each idle runner would still start up on the measure
  // job's cores). Triton's cache is per candidate and per GPU kind; the
  // runners must not exec ldconfig to find libcuda.
  void tune(protocol::Settings& st, const Request& req, const EnvKnobs& k) const override {
    const int runners = req.mode == Mode::submit ? k_gpu_runners_a_side : 1;
    if (!k.reference_runners) st.reference_runners = runners;
    if (!k.candidate_runners) st.candidate_runners = runners;
    st.l2_bytes = static_cast<std::int64_t>(m_gpu.l2_bytes);
    const std::string dir = triton_dir(m_cache, m_versions, req.code);
    json env;
    env["TRITON_CACHE_DIR"] = dir;
    env["TRITON_HOME"] = dir;
    env["TRITON_CACHE_AUTOTUNING"] = "1";
    const std::string libcuda = m_versions.value("libcuda_dir", "");
    if (!libcuda.empty()) env["TRITON_LIBCUDA_PATH"] = libcuda;
    st.runner_env = env;
    // KORCH_RUNNER_EXEC=1 lets every runner exec; by default only a Triton
    // candidate's runners may (measure_job).
    st.runner_exec = k.runner_exec;
  }
  // A cgroup caps the job's host memory: a measure job has up to
  // 1 + 2 * k_gpu_runners_a_side CUDA processes (the judge and its runners).
  protocol::Spawn spawn(int gpu) const override {
    protocol::Spawn sp;
    sp.memory_budget_mb = m_cfg.memory_budget_mb;
    sp.memory_limit_mb =
        gpu_job_host_limit_mb(1 + 2 * k_gpu_runners_a_side, m_cfg.memory_budget_mb);
    if (gpu >= 0) {
      sp.gpu = gpu;
      if (auto it = m_gpu_cpus.find(gpu); it != m_gpu_cpus.end()) sp.cpus = it->second;
    } else {
      sp.cpus = m_cpu_job_cpus;
    }
    return sp;
  }
  // On a compile slot of the CPU pool: the GPUs keep measuring meanwhile; the
  // slot is returned however the job ends.
  JobOutcome run_compile(JobRunner& jobs, const std::string& job_dir, const std::string& build_dir,
                         double timeout_s) override {
    protocol::Spawn sp = spawn(-1);
    sp.build_dir = build_dir;
    m_compile_slots->acquire();
    struct Slot {
      std::counting_semaphore<>& slots;
      ~Slot() { slots.release(); }
    } slot{*m_compile_slots};
    return jobs.run(JobRole::compile, job_dir, sp.dump(), std::nullopt, timeout_s);
  }
  JobOutcome run_measure(JobRunner& jobs, const std::string& job_dir, const Request&,
                         const Device& device, std::optional<std::uint64_t> seed,
                         double timeout_s) override {
    return jobs.run(JobRole::measure, job_dir, spawn(device.gpu).dump(), seed, timeout_s);
  }

  bool leases() const override { return true; }
  std::optional<Device> acquire(const Request& req, json& stages) override {
    auto lease = m_pool->acquire(req.mode == Mode::submit ? GpuPool::Priority::submit
                                                          : GpuPool::Priority::check);
    if (!lease) return std::nullopt;
    // Of the wait, the part for other korch processes on this host (one
    // GPU, one measurement, host-wide).
    stages["host_lease_wait_s"] = stages.value("host_lease_wait_s", 0.0) + lease->host_wait_s();
    Device d;
    d.gpu = lease->gpu();
    d.lease = std::move(*lease);
    return d;
  }
  std::string lock_path(int gpu) const override { return m_pool->lock_path(gpu); }
  bool check_health(Device& device) override {
    return !device.lease || device.lease->check_health();
  }

  bool compiles_under_lease() const override { return m_compile_under_lease; }
  bool warms_triton() const override { return true; }
  bool remeasures_distrusted_timing() const override { return false; }
  bool runs_host_faults_again() const override { return true; }
  const roofline::GpuPeaks* peaks() const override { return m_peaks ? &*m_peaks : nullptr; }
  WorkCache* work() override { return &m_work; }
  std::int64_t budget_mb() const override {
    return gpu_memory_budget_mb(m_cfg.memory_budget_mb, m_gpu.memory_bytes);
  }
  void stop() override { m_pool->stop(); }

 private:
  // Two cores per GPU for its measure jobs (the judge and two runners take
  // turns: the protocol is synchronous), the rest for compiles; compile
  // slots by cores and host memory unless configured. Cores are reserved by
  // GPU index for every GPU of the host, not only the configured ones
  // (GpuPool::plan_cores), so two korch processes given different GPUs of
  // one host never time on the same cores nor compile on the other's.
  void plan(const std::vector<int>& gpus) {
    const int host_gpus =
        std::max(std::max(1, m_gpu.count), *std::max_element(gpus.begin(), gpus.end()) + 1);
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

  const config::EvaluatorConfig& m_cfg;
  std::string m_cache;
  protocol::GpuInfo m_gpu;
  const json& m_versions;
  std::optional<roofline::GpuPeaks> m_peaks;  // datasheet peaks of that GPU, when known
  WorkCache m_work;
  bool m_compile_under_lease;
  int m_gpu_count;
  std::unique_ptr<GpuPool> m_pool;
  std::map<int, std::vector<int>> m_gpu_cpus;  // GPU -> the cores of its measure jobs
  std::vector<int> m_cpu_job_cpus;             // cores of compile and rules jobs
  int m_compile_slot_count = 1;
  std::unique_ptr<std::counting_semaphore<>> m_compile_slots;
};

}  // namespace

std::unique_ptr<Host> make_gpu_host(const config::EvaluatorConfig& cfg, const std::string& cache,
                                    const protocol::GpuInfo& gpu, const std::vector<int>& gpus,
                                    const json& versions, const EnvKnobs& knobs, JobRunner& jobs,
                                    Clock& clock, const StopFlag& stop) {
  return std::make_unique<GpuHost>(cfg, cache, gpu, gpus, versions, knobs, jobs, clock, stop);
}

}  // namespace korch::evaluator::stages
