#pragma once
// The protected evaluator's pipeline (DESIGN §5) as stages over one context
// value. A stage is a free function of a StageContext; one wrapper
// (run_stage) checks for stop, times the stage into evidence.stages, and ends
// the run when a stage decides a verdict -- the shape of DuckDB's
// Optimizer::RunOptimizer. ProtectedEvaluator keeps the queue, the order of
// the stages and the retry loops; where a job runs (cpu or gpu) is a Host
// (host.hpp); time is a Clock, so tests observe the pauses without sleeping.
//
// The stages, one file each: rules.cpp (and the device check), compile.cpp,
// lease.cpp, warm.cpp, measure.cpp, roofline.cpp, health.cpp.
#include <chrono>
#include <condition_variable>
#include <map>
#include <memory>
#include <mutex>
#include <optional>
#include <string>

#include <nlohmann/json.hpp>

#include "evaluator/evaluator.hpp"
#include "evaluator/gpu_pool.hpp"
#include "evaluator/job_protocol.hpp"
#include "evaluator/knobs.hpp"
#include "evaluator/zygote.hpp"

namespace korch::evaluator {
class CompileCache;
}

namespace korch::evaluator::stages {

using json = nlohmann::json;
class Host;

// The evaluator's stop: set once by shutdown(); pauses end at it.
class StopFlag {
 public:
  void request();
  bool requested() const;
  // Blocks up to `d`; true when stop was requested (before or meanwhile).
  bool wait_for(std::chrono::milliseconds d) const;

 private:
  mutable std::mutex m_mu;
  mutable std::condition_variable m_cv;
  bool m_stop = false;
};

// Time, injected: what the pipeline reads its durations from and pauses by.
class Clock {
 public:
  using time_point = std::chrono::steady_clock::time_point;
  virtual ~Clock() = default;
  virtual time_point now() = 0;
  // Pauses `d` unless `stop` is requested first: false when it was.
  virtual bool pause(std::chrono::milliseconds d, const StopFlag& stop) = 0;
  double seconds_since(time_point t0) { return std::chrono::duration<double>(now() - t0).count(); }
};
// The steady clock, pausing for real.
std::shared_ptr<Clock> real_clock();

// The device the stages after compile run on: a GPU's lease, or the CPU.
struct Device {
  int gpu = -1;                         // -1: the CPU
  std::optional<GpuPool::Lease> lease;  // gpu: held until released
  Clock::time_point held_since{};
};

// How a stage ends.
enum class Next {
  go_on,      // the next stage runs
  skip,       // nothing to do here (no time is recorded); the next stage runs
  verdict,    // the report holds the run's outcome: the run ends
  run_again,  // not a result (the host's fault, a GPU that failed): the retry loop decides
};

// One evaluation, as every stage reads and writes it.
struct StageContext {
  const Request& req;
  const config::EvaluatorConfig& cfg;
  const std::string& cache;  // the evaluator's cache folder
  JobRunner& jobs;           // the worker zygote (tests: a fake judge)
  Host& host;                // where jobs run: cpu or gpu
  CompileCache& compile_cache;
  const EnvKnobs& knobs;
  const json& versions;  // what the worker reported
  const StopFlag& stop;
  Clock& clock;
  Report& report;

  // What the stages leave for the ones after them.
  protocol::RulesResult rules;
  json prebuilt = json::object();  // compile cache key -> {dir, module, so}
  bool triton = false;
  Device device;
  std::optional<protocol::MeasureResult> measured;  // the last measure job's result
  bool device_failed = false;                       // health: the GPU left the pool

  json& evidence() { return report.evidence; }
  json& stages() { return report.evidence["stages"]; }
  std::string jobs_root() const { return cache + "/jobs"; }
  // A job's settings: the campaign's, the host's choices, then the knobs.
  protocol::Settings settings() const;
};

using Stage = Next (*)(StageContext&);

// The one wrapper: a stop ends the run (interrupted); the stage's seconds are
// added to evidence.stages[key] (none for a skip, or with no key); go_on or
// skip give go_on.
Next run_stage(StageContext& ctx, const char* key, Stage stage);

// The stages.
Next device_check(StageContext& ctx);  // the request's device is this evaluator's
Next rules(StageContext& ctx);         // rules.cpp: the static rules, load_inline resolved
Next compile(StageContext& ctx);       // compile.cpp: every load_inline into the cache
Next lease(StageContext& ctx);         // lease.cpp: a device for what follows
Next warm(StageContext& ctx);          // warm.cpp: Triton compiles and autotunes
Next measure(StageContext& ctx);       // measure.cpp: the judge (cpu: again on distrust)
Next roofline(StageContext& ctx);      // roofline.cpp: impossible_timing
Next health(StageContext& ctx);        // health.cpp: a suspect GPU checked

// Shared by the stages.
// A job that left no result: why, honestly (timeout or worker_crash).
void job_failed(Report& r, const JobOutcome& o, const char* stage);
// One measure job; nullopt (with r filled in) when it left no result.
std::optional<protocol::MeasureResult> measure_job(StageContext& ctx, Report& r, json& evidence);
// The judge's result as the report's verdict and evidence.
void apply_measure(const protocol::MeasureResult& m, Report& r, json& evidence);
// A crash or hang that may have left the GPU itself broken.
bool gpu_suspect(const Report& r);
// Triton's cache of one candidate, per GPU kind (warm.cpp).
std::string triton_dir(const std::string& cache, const json& versions, const std::string& code);

// The GPU health check (health.cpp): the check job on `gpu`, tried again
// after a pause while it fails. A check that could not run (the job never
// reached the GPU) is not a failure; neither is one that failed while the
// evaluator stops. false: the GPU failed every try and leaves the pool.
inline constexpr int k_health_tries = 3;
inline constexpr std::chrono::seconds k_health_pause{3};
bool gpu_fit(JobRunner& jobs, const std::string& jobs_root, const std::string& spawn_json, int gpu,
             Clock& clock, const StopFlag& stop);

// The work (flops, bytes, dtype) of tasks' references, counted once by the
// judge and kept by task source, torch and counter version (roofline.cpp).
class WorkCache {
 public:
  WorkCache(std::string cache, const json& versions);
  std::optional<json> known(const std::string& task_source);
  void remember(const std::string& task_source, const json& work);

 private:
  std::string path(const std::string& task_source) const;
  std::string m_cache, m_torch, m_counter;
  std::mutex m_mu;
  std::map<std::string, json> m_work;  // path -> the task's counted work
};

}  // namespace korch::evaluator::stages
