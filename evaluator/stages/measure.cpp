// Stage 4: the measure job -- the judge and its runners -- on the device the
// lease stage holds (cpu: the CPU). Its verdict becomes the report's.
//
// cpu: runner processes whose times the judge distrusts are measured again
// with a fresh judge and fresh runners, at most k_timing_remeasures times. A
// reference-side reason is the host's (the reference's code is the task's):
// the next run waits for the load to pass, and if it stays the outcome is
// infrastructure (worker_crash, run again by the episode, never the
// candidate's verdict). Only the candidate's own runners disagreeing ends in
// impossible_timing.
//
// gpu: the judge's `infrastructure` (the host's fault) is not a verdict: the
// stage hands it to the evaluator's retry loop (Next::run_again).
#include <fmt/format.h>

#include "evaluator/job_dir.hpp"
#include "evaluator/stages/context.hpp"
#include "evaluator/stages/host.hpp"
#include "util/log.hpp"

namespace korch::evaluator::stages {
namespace {
constexpr double k_measure_grace_s = 15;  // the judge's own deadline comes first
constexpr int k_timing_remeasures = 2;    // cpu: measure jobs again after distrusted timing
constexpr int k_timing_pause_s = 5;  // cpu: before a re-measure the host is blamed for (5, 10 s)

// cpu: measured again while the judge distrusts its runners
// (protocol::timing_outcome, the one decision on distrusted times); false
// when the evaluator stopped during a pause (the report says so).
constexpr int k_measurements = k_timing_remeasures + 1;

bool remeasure_distrusted(StageContext& ctx, std::optional<protocol::MeasureResult>& res) {
  Report& r = ctx.report;
  json& evidence = ctx.evidence();
  for (int n = 1; res; ++n) {
    if (protocol::timing_outcome(*res, n, k_measurements) != protocol::TimingOutcome::measure_again)
      break;
    const std::string why = res->timing_distrust();
    const bool machine = res->timing_distrust_is_machine();
    KLOG_WARN("[eval {}] timing distrusted ({}), measuring again: {}", ctx.req.request_id,
              machine ? "the host" : "the candidate's runners", why);
    evidence["timing_remeasured"].push_back(why);
    if (machine && !ctx.clock.pause(std::chrono::seconds(k_timing_pause_s << (n - 1)), ctx.stop)) {
      r.error = "the evaluator shut down while waiting to measure again";
      r.interrupted = true;
      return false;
    }
    res = measure_job(ctx, r, evidence);
  }
  return true;
}

// cpu: still distrusted after the re-measures: the host's fault or the
// candidate's, never a speedup.
void judge_distrust(const protocol::MeasureResult& res, Report& r, json& evidence) {
  const auto outcome = protocol::timing_outcome(res, k_measurements, k_measurements);
  if (outcome == protocol::TimingOutcome::keep) return;
  const std::string why = res.timing_distrust();
  r.correct = false;
  if (outcome == protocol::TimingOutcome::host_fault) {
    r.status = Verdict::worker_crash;
    r.error = fmt::format(
        "infrastructure: the runners' times could not be trusted in {} measurements "
        "(the host, not the candidate's fault): {}",
        k_measurements, why);
    evidence["infrastructure"].push_back({{"run", k_measurements}, {"why", why}});
  } else {
    r.status = Verdict::impossible_timing;
    r.error = fmt::format("the runners' times could not be trusted in {} measurements: {}",
                          k_measurements, why);
  }
}
}  // namespace

// triton: the runners may exec. Measured on the H200 (Triton 3.6): even after
// the sandboxed warm-up filled the candidate's cache, Triton's launcher build
// in the runner ran gcc again ("Operation not permitted: /usr/bin/gcc"), so a
// no-exec runner cannot run Triton there yet. The rules already keep
// subprocess/os/ctypes out of the candidate's Python and the symbol allowlist
// keeps exec out of native code; uid, namespaces, no network and
// no_new_privs still hold. The report says "runner_may_exec".
std::optional<protocol::MeasureResult> measure_job(StageContext& ctx, Report& r, json& evidence) {
  const Request& req = ctx.req;
  JobDir dir(ctx.jobs_root(), "measure");
  protocol::Settings st = ctx.settings();
  if (ctx.host.warms_triton() && ctx.triton) st.runner_exec = true;
  if (st.runner_exec) evidence["runner_may_exec"] = true;
  protocol::MeasureJob mj;
  mj.mode = req.mode;
  mj.code = req.code;
  mj.task_source = req.task.source;
  mj.task_name = req.task.name;
  mj.prebuilt = ctx.prebuilt;
  mj.timeout_s = ctx.cfg.timeout_s;
  if (WorkCache* w = ctx.host.work()) mj.work = w->known(req.task.source);
  (void)dir.write_job(protocol::measure_job(st, mj));
  std::optional<std::uint64_t> seed;
  if (req.mode == Mode::submit) seed = req.secret_seed;
  JobOutcome o = ctx.host.run_measure(ctx.jobs, dir.path(), req, ctx.device, seed,
                                      ctx.cfg.timeout_s + k_measure_grace_s);
  evidence["measure_wall_s"] = o.wall_s;
  if (!protocol::has_result(o.result_json)) {
    job_failed(r, o, "measure");
    return std::nullopt;
  }
  auto m = protocol::parse_measure(o.result_json);
  if (!m) {
    // A verdict the daemon does not know is a protocol error, said plainly.
    r.status = Verdict::worker_crash;
    r.error = m.error().message;
    return std::nullopt;
  }
  m->candidate_log = tail(o.candidate_log);
  return std::move(*m);
}

void apply_measure(const protocol::MeasureResult& m, Report& r, json& evidence) {
  r.status = m.verdict;
  r.correct = m.correct && r.status == Verdict::ok;
  static_cast<Measured&>(r) = m;
  r.error = m.error;
  r.notes = m.notes;
  std::string detail = m.runtime_detail;
  if (r.status != Verdict::ok && !m.candidate_log.empty())
    detail += "\n--- candidate output ---\n" + m.candidate_log;
  r.runtime_detail = tail(detail);
  // The candidate runner's protections are the ones a cheat meets.
  r.protections = m.candidate_protections.empty() ? m.protections : m.candidate_protections;
  evidence["measure"] = m.evidence;
  evidence["judge_protections"] = m.protections;
}

Next measure(StageContext& ctx) {
  Report& r = ctx.report;
  json& evidence = ctx.evidence();
  auto res = measure_job(ctx, r, evidence);
  const bool cpu_timing = ctx.host.remeasures_distrusted_timing();
  if (cpu_timing && !remeasure_distrusted(ctx, res)) return Next::verdict;
  ctx.measured = std::move(res);
  // No result: the report says why (a crash the health stage may look into).
  if (!ctx.measured) return Next::go_on;
  if (!ctx.measured->infrastructure.empty() && ctx.host.runs_host_faults_again())
    return Next::run_again;
  if (WorkCache* w = ctx.host.work()) w->remember(ctx.req.task.source, ctx.measured->work());
  apply_measure(*ctx.measured, r, evidence);
  if (cpu_timing) judge_distrust(*ctx.measured, r, evidence);
  return Next::go_on;
}

}  // namespace korch::evaluator::stages
