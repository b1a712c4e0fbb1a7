#include "evaluator/gpu_facts.hpp"

#include <algorithm>
#include <utility>

#include "evaluator/job_dir.hpp"
#include "evaluator/job_protocol.hpp"
#include "evaluator/zygote.hpp"

namespace korch::evaluator {
namespace {
constexpr double k_gpuinfo_timeout_s = 120;

// One gpuinfo job (trusted code only) in a fresh folder under `jobs_root`.
std::pair<protocol::GpuInfo, JobOutcome> run_gpuinfo(JobRunner& zygote,
                                                     const std::string& jobs_root,
                                                     const std::string& spawn_json) {
  JobDir dir(jobs_root, "gpuinfo");
  JobOutcome o;
  if (auto w = dir.write_job(protocol::gpuinfo_job()); !w) {
    o.worker_log = w.error().message;
  } else {
    o = zygote.run(JobRole::gpuinfo, dir.path(), spawn_json, std::nullopt, k_gpuinfo_timeout_s);
  }
  return {protocol::parse_gpuinfo(o.result_json), std::move(o)};
}
}  // namespace

std::int64_t gpu_memory_budget_mb(std::int64_t configured_mb, double device_bytes) {
  const auto device_mb = static_cast<std::int64_t>(device_bytes / (1 << 20));
  return std::max<std::int64_t>(configured_mb, device_mb * 2 / 5);
}

std::int64_t gpu_job_host_limit_mb(int cuda_processes, std::int64_t configured_mb) {
  return cuda_processes * k_cuda_process_host_mb + 4 * configured_mb;
}

Result<protocol::GpuInfo> query_gpu_facts(JobRunner& zygote, const std::string& jobs_root) {
  const auto [gpu, o] = run_gpuinfo(zygote, jobs_root, "{}");
  if (!gpu.ok) {
    std::string why = gpu.raw.empty() ? o.worker_log : gpu.error;
    if (why.size() > 800) why = why.substr(why.size() - 800);
    return fail("no usable GPU: " + why +
                " (a worker built against a CPU-only torch cannot evaluate on a GPU)");
  }
  return gpu;
}

GpuHealth gpu_health_check(JobRunner& zygote, const std::string& jobs_root,
                           const std::string& spawn_json, std::string* why) {
  const auto [gpu, o] = run_gpuinfo(zygote, jobs_root, spawn_json);
  const bool ok = gpu.ok && gpu.health;
  // The job never started: no process of it touched the GPU.
  const bool not_run = !ok && gpu.raw.empty() && !o.timed_out && !o.started;
  if (!ok && why) {
    *why = o.timed_out          ? "the check timed out"
           : !gpu.error.empty() ? gpu.error
           : gpu.ok             ? "the sum on the GPU was wrong"
                                : "no result: " + o.worker_log + o.error;
    if (why->size() > 600) *why = why->substr(why->size() - 600);
  }
  return ok ? GpuHealth::ok : not_run ? GpuHealth::not_run : GpuHealth::failed;
}

}  // namespace korch::evaluator
