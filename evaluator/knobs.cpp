#include "evaluator/knobs.hpp"

#include <cstdlib>
#include <optional>
#include <string>

namespace korch::evaluator {

EnvKnobs EnvKnobs::read() {
  EnvKnobs k;
  // A knob's text when it is set (non-empty), which is then recorded.
  auto knob = [&](const char* name) -> std::optional<std::string> {
    const char* v = std::getenv(name);
    if (!v || !*v) return std::nullopt;
    k.recorded[name] = v;
    return std::string(v);
  };
  if (auto v = knob("KORCH_REFERENCE_RUNNERS")) k.reference_runners = std::atoi(v->c_str());
  if (auto v = knob("KORCH_CANDIDATE_RUNNERS")) k.candidate_runners = std::atoi(v->c_str());
  if (auto v = knob("KORCH_JUDGE_SHARES_CORE")) k.judge_shares_core = *v == "1";
  if (auto v = knob("KORCH_TIMING_BATCHED_CAP")) k.timing_batched_cap = *v == "1";
  if (auto v = knob("KORCH_TIMING_BLOCK_MS")) k.timing_block_ms = std::atof(v->c_str());
  if (auto v = knob("KORCH_TIMING_CALIBRATIONS")) k.timing_calibrations = std::atoi(v->c_str());
  if (auto v = knob("KORCH_TIMING_BATCH_US")) k.timing_batch_us = std::atof(v->c_str());
  if (auto v = knob("KORCH_TIMING_SPIN_US")) k.timing_spin_us = std::atof(v->c_str());
  if (auto v = knob("KORCH_TIMING_MAX_S")) k.timing_max_s = std::atof(v->c_str());
  if (auto v = knob("KORCH_TIMING_MAX_BLOCKS")) k.timing_max_blocks = std::atoi(v->c_str());
  if (auto v = knob("KORCH_TIMING_MIN_CALLS")) k.timing_min_calls = std::atoi(v->c_str());
  if (auto v = knob("KORCH_TIMING_LONE_RUNNERS")) k.timing_lone_runners = std::atoi(v->c_str());
  if (auto v = knob("KORCH_TIMING_JUDGE_WRITES")) k.timing_judge_writes = *v == "1";
  if (auto v = knob("KORCH_TIMING_SPLIT_COMPARE")) k.timing_split_compare = *v != "0";
  if (auto v = knob("KORCH_TIMING_STOP_ON_BOOTSTRAP")) k.timing_stop_on_bootstrap = *v == "1";
  if (auto v = knob("KORCH_TIMING_HEAP_ONLY")) k.timing_heap_only = *v == "1" ? 1 : 0;
  k.profile_first_call = knob("KORCH_PROFILE_FIRST_CALL") == "1";
  k.fake_cuda = knob("KORCH_FAKE_CUDA").value_or("");
  k.runner_exec = knob("KORCH_RUNNER_EXEC") == "1";
  k.compile_under_lease = knob("KORCH_EVAL_COMPILE_UNDER_LEASE") == "1";
  k.gpu_lock_dir = knob("KORCH_GPU_LOCK_DIR").value_or("");
  k.fresh_process = knob("KORCH_EVAL_FRESH_PROCESS") == "1";
  knob("KORCH_WORKER");  // recorded only: find_worker_path (zygote.cpp) reads it
  // Set even to "", it replaces the workers' default (recorded only when non-empty).
  knob("KORCH_WORKER_GLIBC_TUNABLES");
  if (const char* t = std::getenv("KORCH_WORKER_GLIBC_TUNABLES")) k.worker_glibc_tunables = t;
  return k;
}

}  // namespace korch::evaluator
