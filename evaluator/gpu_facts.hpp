// The GPU an evaluator runs on, and the memory a job may use there: one place
// for the rules the evaluator (evaluator.mode = "gpu") and the task validator
// (`korch tasks validate --mode gpu`) both apply, so a task the validator
// passes is a task the evaluator accepts.
#pragma once

#include <cstdint>
#include <string>

#include "util/error.hpp"

namespace korch::evaluator {

class JobRunner;
namespace protocol {
struct GpuInfo;
}

// Host memory one CUDA process of a job needs beyond the task's data (torch,
// the CUDA context and its libraries), measured on the H200: ~3 GB, doubled.
inline constexpr std::int64_t k_cuda_process_host_mb = 6144;

// GPU memory a task's inputs, pristine copies and outputs may use: the
// configured budget, raised to 40% of the device's (a KernelBench level-1
// input set alone can be 6.4 GB).
std::int64_t gpu_memory_budget_mb(std::int64_t configured_mb, double device_bytes);

// The cgroup memory.max of a GPU job: RLIMIT_AS cannot confine a CUDA process
// (it reserves huge address ranges), so the host memory of the whole job is
// capped instead: every CUDA process plus the task's data staged on the host.
std::int64_t gpu_job_host_limit_mb(int cuda_processes, std::int64_t configured_mb);

// Asks the GPU itself, in a sandboxed job: its facts (name, memory_bytes,
// l2_bytes, sms, count, ...); an error that says why there are none.
Result<protocol::GpuInfo> query_gpu_facts(JobRunner& jobs, const std::string& jobs_root);

// The GPU pool's health check: the same job (a small allocation and a sum)
// on one GPU, spawned with `spawn_json` (its lease and cores). `why` gets
// the reason of a failure (the job's error, or its log when it left none).
// not_run: the job never reached the GPU (the zygote was stopping or being
// restarted): a fact about korch's processes, not about the GPU. Measured
// on the H200 (issue #32): a campaign stopped by SIGTERM with a crash's
// health check in flight took its GPU out, "the worker zygote is not running".
enum class GpuHealth { ok, failed, not_run };
GpuHealth gpu_health_check(JobRunner& jobs, const std::string& jobs_root,
                           const std::string& spawn_json, std::string* why = nullptr);

}  // namespace korch::evaluator
