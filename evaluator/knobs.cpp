#include "evaluator/knobs.hpp"

#include <cstdlib>

namespace korch::evaluator {
namespace {

// Every knob's name: the ones a report records when set.
constexpr const char* k_names[] = {"KORCH_REFERENCE_RUNNERS",
                                   "KORCH_CANDIDATE_RUNNERS",
                                   "KORCH_JUDGE_SHARES_CORE",
                                   "KORCH_TIMING_BATCHED_CAP",
                                   "KORCH_TIMING_BLOCK_MS",
                                   "KORCH_TIMING_CALIBRATIONS",
                                   "KORCH_TIMING_BATCH_US",
                                   "KORCH_TIMING_SPIN_US",
                                   "KORCH_TIMING_HEAP_ONLY",
                                   "KORCH_RUNNER_EXEC",
                                   "KORCH_EVAL_COMPILE_UNDER_LEASE",
                                   "KORCH_EVAL_FRESH_PROCESS",
                                   "KORCH_WORKER_GLIBC_TUNABLES",
                                   "KORCH_GPU_LOCK_DIR",
                                   "KORCH_WORKER",
                                   "KORCH_PROFILE_FIRST_CALL"};

}  // namespace

EnvKnobs EnvKnobs::read() {
  EnvKnobs k;
  for (const char* name : k_names)
    if (const char* v = std::getenv(name); v && *v) k.recorded[name] = v;
  auto text = [&](const char* name) { return k.recorded.value(name, std::string()); };
  auto set = [&](const char* name) { return k.recorded.contains(name); };
  if (set("KORCH_REFERENCE_RUNNERS"))
    k.reference_runners = std::atoi(text("KORCH_REFERENCE_RUNNERS").c_str());
  if (set("KORCH_CANDIDATE_RUNNERS"))
    k.candidate_runners = std::atoi(text("KORCH_CANDIDATE_RUNNERS").c_str());
  if (set("KORCH_JUDGE_SHARES_CORE")) k.judge_shares_core = text("KORCH_JUDGE_SHARES_CORE") == "1";
  if (set("KORCH_TIMING_BATCHED_CAP"))
    k.timing_batched_cap = text("KORCH_TIMING_BATCHED_CAP") == "1";
  if (set("KORCH_TIMING_BLOCK_MS"))
    k.timing_block_ms = std::atof(text("KORCH_TIMING_BLOCK_MS").c_str());
  if (set("KORCH_TIMING_CALIBRATIONS"))
    k.timing_calibrations = std::atoi(text("KORCH_TIMING_CALIBRATIONS").c_str());
  if (set("KORCH_TIMING_BATCH_US"))
    k.timing_batch_us = std::atof(text("KORCH_TIMING_BATCH_US").c_str());
  if (set("KORCH_TIMING_SPIN_US"))
    k.timing_spin_us = std::atof(text("KORCH_TIMING_SPIN_US").c_str());
  if (set("KORCH_TIMING_HEAP_ONLY"))
    k.timing_heap_only = text("KORCH_TIMING_HEAP_ONLY") == "1" ? 1 : 0;
  k.profile_first_call = text("KORCH_PROFILE_FIRST_CALL") == "1";
  k.runner_exec = text("KORCH_RUNNER_EXEC") == "1";
  k.compile_under_lease = text("KORCH_EVAL_COMPILE_UNDER_LEASE") == "1";
  k.gpu_lock_dir = text("KORCH_GPU_LOCK_DIR");
  k.fresh_process = text("KORCH_EVAL_FRESH_PROCESS") == "1";
  if (const char* t = std::getenv("KORCH_WORKER_GLIBC_TUNABLES")) k.worker_glibc_tunables = t;
  return k;
}

}  // namespace korch::evaluator
