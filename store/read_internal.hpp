#pragma once
// Internal to korch_store: the read side of the SQLite backend. Reads run on
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

 private:
  void give_back(std::unique_ptr<Db> db);

  std::string m_path;
  int m_busy_timeout_ms;
  std::mutex m_mutex;
  std::vector<std::unique_ptr<Db>> m_idle;
};

// The queries behind Store's read methods. Each runs inside the caller's
// read transaction on `db` and throws SqliteError on failure.
std::optional<CampaignRow> query_campaign(Db& db, const std::string& id);
std::vector<CampaignRow> query_campaigns(Db& db);
std::vector<TaskRow> query_tasks(Db& db, const std::string& campaign_id);
std::vector<EpisodeSummary> query_episodes(Db& db, const std::string& campaign_id);
std::vector<EpisodeSnapshot> query_unfinished(Db& db, const std::string& campaign_id);
std::optional<EpisodeSnapshot> query_episode(Db& db, const std::string& episode_id);
std::optional<EvaluationRow> query_evaluation(Db& db, const std::string& request_id);
std::optional<LlmCallRow> query_llm_call(Db& db, const std::string& request_id);
std::vector<TurnRow> query_turns(Db& db, const std::string& campaign_id);
std::vector<LlmCallRow> query_llm_calls(Db& db, const std::string& campaign_id);
std::vector<EvaluationRow> query_evaluations(Db& db, const std::string& campaign_id);
std::vector<FinalRow> query_finals(Db& db, const std::string& campaign_id);
std::vector<EventRow> query_events(Db& db, const std::string& campaign_id);
CampaignCounts query_counts(Db& db, const std::string& campaign_id);
std::optional<Lease> query_lease(Db& db, const std::string& campaign_id);

}  // namespace korch::store::detail
