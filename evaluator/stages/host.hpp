#pragma once
// Where the evaluator's jobs run: the CPU (cpu_host.cpp) or GPUs
// (gpu_host.cpp), two kinds of one interface. The stages ask the host, never
// the mode: which cores and limits a job gets, which locks a job holds while
// it runs, whether a device is leased, warmed up, checked for health, and
// which outcomes run again.
#include <memory>
#include <optional>
#include <string>
#include <vector>

#include "evaluator/roofline.hpp"
#include "evaluator/stages/context.hpp"

namespace korch::evaluator::stages {

class Host {
 public:
  virtual ~Host() = default;
  virtual config::EvalMode mode() const = 0;
  // The device and software, for the system prompt.
  virtual std::string describe(const json& versions) const = 0;
  // Pipeline threads: `workers` configured.
  virtual int threads(int workers) const = 0;
  // The host's part of a job's settings, after the knobs (ctx.settings()).
  virtual void tune(protocol::Settings& st, const Request& req, const EnvKnobs& knobs) const = 0;
  // How a job starts on `gpu` (-1: a CPU job: rules, compile).
  virtual protocol::Spawn spawn(int gpu) const = 0;
  // Runs a compile-role job (a compile, a symbol re-check) building into
  // `build_dir`, never while anything is timed on its cores.
  virtual JobOutcome run_compile(JobRunner& jobs, const std::string& job_dir,
                                 const std::string& build_dir, double timeout_s) = 0;
  // Runs a measure job on `device` (the caller holds it).
  virtual JobOutcome run_measure(JobRunner& jobs, const std::string& job_dir, const Request& req,
                                 const Device& device, std::optional<std::uint64_t> seed,
                                 double timeout_s) = 0;

  // Devices: a GPU is leased for warm-up, measure, roofline and health.
  virtual bool leases() const = 0;
  // Blocks for a device (SUBMIT first); nullopt when the evaluator stops first.
  virtual std::optional<Device> acquire(const Request& req, json& stages) = 0;
  // The device's lock file, for the evidence.
  virtual std::string lock_path(int gpu) const = 0;
  // After a suspect outcome: false when the device failed its health check
  // (it left the pool; its lease is gone).
  virtual bool check_health(Device& device) = 0;

  // Policy.
  virtual bool compiles_under_lease() const = 0;          // the device is held from compile on
  virtual bool warms_triton() const = 0;                  // Triton candidates warm up first
  virtual bool remeasures_distrusted_timing() const = 0;  // cpu: timing health
  virtual bool runs_host_faults_again() const = 0;        // the judge's `infrastructure`
  virtual const roofline::GpuPeaks* peaks() const = 0;    // datasheet peaks, when known
  virtual WorkCache* work() = 0;                          // counted work, kept (gpu)
  virtual std::int64_t budget_mb() const = 0;             // of the device's memory

  // Wakes waiters for a device; they get nullopt.
  virtual void stop() = 0;
};

std::unique_ptr<Host> make_cpu_host(const config::EvaluatorConfig& cfg);
// Plans cores and compile slots for `gpus` of the host whose first GPU's facts
// are `gpu`; health checks run through `jobs` under `clock` and `stop`.
std::unique_ptr<Host> make_gpu_host(const config::EvaluatorConfig& cfg, const std::string& cache,
                                    const protocol::GpuInfo& gpu, const std::vector<int>& gpus,
                                    const json& versions, const EnvKnobs& knobs, JobRunner& jobs,
                                    Clock& clock, const StopFlag& stop);

}  // namespace korch::evaluator::stages
