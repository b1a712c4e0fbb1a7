#pragma once
// The evaluation work queue (DESIGN §8, docs/cluster.md): evaluations become
// rows of `eval_queue` that `korch worker` processes claim, and each worker
// reports itself as a row of `workers`. PostgreSQL only: the queue is how a
// coordinator on one host and workers on many meet. (The tables exist in a
// SQLite store too, so both schemas stay one; a SQLite store keeps evaluating
// in-process and open() refuses it.)
//
// The rules (what the tests in tests/store/test_work_queue.cpp show):
//  - a row is keyed on (request id, evaluator version): a request id is the
//    candidate's digest, so the same candidate evaluated under another
//    evaluator version is another row, and a coordinator never gets the
//    result of a version it does not run.
//  - enqueue inserts a row in state `queued` unless its key is there
//    already (a coordinator that resumes enqueues the same ids again; a row
//    that is `done` then delivers its stored result).
//  - claim takes the oldest row that is `queued`, or `claimed` with an
//    expired lease, whose evaluator version equals the worker's, in one
//    statement: UPDATE ... WHERE request_id = (SELECT ... FOR UPDATE SKIP
//    LOCKED LIMIT 1) RETURNING. Every claim increments the row's lease token.
//  - heartbeat extends a lease while its token is the row's; complete writes
//    the result and ends the lease in one transaction, and only while the
//    token is the row's and the row is `claimed`. A result from a lease that
//    was re-claimed (a new token) is refused: a re-claimed evaluation is
//    counted once. A lease that expired but that nobody re-claimed is still
//    its holder's (its token is unchanged): its result is accepted, since no
//    one else can deliver one.
//  - release hands a claimed row back (state `queued`) under the same token
//    rule: a worker that stops without a result gives its work up at once.
//  - NOTIFY wakes idle workers (channel korch_eval_queued, on enqueue and
//    release) and waiting coordinators (korch_eval_done, on complete).
// Lease times are the server's clock (clock_timestamp()), so hosts whose
// clocks differ agree on expiry.
//
// Threading: a WorkQueue holds one connection for statements and one for
// LISTEN (opened at the first wait()); every method is thread-safe (a mutex
// per connection). wait() blocks only the LISTEN connection, and the
// notifications it consumes are gone for every other waiter: let one thread
// wait and wake the others (korch worker's slots share one WorkQueue, so a
// worker process holds two connections whatever its slots).
// A connection the server dropped (a restart) is reopened once per call.
#include <cstdint>
#include <memory>
#include <optional>
#include <string>
#include <vector>

#include "util/error.hpp"

namespace korch::store {

// One evaluation of the queue (table eval_queue).
struct QueueRow {
  std::string request_id;
  std::string campaign_id;        // "" when the coordinator serves no one campaign
  std::string evaluator_version;  // what the campaign's verdicts rest on
  std::string request_json;       // the evaluation request (encode_request,
                                  // evaluator/remote/queue_evaluator.cpp)
  std::string state = "queued";  // queued | claimed | done
  std::string worker_id;         // the last claimer
  std::int64_t lease_token = 0;  // incremented by every claim
  // Claims not handed back (release): the first, and each re-claim after a
  // lost worker. A draining worker's hand-back does not count: --max-claims
  // caps losses, not rolling restarts.
  std::int64_t claims = 0;
  double lease_expires_at = 0;  // server clock, seconds since the epoch
  std::string result_json;      // the report, once done
  double enqueued_at = 0;
  double claimed_at = 0;
  double finished_at = 0;

  friend bool operator==(const QueueRow&, const QueueRow&) = default;
};

// One `korch worker` process (table workers), written at start and at every
// heartbeat; `korch status` lists them.
struct WorkerRow {
  std::string id;  // "<host>:<pid>:<start time>" unless --id names it
  std::string host;
  std::int64_t pid = 0;
  std::string gpus;        // "none", or the GPU indices it measures on ("0,1")
  std::int64_t slots = 0;  // evaluations at a time (one per GPU)
  std::string korch_version;
  std::string evaluator_version;
  std::string mode;                // mock | cpu | gpu
  std::string device_description;  // what the system prompt says about the device
  std::string state;               // running | draining | stopped
  std::string note;                // why it refuses queued work, when it does
  double started_at = 0;
  double heartbeat_at = 0;  // server clock
  std::int64_t evaluations_done = 0;

  friend bool operator==(const WorkerRow&, const WorkerRow&) = default;
};

// The device a remote campaign's evaluations run on (table
// campaign_devices), pinned at the campaign's first start: the first worker
// of its evaluator that registered tells it (the coordinator's host may have
// no such device). A resumed campaign reads it back instead of asking the
// workers again, so its system prompt and queue version stay what they were.
struct CampaignDevice {
  std::string campaign_id;         // "" for korch serve's evaluator
  std::string device_model;        // gpu mode: the GPU's name, in the queue version; else ""
  std::string device_description;  // what the system prompt says about the device
  double pinned_at = 0;

  friend bool operator==(const CampaignDevice&, const CampaignDevice&) = default;
};

// A claimed evaluation: what the worker runs and the token its result must carry.
// (request_id, evaluator_version, lease_token) names the lease.
struct Claim {
  std::string request_id;
  std::string evaluator_version;
  std::string campaign_id;
  std::string request_json;
  std::int64_t lease_token = 0;
  std::int64_t claims = 0;  // 1 on a first claim
};

// Queued rows that wait for another evaluator version than the asking worker's.
struct ForeignWork {
  std::string evaluator_version;
  std::string campaign_id;
  std::int64_t queued = 0;
};

struct QueueCounts {
  std::int64_t queued = 0;
  std::int64_t claimed = 0;
  std::int64_t done = 0;
};

// The NOTIFY channels.
inline constexpr const char* k_channel_queued = "korch_eval_queued";
inline constexpr const char* k_channel_done = "korch_eval_done";

class WorkQueue {
 public:
  // Connects to the PostgreSQL store at `location` (a postgres:// URL),
  // migrating it first if needed. `migrate` false (workers, `korch status`):
  // a store of another schema version is refused with a message that says
  // which (a worker never migrates its coordinator's store; a blank database
  // is given the current schema). A SQLite location fails
  // (ErrorKind::invalid) with a line saying the queue needs PostgreSQL.
  static Result<std::unique_ptr<WorkQueue>> open(const std::string& location, bool migrate = true);
  virtual ~WorkQueue() = default;

  // --- coordinator -----------------------------------------------------------
  // Inserts `row` (state queued) unless its (request id, evaluator version)
  // exists; true when inserted. Notifies korch_eval_queued.
  virtual Result<bool> enqueue(const QueueRow& row) = 0;
  // The rows of `evaluator_version` among `request_ids` that are done:
  // (request id, result json). Another version's result is never returned.
  virtual Result<std::vector<std::pair<std::string, std::string>>> results(
      const std::vector<std::string>& request_ids, const std::string& evaluator_version) = 0;

  // Pins `device` for its campaign unless one is pinned already; returns the
  // pinned one (the first pin wins, also between two coordinators).
  virtual Result<CampaignDevice> pin_device(const CampaignDevice& device) = 0;
  // The campaign's pinned device, if any.
  virtual Result<std::optional<CampaignDevice>> pinned_device(const std::string& campaign_id) = 0;

  // --- worker ----------------------------------------------------------------
  // Claims one evaluation for `worker_id` with a lease of `lease_s` seconds,
  // or nullopt when none of `evaluator_version` is ready.
  virtual Result<std::optional<Claim>> claim(const std::string& worker_id,
                                             const std::string& evaluator_version,
                                             double lease_s) = 0;
  // Extends the lease; false when it is no longer this token's.
  virtual Result<bool> heartbeat(const Claim& claim, double lease_s) = 0;
  // Writes the result and ends the lease in one transaction (also counting
  // it in the worker's row); false when refused (the lease was re-claimed or
  // the row is done).
  virtual Result<bool> complete(const Claim& claim, const std::string& worker_id,
                                const std::string& result_json) = 0;
  // Hands the row back (queued); false when the lease was no longer ours.
  // `counted`: the claim stays counted (a run the host failed, run again
  // by whichever worker claims it next; korch worker's --max-claims caps
  // them with the losses); else it is not (a draining worker's hand-back).
  virtual Result<bool> release(const Claim& claim, bool counted = false) = 0;
  // Queued rows of other evaluator versions than `evaluator_version`.
  virtual Result<std::vector<ForeignWork>> foreign_work(const std::string& evaluator_version) = 0;

  // --- workers' rows ----------------------------------------------------------
  // Inserts or replaces the row (heartbeat_at := the server's now; the
  // stored evaluations_done is kept: complete() counts it).
  virtual Result<void> put_worker(const WorkerRow& row) = 0;
  virtual Result<std::vector<WorkerRow>> list_workers() = 0;
  virtual Result<QueueCounts> counts(const std::string& campaign_id) = 0;
  virtual Result<std::vector<QueueRow>> list(const std::string& campaign_id) = 0;

  // --- wake-ups ---------------------------------------------------------------
  // Blocks up to `timeout_s` for a NOTIFY on `channel` (LISTENing on first
  // use); true when one arrived. Every notification pending is consumed.
  virtual Result<bool> wait(const std::string& channel, double timeout_s) = 0;
};

}  // namespace korch::store
