#pragma once
// korch's durable state: one SQLite database (WAL) per campaign directory, or
// a PostgreSQL database named by a URL (Options::path below; DESIGN §8).
// Both backends implement this one interface with the same schema version,
// conflict rules, group commit and snapshot reads (docs/ARCHITECTURE.md,
// "Store backends").
//
// Threading: one writer thread owns the write connection. Callers hand it a
// WriteBatch; the writer groups many batches into one `BEGIN IMMEDIATE`
// transaction (group commit) and invokes each batch's callback only after the
// COMMIT is durable, so "committed" always means durable (synchronous=FULL by
// default: the WAL is fsynced before the callback). Callbacks run one at a
// time, in commit order, on a thread of the store. Reads use a separate connection per calling
// thread (checked out of a small pool for the duration of one read, in its own read transaction, so
// a read sees one consistent snapshot) and are synchronous. Every public method is thread-safe. Do
// not destroy a Store from one of its callbacks.
//
// Write-ahead contract (DESIGN §3): the engine commits a step's outcome before
// it starts any later step that depends on it.
//
// Conflict rules enforced here, not by callers:
//  - turns: primary key (episode, turn); a second insert is ignored and
//    reported in CommitInfo::conflicts (the stored row wins).
//  - evaluations: primary key request_id; a row in state "done" is never
//    changed again (a later put is reported in CommitInfo::conflicts).
//  - llm_calls: primary key request_id; a row in state "done" is never
//    changed again (a later put is reported in CommitInfo::conflicts).
//    A request id names its episode and turn: a later put keeps the stored
//    episode_id and turn (the same holds for evaluations' episode_id).
//    dup_possible is sticky: once stored true, a later put keeps it true
//    (it records what already happened on the wire).
//  - messages: primary key (episode, epoch, seq); duplicates are ignored.
//  - finals: primary key episode; the first final wins (a later one is
//    reported in CommitInfo::conflicts). Inserting a final also sets the
//    episode's status to "final" (and stamps updated_at, unless the episode
//    was already final); a final episode's status never changes again (an
//    EpisodeUpdate that tries is reported as a conflict).
//  - campaigns, tasks, episodes: inserted if absent, never overwritten.
//
// Referential rules (foreign keys, checked per operation): tasks and episodes
// need their campaign; messages, turns and finals need their episode; an
// EpisodeUpdate of an unknown episode fails its batch. llm_calls,
// evaluations and events may name an episode that does not exist (the
// evaluator also serves requests outside any campaign). A batch that breaks a
// rule fails alone: the other batches of its group still commit. Statuses,
// states, roles, kinds and end reasons are enums (store/vocabulary.hpp),
// spelt as TEXT at the column by their name tables.
#include <cstdint>
#include <functional>
#include <memory>
#include <optional>
#include <string>
#include <string_view>
#include <variant>
#include <vector>

#include "store/vocabulary.hpp"
#include "util/error.hpp"

namespace korch::store {

// Newest schema version this binary understands. A database with a larger
// recorded version is refused by open().
inline constexpr int k_schema_version = 6;

// Which engine holds a store.
enum class Backend { sqlite, postgres };

// Where a store lives, parsed from what the user wrote (store.url, db_path,
// --db): a plain path or "sqlite:PATH" is a SQLite file (the default);
// "postgres://..." or "postgresql://..." is a PostgreSQL database (libpq's
// URL syntax: user, host, port, dbname, ?host=/socket/dir, sslmode, ...).
struct Location {
  Backend backend = Backend::sqlite;
  std::string target;  // the file's path, or the URL handed to libpq
};

// Fails (ErrorKind::invalid, one line, password redacted) on an empty text,
// an unknown scheme ("mysql://...") or a URL without a host part.
Result<Location> parse_location(const std::string& text);
// True when `text` names a PostgreSQL store.
bool is_postgres_url(std::string_view text);
// `text` with the password of a URL ("postgres://user:PASSWORD@host") and
// any "password=" parameter replaced by "****"; other text unchanged. Use it
// wherever a store location is printed, logged or stored.
std::string redact_url(std::string_view text);

struct Options {
  // The store's location (see Location): a SQLite path, "sqlite:PATH" or a
  // postgres:// URL. Prefer PGPASSFILE or PGPASSWORD to a password in it.
  std::string path;
  // OFF | NORMAL | FULL | EXTRA. SQLite: PRAGMA synchronous. PostgreSQL:
  // FULL and EXTRA set synchronous_commit = on (a COMMIT returns once the
  // server flushed it), NORMAL and OFF set it off.
  std::string synchronous = "FULL";
  int busy_timeout_ms = 5000;
  int max_batches_per_txn = 512;  // group-commit upper bound
  bool read_only = false;         // open for status/export only
};

struct CampaignRow {
  std::string id;
  std::string name;
  std::string config_json;  // secrets never included
  std::uint64_t secret_seed = 0;
  double created_at = 0;

  friend bool operator==(const CampaignRow&, const CampaignRow&) = default;
};

struct TaskRow {
  std::string campaign_id;
  std::string task_id;
  int level = 0;
  int number = 0;
  std::string name;
  std::string path;
  std::string source;  // reference module, stored for reproducibility

  friend bool operator==(const TaskRow&, const TaskRow&) = default;
};

// An episode without its system prompt: what listings read (list_episodes).
// A listing of thousands of episodes must not read thousands of prompts.
struct EpisodeSummary {
  std::string id;
  std::string campaign_id;
  std::string task_id;
  std::string model_id;
  int sample_index = 0;
  EpisodeStatus status = EpisodeStatus::pending;
  double active_s = 0;  // wall-clock seconds spent while driven
  std::int64_t tokens_used = 0;
  double cost_usd = 0;
  double created_at = 0;
  double updated_at = 0;

  friend bool operator==(const EpisodeSummary&, const EpisodeSummary&) = default;
};

// The whole episode row: its summary and the system prompt, which is
// rendered once and reused verbatim on resume.
struct EpisodeRow : EpisodeSummary {
  std::string system_prompt;

  friend bool operator==(const EpisodeRow&, const EpisodeRow&) = default;
};

// Partial update of an episode; unset fields are left alone.
struct EpisodeUpdate {
  std::string id;
  std::optional<EpisodeStatus> status;
  std::optional<double> active_s;
  std::optional<std::int64_t> tokens_used;
  std::optional<double> cost_usd;

  friend bool operator==(const EpisodeUpdate&, const EpisodeUpdate&) = default;
};

// One message of an episode's conversation. A compaction starts a new epoch;
// the live conversation is the messages of the highest epoch, ordered by seq.
struct MessageRow {
  std::string episode_id;
  int epoch = 0;
  int seq = 0;
  Role role = Role::user;
  MessageKind kind = MessageKind::task;
  int turn = 0;
  std::string content;

  friend bool operator==(const MessageRow&, const MessageRow&) = default;
};

struct TurnRow {
  std::string episode_id;
  int turn = 0;  // 1-based
  std::string model_id;
  std::string llm_request_id;
  std::string action;        // check | submit | none
  std::string parse_status;  // code | no_code | truncated
  std::string code;
  std::string code_sha;
  std::string eval_request_id;  // "" when no evaluation ran
  std::string eval_status;      // verdict string of the check/submit, "" if none
  std::string finish_reason;
  std::int64_t prompt_tokens = 0;
  std::int64_t completion_tokens = 0;
  double llm_latency_s = 0;
  double at = 0;

  friend bool operator==(const TurnRow&, const TurnRow&) = default;
};

struct LlmCallRow {
  std::string request_id;
  std::string episode_id;
  int turn = 0;
  std::string model_id;
  CallState state = CallState::started;
  double started_at = 0;
  double finished_at = 0;
  std::string content;  // failed calls only: a completed reply is stored once, as the
                        // episode's assistant message of this turn (agent/episode.cpp)
  std::string reasoning;
  std::string finish_reason;
  std::int64_t prompt_tokens = 0;
  std::int64_t completion_tokens = 0;
  std::int64_t cached_tokens = 0;
  std::int64_t reasoning_tokens = 0;
  double cost_usd = 0;
  double latency_s = 0;
  int http_attempts = 0;
  std::string attempts_json;  // [{"status":429,"error":"","latency_s":0.1}, ...]
  std::string provider_request_id;
  std::string failure;  // "" | context_overflow | permanent | exhausted
  std::string error;
  // True when this request may have reached the provider more than once: an
  // earlier send's outcome was never committed (korch was killed or stopped
  // with the call in flight) and the call was sent again under the same id.
  // False for a call sent once. Kept by every later write of the row.
  bool dup_possible = false;
  int sends = 1;  // how many times this id was sent (restarts)

  friend bool operator==(const LlmCallRow&, const LlmCallRow&) = default;
};

struct EvaluationRow {
  std::string request_id;
  std::string episode_id;
  std::string kind;  // check | submit
  std::string code_sha;
  EvalState state = EvalState::queued;
  std::string owner;  // "<host>:<pid>" of the process running it
  int attempts = 0;   // times started, interrupted starts included (informational)
  // Failures a live korch observed (the worker ended without a result while
  // korch ran and was not stopping): what counts toward the attempt cap
  // (agent/episode.hpp, k_max_eval_attempts). A start whose korch died or was
  // stopped does not count.
  int failures = 0;
  std::string verdict;
  std::string report_json;
  std::string evaluator_version;
  double created_at = 0;
  double finished_at = 0;

  friend bool operator==(const EvaluationRow&, const EvaluationRow&) = default;
};

struct EventRow {
  std::string episode_id;
  int turn = 0;
  std::string kind;  // compaction | crash | model_swap | resumed | budget | ...
  std::string detail;
  double at = 0;

  friend bool operator==(const EventRow&, const EventRow&) = default;
};

struct FinalRow {
  std::string episode_id;
  EndReason reason = EndReason::submitted;
  std::string verdict;     // evaluator verdict of the submission, "" if none
  std::string request_id;  // submission request id, "" if none
  std::optional<double> speedup;
  double reward = 0;
  bool correct = false;
  double at = 0;

  friend bool operator==(const FinalRow&, const FinalRow&) = default;
};

// The verdict card of an evaluator version (issue #51, `korch audit --store`):
// korch's own error rates on its corpus. Keyed by (evaluator_version,
// rules_version, device); a later card of the same key replaces it.
struct VerdictCardRow {
  std::string evaluator_version;
  std::string rules_version;
  std::string device;
  std::string mode;           // cpu | gpu
  int attacks_accepted = 0;   // attack success x ...
  int attacks = 0;            // ... of N
  int honest_rejected = 0;    // false rejection y ...
  int honest = 0;             // ... of M
  std::string card_json;      // the whole card (korch audit --json)
  double measured_at = 0;

  friend bool operator==(const VerdictCardRow&, const VerdictCardRow&) = default;
};

// One unit of atomic work: all of a batch's operations commit together, in
// the order added. Several batches may share one transaction.
class WriteBatch {
 public:
  void put(CampaignRow row);  // insert if absent
  void put(TaskRow row);      // insert if absent
  void put(EpisodeRow row);   // insert if absent
  void update(EpisodeUpdate update);
  void put(MessageRow row);     // insert if absent
  void put(TurnRow row);        // insert; existing key = conflict
  void put(LlmCallRow row);     // upsert unless the stored row is done
  void put(EvaluationRow row);  // upsert unless the stored row is done
  void put(EventRow row);       // append
  void put(FinalRow row);       // insert if absent (first final wins)
  void put(VerdictCardRow row);  // upsert (the latest card of its key)
  // Moves every operation of `other` to the end of this batch.
  void append(WriteBatch&& other) {
    for (auto& op : other.m_ops) m_ops.push_back(std::move(op));
    other.m_ops.clear();
  }
  bool empty() const { return m_ops.empty(); }
  std::size_t size() const { return m_ops.size(); }

  using Op = std::variant<CampaignRow, TaskRow, EpisodeRow, EpisodeUpdate, MessageRow, TurnRow,
                          LlmCallRow, EvaluationRow, EventRow, FinalRow, VerdictCardRow>;
  const std::vector<Op>& ops() const { return m_ops; }

 private:
  std::vector<Op> m_ops;
};

struct CommitInfo {
  // Human-readable descriptions of rows that were not written because the
  // stored row wins ("turn e-..:3 exists").
  std::vector<std::string> conflicts;
};

using CommitCallback = std::function<void(Result<CommitInfo>)>;

// Everything needed to rebuild one episode in memory.
struct EpisodeSnapshot {
  EpisodeRow episode;
  std::vector<MessageRow> messages;   // live epoch only, by seq
  int epoch = 0;                      // live epoch number
  std::vector<TurnRow> turns;         // by turn
  std::vector<LlmCallRow> llm_calls;  // by turn
  std::vector<EvaluationRow> evaluations;
  std::optional<FinalRow> final;
  std::vector<EventRow> events;  // the episode's lifecycle events, oldest first
};

// Aggregates for `korch status`. Tokens and cost are summed over the
// campaign's llm_calls rows (every paid call, including failed ones).
struct CampaignCounts {
  std::int64_t episodes = 0;
  std::int64_t pending = 0;
  std::int64_t running = 0;
  std::int64_t final = 0;
  std::int64_t turns = 0;
  std::int64_t llm_calls = 0;
  std::int64_t prompt_tokens = 0;
  std::int64_t completion_tokens = 0;
  double cost_usd = 0;
  std::int64_t submitted = 0;  // finals with reason submitted
  std::int64_t correct = 0;

  friend bool operator==(const CampaignCounts&, const CampaignCounts&) = default;
};

struct Lease {
  std::string campaign_id;
  std::string owner;
  double heartbeat_at = 0;
  double expires_at = 0;

  friend bool operator==(const Lease&, const Lease&) = default;
};

class Store {
 public:
  // Opens (creating if needed) the database, applies migrations, starts the
  // writer thread. Fails with one line naming the path (a URL redacted) when
  // the file is not a database, is read-only (unless options.read_only), has
  // a newer schema, or when the PostgreSQL server cannot be reached.
  static Result<std::unique_ptr<Store>> open(const Options& options);
  virtual ~Store() = default;

  // --- writes (writer thread) ------------------------------------------------
  // Queues a batch; `done` runs on a store thread once the COMMIT is durable
  // (or with the error if the transaction failed: then nothing of the batch
  // was written).
  // Batches commit in submission order. After close(), or on a read-only
  // store, `done` runs at once on the caller's thread with an error.
  // Exceptions thrown by `done` are logged and swallowed.
  virtual void commit(WriteBatch batch, CommitCallback done) = 0;
  // Blocking form of commit(): returns once the batch is durable (or failed).
  // May be called from inside a commit callback.
  virtual Result<CommitInfo> commit_sync(WriteBatch batch) = 0;
  // Drains the queue and stops the writer thread. Idempotent.
  virtual void close() = 0;

  // --- leases (one owner per campaign) ---------------------------------------
  // Takes the campaign's lease for `owner` if it is free, expired or already
  // ours. Returns the current holder when someone else holds a live lease.
  // Runs in a BEGIN IMMEDIATE transaction on the writer thread, so it is
  // exclusive across processes sharing the file. heartbeat_lease fails when
  // the lease is no longer ours; release_lease is a no-op if it is not ours.
  virtual Result<std::optional<Lease>> acquire_lease(const std::string& campaign_id,
                                                     const std::string& owner, double ttl_s) = 0;
  virtual Result<void> heartbeat_lease(const std::string& campaign_id, const std::string& owner,
                                       double ttl_s) = 0;
  virtual Result<void> release_lease(const std::string& campaign_id, const std::string& owner) = 0;

  // --- reads (caller's thread, own connection) -------------------------------
  virtual Result<std::optional<CampaignRow>> get_campaign(const std::string& id) = 0;
  virtual Result<std::vector<CampaignRow>> list_campaigns() = 0;
  virtual Result<std::vector<TaskRow>> list_tasks(const std::string& campaign_id) = 0;
  // The campaign's episodes without their system prompts, oldest first; one
  // episode in full comes from load_episode.
  virtual Result<std::vector<EpisodeSummary>> list_episodes(const std::string& campaign_id) = 0;
  // Snapshots of every episode of the campaign whose status is not final, in
  // a handful of queries (resume of 10,000 episodes must take < 5 s).
  virtual Result<std::vector<EpisodeSnapshot>> load_unfinished(const std::string& campaign_id) = 0;
  virtual Result<std::optional<EpisodeSnapshot>> load_episode(const std::string& episode_id) = 0;
  virtual Result<std::optional<EvaluationRow>> get_evaluation(const std::string& request_id) = 0;
  virtual Result<std::optional<LlmCallRow>> get_llm_call(const std::string& request_id) = 0;
  virtual Result<std::vector<TurnRow>> list_turns(const std::string& campaign_id) = 0;
  // Every message of the campaign, every epoch (load_episode gives the live
  // one), by episode, epoch and seq: what copying a campaign whole needs.
  virtual Result<std::vector<MessageRow>> list_messages(const std::string& campaign_id) = 0;
  virtual Result<std::vector<LlmCallRow>> list_llm_calls(const std::string& campaign_id) = 0;
  virtual Result<std::vector<EvaluationRow>> list_evaluations(const std::string& campaign_id) = 0;
  virtual Result<std::vector<FinalRow>> list_finals(const std::string& campaign_id) = 0;
  virtual Result<std::vector<EventRow>> list_events(const std::string& campaign_id) = 0;
  virtual Result<CampaignCounts> counts(const std::string& campaign_id) = 0;
  // Every verdict card stored (korch audit --store), by evaluator version,
  // rules version and device.
  virtual Result<std::vector<VerdictCardRow>> list_verdict_cards() = 0;
  // Schema version recorded in the file.
  virtual Result<int> schema_version() = 0;
};

}  // namespace korch::store
