// Stage 6 (gpu): after a crash or a hang that may have left the GPU broken,
// its health check (a small allocation and a sum on that GPU, in a sandboxed
// job of its own) under the same lease. A GPU that fails it leaves the pool
// (GpuPool) and the evaluation runs again on another lease: Next::run_again,
// the evaluator's retry loop decides.
//
// The check runs after the job that made the GPU suspect has exited, but a
// PID namespace's other processes (the runners, holding CUDA contexts) are
// still being torn down by the kernel and driver when its PID 1's exit is
// reported. A check that fails once is therefore tried again after a pause:
// a GPU left broken (a hung GPU, a context the driver cannot recover) fails
// every try; one that was busy tearing down passes the next.
#include "evaluator/gpu_facts.hpp"
#include "evaluator/stages/context.hpp"
#include "evaluator/stages/host.hpp"
#include "util/log.hpp"

namespace korch::evaluator::stages {

bool gpu_suspect(const Report& r) {
  if (r.status == Verdict::worker_crash || r.status == Verdict::timeout) return true;
  if (r.status != Verdict::runtime_error) return false;
  for (const std::string* t : {&r.error, &r.runtime_detail})
    if (t->find("CUDA") != std::string::npos || t->find("cuda") != std::string::npos ||
        t->find("device-side") != std::string::npos)
      return true;
  return false;
}

bool gpu_fit(JobRunner& jobs, const std::string& jobs_root, const std::string& spawn_json, int gpu,
             Clock& clock, const StopFlag& stop) {
  std::string why, first;
  int failed = 0, not_run = 0;
  for (int attempt = 1;; ++attempt) {
    const GpuHealth h = gpu_health_check(jobs, jobs_root, spawn_json, &why);
    if (h == GpuHealth::ok) {
      if (attempt > 1)
        KLOG_WARN("[eval] GPU {} passed its health check on try {} (before: {})", gpu, attempt,
                  first);
      return true;
    }
    if (stop.requested()) {
      // The evaluator is stopping: its jobs are being killed, the check's
      // among them; nothing about this GPU is known and it stays in the pool.
      KLOG_INFO("[eval] GPU {} health check not decided: the evaluator is stopping ({})", gpu, why);
      return true;
    }
    // A check that never reached the GPU (the zygote restarting) is a fact
    // about korch's processes, not about the GPU: it is tried again and
    // never counts as a failure.
    ++(h == GpuHealth::failed ? failed : not_run);
    if (first.empty()) first = why;
    KLOG_WARN("[eval] GPU {} health check try {} {}: {}", gpu, attempt,
              h == GpuHealth::not_run ? "could not run" : "failed", why);
    if (failed >= k_health_tries) break;
    if (not_run >= k_health_tries) {
      KLOG_WARN("[eval] GPU {}: its health check could not run {} times; it stays in the pool", gpu,
                not_run);
      return true;
    }
    clock.pause(k_health_pause, stop);  // a stop ends it early; the next try's answer decides
  }
  KLOG_ERROR("[eval] GPU {} failed its health check {} times: {}", gpu, failed, why);
  return false;
}

Next health(StageContext& ctx) {
  if (!ctx.device.lease || !gpu_suspect(ctx.report)) return Next::skip;
  const bool healthy = ctx.host.check_health(ctx.device);  // on failure the GPU leaves the pool
  ctx.evidence()["gpu_health_after"] = healthy ? "ok" : "failed";
  if (healthy) return Next::go_on;
  ctx.device_failed = true;
  return Next::run_again;
}

}  // namespace korch::evaluator::stages
