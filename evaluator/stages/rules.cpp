// Stage 1: the static rules, in a sandboxed job (no candidate code runs).
// Also run with rules off: they resolve the load_inline arguments the compile
// stage builds.
#include "evaluator/job_dir.hpp"
#include "evaluator/stages/context.hpp"
#include "evaluator/stages/host.hpp"

namespace korch::evaluator::stages {
namespace {
constexpr double k_rules_timeout_s = 60;
}

Next rules(StageContext& ctx) {
  Report& r = ctx.report;
  JobDir dir(ctx.jobs_root(), "rules");
  (void)dir.write_job(protocol::rules_job(ctx.settings(), ctx.req.code));
  JobOutcome o = ctx.jobs.run(JobRole::rules, dir.path(), ctx.host.spawn(-1).dump(), std::nullopt,
                              k_rules_timeout_s);
  auto parsed = protocol::parse_rules(o.result_json);
  if (!parsed || !parsed->error.empty()) {
    if (parsed) {
      r.status = Verdict::worker_crash;
      r.error = parsed->error;
      r.runtime_detail = tail(parsed->detail);
    } else {
      job_failed(r, o, "rule");
    }
    return Next::verdict;
  }
  ctx.rules = std::move(*parsed);
  const protocol::RulesResult& rules = ctx.rules;
  r.protections = rules.protections;
  ctx.evidence()["rules"] = {{"ok", rules.ok},
                             {"violations", rules.violations_json},
                             {"rules_version", rules.rules_version},
                             {"wall_s", o.wall_s},
                             {"skipped", !ctx.req.rules}};
  ctx.triton = rules.language == protocol::CandidateLanguage::triton;
  if (!ctx.req.rules || rules.ok) return Next::go_on;
  r.status = Verdict::rule_violation;
  if (!rules.violations.empty()) {
    r.rule_id = rules.violations[0].rule;
    std::string msg;
    for (auto& v : rules.violations)
      msg += "line " + std::to_string(v.line) + ": [" + v.rule + "] " + v.message + "\n";
    r.error = tail(msg);
  } else {
    r.error = "the static rules rejected the candidate";
  }
  return Next::verdict;
}

}  // namespace korch::evaluator::stages
