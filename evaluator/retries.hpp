#pragma once
// Running an evaluation again when its outcome is not a result about the
// candidate (docs/cluster.md, "Retries"): one cap and one pause schedule for
// every layer that does it --
//   the evaluator: the host's fault (the judge's `infrastructure`: memory held
//     outside the evaluation, a device that refused a context) and a GPU that
//     failed its health check after the run (ProtectedEvaluator::on_device);
//   the queue worker: it hands a host fault back to the queue, and whichever
//     worker claims it next runs it again (evaluator/remote/eval_worker.cpp);
//   the episode: a worker_crash a live korch observed (agent/episode.hpp).
// The evaluator and the queue count runs: a report records the runs the host
// failed in evidence.infrastructure, so a queue worker whose evaluator spent
// the cap writes the outcome instead of handing it back. The episode counts
// the reports it observed, against the same number.
#include <algorithm>
#include <chrono>

#include <nlohmann/json.hpp>

namespace korch::evaluator {

// The most runs one evaluation gets at each layer above.
inline constexpr int k_max_runs = 3;

// The pause before run `next` (2, 3, ...) after the host failed the one
// before it: 5 s, doubling, at most 60 s.
constexpr std::chrono::seconds pause_before_run(int next) {
  return std::chrono::seconds(std::min(60, 5 << std::clamp(next - 2, 0, 4)));
}

// The runs of an evaluation that the host failed, as a report's evidence
// records them (evidence.infrastructure; at least 1 for a host fault).
inline int host_fault_runs(const nlohmann::json& evidence, bool host_fault) {
  int n = 0;
  if (evidence.is_object() && evidence.contains("infrastructure") &&
      evidence["infrastructure"].is_array())
    n = static_cast<int>(evidence["infrastructure"].size());
  return host_fault ? std::max(n, 1) : n;
}

}  // namespace korch::evaluator
