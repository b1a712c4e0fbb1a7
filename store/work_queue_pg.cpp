// The evaluation work queue on PostgreSQL (store/work_queue.hpp).
#include <libpq-fe.h>
#include <poll.h>

#include <cerrno>
#include <chrono>
#include <cmath>
#include <mutex>
#include <set>

#include "store/codec_internal.hpp"
#include "store/pg_internal.hpp"
#include "store/store.hpp"
#include "store/work_queue.hpp"
#include "util/log.hpp"

namespace korch::store {
namespace {

using detail::PgConn;
using detail::PgError;
using detail::PgTxn;

// The server's clock in seconds since the epoch: leases are judged by it, so
// that hosts whose clocks differ agree.
constexpr const char* k_now = "EXTRACT(EPOCH FROM clock_timestamp())::DOUBLE PRECISION";

std::string sql_now(std::string text) {
  for (std::size_t at; (at = text.find("NOW_S")) != std::string::npos;) text.replace(at, 5, k_now);
  return text;
}

// One connection, reopened when the server dropped it.
class Connection {
 public:
  explicit Connection(std::string url) : m_url(std::move(url)) {}

  // Runs fn(conn) under the mutex; a lost connection is reopened and fn run
  // once more (every caller's statements are safe to repeat, or, like a
  // claim, leave at worst a lease that expires).
  template <typename T, typename F>
  Result<T> run(F&& fn) {
    std::lock_guard lock(m_mutex);
    for (int attempt = 0;; ++attempt) {
      try {
        if (!m_conn || m_conn->broken()) {
          m_conn.reset();
          m_conn = std::make_unique<PgConn>(m_url, false, true);
          m_listening.clear();
        }
        if constexpr (std::is_void_v<T>) {
          fn(*m_conn);
          return {};
        } else {
          return fn(*m_conn);
        }
      } catch (const PgError& e) {
        if (e.connection_lost()) m_conn.reset();
        if (e.connection_lost() && attempt == 0) continue;
        return fail(e.connection_lost() ? ErrorKind::unavailable : ErrorKind::failure, e.what());
      } catch (const std::exception& e) {
        return fail(e.what());
      }
    }
  }

  // Channels this connection LISTENs on (cleared on reconnect).
  std::set<std::string>& listening() { return m_listening; }

 private:
  std::string m_url;
  std::mutex m_mutex;
  std::unique_ptr<PgConn> m_conn;
  std::set<std::string> m_listening;
};

// Consumes every notification pending on `db`; true when there was one.
bool drain_notifications(PgConn& db) {
  if (PQconsumeInput(db.get()) == 0) db.throw_error(nullptr, "reading notifications");
  bool any = false;
  while (PGnotify* n = PQnotifies(db.get())) {
    any = true;
    PQfreemem(n);
  }
  return any;
}

class PgWorkQueue final : public WorkQueue {
 public:
  explicit PgWorkQueue(const std::string& url) : m_db(url), m_listen(url) {}

  Result<bool> enqueue(const QueueRow& row) override {
    return m_db.run<bool>([&](PgConn& db) {
      static const std::string sql = sql_now(detail::insert_sql(
          detail::k_eval_queue, "ON CONFLICT (request_id, evaluator_version) DO NOTHING"));
      PgTxn txn(db, PgTxn::Kind::write);
      QueueRow r = row;
      r.state = "queued";
      r.worker_id.clear();
      r.lease_token = 0;
      r.claims = 0;
      r.lease_expires_at = 0;
      r.result_json.clear();
      r.claimed_at = 0;
      r.finished_at = 0;
      detail::bind_row(db.stmt(sql), detail::k_eval_queue, r).run();
      bool inserted = db.changes() == 1;
      if (inserted) db.exec(std::string("NOTIFY ") + k_channel_queued, "notifying");
      txn.commit();
      return inserted;
    });
  }

  Result<std::vector<std::pair<std::string, std::string>>> results(
      const std::vector<std::string>& request_ids, const std::string& evaluator_version) override {
    using Out = std::vector<std::pair<std::string, std::string>>;
    if (request_ids.empty()) return Out{};
    // The ids travel as one text[] literal: {"id1","id2"} with " and \ escaped.
    std::string array = "{";
    for (std::size_t i = 0; i < request_ids.size(); ++i) {
      if (i > 0) array += ',';
      array += '"';
      for (char c : request_ids[i]) {
        if (c == '"' || c == '\\') array += '\\';
        array += c;
      }
      array += '"';
    }
    array += '}';
    return m_db.run<Out>([&](PgConn& db) {
      auto& q = db.stmt(
          "SELECT request_id, result_json FROM eval_queue WHERE request_id = ANY(?1::text[]) AND "
          "evaluator_version = ?2 AND state = 'done'");
      q.bind(array, evaluator_version);
      Out out;
      while (q.step()) out.emplace_back(q.text(0), q.text(1));
      return out;
    });
  }

  Result<CampaignDevice> pin_device(const CampaignDevice& device) override {
    return m_db.run<CampaignDevice>([&](PgConn& db) {
      static const std::string sql =
          detail::insert_sql(detail::k_campaign_devices, "ON CONFLICT (campaign_id) DO NOTHING");
      PgTxn txn(db, PgTxn::Kind::write);
      detail::bind_row(db.stmt(sql), detail::k_campaign_devices, device).run();
      auto stored = read_device(db, device.campaign_id);
      txn.commit();
      if (!stored) throw std::runtime_error("campaign_devices: the pinned row vanished");
      return *stored;
    });
  }

  Result<std::optional<CampaignDevice>> pinned_device(const std::string& campaign_id) override {
    return m_db.run<std::optional<CampaignDevice>>(
        [&](PgConn& db) { return read_device(db, campaign_id); });
  }

  Result<std::optional<Claim>> claim(const std::string& worker_id,
                                     const std::string& evaluator_version,
                                     double lease_s) override {
    return m_db.run<std::optional<Claim>>([&](PgConn& db) -> std::optional<Claim> {
      static const std::string sql = sql_now(
          "UPDATE eval_queue SET state = 'claimed', worker_id = ?1, lease_token = lease_token + 1, "
          "claims = claims + 1, claimed_at = NOW_S, lease_expires_at = NOW_S + ?3 "
          "WHERE evaluator_version = ?2 AND request_id = (SELECT request_id FROM eval_queue "
          "WHERE evaluator_version = ?2 AND "
          "(state = 'queued' OR (state = 'claimed' AND lease_expires_at <= NOW_S)) "
          "ORDER BY enqueued_at, request_id LIMIT 1 FOR UPDATE SKIP LOCKED) "
          "RETURNING request_id, evaluator_version, campaign_id, request_json, lease_token, "
          "claims");
      // One statement, its own transaction (autocommit): one round trip.
      auto& q = db.stmt(sql);
      q.bind(worker_id, evaluator_version, lease_s);
      std::optional<Claim> out;
      if (q.step()) out = Claim{q.text(0), q.text(1), q.text(2), q.text(3), q.i64(4), q.i64(5)};
      q.run();
      return out;
    });
  }

  Result<bool> heartbeat(const Claim& claim, double lease_s) override {
    return m_db.run<bool>([&](PgConn& db) {
      static const std::string sql = sql_now(
          "UPDATE eval_queue SET lease_expires_at = NOW_S + ?3 WHERE request_id = ?1 AND "
          "lease_token = ?2 AND state = 'claimed' AND evaluator_version = ?4");
      db.stmt(sql)
          .bind(claim.request_id, claim.lease_token, lease_s, claim.evaluator_version)
          .run();
      return db.changes() == 1;
    });
  }

  Result<bool> complete(const Claim& claim, const std::string& worker_id,
                        const std::string& result_json) override {
    return m_db.run<bool>([&](PgConn& db) {
      static const std::string end = sql_now(
          "UPDATE eval_queue SET state = 'done', result_json = ?3, finished_at = NOW_S, "
          "lease_expires_at = 0 WHERE request_id = ?1 AND lease_token = ?2 AND state = 'claimed' "
          "AND evaluator_version = ?4");
      PgTxn txn(db, PgTxn::Kind::write);
      db.stmt(end)
          .bind(claim.request_id, claim.lease_token, result_json, claim.evaluator_version)
          .run();
      if (db.changes() != 1) return false;  // the transaction rolls back
      db.stmt("UPDATE workers SET evaluations_done = evaluations_done + 1 WHERE id = ?1")
          .bind(worker_id)
          .run();
      db.stmt("SELECT pg_notify(?1, ?2)").bind(std::string(k_channel_done), claim.request_id).run();
      txn.commit();
      return true;
    });
  }

  Result<bool> release(const Claim& claim, bool counted) override {
    return m_db.run<bool>([&](PgConn& db) {
      PgTxn txn(db, PgTxn::Kind::write);
      db.stmt(
            "UPDATE eval_queue SET state = 'queued', lease_expires_at = 0, "
            "claims = claims - ?4 WHERE request_id = ?1 AND lease_token = ?2 AND "
            "state = 'claimed' AND evaluator_version = ?3")
          .bind(claim.request_id, claim.lease_token, claim.evaluator_version,
                static_cast<std::int64_t>(counted ? 0 : 1))
          .run();
      if (db.changes() != 1) return false;
      db.exec(std::string("NOTIFY ") + k_channel_queued, "notifying");
      txn.commit();
      return true;
    });
  }

  Result<std::vector<ForeignWork>> foreign_work(const std::string& evaluator_version) override {
    return m_db.run<std::vector<ForeignWork>>([&](PgConn& db) {
      auto& q = db.stmt(
          "SELECT evaluator_version, campaign_id, COUNT(*) FROM eval_queue WHERE state <> 'done' "
          "AND evaluator_version <> ?1 GROUP BY evaluator_version, campaign_id ORDER BY 1, 2");
      q.bind(evaluator_version);
      std::vector<ForeignWork> out;
      while (q.step()) out.push_back({q.text(0), q.text(1), q.i64(2)});
      return out;
    });
  }

  Result<void> put_worker(const WorkerRow& row) override {
    return m_db.run<void>([&](PgConn& db) {
      static const std::string sql = sql_now(detail::insert_sql(
          detail::k_workers,
          "ON CONFLICT (id) DO UPDATE SET " +
              detail::excluded_set(detail::k_workers, {}, {"evaluations_done", "started_at"})));
      WorkerRow r = row;
      r.evaluations_done = 0;  // complete() counts
      // heartbeat_at: the server's clock, set by a second statement (the codec binds every column).
      detail::bind_row(db.stmt(sql), detail::k_workers, r).run();
      db.stmt(sql_now("UPDATE workers SET heartbeat_at = NOW_S WHERE id = ?1")).bind(row.id).run();
    });
  }

  Result<std::vector<WorkerRow>> list_workers() override {
    return m_db.run<std::vector<WorkerRow>>([&](PgConn& db) {
      static const std::string sql =
          "SELECT " + detail::column_list(detail::k_workers) + " FROM workers ORDER BY host, id";
      auto& q = db.stmt(sql);
      q.bind();
      std::vector<WorkerRow> out;
      while (q.step()) out.push_back(detail::read_row(detail::k_workers, q));
      return out;
    });
  }

  Result<QueueCounts> counts(const std::string& campaign_id) override {
    return m_db.run<QueueCounts>([&](PgConn& db) {
      auto& q =
          db.stmt("SELECT state, COUNT(*) FROM eval_queue WHERE campaign_id = ?1 GROUP BY state");
      q.bind(campaign_id);
      QueueCounts c;
      while (q.step()) {
        auto state = q.text(0);
        auto n = q.i64(1);
        if (state == "queued") c.queued = n;
        if (state == "claimed") c.claimed = n;
        if (state == "done") c.done = n;
      }
      return c;
    });
  }

  Result<std::vector<QueueRow>> list(const std::string& campaign_id) override {
    return m_db.run<std::vector<QueueRow>>([&](PgConn& db) {
      static const std::string sql = "SELECT " + detail::column_list(detail::k_eval_queue) +
                                     " FROM eval_queue WHERE campaign_id = ?1 ORDER BY request_id";
      auto& q = db.stmt(sql);
      q.bind(campaign_id);
      std::vector<QueueRow> out;
      while (q.step()) out.push_back(detail::read_row(detail::k_eval_queue, q));
      return out;
    });
  }

  Result<bool> wait(const std::string& channel, double timeout_s) override {
    const auto deadline = std::chrono::steady_clock::now() +
                          std::chrono::microseconds(static_cast<std::int64_t>(timeout_s * 1e6));
    return m_listen.run<bool>([&](PgConn& db) {
      if (!m_listen.listening().contains(channel)) {
        db.exec("LISTEN " + channel, "listening");
        m_listen.listening().insert(channel);
      }
      for (;;) {
        if (drain_notifications(db)) return true;
        auto left = std::chrono::duration_cast<std::chrono::milliseconds>(
                        deadline - std::chrono::steady_clock::now())
                        .count();
        if (left <= 0) return false;
        pollfd p{PQsocket(db.get()), POLLIN, 0};
        if (p.fd < 0) db.throw_error(nullptr, "waiting for notifications");
        int rc = ::poll(&p, 1, static_cast<int>(left));
        if (rc < 0 && errno != EINTR) db.throw_error(nullptr, "waiting for notifications");
      }
    });
  }

 private:
  static std::optional<CampaignDevice> read_device(PgConn& db, const std::string& campaign_id) {
    static const std::string sql = "SELECT " + detail::column_list(detail::k_campaign_devices) +
                                   " FROM campaign_devices WHERE campaign_id = ?1";
    auto& q = db.stmt(sql);
    q.bind(campaign_id);
    std::optional<CampaignDevice> out;
    while (q.step()) out = detail::read_row(detail::k_campaign_devices, q);
    return out;
  }

  Connection m_db;
  Connection m_listen;
};

}  // namespace

Result<std::unique_ptr<WorkQueue>> WorkQueue::open(const std::string& location, bool migrate) {
  auto where = parse_location(location);
  if (!where) return std::unexpected(where.error());
  if (where->backend != Backend::postgres) {
    return fail(ErrorKind::invalid,
                redact_url(location) +
                    ": the evaluation queue needs a PostgreSQL store (postgres://...); a SQLite "
                    "store evaluates in-process");
  }
  // Opening the store applies the migrations (the queue's tables are version
  // 4); read-only, it refuses a schema older or newer than this korch with a
  // message that says which, and changes nothing (a worker never migrates
  // the store its coordinator runs on).
  Options options;
  options.path = location;
  options.read_only = !migrate;
  auto st = Store::open(options);
  if (!st && !migrate &&
      st.error().message.find("no korch store in this database") != std::string::npos) {
    // A blank database (workers started before their coordinator): creating
    // the current schema in it changes nothing anyone else holds.
    options.read_only = false;
    st = Store::open(options);
  }
  if (!st) return std::unexpected(st.error());
  (*st)->close();
  return std::unique_ptr<WorkQueue>(std::make_unique<PgWorkQueue>(where->target));
}

}  // namespace korch::store
