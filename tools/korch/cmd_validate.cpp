// korch tasks validate: the evaluator's task checks (nondeterministic,
// nearly constant, input-independent, non-finite, rounding noise, over the
// memory budget); --out FILE keeps them for a campaign's tasks.exclude_flagged.
#include <cstdio>

#include "config/tasks.hpp"
#include "evaluator/validate.hpp"
#include "evaluator/validate_report.hpp"
#include "tools/korch/cli.hpp"
#include "util/fs.hpp"
#include "util/log.hpp"

namespace korch::cli {

int cmd_tasks_validate(const Args& args, const std::vector<config::Task>& tasks) {
  log::init(args.get("--log-level").value_or("warn"));
  config::EvaluatorConfig cfg;
  auto mode = get_enum(args, "--mode", config::EvalMode::cpu);
  if (!mode) {
    return report_failure("tasks validate", ErrorKind::invalid, "--mode cpu|gpu");
  }
  cfg.mode = *mode;
  auto budget = get_number<std::int64_t>(args, "--memory-budget-mb");
  auto timeout = get_number<double>(args, "--timeout");
  if (!budget) return report_failure("tasks validate", budget.error());
  if (!timeout) return report_failure("tasks validate", timeout.error());
  if (*budget) cfg.memory_budget_mb = **budget;
  if (auto g = args.get("--gpus")) cfg.gpus = *g;  // gpu mode: "all", "1", "0-3"
  if (*timeout) cfg.timeout_s = **timeout;
  auto cache = args.get("--cache-dir").value_or("/tmp/korch-validate-cache");
  int flagged = 0;
  auto validator = evaluator::TaskValidator::start(cfg, cache);
  if (!validator) {
    return report_failure("tasks validate", ErrorKind::failure, validator.error().message);
  }
  std::vector<std::pair<config::Task, evaluator::TaskValidation>> validated;
  for (auto& task : tasks) {
    auto v = (*validator)->validate(task);
    if (!v) {
      return report_failure("tasks validate", ErrorKind::failure, v.error().message);
    }
    validated.emplace_back(task, *v);
    if (v->ok) {
      std::printf("ok      %s  (%.1f MB, ref %.3f ms)\n", task.id.c_str(), v->estimated_bytes / 1e6,
                  v->ref_time_ms);
    } else {
      ++flagged;
      std::printf("FLAGGED %s\n", task.id.c_str());
      for (auto& issue : v->issues) std::printf("        %s\n", issue.c_str());
    }
    std::fflush(stdout);
  }
  std::fprintf(stderr, "%zu task(s), %d flagged\n", tasks.size(), flagged);
  if (auto out = args.get("--out")) {
    if (auto w = write_file_atomic(*out, evaluator::validate_report_json(validated)); !w)
      return report_failure("tasks validate", w.error());
    std::fprintf(stderr, "report: %s (a campaign's tasks.exclude_flagged)\n", out->c_str());
  }
  return flagged ? exit_code(ErrorKind::failure) : k_exit_ok;
}

}  // namespace korch::cli
