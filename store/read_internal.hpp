#pragma once
// Internal to korch_store: the read side. The queries serve both backends;
// the pool below is SQLite's (pg_store.cpp has PostgreSQL's). Reads run on
// the caller's thread, on a connection checked out of a small pool for the
// duration of one read, inside one read transaction (one consistent snapshot).
#include <memory>
#include <mutex>
#include <optional>
#include <string>
#include <vector>

#include "store/sqlite_internal.hpp"
#include "store/store.hpp"

namespace korch::store::detail {

// Pool of read-only connections. A caller checks one out for the duration of
// one read, so no connection is ever used by two threads at once and reads
// never wait for the writer. Thread-safe.
class ReadPool {
 public:
  ReadPool(std::string path, int busy_timeout_ms);

  class Handle {
   public:
    Handle(ReadPool& pool, std::unique_ptr<Db> db) : m_pool(pool), m_db(std::move(db)) {}
    ~Handle() { m_pool.give_back(std::move(m_db)); }
    Handle(const Handle&) = delete;
    Handle& operator=(const Handle&) = delete;
    Db& db() { return *m_db; }

   private:
    ReadPool& m_pool;
    std::unique_ptr<Db> m_db;
  };

  // Checks out an idle connection or opens a new one. Throws SqliteError.
  Handle take();

  // Runs fn(db) on a checked-out connection in one deferred transaction (one
  // snapshot), again while the database is busy. Exceptions come back as errors.
  template <typename T, typename F>
  Result<T> read(F&& fn) {
    try {
      auto handle = take();
      std::optional<T> out;
      retry_busy(
          [&] {
            Txn txn(handle.db(), Txn::Kind::deferred);
            out.emplace(fn(handle.db()));
            txn.commit();
          },
          m_busy_timeout_ms);
      return std::move(*out);
    } catch (const std::exception& e) {
      return fail(e.what());
    }
  }

 private:
  void give_back(std::unique_ptr<Db> db);

  std::string m_path;
  int m_busy_timeout_ms;
  std::mutex m_mutex;
  std::vector<std::unique_ptr<Db>> m_idle;
};

// The queries behind Store's read methods, for either backend's connection
// (DbT = Db or PgConn; instantiated for both in read.cpp). Each runs inside
// the caller's read transaction on `db` and throws (SqliteError, PgError) on
// failure.
template <typename DbT>
std::optional<CampaignRow> query_campaign(DbT& db, const std::string& id);
template <typename DbT>
std::vector<CampaignRow> query_campaigns(DbT& db);
template <typename DbT>
std::vector<TaskRow> query_tasks(DbT& db, const std::string& campaign_id);
template <typename DbT>
std::vector<EpisodeSummary> query_episodes(DbT& db, const std::string& campaign_id);
template <typename DbT>
std::vector<EpisodeSnapshot> query_unfinished(DbT& db, const std::string& campaign_id);
template <typename DbT>
std::optional<EpisodeSnapshot> query_episode(DbT& db, const std::string& episode_id);
template <typename DbT>
std::optional<EvaluationRow> query_evaluation(DbT& db, const std::string& request_id);
template <typename DbT>
std::optional<LlmCallRow> query_llm_call(DbT& db, const std::string& request_id);
template <typename DbT>
std::vector<TurnRow> query_turns(DbT& db, const std::string& campaign_id);
template <typename DbT>
std::vector<MessageRow> query_messages(DbT& db, const std::string& campaign_id);
template <typename DbT>
std::vector<LlmCallRow> query_llm_calls(DbT& db, const std::string& campaign_id);
template <typename DbT>
std::vector<EvaluationRow> query_evaluations(DbT& db, const std::string& campaign_id);
template <typename DbT>
std::vector<FinalRow> query_finals(DbT& db, const std::string& campaign_id);
template <typename DbT>
std::vector<VerdictCardRow> query_verdict_cards(DbT& db);
template <typename DbT>
std::vector<EventRow> query_events(DbT& db, const std::string& campaign_id);
template <typename DbT>
CampaignCounts query_counts(DbT& db, const std::string& campaign_id);
template <typename DbT>
std::optional<Lease> query_lease(DbT& db, const std::string& campaign_id);

}  // namespace korch::store::detail
