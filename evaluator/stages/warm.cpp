// Stage 3 (gpu): Triton compiles (and autotunes) a Triton candidate's kernels
// in a sandboxed warm-up before anything is timed. A warm-up that succeeded
// leaves a marker written by the daemon (not the candidate): the candidate's
// kernels and autotuning choices are in its cache, so a later evaluation of
// the same code (CHECK then SUBMIT, a repeat) skips the job and times the
// same kernels.
#include <filesystem>

#include "evaluator/job_dir.hpp"
#include "evaluator/stages/context.hpp"
#include "evaluator/stages/host.hpp"
#include "util/fs.hpp"
#include "util/sha256.hpp"

namespace korch::evaluator::stages {
namespace {
constexpr double k_warm_timeout_s = 900;  // Triton compiles + autotuning of one candidate
}

std::string triton_dir(const std::string& cache, const json& versions, const std::string& code) {
  return cache + "/triton/" + versions.value("arch", "gpu") + "-" + sha256_hex(code).substr(0, 24);
}

Next warm(StageContext& ctx) {
  if (!ctx.triton || !ctx.host.warms_triton()) return Next::skip;
  const std::string marker = triton_dir(ctx.cache, ctx.versions, ctx.req.code) + ".warmed";
  json& evidence = ctx.evidence();
  std::error_code ec;
  if (std::filesystem::exists(marker, ec)) {
    evidence["warm"] = {{"ok", true}, {"cached", true}};
    return Next::skip;
  }
  JobDir dir(ctx.jobs_root(), "warm");
  const protocol::Settings st = ctx.settings();
  (void)dir.write_job(protocol::warm_job(st, ctx.req.code, ctx.req.task.source, ctx.prebuilt,
                                         st.runner_env.value("TRITON_CACHE_DIR", "")));
  JobOutcome o = ctx.jobs.run(JobRole::warm, dir.path(), ctx.host.spawn(ctx.device.gpu).dump(),
                              std::nullopt, k_warm_timeout_s);
  const protocol::WarmResult w = protocol::parse_warm(o.result_json);
  evidence["warm"] = {{"ok", w.ok}, {"wall_s", o.wall_s}, {"timed_out", o.timed_out}};
  if (w.ok) (void)write_file_atomic(marker, "");
  // A failed warm-up is not a verdict: the measure job meets the same error
  // and reports it with the judge's evidence.
  if (!w.ok && !w.error.empty()) evidence["warm"]["error"] = tail(w.error, 1500);
  return Next::go_on;
}

}  // namespace korch::evaluator::stages
