#pragma once
// The process environment's evaluator knobs (docs/config.md, "Evaluator
// knobs"): A/B and benchmarking switches, not campaign settings. Read once,
// when the evaluator starts (EnvKnobs::read); every report's evidence
// records the ones set (`env_knobs`), so a value inherited from a shell never
// changes a verdict or a statistic unseen (issue #38).
#include <optional>
#include <string>

#include <nlohmann/json.hpp>

namespace korch::evaluator {

struct EnvKnobs {
  // The judge's timing (protocol::Settings; tools/bench/README.md). Unset:
  // the evaluator's own choice.
  std::optional<int> reference_runners;    // KORCH_REFERENCE_RUNNERS=1|2
  std::optional<int> candidate_runners;    // KORCH_CANDIDATE_RUNNERS=1|2
  std::optional<bool> judge_shares_core;   // KORCH_JUDGE_SHARES_CORE=1
  std::optional<bool> timing_batched_cap;  // KORCH_TIMING_BATCHED_CAP=1
  std::optional<double> timing_block_ms;   // KORCH_TIMING_BLOCK_MS=MS
  std::optional<int> timing_calibrations;  // KORCH_TIMING_CALIBRATIONS=N
  std::optional<double> timing_batch_us;   // KORCH_TIMING_BATCH_US=US
  std::optional<double> timing_spin_us;    // KORCH_TIMING_SPIN_US=US
  std::optional<int> timing_heap_only;     // KORCH_TIMING_HEAP_ONLY=0|1
  std::optional<double> timing_max_s;      // KORCH_TIMING_MAX_S=S (korch audit's honest entries)
  std::optional<int> timing_max_blocks;    // KORCH_TIMING_MAX_BLOCKS=N
  std::optional<int> timing_min_calls;     // KORCH_TIMING_MIN_CALLS=N
  std::optional<int> timing_lone_runners;  // KORCH_TIMING_LONE_RUNNERS=N
  std::optional<bool> timing_judge_writes; // KORCH_TIMING_JUDGE_WRITES=1
  std::optional<bool> timing_split_compare; // KORCH_TIMING_SPLIT_COMPARE=0
  std::optional<bool> timing_stop_on_bootstrap;  // KORCH_TIMING_STOP_ON_BOOTSTRAP=1
  bool profile_first_call = false;         // KORCH_PROFILE_FIRST_CALL=1
  // KORCH_FAKE_CUDA={"foreign_mb":4096,...}: tests only, cpu mode (job_protocol.hpp).
  std::string fake_cuda;
  // gpu mode
  bool runner_exec = false;          // KORCH_RUNNER_EXEC=1: every runner may exec
  bool compile_under_lease = false;  // KORCH_EVAL_COMPILE_UNDER_LEASE=1: the benchmark's baseline
  std::string gpu_lock_dir;          // KORCH_GPU_LOCK_DIR; empty: host_gpu_lock_dir()'s default
  // The worker zygote
  bool fresh_process = false;  // KORCH_EVAL_FRESH_PROCESS=1
  // KORCH_WORKER_GLIBC_TUNABLES, set even to "": replaces the workers' default.
  std::optional<std::string> worker_glibc_tunables;

  // The knobs set (non-empty), by name, as their text: what reports record.
  // KORCH_WORKER (where the worker executable is; find_worker_path reads it)
  // is recorded here too.
  nlohmann::json recorded = nlohmann::json::object();

  // The process environment's knobs, now.
  static EnvKnobs read();
};

}  // namespace korch::evaluator
