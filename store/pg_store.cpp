// The PostgreSQL backend: PgStore implements the Store interface over libpq
// with the same schema version, conflict rules (apply_internal.hpp), queries
// (read.cpp) and commit contract as the SQLite backend.
//
// Writes: one writer thread owns the write connection. It takes up to
// max_batches_per_txn queued batches, applies them in one transaction (a
// batch that breaks a rule fails alone: the group is applied again without
// it), COMMITs, and only then runs the batches' callbacks, in commit order,
// on the writer thread. With synchronous FULL
// (synchronous_commit = on) COMMIT returns once the server has flushed its
// WAL, so "committed" means durable, as with SQLite.
// Reads: a pool of read-only connections; each read is one REPEATABLE READ
// transaction (one snapshot).
// Leases: one statement each (INSERT ... ON CONFLICT DO UPDATE ... WHERE),
// which PostgreSQL runs atomically across processes and hosts.
#include <libpq-fe.h>
#include <pthread.h>

#include <future>
#include <mutex>
#include <thread>

#include "store/apply_internal.hpp"
#include "store/codec_internal.hpp"
#include "store/pg_internal.hpp"
#include "store/read_internal.hpp"
#include "store/schema_internal.hpp"
#include "store/store.hpp"
#include "store/store_internal.hpp"
#include "util/fs.hpp"
#include "util/log.hpp"

namespace korch::store {

// --- the PostgreSQL backend's own ways (store_internal.hpp) -------------------

namespace detail {

// The largest version recorded in schema_migrations (0 when the table does not exist).
int recorded_version(PgConn& db) {
  if (db.query_i64("SELECT CASE WHEN to_regclass('schema_migrations') IS NULL THEN 0 ELSE 1 END") ==
      0)
    return 0;
  return static_cast<int>(db.query_i64("SELECT COALESCE(MAX(version), 0) FROM schema_migrations"));
}

PgTxn write_txn(PgConn& db) { return PgTxn(db, PgTxn::Kind::write); }

// One statement takes a free, expired or own lease atomically; when it took
// nothing, the holder is read.
std::optional<Lease> take_lease(PgConn& db, const std::string& campaign_id,
                                const std::string& owner, double ttl_s) {
  static const std::string take =
      insert_sql(k_leases, "ON CONFLICT (campaign_id) DO UPDATE SET " + excluded_set(k_leases) +
                               " WHERE leases.owner = excluded.owner OR "
                               "leases.expires_at <= excluded.heartbeat_at");
  for (;;) {
    auto txn = write_txn(db);
    double now = now_unix();
    bind_row(db.stmt(take), k_leases, Lease{campaign_id, owner, now, now + ttl_s}).run();
    if (db.changes() == 1) {
      txn.commit();
      return std::nullopt;
    }
    auto held_by_other = query_lease(db, campaign_id);
    txn.commit();
    if (held_by_other) return held_by_other;
    // Released between the two statements: try again.
  }
}

}  // namespace detail

namespace {

using detail::PgConn;
using detail::PgError;
using detail::PgTxn;

// Idle read connections kept open for reuse.
constexpr std::size_t k_max_idle_readers = 16;
// Serialises migrations of one database across processes (an arbitrary
// constant for pg_advisory_xact_lock: "korch" in ASCII).
constexpr std::int64_t k_migration_lock = 0x6b6f726368;

// Applies the missing migrations in one transaction, serialised across processes.
void migrate(PgConn& db) {
  // Text is UTF-8 end to end (prompts, replies, code): a database in another
  // encoding would refuse or mangle characters it cannot hold.
  if (db.query_i64("SELECT CASE WHEN current_setting('server_encoding') IN ('UTF8', "
                   "'SQL_ASCII') THEN 1 ELSE 0 END") == 0) {
    throw korch::Fatal(db.path() +
                       ": the database's encoding is not UTF8; create it with ENCODING 'UTF8'");
  }
  PgTxn txn(db, PgTxn::Kind::write);
  db.exec("SELECT pg_advisory_xact_lock(" + std::to_string(k_migration_lock) + ")",
          "locking for migrations");
  db.exec(
      "CREATE TABLE IF NOT EXISTS schema_migrations (version BIGINT PRIMARY KEY, applied_at DOUBLE "
      "PRECISION NOT NULL)",
      "creating schema_migrations");
  if (!detail::apply_migrations(db, detail::pg_migrations())) return;  // the txn rolls back
  txn.commit();
}

// Pool of read-only connections (ReadPool's twin). Thread-safe.
class PgReadPool {
 public:
  explicit PgReadPool(std::string url) : m_url(std::move(url)) {}

  class Handle {
   public:
    Handle(PgReadPool& pool, std::unique_ptr<PgConn> conn)
        : m_pool(pool), m_conn(std::move(conn)) {}
    ~Handle() { m_pool.give_back(std::move(m_conn)); }
    Handle(const Handle&) = delete;
    Handle& operator=(const Handle&) = delete;
    PgConn& conn() { return *m_conn; }

   private:
    PgReadPool& m_pool;
    std::unique_ptr<PgConn> m_conn;
  };

  // Runs fn(conn) on a checked-out connection in one snapshot (a REPEATABLE
  // READ transaction). A connection the server dropped (a restart) is
  // replaced once. Exceptions come back as errors.
  template <typename T, typename F>
  Result<T> read(F&& fn) {
    for (int attempt = 0;; ++attempt) {
      try {
        auto handle = take();
        PgTxn txn(handle.conn(), PgTxn::Kind::snapshot);
        T out = fn(handle.conn());
        txn.commit();
        return out;
      } catch (const PgError& e) {
        if (!e.connection_lost() || attempt > 0) return fail(e.what());
        clear();
      } catch (const std::exception& e) {
        return fail(e.what());
      }
    }
  }

  // Closes every idle connection (after one was found dead: the server
  // restarted, and the others are dead too).
  void clear() {
    std::lock_guard lock(m_mutex);
    m_idle.clear();
  }

  Handle take() {
    {
      std::lock_guard lock(m_mutex);
      if (!m_idle.empty()) {
        auto conn = std::move(m_idle.back());
        m_idle.pop_back();
        return Handle(*this, std::move(conn));
      }
    }
    return Handle(*this, std::make_unique<PgConn>(m_url, true, true));
  }

 private:
  void give_back(std::unique_ptr<PgConn> conn) {
    std::lock_guard lock(m_mutex);
    // A broken connection (server restarted) is dropped; the next read opens a new one.
    if (conn && !conn->broken() && m_idle.size() < k_max_idle_readers)
      m_idle.push_back(std::move(conn));
  }

  std::string m_url;
  std::mutex m_mutex;
  std::vector<std::unique_ptr<PgConn>> m_idle;
};

// The writer thread and its queue (Writer's twin, without WAL syncing and
// checkpoints: the server does those).
class PgWriter {
 public:
  PgWriter(const Options& options, std::string url, bool synchronous_commit,
           std::unique_ptr<PgConn> conn)
      : m_options(options),
        m_url(std::move(url)),
        m_synchronous_commit(synchronous_commit),
        m_conn(std::move(conn)) {
    m_thread = std::thread([this] { main(); });
    m_thread_id = m_thread.get_id();
  }

  ~PgWriter() {
    close();
    std::lock_guard lock(m_join_mutex);
    if (m_thread.joinable()) m_thread.detach();  // destroyed from a callback
  }

  void commit(WriteBatch batch, CommitCallback done) {
    enqueue(Job{std::move(batch), std::move(done), {}});
  }

  Result<CommitInfo> commit_sync(WriteBatch batch) {
    if (on_writer_thread()) {
      // From a commit callback: the writer is between transactions.
      std::vector<Job> jobs;
      Result<CommitInfo> result = fail(closed_message());
      jobs.push_back(
          Job{std::move(batch), [&](Result<CommitInfo> r) { result = std::move(r); }, {}});
      run_group(jobs);
      return result;
    }
    auto promise = std::make_shared<std::promise<Result<CommitInfo>>>();
    auto future = promise->get_future();
    enqueue(Job{std::move(batch),
                [promise](Result<CommitInfo> r) { promise->set_value(std::move(r)); },
                {}});
    return future.get();
  }

  // Runs `task` alone on the writer thread, in queue order; the task opens
  // and commits its own transaction. Exceptions come back as errors.
  Result<void> run_task(const std::function<void(PgConn&)>& task) {
    auto promise = std::make_shared<std::promise<Result<void>>>();
    auto future = promise->get_future();
    // The lease statements are safe to repeat: a task that lost its
    // connection runs again once on a new one.
    auto body = [this, promise, &task] {
      for (int attempt = 0;; ++attempt) {
        try {
          task(connection());
          promise->set_value({});
        } catch (const PgError& e) {
          if (e.connection_lost()) drop_connection();
          if (e.connection_lost() && attempt == 0) continue;
          promise->set_value(fail(e.what()));
        } catch (const std::exception& e) {
          promise->set_value(fail(e.what()));
        }
        return;
      }
    };
    if (on_writer_thread()) {
      body();
      return future.get();
    }
    Job job{{}, {}, body};
    if (!m_queue.push(job)) return fail(closed_message());
    return future.get();
  }

  void close() {
    m_queue.stop();
    if (on_writer_thread()) return;  // the loop ends after draining; the destructor detaches
    std::lock_guard lock(m_join_mutex);
    if (m_thread.joinable()) m_thread.join();
  }

 private:
  struct Job {
    WriteBatch batch;
    CommitCallback done;
    std::function<void()> task;  // runs alone, on the write connection
  };

  bool on_writer_thread() const { return std::this_thread::get_id() == m_thread_id; }
  std::string closed_message() const { return detail::redacted(m_url) + ": store is closed"; }

  void enqueue(Job job) {
    if (!m_queue.push(job)) detail::invoke_safely(job.done, fail(closed_message()));
  }

  // The write connection, reopened when the server dropped it (a restart):
  // the transaction that saw the break failed; the next one starts afresh.
  PgConn& connection() {
    if (!m_conn || m_conn->broken()) {
      drop_connection();
      m_conn = std::make_unique<PgConn>(m_url, false, m_synchronous_commit);
      KLOG_WARN("[store] {}: reconnected the write connection", m_conn->path());
    }
    if (!m_applier) m_applier.emplace(*m_conn);
    return *m_conn;
  }

  // Applies `jobs` in one transaction and COMMITs, then runs their callbacks
  // in order. A batch that breaks a rule fails alone: the transaction is
  // rolled back and the group applied again without it (as the SQLite writer
  // does; no savepoint per batch, which would cost two round trips each).
  // When the connection breaks before COMMIT was sent (the server
  // restarted), nothing was committed: the group runs again once on a new
  // connection. A break during COMMIT leaves its outcome unknown: the group
  // fails (a resume reads what was stored).
  void run_group(std::vector<Job>& jobs) {
    std::vector<std::optional<Result<CommitInfo>>> results(jobs.size());
    bool reconnected = false;
    for (;;) {
      bool committing = false;
      std::optional<std::size_t> bad;  // the batch that failed this pass
      try {
        PgConn& db = connection();
        PgTxn txn(db, PgTxn::Kind::write);
        for (std::size_t i = 0; i < jobs.size(); ++i) {
          if (results[i] && !*results[i]) continue;  // failed in an earlier pass
          bad = i;
          results[i] = m_applier->apply(jobs[i].batch);
        }
        bad.reset();
        committing = true;
        txn.commit();
      } catch (const PgError& e) {
        if (e.connection_lost()) {
          drop_connection();
          if (!committing && !reconnected) {
            KLOG_WARN("[store] {}; applying the group again on a new connection", e.what());
            reconnected = true;
            for (auto& r : results) {
              if (r && *r) r.reset();
            }
            continue;
          }
        } else if (bad) {
          KLOG_WARN("[store] batch failed, applying the rest of its group again: {}", e.what());
          fail_alone(results, *bad, e.what());
          continue;
        }
        for (auto& r : results) {
          if (!r || *r) r = fail(e.what());
        }
      } catch (const std::exception& e) {
        if (bad) {
          KLOG_WARN("[store] batch failed, applying the rest of its group again: {}", e.what());
          fail_alone(results, *bad, e.what());
          continue;
        }
        for (auto& r : results) {
          if (!r || *r) r = fail(e.what());
        }
      }
      break;
    }
    for (std::size_t i = 0; i < jobs.size(); ++i) {
      detail::invoke_safely(jobs[i].done, std::move(*results[i]));
    }
  }

  // Marks batch `bad` failed and forgets the tentative results of the others
  // (their transaction was rolled back; the next pass applies them again).
  static void fail_alone(std::vector<std::optional<Result<CommitInfo>>>& results, std::size_t bad,
                         const std::string& error) {
    for (auto& r : results) {
      if (r && *r) r.reset();
    }
    results[bad] = fail(error);
  }

  // Forgets the write connection; connection() opens a new one.
  void drop_connection() {
    m_applier.reset();
    m_conn.reset();
  }

  void main() {
    pthread_setname_np(pthread_self(), "korch-store-p");
    const auto limit = static_cast<std::size_t>(std::max(1, m_options.max_batches_per_txn));
    for (;;) {
      std::vector<Job> group;
      std::optional<Job> task;
      {
        std::unique_lock lock(m_queue.mutex);
        m_queue.cv.wait(lock, [&] { return !m_queue.jobs.empty() || m_queue.stopping; });
        if (m_queue.jobs.empty()) break;  // stopping, drained
        if (m_queue.jobs.front().task) {
          task = std::move(m_queue.jobs.front());
          m_queue.jobs.pop_front();
        } else {
          while (!m_queue.jobs.empty() && !m_queue.jobs.front().task && group.size() < limit) {
            group.push_back(std::move(m_queue.jobs.front()));
            m_queue.jobs.pop_front();
          }
        }
      }
      try {
        if (task) {
          task->task();
        } else {
          run_group(group);
        }
      } catch (const std::exception& e) {
        KLOG_ERROR("[store] writer: {}", e.what());
      } catch (...) {
        KLOG_ERROR("[store] writer: non-standard exception");
      }
    }
    m_applier.reset();
    m_conn.reset();
  }

  Options m_options;
  std::string m_url;
  bool m_synchronous_commit;
  std::unique_ptr<PgConn> m_conn;
  std::optional<detail::BatchApplierT<PgConn>> m_applier;

  detail::WriterQueue<Job> m_queue;

  std::mutex m_join_mutex;
  std::thread m_thread;
  std::thread::id m_thread_id;
};

// The Store over one PostgreSQL database: a PgWriter (absent when read-only)
// and a pool of read connections.
using PgStore = detail::BackendStore<PgConn, PgWriter, PgReadPool>;

}  // namespace

// open.cpp hands postgres:// locations here.
Result<std::unique_ptr<Store>> open_postgres(const Options& options, const std::string& url) {
  const std::string name = detail::redacted(url);
  std::string sync = options.synchronous;
  for (auto& c : sync) c = static_cast<char>(std::toupper(static_cast<unsigned char>(c)));
  if (sync != "OFF" && sync != "NORMAL" && sync != "FULL" && sync != "EXTRA") {
    return fail(ErrorKind::invalid, name +
                                        ": synchronous must be OFF, NORMAL, FULL or EXTRA, not '" +
                                        options.synchronous + "'");
  }
  if (options.max_batches_per_txn < 1)
    return fail(ErrorKind::invalid, name + ": max_batches_per_txn must be at least 1");
  bool synchronous_commit = sync == "FULL" || sync == "EXTRA";
  // A URL libpq cannot parse is bad input (exit 2), not an unreachable server
  // (unavailable): say so before connecting. libpq quotes the offending
  // token, which may be the password: only its words before the quote are kept.
  char* parse_error = nullptr;
  if (PQconninfoOption* parsed = PQconninfoParse(url.c_str(), &parse_error)) {
    PQconninfoFree(parsed);
  } else {
    std::string why = parse_error != nullptr ? parse_error : "out of memory";
    if (parse_error != nullptr) PQfreemem(parse_error);
    if (auto quote = why.find(": \""); quote != std::string::npos) why.resize(quote);
    while (!why.empty() && (why.back() == '\n' || why.back() == ' ')) why.pop_back();
    return fail(ErrorKind::invalid, name + ": not a valid PostgreSQL URL: " + why);
  }
  try {
    if (options.read_only) {
      PgConn db(url, true, true);
      int version = detail::recorded_version(db);
      if (version > k_schema_version) return fail(detail::newer_message(name, version));
      if (version == 0) return fail(name + ": no korch store in this database");
      if (version < k_schema_version) return fail(detail::older_message(name, version));
      return std::unique_ptr<Store>(std::make_unique<PgStore>(name, nullptr, url));
    }
    auto db = std::make_unique<PgConn>(url, false, synchronous_commit);
    migrate(*db);
    auto writer = std::make_unique<PgWriter>(options, url, synchronous_commit, std::move(db));
    return std::unique_ptr<Store>(std::make_unique<PgStore>(name, std::move(writer), url));
  } catch (const PgError& e) {
    return fail(e.connection_lost() ? ErrorKind::unavailable : ErrorKind::failure, e.what());
  } catch (const std::exception& e) {
    return fail(e.what());
  }
}

}  // namespace korch::store
