#include "evaluator/validate.hpp"

#include <filesystem>

#include "config/gpus.hpp"
#include "evaluator/gpu_facts.hpp"
#include "evaluator/job_dir.hpp"
#include "evaluator/job_protocol.hpp"
#include "evaluator/zygote.hpp"
#include "util/fs.hpp"

namespace korch::evaluator {
namespace {
constexpr double k_validate_timeout_s = 300;
}

Result<std::unique_ptr<TaskValidator>> TaskValidator::start(const config::EvaluatorConfig& cfg,
                                                            const std::string& cache_dir) {
  namespace fs = std::filesystem;
  std::error_code ec;
  std::unique_ptr<TaskValidator> v(new TaskValidator());
  v->m_cfg = cfg;
  v->m_cache = fs::absolute(cache_dir, ec).lexically_normal().string();
  fs::create_directories(v->m_cache + "/jobs", ec);
  fs::create_directories(v->m_cache + "/run", ec);
  reap_orphans(v->m_cache + "/run");
  auto z = Zygote::start(find_worker_path(), v->m_cache + "/run");
  if (!z) return std::unexpected(z.error());
  v->m_zygote = std::move(*z);
  v->m_budget_mb = cfg.memory_budget_mb;
  if (cfg.mode == config::EvalMode::gpu) {
    // The evaluator's own budget rule, so "over budget" means what it will do.
    auto facts = query_gpu_facts(*v->m_zygote, v->m_cache + "/jobs");
    if (!facts) return std::unexpected(facts.error());
    const protocol::GpuInfo& gpu = *facts;
    v->m_budget_mb = gpu_memory_budget_mb(cfg.memory_budget_mb, gpu.memory_bytes);
    // The first GPU of evaluator.gpus.
    auto list = config::parse_gpu_list(cfg.gpus, std::max(1, gpu.count));
    if (!list) return fail("evaluator.gpus: " + list.error().message);
    v->m_gpu = list->front();
  }
  return v;
}

TaskValidator::~TaskValidator() {
  if (m_zygote) m_zygote->stop();
}

Result<TaskValidation> TaskValidator::validate(const config::Task& task) {
  const bool gpu = m_cfg.mode == config::EvalMode::gpu;
  JobDir dir(m_cache + "/jobs", "validate");
  if (auto w = dir.write_job(protocol::validate_job(task.source, task.name, m_budget_mb, gpu)); !w)
    return std::unexpected(w.error());
  protocol::Spawn sp;
  sp.memory_budget_mb = m_cfg.memory_budget_mb;
  if (gpu) {
    sp.memory_limit_mb = gpu_job_host_limit_mb(1, m_cfg.memory_budget_mb);
    sp.gpu = m_gpu;
  }
  JobOutcome o = m_zygote->run(JobRole::validate, dir.path(), sp.dump(), std::nullopt,
                               std::max(m_cfg.timeout_s, k_validate_timeout_s));

  TaskValidation v;
  v.task_id = task.id;
  auto res = protocol::parse_validate(o.result_json);
  if (!res) {
    v.issues.push_back(o.timed_out ? "error: the reference exceeded the time limit"
                                   : "error: the validation worker crashed (exit " +
                                         std::to_string(o.exit_code) + ")");
    return v;
  }
  v.issues = res->issues;
  v.ok = v.issues.empty();
  v.estimated_bytes = res->estimated_bytes;
  v.ref_time_ms = res->ref_time_ms;
  v.protections = res->protections;
  return v;
}

Result<TaskValidation> validate_task(const config::Task& task, const config::EvaluatorConfig& cfg,
                                     const std::string& cache_dir) {
  auto v = TaskValidator::start(cfg, cache_dir);
  if (!v) return std::unexpected(v.error());
  return (*v)->validate(task);
}

}  // namespace korch::evaluator
