// Store::open, which picks the backend from the location (a path or
// sqlite:PATH: SQLite; postgres://: PostgreSQL, pg_store.cpp), and the
// SQLite backend: checks on the file, pragmas, migrations, and SqliteStore,
// which joins the write side (write.cpp) and the read side (read.cpp) behind
// the Store interface.
#include <sys/stat.h>

#include <algorithm>
#include <cctype>
#include <optional>
#include <utility>

#include "store/codec_internal.hpp"
#include "store/read_internal.hpp"
#include "store/schema_internal.hpp"
#include "store/sqlite_internal.hpp"
#include "store/store.hpp"
#include "store/write_internal.hpp"
#include "util/fs.hpp"
#include "util/log.hpp"

namespace korch::store {
namespace {

using detail::Db;
using detail::SqliteError;
using detail::Stmt;
using detail::Txn;

// Page size of newly created databases (an existing file keeps its own: a
// WAL database cannot change it). Each group commit rewrites one index leaf
// per touched episode and index, so small pages write less. Rows of a few KB
// decide it. 2 KB pages write fewer bytes per turn (a 6 KB row keeps ~230
// bytes in its leaf and the rest in full overflow pages: 45 KB per
// korch-bench-store turn against 48 KB on 4 KB pages, and a smaller file),
// but each page is a WAL frame, a checksum and a pwrite: measured side by
// side (8 interleaved runs each, tools/bench/README.md), 4 KB pages commit
// ~12% more turns per second (median 10,490 against 9,350), and SQLite alone
// with the same bytes per turn does 15,000 on 4 KB pages against 10,000 on
// 2 KB (korch-bench-sqlite-ceiling). Files made with 2 KB pages keep them.
constexpr int k_page_size = 4096;
// Page cache of the write connection. A group of 512 turns dirties ~20 MB of
// pages; a smaller cache spills them to the WAL mid-transaction.
constexpr int k_writer_cache_kib = 64 * 1024;

// The largest schema version recorded in the file: PRAGMA user_version or
// the schema_migrations table, whichever is larger.
int recorded_version(Db& db) {
  auto version = db.query_i64("PRAGMA user_version");
  bool has_table = db.query_i64(
                       "SELECT count(*) FROM sqlite_master WHERE type = 'table' AND name = "
                       "'schema_migrations'") > 0;
  if (has_table)
    version =
        std::max(version, db.query_i64("SELECT COALESCE(MAX(version), 0) FROM schema_migrations"));
  return static_cast<int>(version);
}

std::string newer_message(const std::string& path, int version) {
  return path + ": schema version " + std::to_string(version) + " is newer than this korch (" +
         std::to_string(k_schema_version) + "); upgrade korch";
}

// Applies the missing migrations in one write transaction.
void migrate(Db& db) {
  Txn txn(db, Txn::Kind::immediate);
  db.exec(
      "CREATE TABLE IF NOT EXISTS schema_migrations (version INTEGER PRIMARY KEY, applied_at REAL "
      "NOT NULL)",
      "creating schema_migrations");
  int version = recorded_version(db);
  if (version > k_schema_version) throw korch::Fatal(newer_message(db.path(), version));
  if (version == k_schema_version) return;  // nothing to do; the txn rolls back
  for (const auto& m : detail::migrations()) {
    if (m.version <= version) continue;
    db.exec(m.sql, "applying migration " + std::to_string(m.version));
    db.stmt("INSERT INTO schema_migrations (version, applied_at) VALUES (?1, ?2)")
        .bind(m.version, now_unix())
        .run();
    KLOG_INFO("[store] {}: applied schema migration {}", db.path(), m.version);
  }
  db.exec("PRAGMA user_version = " + std::to_string(k_schema_version), "setting user_version");
  txn.commit();
}

// The Store over one SQLite file: a Writer (absent when read-only) and a
// pool of read connections.
class SqliteStore final : public Store {
 public:
  SqliteStore(Options options, std::unique_ptr<detail::Writer> writer)
      : m_options(std::move(options)),
        m_writer(std::move(writer)),
        m_readers(m_options.path, m_options.busy_timeout_ms) {}

  ~SqliteStore() override { close(); }

  void commit(WriteBatch batch, CommitCallback done) override {
    if (!m_writer) {
      detail::invoke_safely(done, fail(read_only_message()));
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
    auto r = write_task([&](Db& db) {
      Txn txn(db, Txn::Kind::immediate);
      double now = now_unix();
      auto held = detail::query_lease(db, campaign_id);
      if (held && held->owner != owner && held->expires_at > now) {
        held_by_other = std::move(held);
        return;
      }
      auto lease = Lease{campaign_id, owner, now, now + ttl_s};
      static const std::string upsert =
          detail::insert_sql(detail::k_leases, "ON CONFLICT (campaign_id) DO UPDATE SET " +
                                                   detail::excluded_set(detail::k_leases));
      detail::bind_row(db.stmt(upsert), detail::k_leases, lease).run();
      txn.commit();
    });
    if (!r) return std::unexpected(r.error());
    return held_by_other;
  }

  Result<void> heartbeat_lease(const std::string& campaign_id, const std::string& owner,
                               double ttl_s) override {
    std::string lost;
    auto r = write_task([&](Db& db) {
      Txn txn(db, Txn::Kind::immediate);
      double now = now_unix();
      db.stmt(
            "UPDATE leases SET heartbeat_at = ?3, expires_at = ?4 WHERE campaign_id = ?1 AND owner "
            "= ?2")
          .bind(campaign_id, owner, now, now + ttl_s)
          .run();
      if (db.changes() == 0) {
        auto held = detail::query_lease(db, campaign_id);
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
    return write_task([&](Db& db) {
      Txn txn(db, Txn::Kind::immediate);
      db.stmt("DELETE FROM leases WHERE campaign_id = ?1 AND owner = ?2")
          .bind(campaign_id, owner)
          .run();
      txn.commit();
    });
  }

  // --- reads -----------------------------------------------------------------

  Result<std::optional<CampaignRow>> get_campaign(const std::string& id) override {
    return read<std::optional<CampaignRow>>([&](Db& db) { return detail::query_campaign(db, id); });
  }
  Result<std::vector<CampaignRow>> list_campaigns() override {
    return read<std::vector<CampaignRow>>([&](Db& db) { return detail::query_campaigns(db); });
  }
  Result<std::vector<TaskRow>> list_tasks(const std::string& campaign_id) override {
    return read<std::vector<TaskRow>>([&](Db& db) { return detail::query_tasks(db, campaign_id); });
  }
  Result<std::vector<EpisodeSummary>> list_episodes(const std::string& campaign_id) override {
    return read<std::vector<EpisodeSummary>>(
        [&](Db& db) { return detail::query_episodes(db, campaign_id); });
  }
  Result<std::vector<EpisodeSnapshot>> load_unfinished(const std::string& campaign_id) override {
    return read<std::vector<EpisodeSnapshot>>(
        [&](Db& db) { return detail::query_unfinished(db, campaign_id); });
  }
  Result<std::optional<EpisodeSnapshot>> load_episode(const std::string& episode_id) override {
    return read<std::optional<EpisodeSnapshot>>(
        [&](Db& db) { return detail::query_episode(db, episode_id); });
  }
  Result<std::optional<EvaluationRow>> get_evaluation(const std::string& request_id) override {
    return read<std::optional<EvaluationRow>>(
        [&](Db& db) { return detail::query_evaluation(db, request_id); });
  }
  Result<std::optional<LlmCallRow>> get_llm_call(const std::string& request_id) override {
    return read<std::optional<LlmCallRow>>(
        [&](Db& db) { return detail::query_llm_call(db, request_id); });
  }
  Result<std::vector<TurnRow>> list_turns(const std::string& campaign_id) override {
    return read<std::vector<TurnRow>>([&](Db& db) { return detail::query_turns(db, campaign_id); });
  }
  Result<std::vector<MessageRow>> list_messages(const std::string& campaign_id) override {
    return read<std::vector<MessageRow>>(
        [&](Db& db) { return detail::query_messages(db, campaign_id); });
  }
  Result<std::vector<LlmCallRow>> list_llm_calls(const std::string& campaign_id) override {
    return read<std::vector<LlmCallRow>>(
        [&](Db& db) { return detail::query_llm_calls(db, campaign_id); });
  }
  Result<std::vector<EvaluationRow>> list_evaluations(const std::string& campaign_id) override {
    return read<std::vector<EvaluationRow>>(
        [&](Db& db) { return detail::query_evaluations(db, campaign_id); });
  }
  Result<std::vector<FinalRow>> list_finals(const std::string& campaign_id) override {
    return read<std::vector<FinalRow>>(
        [&](Db& db) { return detail::query_finals(db, campaign_id); });
  }
  Result<std::vector<EventRow>> list_events(const std::string& campaign_id) override {
    return read<std::vector<EventRow>>(
        [&](Db& db) { return detail::query_events(db, campaign_id); });
  }
  Result<CampaignCounts> counts(const std::string& campaign_id) override {
    return read<CampaignCounts>([&](Db& db) { return detail::query_counts(db, campaign_id); });
  }
  Result<int> schema_version() override {
    return read<int>([&](Db& db) { return recorded_version(db); });
  }

 private:
  std::string read_only_message() const { return m_options.path + ": store is open read-only"; }

  Result<void> write_task(const std::function<void(Db&)>& task) {
    if (!m_writer) return fail(read_only_message());
    return m_writer->run_task(task);
  }

  template <typename T, typename F>
  Result<T> read(F&& fn) {
    try {
      auto handle = m_readers.take();
      std::optional<T> out;
      detail::retry_busy(
          [&] {
            Txn txn(handle.db(), Txn::Kind::deferred);
            out.emplace(fn(handle.db()));
            txn.commit();
          },
          m_options.busy_timeout_ms);
      return std::move(*out);
    } catch (const std::exception& e) {
      return fail(e.what());
    }
  }

  Options m_options;
  std::unique_ptr<detail::Writer> m_writer;
  detail::ReadPool m_readers;
};

std::string upper(std::string s) {
  for (auto& c : s) c = static_cast<char>(std::toupper(static_cast<unsigned char>(c)));
  return s;
}

// Turns SQLite's wording for a non-database file into one line naming the path.
std::string describe_open_error(const std::string& path, const SqliteError& e) {
  int primary = e.code() & 0xff;
  if (primary == SQLITE_NOTADB) return path + ": not a SQLite database (corrupt or not a korch.db)";
  if (primary == SQLITE_CORRUPT) return path + ": database is corrupt";
  return e.what();
}

Result<std::unique_ptr<Store>> open_sqlite(const Options& options) {
  const std::string& path = options.path;
  if (path.empty()) return fail("store: empty database path");
  std::string sync = upper(options.synchronous);
  if (sync != "OFF" && sync != "NORMAL" && sync != "FULL" && sync != "EXTRA") {
    return fail(path + ": synchronous must be OFF, NORMAL, FULL or EXTRA, not '" +
                options.synchronous + "'");
  }
  if (options.max_batches_per_txn < 1)
    return fail(path + ": max_batches_per_txn must be at least 1");

  struct stat st {};
  bool exists = ::stat(path.c_str(), &st) == 0;
  if (exists && !S_ISREG(st.st_mode)) return fail(path + ": not a regular file");
  if (!exists && options.read_only) return fail(path + ": no such database");
  // Respect a write-protected file even when running as root (where SQLite
  // itself would happily write to it).
  if (exists && !options.read_only && (st.st_mode & (S_IWUSR | S_IWGRP | S_IWOTH)) == 0) {
    return fail(
        path +
        ": database file is read-only; open it read-only (status/export) or make it writable");
  }

  try {
    auto mode = options.read_only ? Db::Mode::read_only : Db::Mode::read_write;
    auto db = std::make_unique<Db>(path, mode, options.busy_timeout_ms);
    if (!options.read_only && sqlite3_db_readonly(db->get(), "main") == 1) {
      return fail(
          path +
          ": database file is read-only; open it read-only (status/export) or make it writable");
    }
    // Touches the file: a non-database fails here with SQLITE_NOTADB.
    int version = 0;
    detail::retry_busy([&] { version = recorded_version(*db); }, options.busy_timeout_ms);
    if (version > k_schema_version) return fail(newer_message(path, version));

    if (options.read_only) {
      if (version < k_schema_version) {
        return fail(path + ": schema version " + std::to_string(version) +
                    " is older than this korch (" + std::to_string(k_schema_version) +
                    "); open it once for writing to migrate");
      }
      db.reset();
      return std::unique_ptr<Store>(std::make_unique<SqliteStore>(options, nullptr));
    }

    db->exec("PRAGMA page_size = " + std::to_string(k_page_size), "setting page_size");
    std::string journal;
    detail::retry_busy([&] { journal = db->query_text("PRAGMA journal_mode = WAL"); },
                       options.busy_timeout_ms);
    if (upper(journal) != "WAL")
      return fail(path + ": cannot switch to WAL mode (journal_mode is " + journal + ")");
    // FULL: SQLite runs NORMAL (no fsync inside COMMIT) and the writer's
    // syncer fsyncs the WAL before any callback runs (write_internal.hpp).
    bool own_sync = sync == "FULL";
    db->exec("PRAGMA synchronous = " + std::string(own_sync ? "NORMAL" : sync),
             "setting synchronous");
    db->exec("PRAGMA foreign_keys = ON", "enabling foreign keys");
    db->exec("PRAGMA cache_size = -" + std::to_string(k_writer_cache_kib), "setting cache_size");
    migrate(*db);
    auto writer = std::make_unique<detail::Writer>(options, std::move(db), own_sync);
    return std::unique_ptr<Store>(std::make_unique<SqliteStore>(options, std::move(writer)));
  } catch (const SqliteError& e) {
    return fail(describe_open_error(path, e));
  } catch (const std::exception& e) {
    return fail(e.what());
  }
}

}  // namespace

// pg_store.cpp
Result<std::unique_ptr<Store>> open_postgres(const Options& options, const std::string& url);

Result<std::unique_ptr<Store>> Store::open(const Options& options) {
  auto location = parse_location(options.path);
  if (!location) return std::unexpected(location.error());
  if (location->backend == Backend::postgres) return open_postgres(options, location->target);
  Options sqlite = options;
  sqlite.path = location->target;
  return open_sqlite(sqlite);
}

}  // namespace korch::store
