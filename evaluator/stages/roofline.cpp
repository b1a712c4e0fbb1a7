// Stage 5 (gpu, a GPU of known peaks): the roofline. The task's counted work
// gives the least time any kernel can take on this GPU (t_min); a candidate
// time under k_impossible_fraction * t_min is measured again by a fresh judge,
// and under it twice the timing, not the kernel, is what is broken:
// impossible_timing.
//
// The work (flops, bytes, dtype) of a task's reference is a function of the
// task's source (KernelBench input shapes are fixed), torch (which ops a
// module dispatches to) and the counter's own code: counted once by the judge
// and kept under that key, in memory and in <cache>/work/, so later
// evaluations of the task do not count again under the GPU lease. A changed
// task file, torch or counter counts again.
#include <filesystem>

#include "evaluator/stages/context.hpp"
#include "evaluator/stages/host.hpp"
#include "util/fs.hpp"
#include "util/sha256.hpp"

namespace korch::evaluator::stages {

WorkCache::WorkCache(std::string cache, const json& versions)
    : m_cache(std::move(cache)),
      m_torch(versions.value("torch", "?")),
      m_counter(versions.value("flops_counter", "?")) {}

std::string WorkCache::path(const std::string& task_source) const {
  const std::string key = task_source + '\0' + m_torch + '\0' + m_counter;
  return m_cache + "/work/" + sha256_hex(key).substr(0, 32) + ".json";
}

std::optional<json> WorkCache::known(const std::string& task_source) {
  const std::string p = path(task_source);
  std::lock_guard lk(m_mu);
  if (auto it = m_work.find(p); it != m_work.end()) return it->second;
  auto text = read_file(p);
  if (!text) return std::nullopt;
  json w = json::parse(*text, nullptr, false);
  if (w.is_discarded() || !w.is_object() || !w.contains("flops")) return std::nullopt;
  m_work[p] = w;
  return w;
}

void WorkCache::remember(const std::string& task_source, const json& w) {
  if (!w.is_object() || !w.contains("flops") || w.value("cached", false)) return;
  const std::string p = path(task_source);
  std::lock_guard lk(m_mu);
  m_work[p] = w;
  std::error_code ec;
  std::filesystem::create_directories(m_cache + "/work", ec);
  (void)write_file_atomic(p, w.dump());
}

Next roofline(StageContext& ctx) {
  const roofline::GpuPeaks* peaks = ctx.host.peaks();
  if (!peaks || !ctx.measured) return Next::skip;
  Report& r = ctx.report;
  json& evidence = ctx.evidence();
  const protocol::CountedWork& work = ctx.measured->counted_work;  // evidence.work, typed
  if (!work.flops) return Next::skip;
  auto prec = roofline::precision_from(work.dtype, ctx.cfg.tolerance);
  if (!prec) return Next::skip;
  roofline::WorkEstimate w{*work.flops, work.bytes.value_or(0.0)};
  const double t_min = roofline::t_min_s(w, *peaks, *prec);
  if (!(t_min > 0)) return Next::skip;
  r.t_min_ms = t_min * 1e3;
  evidence["roofline"] = {{"gpu", peaks->name},
                          {"precision", roofline::to_string(*prec)},
                          {"flops", w.flops},
                          {"bytes", w.bytes},
                          {"t_min_ms", t_min * 1e3}};
  if (r.status != Verdict::ok || !r.cand_time_ms) return Next::go_on;
  if (roofline::classify(*r.cand_time_ms / 1e3, t_min) == roofline::Classification::ok)
    return Next::go_on;
  // Suspicious: measure again (a fresh judge, fresh runners).
  json again_ev = json::object();
  Report again = r;
  auto res2 = measure_job(ctx, again, again_ev);
  double t2 = 0;
  if (res2 && res2->cand_time_ms) t2 = *res2->cand_time_ms / 1e3;
  evidence["roofline"]["remeasured_ms"] = t2 * 1e3;
  if (t2 > 0 && roofline::classify(t2, t_min) == roofline::Classification::ok) return Next::go_on;
  r.status = Verdict::impossible_timing;
  r.correct = false;
  r.error = "measured " + std::to_string(*r.cand_time_ms) + " ms (and again " +
            std::to_string(t2 * 1e3) + " ms), under " +
            std::to_string(roofline::k_impossible_fraction) + " x the roofline bound " +
            std::to_string(t_min * 1e3) + " ms of " + peaks->name +
            ": the timing, not the kernel, is broken";
  return Next::go_on;
}

}  // namespace korch::evaluator::stages
