// Store::open, which picks the backend from the location (a path or
// sqlite:PATH: SQLite; postgres://: PostgreSQL, pg_store.cpp), and the
// SQLite backend: checks on the file, pragmas, migrations, and SqliteStore,
// which joins the write side (write.cpp) and the read side (read.cpp) behind
// the Store interface (store_internal.hpp's BackendStore, which PgStore
// shares).
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
#include "store/store_internal.hpp"
#include "store/write_internal.hpp"
#include "util/fs.hpp"
#include "util/log.hpp"

namespace korch::store {

// --- the SQLite backend's own ways (store_internal.hpp) -----------------------

namespace detail {

// SQLite records the version in PRAGMA user_version and the
// schema_migrations table: the larger of the two.
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

Txn write_txn(Db& db) { return Txn(db, Txn::Kind::immediate); }

// Reads the lease, then upserts it unless another owner's is live.
std::optional<Lease> take_lease(Db& db, const std::string& campaign_id, const std::string& owner,
                                double ttl_s) {
  auto txn = write_txn(db);
  double now = now_unix();
  auto held = query_lease(db, campaign_id);
  if (held && held->owner != owner && held->expires_at > now) return held;
  auto lease = Lease{campaign_id, owner, now, now + ttl_s};
  static const std::string upsert =
      insert_sql(k_leases, "ON CONFLICT (campaign_id) DO UPDATE SET " + excluded_set(k_leases));
  bind_row(db.stmt(upsert), k_leases, lease).run();
  txn.commit();
  return std::nullopt;
}

}  // namespace detail

namespace {

using detail::Db;
using detail::SqliteError;
using detail::Stmt;
using detail::Txn;

// The Store over one SQLite file: a Writer (absent when read-only) and a
// pool of read connections.
using SqliteStore = detail::BackendStore<Db, detail::Writer, detail::ReadPool>;

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

// Applies the missing migrations in one write transaction.
void migrate(Db& db) {
  Txn txn(db, Txn::Kind::immediate);
  db.exec(
      "CREATE TABLE IF NOT EXISTS schema_migrations (version INTEGER PRIMARY KEY, applied_at REAL "
      "NOT NULL)",
      "creating schema_migrations");
  if (!detail::apply_migrations(db, detail::migrations())) return;  // the txn rolls back
  db.exec("PRAGMA user_version = " + std::to_string(k_schema_version), "setting user_version");
  txn.commit();
}

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
    detail::retry_busy([&] { version = detail::recorded_version(*db); }, options.busy_timeout_ms);
    if (version > k_schema_version) return fail(detail::newer_message(path, version));

    if (options.read_only) {
      if (version < k_schema_version) return fail(detail::older_message(path, version));
      db.reset();
      return std::unique_ptr<Store>(
          std::make_unique<SqliteStore>(path, nullptr, path, options.busy_timeout_ms));
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
    return std::unique_ptr<Store>(
        std::make_unique<SqliteStore>(path, std::move(writer), path, options.busy_timeout_ms));
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
