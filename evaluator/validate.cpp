#include "evaluator/validate.hpp"

#include <filesystem>
#include <nlohmann/json.hpp>
#include <random>

#include "evaluator/zygote.hpp"
#include "util/fs.hpp"

namespace korch::evaluator {
namespace {
constexpr double k_validate_timeout_s = 300;
}

Result<TaskValidation> validate_task(const config::Task& task,
                                     const config::EvaluatorConfig& cfg,
                                     const std::string& cache_dir) {
  namespace fs = std::filesystem;
  using json = nlohmann::json;
  std::error_code ec;
  const std::string abs = fs::absolute(cache_dir, ec).lexically_normal().string();
  fs::create_directories(abs + "/jobs", ec);
  fs::create_directories(abs + "/run", ec);
  reap_orphans(abs + "/run");
  auto z = Zygote::start(find_worker_path(), abs + "/run");
  if (!z) return std::unexpected(z.error());

  const std::string dir = abs + "/jobs/validate-" + std::to_string(std::random_device{}());
  fs::create_directories(dir, ec);
  fs::permissions(dir, fs::perms::owner_all, ec);
  json job;
  job["task_source"] = task.source;
  job["task_name"] = task.name;
  job["memory_budget_mb"] = cfg.memory_budget_mb;
  if (auto w = write_file_atomic(dir + "/job.json", job.dump()); !w) return std::unexpected(w.error());
  json extra;
  extra["memory_budget_mb"] = cfg.memory_budget_mb;
  JobOutcome o = (*z)->run("validate", dir, extra.dump(), std::nullopt,
                           std::max(cfg.timeout_s, k_validate_timeout_s));
  (*z)->stop();
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

}  // namespace korch::evaluator
