#pragma once
// Task validation (`korch tasks validate`): runs a task's reference alone in a
// sandboxed worker and flags tasks a candidate could pass without computing
// anything, or that the evaluator cannot judge.
#include <cstdint>
#include <memory>
#include <string>
#include <vector>

#include "config/campaign.hpp"
#include "config/tasks.hpp"
#include "util/error.hpp"

namespace korch::evaluator {

struct TaskValidation {
  std::string task_id;
  bool ok = false;  // no issues
  // One line each, prefixed by a stable tag: "nondeterministic: ...",
  // "nearly_constant: ...", "input_independent: ...", "over_budget: ...",
  // "non_finite: ...", "rounding_noise: ..." (the float32 output differs
  // from the same reference in float64 by more than the strict rtol, 1e-4:
  // a correct kernel that rounds differently fails it; issue #47),
  // "error: ...".
  std::vector<std::string> issues;
  std::int64_t estimated_bytes = 0;  // inputs + pristine copies + outputs
  double ref_time_ms = 0;            // one reference call, one thread
  std::vector<std::string> protections;
};

class Zygote;

// Validates many tasks with one warm worker zygote (torch is imported once).
// cfg.mode gpu runs each reference on the GPU. Not thread-safe.
class TaskValidator {
 public:
  static Result<std::unique_ptr<TaskValidator>> start(const config::EvaluatorConfig& cfg,
                                                      const std::string& cache_dir);
  ~TaskValidator();
  // Fails only when the worker cannot run at all; problems with the task
  // itself are issues.
  Result<TaskValidation> validate(const config::Task& task);

 private:
  TaskValidator() = default;
  config::EvaluatorConfig m_cfg;
  std::string m_cache;
  std::int64_t m_budget_mb = 0;  // of GPU memory in gpu mode (gpu_facts.hpp)
  int m_gpu = 0;                 // gpu mode: the GPU it validates on (first of evaluator.gpus)
  std::unique_ptr<Zygote> m_zygote;
};

// One task with a zygote of its own (seconds of start-up).
Result<TaskValidation> validate_task(const config::Task& task, const config::EvaluatorConfig& cfg,
                                     const std::string& cache_dir);

}  // namespace korch::evaluator
