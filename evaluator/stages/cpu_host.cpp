// The CPU as the evaluator's host: jobs run anywhere on the machine's cores;
// compile jobs take the timing lock shared and a submit-mode measure job
// (which times) takes it exclusively, so no compiler runs while anything is
// being timed. No device is leased; distrusted timing is measured again.
#include <shared_mutex>

#include "evaluator/stages/host.hpp"

namespace korch::evaluator::stages {
namespace {

constexpr int k_lone_call_runners_a_side = 4;

class CpuHost final : public Host {
 public:
  explicit CpuHost(const config::EvaluatorConfig& cfg) : m_budget_mb(cfg.memory_budget_mb) {}

  config::EvalMode mode() const override { return config::EvalMode::cpu; }
  std::string describe(const json& v) const override {
    return "CPU (x86_64), one thread per side; torch " + v.value("torch", "?") + ", Python " +
           v.value("python", "?") + ", compiler: " + v.value("compiler", "?") +
           ". Kernels are C++ built with torch.utils.cpp_extension.load_inline (CPU only).";
  }
  int threads(int workers) const override { return std::max(1, workers); }
  // A SUBMIT whose calls are timed alone (200 us or more; shorter ones go in
  // batches) is timed by 4 runners a side, the others by 2 (the worker's
  // default): with two, the processes' own spread (0.3-1.6%) estimated from
  // 2 degrees of freedom left equal work's interval over +-3% in 1 of 3
  // evaluations at ~1 ms and at ~13 ms a call; with four (6 dof) the
  // intervals were +-0.9-2.0% (tools/bench/README.md, stop 58). Batched
  // calls keep two: with four their spread grew to 2.7-4.5%. The worker
  // forks 4 a side; the judge, which knows the reference's time per call,
  // sends the extra two away for batched calls (Judge._more_runners_fit).
  // An explicit runner count (KORCH_REFERENCE_RUNNERS, ...) keeps its meaning.
  void tune(protocol::Settings& st, const Request& req, const EnvKnobs& k) const override {
    if (req.mode == Mode::submit && !k.reference_runners && !k.candidate_runners &&
        !k.timing_lone_runners)
      st.timing_lone_runners = k_lone_call_runners_a_side;
  }
  protocol::Spawn spawn(int) const override {
    protocol::Spawn sp;
    sp.memory_budget_mb = m_budget_mb;
    return sp;
  }
  JobOutcome run_compile(JobRunner& jobs, const std::string& job_dir, const std::string& build_dir,
                         double timeout_s) override {
    protocol::Spawn sp = spawn(-1);
    sp.build_dir = build_dir;
    std::shared_lock shared(m_timing);
    return jobs.run(JobRole::compile, job_dir, sp.dump(), std::nullopt, timeout_s);
  }
  JobOutcome run_measure(JobRunner& jobs, const std::string& job_dir, const Request& req,
                         const Device&, std::optional<std::uint64_t> seed,
                         double timeout_s) override {
    if (req.mode == Mode::submit) {
      std::unique_lock timing(m_timing);  // no compile while timing
      return jobs.run(JobRole::measure, job_dir, spawn(-1).dump(), seed, timeout_s);
    }
    std::shared_lock shared(m_timing);
    return jobs.run(JobRole::measure, job_dir, spawn(-1).dump(), seed, timeout_s);
  }

  bool leases() const override { return false; }
  std::optional<Device> acquire(const Request&, json&) override { return Device{}; }
  std::string lock_path(int) const override { return ""; }
  bool check_health(Device&) override { return true; }

  bool compiles_under_lease() const override { return false; }
  bool warms_triton() const override { return false; }
  bool remeasures_distrusted_timing() const override { return true; }
  bool runs_host_faults_again() const override { return false; }
  const roofline::GpuPeaks* peaks() const override { return nullptr; }
  WorkCache* work() override { return nullptr; }
  std::int64_t budget_mb() const override { return m_budget_mb; }
  void stop() override {}

 private:
  std::int64_t m_budget_mb;
  std::shared_mutex m_timing;  // timing excludes compiles
};

}  // namespace

std::unique_ptr<Host> make_cpu_host(const config::EvaluatorConfig& cfg) {
  return std::make_unique<CpuHost>(cfg);
}

}  // namespace korch::evaluator::stages
