// korch eval / tasks.
#include <fmt/format.h>
#include <sys/prctl.h>

#include <cstdio>
#include <future>
#include <random>

#include "config/tasks.hpp"
#include "evaluator/evaluator.hpp"
#include "tools/korch/cli.hpp"
#include "util/fs.hpp"
#include "util/log.hpp"

namespace korch::cli {
namespace {

void print_report_text(const evaluator::Report& r) {
  std::printf("status: %s%s\n", evaluator::to_string(r.status),
              r.mock ? " (MOCK: fake verdict)" : "");
  std::printf("correct: %s\n", r.correct ? "yes" : "no");
  if (r.speedup) {
    std::printf("speedup: %.3f (95%% CI %.3f–%.3f), ref %.4f ms, candidate %.4f ms\n", *r.speedup,
                r.speedup_ci_low.value_or(0), r.speedup_ci_high.value_or(0),
                r.ref_time_ms.value_or(0), r.cand_time_ms.value_or(0));
  }
  std::printf("reward: %.4f\n", r.reward);
  if (!r.rule_id.empty()) std::printf("rule: %s\n", r.rule_id.c_str());
  if (!r.error.empty()) std::printf("error: %s\n", r.error.c_str());
  if (r.max_abs_diff) std::printf("max_abs_diff: %g\n", *r.max_abs_diff);
  if (!r.compile_log.empty()) std::printf("compile log (tail):\n%s\n", r.compile_log.c_str());
  if (!r.runtime_detail.empty())
    std::printf("runtime detail (tail):\n%s\n", r.runtime_detail.c_str());
  if (r.rules_skipped) std::printf("rules: SKIPPED (--rules off)\n");
  std::string prot;
  for (auto& p : r.protections) prot += (prot.empty() ? "" : ", ") + p;
  std::printf("protections: %s\n", prot.c_str());
  std::printf("evaluator: %s (%s), %.2f s\n", r.evaluator_version.c_str(), r.mode.c_str(),
              r.wall_s);
}

}  // namespace

int cmd_eval(const Args& args) {
  auto task_path = args.get("--task");
  auto code_path = args.get("--code");
  if (!task_path || !code_path) {
    return report_failure("eval", ErrorKind::invalid, "--task FILE and --code FILE are required");
  }
  auto mode = args.has("--mode") ? evaluator::mode_from_string(*args.get("--mode"))
                                 : std::optional(evaluator::Mode::submit);
  auto device = args.get("--device").value_or("cpu");
  auto rules = args.get("--rules").value_or("on");
  const bool cuda = device == "cuda";
  if (!mode || (!cuda && device != "cpu") || (rules != "on" && rules != "off")) {
    return report_failure("eval", ErrorKind::invalid,
                          "--mode check|submit, --device cpu|cuda, --rules on|off");
  }
  config::EvaluatorConfig cfg;
  auto eval_mode =
      get_enum(args, "--evaluator", cuda ? config::EvalMode::gpu : config::EvalMode::cpu);
  auto tolerance = get_enum(args, "--tolerance", cfg.tolerance);
  auto reward = get_enum(args, "--reward", cfg.reward);
  if (!eval_mode || !tolerance || !reward) {
    return report_failure(
        "eval", ErrorKind::invalid,
        fmt::format("--evaluator {}, --tolerance {}, --reward {}", enum_choices<config::EvalMode>(),
                    enum_choices<config::Tolerance>(), enum_choices<config::Reward>()));
  }
  cfg.mode = *eval_mode;
  cfg.tolerance = *tolerance;
  cfg.reward = *reward;
  log::init(args.get("--log-level").value_or("warn"));
  ::prctl(PR_SET_DUMPABLE, 0);
  auto task = config::load_task_file(*task_path);
  if (!task) {
    return report_failure("eval", ErrorKind::invalid, task.error().message);
  }
  auto code = read_file(*code_path);
  if (!code) {
    return report_failure("eval", ErrorKind::invalid, code.error().message);
  }
  auto timeout = get_number<double>(args, "--timeout");
  auto budget = get_number<std::int64_t>(args, "--memory-budget-mb");
  auto seed = get_number<std::uint64_t>(args, "--seed");
  if (!timeout) return report_failure("eval", timeout.error());
  if (!budget) return report_failure("eval", budget.error());
  if (!seed) return report_failure("eval", seed.error());
  if (*timeout) cfg.timeout_s = **timeout;
  if (*budget) cfg.memory_budget_mb = **budget;
  if (auto g = args.get("--gpus")) cfg.gpus = *g;  // gpu mode: "all", "1", "0-3"
  auto ev = evaluator::make_evaluator(cfg, args.get("--cache-dir").value_or(default_cache_dir()));
  if (!ev) {
    return report_failure("eval", ErrorKind::failure, ev.error().message);
  }
  evaluator::Request req;
  req.mode = *mode;
  req.request_id = fmt::format("cli|{}|{}", to_string(*mode), task->id);
  req.task = *task;
  req.code = *code;
  req.rules = rules == "on";
  req.device = cuda ? config::EvalMode::gpu : config::EvalMode::cpu;
  if (*seed) {
    req.secret_seed = **seed;
  } else {
    std::random_device rd;
    req.secret_seed = (static_cast<std::uint64_t>(rd()) << 32) ^ rd();
  }
  std::promise<evaluator::Report> done;
  auto fut = done.get_future();
  (*ev)->evaluate(std::move(req), [&done](evaluator::Report r) { done.set_value(std::move(r)); });
  auto report = fut.get();
  (*ev)->shutdown();
  if (args.has("--json")) {
    std::printf("%s\n", report.to_json().c_str());
  } else {
    print_report_text(report);
  }
  return report.status == evaluator::Verdict::ok ? k_exit_ok : exit_code(ErrorKind::failure);
}

int cmd_tasks(const Args& args, bool validate) {
  if (args.positional.size() != 1) {
    return report_failure("tasks", ErrorKind::invalid,
                          "usage: korch tasks list|validate DIR [--levels 1,2] [--ids 1-10]");
  }
  config::TaskSelection sel;
  sel.kernelbench_dir = args.positional[0];
  if (auto lv = args.get("--levels")) {
    auto parsed = config::parse_id_ranges(*lv);
    if (!parsed) {
      return report_failure("tasks", ErrorKind::invalid,
                            fmt::format("--levels: {}", parsed.error().message));
    }
    sel.levels = *parsed;
  }
  sel.ids = args.get("--ids").value_or("");
  auto tasks = config::load_tasks(sel);
  if (!tasks) {
    return report_failure("tasks", ErrorKind::invalid, tasks.error().message);
  }
  if (!validate) {
    for (auto& t : *tasks) std::printf("%s\t%s\n", t.id.c_str(), t.path.c_str());
    std::fprintf(stderr, "%zu task(s)\n", tasks->size());
    return k_exit_ok;
  }
  return cmd_tasks_validate(args, *tasks);
}

}  // namespace korch::cli
