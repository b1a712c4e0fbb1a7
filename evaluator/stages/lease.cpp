// The device the warm-up, measure, roofline and health stages run on: a GPU
// lease (SUBMIT first; GpuPool), waited for by this stage and timed as
// stages.lease_wait_s. The CPU needs none.
#include "evaluator/stages/context.hpp"
#include "evaluator/stages/host.hpp"

namespace korch::evaluator::stages {

Next lease(StageContext& ctx) {
  if (!ctx.host.leases()) return Next::skip;
  Next next = Next::skip;  // already held (KORCH_EVAL_COMPILE_UNDER_LEASE=1)
  if (!ctx.device.lease) {
    auto device = ctx.host.acquire(ctx.req, ctx.stages());
    if (!device) {
      ctx.report.error = "the evaluator shut down before a GPU was free";
      ctx.report.interrupted = true;
      return Next::verdict;
    }
    ctx.device = std::move(*device);
    ctx.device.held_since = ctx.clock.now();
    next = Next::go_on;
  }
  ctx.evidence()["gpu"] = ctx.device.gpu;
  ctx.evidence()["gpu_lock"] = ctx.host.lock_path(ctx.device.gpu);
  return next;
}

}  // namespace korch::evaluator::stages
