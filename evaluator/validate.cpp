#include "evaluator/validate.hpp"

#include <filesystem>
#include <nlohmann/json.hpp>
#include <random>

#include "config/gpus.hpp"
#include "evaluator/gpu_facts.hpp"
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
    auto gpu = nlohmann::json::parse(*facts);
    v->m_budget_mb = gpu_memory_budget_mb(cfg.memory_budget_mb, gpu.value("memory_bytes", 0.0));
    // The first GPU of evaluator.gpus.
    auto list = config::parse_gpu_list(cfg.gpus, gpu.value("count", 1));
    if (!list) return fail("evaluator.gpus: " + list.error().message);
    v->m_gpu = list->front();
  }
  return v;
}

TaskValidator::~TaskValidator() {
  if (m_zygote) m_zygote->stop();
}

Result<TaskValidation> TaskValidator::validate(const config::Task& task) {
  namespace fs = std::filesystem;
  using json = nlohmann::json;
  std::error_code ec;
  const bool gpu = m_cfg.mode == config::EvalMode::gpu;
  const std::string dir = m_cache + "/jobs/validate-" + std::to_string(std::random_device{}());
  fs::create_directories(dir, ec);
  fs::permissions(dir, fs::perms::owner_all, ec);
  json job;
  job["task_source"] = task.source;
  job["task_name"] = task.name;
  job["memory_budget_mb"] = m_budget_mb;
  job["device"] = gpu ? "cuda" : "cpu";
  if (auto w = write_file_atomic(dir + "/job.json", job.dump()); !w) return std::unexpected(w.error());
  json extra;
  extra["memory_budget_mb"] = m_cfg.memory_budget_mb;
  if (gpu) {
    extra["memory_limit_mb"] = gpu_job_host_limit_mb(1, m_cfg.memory_budget_mb);
    extra["gpu"] = m_gpu;
  }
  JobOutcome o = m_zygote->run("validate", dir, extra.dump(), std::nullopt,
                               std::max(m_cfg.timeout_s, k_validate_timeout_s));
  fs::remove_all(dir, ec);

  TaskValidation v;
  v.task_id = task.id;
  json res = json::parse(o.result_json, nullptr, false);
  if (res.is_discarded()) {
    v.issues.push_back(o.timed_out ? "error: the reference exceeded the time limit"
                                   : "error: the validation worker crashed (exit " +
                                         std::to_string(o.exit_code) + ")");
    return v;
  }
  for (auto& s : res.value("issues", json::array()))
    if (s.is_string()) v.issues.push_back(s.get<std::string>());
  v.ok = v.issues.empty();
  v.estimated_bytes = res.value("estimated_bytes", std::int64_t{0});
  v.ref_time_ms = res.value("ref_time_ms", 0.0);
  for (auto& s : res.value("protections", json::array()))
    if (s.is_string()) v.protections.push_back(s.get<std::string>());
  return v;
}

Result<TaskValidation> validate_task(const config::Task& task,
                                     const config::EvaluatorConfig& cfg,
                                     const std::string& cache_dir) {
  auto v = TaskValidator::start(cfg, cache_dir);
  if (!v) return std::unexpected(v.error());
  return (*v)->validate(task);
}

}  // namespace korch::evaluator
