// Stage 2: every statically resolved load_inline built into the compile cache
// (compile_cache.hpp: identical code is never compiled twice); the host
// decides where a compile job runs (Host::run_compile).
#include "evaluator/compile_cache.hpp"
#include "evaluator/job_dir.hpp"
#include "evaluator/stages/context.hpp"
#include "util/sha256.hpp"

namespace korch::evaluator::stages {

Next compile(StageContext& ctx) {
  Report& r = ctx.report;
  const protocol::RulesResult& rules = ctx.rules;
  json compile_ev = json::array();
  json allow_extra = json::array();
  // Whatever ends this stage, the evidence keeps what was built.
  struct Keep {
    json& evidence;
    json& ev;
    ~Keep() { evidence["compile"] = ev; }
  } keep{ctx.evidence(), compile_ev};
  if (!rules.load_inline.empty() && rules.glue_probe) {
    // What load_inline's own binding glue imports (built once per versions).
    auto probe = ctx.compile_cache.get(rules.glue_probe->entry, rules.glue_probe->key, compile_ev,
                                       json::array(), true, "");
    if (probe) allow_extra = probe->undefined;
  }
  // A cached build's symbol verdict holds only under the allowlist (and
  // glue allowance) it was made under.
  const std::string policy =
      rules.symbol_policy + "+glue-" + sha256_hex(allow_extra.dump()).substr(0, 16);
  for (const auto& li : rules.load_inline) {
    if (!li.unresolved.empty()) {
      r.status = Verdict::compile_error;
      r.error = "line " + std::to_string(li.lineno) +
                ": load_inline arguments are not statically resolvable (" + li.unresolved + ")";
      return Next::verdict;
    }
    auto c = ctx.compile_cache.get(li.entry, li.key, compile_ev, allow_extra, false, policy);
    if (!c) {
      r.status = Verdict::worker_crash;
      r.error = c.error().message;
      return Next::verdict;
    }
    const protocol::CompileManifest& m = *c;
    if (m.status == protocol::CompileStatus::compile_error) {
      r.status = Verdict::compile_error;
      r.error = "the load_inline extension '" + li.name() + "' failed to compile";
      r.compile_log = tail(m.log);
      return Next::verdict;
    }
    if (m.status == protocol::CompileStatus::rule_violation && ctx.req.rules) {
      r.status = Verdict::rule_violation;
      r.rule_id =
          m.violations.empty() || m.violations[0].rule.empty() ? "symbols" : m.violations[0].rule;
      std::string msg;
      for (auto& v : m.violations) msg += v.message + "\n";
      r.error = tail(msg.empty() ? "the built library calls functions outside the allowlist" : msg);
      return Next::verdict;
    }
    ctx.prebuilt[li.key] = {
        {"dir", ctx.cache + "/cache/" + li.key}, {"module", m.module}, {"so", m.so}};
  }
  return Next::go_on;
}

}  // namespace korch::evaluator::stages
