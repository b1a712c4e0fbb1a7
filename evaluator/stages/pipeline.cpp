// The pipeline's wrapper and what its stages share: the stop, the clock, a
// job's settings, a failed job's report, the device check.
#include <thread>

#include "evaluator/job_dir.hpp"
#include "evaluator/stages/context.hpp"
#include "evaluator/stages/host.hpp"

namespace korch::evaluator::stages {

void StopFlag::request() {
  {
    std::lock_guard lk(m_mu);
    m_stop = true;
  }
  m_cv.notify_all();
}

bool StopFlag::requested() const {
  std::lock_guard lk(m_mu);
  return m_stop;
}

bool StopFlag::wait_for(std::chrono::milliseconds d) const {
  std::unique_lock lk(m_mu);
  return m_cv.wait_for(lk, d, [&] { return m_stop; });
}

namespace {
class RealClock final : public Clock {
 public:
  time_point now() override { return std::chrono::steady_clock::now(); }
  bool pause(std::chrono::milliseconds d, const StopFlag& stop) override {
    return !stop.wait_for(d);
  }
};
}  // namespace

std::shared_ptr<Clock> real_clock() { return std::make_shared<RealClock>(); }

Next run_stage(StageContext& ctx, const char* key, Stage stage) {
  if (ctx.stop.requested()) {
    ctx.report.error = "the evaluator shut down before this evaluation ended";
    ctx.report.interrupted = true;
    return Next::verdict;
  }
  const auto t0 = ctx.clock.now();
  const Next next = stage(ctx);
  if (next == Next::skip) return Next::go_on;
  if (key) {
    json& stages = ctx.stages();
    stages[key] = stages.value(key, 0.0) + ctx.clock.seconds_since(t0);
  }
  return next;
}

protocol::Settings StageContext::settings() const {
  protocol::Settings st;
  st.tolerance = cfg.tolerance;
  st.torch_ops = cfg.torch_ops;
  st.memory_budget_mb = host.budget_mb();
  st.gpu = host.mode() == config::EvalMode::gpu;
  // The knobs (knobs.hpp) override what the host chooses.
  const EnvKnobs& k = knobs;
  if (k.reference_runners) st.reference_runners = *k.reference_runners;
  if (k.candidate_runners) st.candidate_runners = *k.candidate_runners;
  if (k.judge_shares_core) st.judge_shares_core = *k.judge_shares_core;
  if (k.timing_batched_cap) st.timing_batched_cap = *k.timing_batched_cap;
  if (k.timing_block_ms) st.timing_block_ms = *k.timing_block_ms;
  if (k.timing_calibrations) st.timing_calibrations = *k.timing_calibrations;
  if (k.timing_batch_us) st.timing_batch_us = *k.timing_batch_us;
  if (k.timing_spin_us) st.timing_spin_us = *k.timing_spin_us;
  if (k.timing_heap_only) st.timing_heap_only = *k.timing_heap_only;
  if (k.timing_max_s) st.timing_max_s = *k.timing_max_s;
  if (k.timing_max_blocks) st.timing_max_blocks = *k.timing_max_blocks;
  if (k.timing_min_calls) st.timing_min_calls = *k.timing_min_calls;
  if (k.timing_lone_runners) st.timing_lone_runners = *k.timing_lone_runners;
  if (k.timing_judge_writes) st.timing_judge_writes = *k.timing_judge_writes;
  if (k.timing_split_compare) st.timing_split_compare = *k.timing_split_compare;
  if (k.timing_stop_on_bootstrap) st.timing_stop_on_bootstrap = *k.timing_stop_on_bootstrap;
  st.profile_first_call = k.profile_first_call;
  st.fake_cuda = k.fake_cuda;
  host.tune(st, req, k);
  return st;
}

void job_failed(Report& r, const JobOutcome& o, const char* stage) {
  if (o.timed_out) {
    r.status = Verdict::timeout;
    r.error = std::string(stage) + " exceeded the wall-clock limit and was killed";
  } else {
    r.status = Verdict::worker_crash;
    r.error = std::string("the ") + stage + " worker ended without a result" +
              (o.error.empty() ? "" : ": " + o.error) + " (exit code " +
              std::to_string(o.exit_code) +
              (o.signal ? ", signal " + std::to_string(o.signal) : "") + ")";
  }
  r.runtime_detail = tail(
      o.worker_log + (o.candidate_log.empty() ? "" : "\n--- candidate ---\n" + o.candidate_log));
}

Next device_check(StageContext& ctx) {
  const config::EvalMode mine = ctx.host.mode();
  if (!ctx.req.device || *ctx.req.device == mine) return Next::skip;
  ctx.report.status = Verdict::worker_crash;
  ctx.report.error = "the " + std::string(to_string(mine)) +
                     " evaluator cannot evaluate on device '" +
                     std::string(to_string(*ctx.req.device)) + "'";
  return Next::verdict;
}

}  // namespace korch::evaluator::stages
