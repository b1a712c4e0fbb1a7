#pragma once
// Internal to korch_store: what the two backends share above their
// connections. BackendStore is the one Store implementation: it hands writes
// to the backend's writer thread (absent when the store is read-only), runs
// the lease statements both dialects share, and answers every read with the
// queries of read_internal.hpp on a connection of the backend's read pool.
// WriterQueue is the queue both writer threads serve; apply_migrations runs
// either dialect's migrations. What a backend does its own way comes from the
// functions declared below, overloaded on its connection type (SQLite's Db in
// open.cpp, PostgreSQL's PgConn in pg_store.cpp).
#include <condition_variable>
#include <deque>
#include <functional>
#include <memory>
#include <mutex>
#include <optional>
#include <span>
#include <string>
#include <utility>
#include <vector>

#include "store/read_internal.hpp"
#include "store/schema_internal.hpp"
#include "store/store.hpp"
#include "util/error.hpp"
#include "util/fs.hpp"
#include "util/log.hpp"

namespace korch::store::detail {

class PgConn;
class PgTxn;

// Calls `done` with `result`; logs and swallows what it throws (write.cpp).
void invoke_safely(const CommitCallback& done, Result<CommitInfo> result);

// The queue a writer thread (Writer, PgWriter) serves: jobs in order, and
// `stopping`, which close() sets once. `mutex` guards both (and may guard
// more of the writer's state); the writer thread waits on `cv`.
template <typename Job>
struct WriterQueue {
  std::mutex mutex;
  std::condition_variable cv;
  std::deque<Job> jobs;
  bool stopping = false;

  // Queues `job` and wakes the writer thread; once stopping, returns false
  // and leaves `job` alone.
  bool push(Job& job) {
    {
      std::lock_guard lock(mutex);
      if (stopping) return false;
      jobs.push_back(std::move(job));
    }
    cv.notify_one();
    return true;
  }

  // Sets `stopping` and wakes every waiter: the writer thread drains the
  // queue and ends.
  void stop() {
    {
      std::lock_guard lock(mutex);
      stopping = true;
    }
    cv.notify_all();
  }
};

// --- what each backend does its own way --------------------------------------

// A write transaction on the connection (SQLite: BEGIN IMMEDIATE).
Txn write_txn(Db& db);
PgTxn write_txn(PgConn& db);
// In its own write transaction: takes the campaign's lease for `owner` if it
// is free, expired or already theirs (nullopt), else returns the live lease
// of its other holder.
std::optional<Lease> take_lease(Db& db, const std::string& campaign_id, const std::string& owner,
                                double ttl_s);
std::optional<Lease> take_lease(PgConn& db, const std::string& campaign_id,
                                const std::string& owner, double ttl_s);
// The schema version recorded in the database.
int recorded_version(Db& db);
int recorded_version(PgConn& db);

// --- schema versions -----------------------------------------------------------

// Why a database whose schema is `version` cannot be opened: it is newer, or
// (read-only) older, than this korch. `name`: the store as messages show it.
inline std::string newer_message(const std::string& name, int version) {
  return name + ": schema version " + std::to_string(version) + " is newer than this korch (" +
         std::to_string(k_schema_version) + "); upgrade korch";
}
inline std::string older_message(const std::string& name, int version) {
  return name + ": schema version " + std::to_string(version) + " is older than this korch (" +
         std::to_string(k_schema_version) + "); open it once for writing to migrate";
}

// Inside the caller's write transaction on `db` (Db or PgConn, whose
// schema_migrations table exists): applies the migrations of `list` (that
// backend's dialect) newer than the version `db` records, and records each
// in schema_migrations. Returns false when it had none to apply; throws Fatal
// when the database is newer than this korch.
template <typename DbT>
bool apply_migrations(DbT& db, std::span<const Migration> list) {
  int version = recorded_version(db);
  if (version > k_schema_version) throw korch::Fatal(newer_message(db.path(), version));
  if (version == k_schema_version) return false;
  for (const auto& m : list) {
    if (m.version <= version) continue;
    db.exec(m.sql, "applying migration " + std::to_string(m.version));
    db.stmt("INSERT INTO schema_migrations (version, applied_at) VALUES (?1, ?2)")
        .bind(m.version, now_unix())
        .run();
    KLOG_INFO("[store] {}: applied schema migration {}", db.path(), m.version);
  }
  return true;
}

// The Store over the connection type Conn (Db or PgConn), its writer WriterT
// (Writer or PgWriter: commit, commit_sync, close, run_task) and its pool of
// read connections Readers (ReadPool or PgReadPool: read<T>(fn) runs fn(conn)
// in one read snapshot and returns exceptions as errors).
template <typename Conn, typename WriterT, typename Readers>
class BackendStore final : public Store {
 public:
  // `name`: the store's location as messages show it (a URL redacted);
  // `writer`: null for a read-only store; `reader_args`: Readers' constructor's.
  template <typename... ReaderArgs>
  BackendStore(std::string name, std::unique_ptr<WriterT> writer, ReaderArgs&&... reader_args)
      : m_name(std::move(name)),
        m_writer(std::move(writer)),
        m_readers(std::forward<ReaderArgs>(reader_args)...) {}

  ~BackendStore() override { close(); }

  void commit(WriteBatch batch, CommitCallback done) override {
    if (!m_writer) {
      invoke_safely(done, fail(read_only_message()));
      return;
    }
    m_writer->commit(std::move(batch), std::move(done));
  }

  Result<CommitInfo> commit_sync(WriteBatch batch) override {
    if (!m_writer) return fail(read_only_message());
    return m_writer->commit_sync(std::move(batch));
  }

  void close() override {
    if (m_writer) m_writer->close();
  }

  // --- leases ----------------------------------------------------------------

  Result<std::optional<Lease>> acquire_lease(const std::string& campaign_id,
                                             const std::string& owner, double ttl_s) override {
    std::optional<Lease> held_by_other;
    auto r =
        write_task([&](Conn& db) { held_by_other = take_lease(db, campaign_id, owner, ttl_s); });
    if (!r) return std::unexpected(r.error());
    return held_by_other;
  }

  Result<void> heartbeat_lease(const std::string& campaign_id, const std::string& owner,
                               double ttl_s) override {
    std::string lost;
    auto r = write_task([&](Conn& db) {
      auto txn = write_txn(db);
      double now = now_unix();
      db.stmt(
            "UPDATE leases SET heartbeat_at = ?3, expires_at = ?4 WHERE campaign_id = ?1 AND owner "
            "= ?2")
          .bind(campaign_id, owner, now, now + ttl_s)
          .run();
      if (db.changes() == 0) {
        auto held = query_lease(db, campaign_id);
        lost = "campaign " + campaign_id + ": lease lost" +
               (held ? " (now held by " + held->owner + ")" : "");
        return;
      }
      txn.commit();
    });
    if (!r) return r;
    if (!lost.empty()) return fail(lost);
    return {};
  }

  Result<void> release_lease(const std::string& campaign_id, const std::string& owner) override {
    return write_task([&](Conn& db) {
      auto txn = write_txn(db);
      db.stmt("DELETE FROM leases WHERE campaign_id = ?1 AND owner = ?2")
          .bind(campaign_id, owner)
          .run();
      txn.commit();
    });
  }

  // --- reads -----------------------------------------------------------------

  Result<std::optional<CampaignRow>> get_campaign(const std::string& id) override {
    return read<std::optional<CampaignRow>>([&](Conn& db) { return query_campaign(db, id); });
  }
  Result<std::vector<CampaignRow>> list_campaigns() override {
    return read<std::vector<CampaignRow>>([&](Conn& db) { return query_campaigns(db); });
  }
  Result<std::vector<TaskRow>> list_tasks(const std::string& campaign_id) override {
    return read<std::vector<TaskRow>>([&](Conn& db) { return query_tasks(db, campaign_id); });
  }
  Result<std::vector<EpisodeSummary>> list_episodes(const std::string& campaign_id) override {
    return read<std::vector<EpisodeSummary>>(
        [&](Conn& db) { return query_episodes(db, campaign_id); });
  }
  Result<std::vector<EpisodeSnapshot>> load_unfinished(const std::string& campaign_id) override {
    return read<std::vector<EpisodeSnapshot>>(
        [&](Conn& db) { return query_unfinished(db, campaign_id); });
  }
  Result<std::optional<EpisodeSnapshot>> load_episode(const std::string& episode_id) override {
    return read<std::optional<EpisodeSnapshot>>(
        [&](Conn& db) { return query_episode(db, episode_id); });
  }
  Result<std::optional<EvaluationRow>> get_evaluation(const std::string& request_id) override {
    return read<std::optional<EvaluationRow>>(
        [&](Conn& db) { return query_evaluation(db, request_id); });
  }
  Result<std::optional<LlmCallRow>> get_llm_call(const std::string& request_id) override {
    return read<std::optional<LlmCallRow>>(
        [&](Conn& db) { return query_llm_call(db, request_id); });
  }
  Result<std::vector<TurnRow>> list_turns(const std::string& campaign_id) override {
    return read<std::vector<TurnRow>>([&](Conn& db) { return query_turns(db, campaign_id); });
  }
  Result<std::vector<MessageRow>> list_messages(const std::string& campaign_id) override {
    return read<std::vector<MessageRow>>([&](Conn& db) { return query_messages(db, campaign_id); });
  }
  Result<std::vector<LlmCallRow>> list_llm_calls(const std::string& campaign_id) override {
    return read<std::vector<LlmCallRow>>(
        [&](Conn& db) { return query_llm_calls(db, campaign_id); });
  }
  Result<std::vector<EvaluationRow>> list_evaluations(const std::string& campaign_id) override {
    return read<std::vector<EvaluationRow>>(
        [&](Conn& db) { return query_evaluations(db, campaign_id); });
  }
  Result<std::vector<FinalRow>> list_finals(const std::string& campaign_id) override {
    return read<std::vector<FinalRow>>([&](Conn& db) { return query_finals(db, campaign_id); });
  }
  Result<std::vector<EventRow>> list_events(const std::string& campaign_id) override {
    return read<std::vector<EventRow>>([&](Conn& db) { return query_events(db, campaign_id); });
  }
  Result<std::vector<VerdictCardRow>> list_verdict_cards() override {
    return read<std::vector<VerdictCardRow>>([&](Conn& db) { return query_verdict_cards(db); });
  }
  Result<CampaignCounts> counts(const std::string& campaign_id) override {
    return read<CampaignCounts>([&](Conn& db) { return query_counts(db, campaign_id); });
  }
  Result<int> schema_version() override {
    return read<int>([&](Conn& db) { return recorded_version(db); });
  }

 private:
  std::string read_only_message() const { return m_name + ": store is open read-only"; }

  // Runs `task` on the writer thread (WriterT::run_task); fails on a
  // read-only store.
  Result<void> write_task(const std::function<void(Conn&)>& task) {
    if (!m_writer) return fail(read_only_message());
    return m_writer->run_task(task);
  }

  template <typename T, typename F>
  Result<T> read(F&& fn) {
    return m_readers.template read<T>(std::forward<F>(fn));
  }

  std::string m_name;
  std::unique_ptr<WriterT> m_writer;
  Readers m_readers;
};

}  // namespace korch::store::detail
