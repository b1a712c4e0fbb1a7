#pragma once
// `korch worker`'s loop (docs/cluster.md): claims evaluations from the
// store's work queue (store/work_queue.hpp), runs them on this host's
// evaluator, writes the results. One claim per slot (one slot per GPU in gpu
// mode); a lease per claim, kept alive by a heartbeat while the evaluation
// runs; the worker's own row (host, GPUs, version, heartbeat, evaluations
// done) renewed as well. Work queued for another evaluator version is left
// alone, and the worker says why (its log and its row's note).
#include <atomic>
#include <cstdint>
#include <string>

#include "evaluator/evaluator.hpp"
#include "util/error.hpp"

namespace korch::evaluator::remote {

struct WorkerOptions {
  std::string store_url;      // postgres://...
  std::string worker_id;      // "" = "<host>:<pid>"
  std::string gpus = "none";  // what the worker row shows: "none" or the indices
  int slots = 1;              // evaluations at a time
  double lease_s = 60;        // a claim's lease; renewed every lease_s / 4
  double idle_poll_s = 5;  // an idle slot looks again at least this often (NOTIFY wakes it sooner)
  // The queue version this worker serves (evaluator/remote/queue_evaluator.hpp,
  // queue_version) and its configuration's evaluator mode.
  std::string queue_version;
  std::string korch_version;
  // An evaluation claimed more often than this (each earlier holder was lost:
  // killed, its host gone) is not run again: its result is worker_crash
  // (DESIGN §3's attempt cap), so a candidate that takes its worker down
  // cannot take the fleet down one worker at a time.
  std::int64_t max_claims = 10;
  // After `stop` (SIGTERM), evaluations still running this many seconds
  // later are cut short (the evaluator is shut down) and handed back
  // unfinished, so another worker runs them at once instead of after a lease
  // (0 = wait for them however long: the default). Kubernetes'
  // terminationGracePeriodSeconds, less a margin.
  double drain_s = 0;
  // Stop after this many evaluations in all (0 = no limit): tests and benchmarks.
  std::int64_t max_evaluations = 0;
};

struct WorkerSummary {
  std::int64_t done = 0;      // results written
  std::int64_t refused = 0;   // results the queue refused (the lease was re-claimed)
  std::int64_t released = 0;  // evaluations handed back unfinished (stopping evaluator)
};

// Runs until `stop` is set (SIGTERM: no new claims; the claimed evaluations
// finish and are written) or max_evaluations were done. Fails when the store
// cannot be opened or the worker cannot register.
Result<WorkerSummary> run_worker(const WorkerOptions& options, evaluator::Evaluator& evaluator,
                                 const std::atomic<bool>& stop);

}  // namespace korch::evaluator::remote
