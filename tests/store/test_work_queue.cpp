// The evaluation work queue (store/work_queue.hpp) on a real PostgreSQL 15
// server (tests/support/postgres_server.hpp): claims, leases, heartbeats,
// expiry and re-claim, refused late results, release, NOTIFY wake-ups,
// concurrent claimers, a server restart.
#include <gtest/gtest.h>

#include <atomic>
#include <cstdlib>
#include <future>
#include <map>
#include <set>
#include <thread>

#include "store/work_queue.hpp"
#include "tests/support/postgres_server.hpp"
#include "tests/support/required.hpp"

namespace korch::store {
namespace {

// A lease long enough never to expire during a test.
constexpr double k_long_lease_s = 3600;
// A lease that has expired by the time the next statement runs.
constexpr double k_expired_lease_s = 0;

class WorkQueueTest : public ::testing::Test {
 protected:
  void SetUp() override {
    auto& pg = testing::PostgresServer::shared();
    if (!pg.ok()) KORCH_SKIP_OR_FAIL(pg.error());
    m_url = pg.fresh_database();
    ASSERT_FALSE(m_url.empty()) << pg.error();
  }

  std::unique_ptr<WorkQueue> open() {
    auto q = WorkQueue::open(m_url);
    EXPECT_TRUE(q) << (q ? "" : q.error().message);
    return q ? std::move(*q) : nullptr;
  }

  static QueueRow row(const std::string& id, const std::string& version = "v1",
                      double enqueued_at = 0) {
    QueueRow r;
    r.request_id = id;
    r.campaign_id = "c-1";
    r.evaluator_version = version;
    r.request_json = "{\"id\":\"" + id + "\"}";
    r.enqueued_at = enqueued_at;
    return r;
  }

  static WorkerRow worker(const std::string& id) {
    WorkerRow w;
    w.id = id;
    w.host = "host-" + id;
    w.pid = 1;
    w.gpus = "none";
    w.slots = 1;
    w.evaluator_version = "v1";
    w.mode = "mock";
    w.state = "running";
    return w;
  }

  std::string m_url;
};

TEST_F(WorkQueueTest, ClaimTakesTheOldestReadyRowOfItsVersionOnce) {
  auto q = open();
  ASSERT_TRUE(q);
  EXPECT_TRUE(q->enqueue(row("r2", "v1", 2)).value());
  EXPECT_TRUE(q->enqueue(row("r1", "v1", 1)).value());
  EXPECT_TRUE(q->enqueue(row("r3", "v2", 0)).value());
  // A second enqueue of an id (a coordinator that resumed) changes nothing.
  auto again = row("r1", "v1", 9);
  again.request_json = "changed";
  EXPECT_FALSE(q->enqueue(again).value());

  auto a = q->claim("A", "v1", k_long_lease_s).value();
  ASSERT_TRUE(a);
  EXPECT_EQ(a->request_id, "r1");
  EXPECT_EQ(a->request_json, "{\"id\":\"r1\"}");
  EXPECT_EQ(a->lease_token, 1);
  EXPECT_EQ(a->claims, 1);
  auto b = q->claim("B", "v1", k_long_lease_s).value();
  ASSERT_TRUE(b);
  EXPECT_EQ(b->request_id, "r2");
  // r3 waits for another evaluator version: a v1 worker neither takes it nor
  // misses telling why.
  EXPECT_FALSE(q->claim("C", "v1", k_long_lease_s).value());
  auto foreign = q->foreign_work("v1").value();
  ASSERT_EQ(foreign.size(), 1u);
  EXPECT_EQ(foreign[0].evaluator_version, "v2");
  EXPECT_EQ(foreign[0].queued, 1);
  auto counts = q->counts("c-1").value();
  EXPECT_EQ(counts.queued, 1);
  EXPECT_EQ(counts.claimed, 2);
  EXPECT_EQ(counts.done, 0);
}

TEST_F(WorkQueueTest, ResultIsWrittenOnceAndOnlyByTheCurrentLease) {
  auto q = open();
  ASSERT_TRUE(q);
  ASSERT_TRUE(q->put_worker(worker("A")));
  ASSERT_TRUE(q->put_worker(worker("B")));
  ASSERT_TRUE(q->enqueue(row("r1")).value());
  // A's lease expires at once: B re-claims the row under a new token.
  auto a = q->claim("A", "v1", k_expired_lease_s).value();
  ASSERT_TRUE(a);
  auto b = q->claim("B", "v1", k_long_lease_s).value();
  ASSERT_TRUE(b);
  EXPECT_EQ(b->request_id, "r1");
  EXPECT_EQ(b->lease_token, a->lease_token + 1);
  EXPECT_EQ(b->claims, 2);
  // A's heartbeat and its late result are refused; B's result counts.
  EXPECT_FALSE(q->heartbeat(*a, k_long_lease_s).value());
  EXPECT_FALSE(q->complete(*a, "A", "late").value());
  EXPECT_TRUE(q->heartbeat(*b, k_long_lease_s).value());
  EXPECT_TRUE(q->complete(*b, "B", "result-of-B").value());
  // Once done, no one completes it again, not even the same lease.
  EXPECT_FALSE(q->complete(*b, "B", "again").value());
  EXPECT_FALSE(q->claim("C", "v1", k_long_lease_s).value());
  auto results = q->results({"r1", "missing"}, "v1").value();
  ASSERT_EQ(results.size(), 1u);
  EXPECT_EQ(results[0].first, "r1");
  EXPECT_EQ(results[0].second, "result-of-B");
  std::map<std::string, std::int64_t> done;
  auto workers = q->list_workers().value();
  for (auto& w : workers) done[w.id] = w.evaluations_done;
  EXPECT_EQ(done["A"], 0);
  EXPECT_EQ(done["B"], 1);
  auto rows = q->list("c-1").value();
  ASSERT_EQ(rows.size(), 1u);
  EXPECT_EQ(rows[0].state, "done");
  EXPECT_EQ(rows[0].worker_id, "B");
}

TEST_F(WorkQueueTest, ExpiredLeaseThatNobodyReclaimedStillDelivers) {
  auto q = open();
  ASSERT_TRUE(q);
  ASSERT_TRUE(q->enqueue(row("r1")).value());
  auto a = q->claim("A", "v1", k_expired_lease_s).value();
  ASSERT_TRUE(a);
  // No one else holds the row: the token is still A's.
  EXPECT_TRUE(q->heartbeat(*a, k_long_lease_s).value());
  EXPECT_FALSE(q->claim("B", "v1", k_long_lease_s).value()) << "a renewed lease is not free";
  EXPECT_TRUE(q->complete(*a, "A", "ok").value());
}

TEST_F(WorkQueueTest, ReleaseHandsTheRowBackUnderTheSameTokenRule) {
  auto q = open();
  ASSERT_TRUE(q);
  ASSERT_TRUE(q->enqueue(row("r1")).value());
  auto a = q->claim("A", "v1", k_long_lease_s).value();
  ASSERT_TRUE(a);
  EXPECT_TRUE(q->release(*a).value());
  EXPECT_FALSE(q->release(*a).value()) << "already released";
  auto b = q->claim("B", "v1", k_long_lease_s).value();
  ASSERT_TRUE(b);
  // A hand-back is not a lost claim: B's is counted as the first (the
  // worker's --max-claims caps losses, so rolling restarts that drain never
  // turn an evaluation into worker_crash). The token still moved on.
  EXPECT_EQ(b->claims, 1);
  EXPECT_GT(b->lease_token, a->lease_token);
  EXPECT_FALSE(q->complete(*a, "A", "stale").value());
  EXPECT_TRUE(q->complete(*b, "B", "ok").value());
}

// Claimers on their own connections race for 300 rows: every row is claimed
// exactly once (FOR UPDATE SKIP LOCKED), none is lost.
TEST_F(WorkQueueTest, ConcurrentClaimersNeverShareARow) {
  constexpr int k_rows = 300;
  constexpr int k_claimers = 8;
  {
    auto q = open();
    ASSERT_TRUE(q);
    for (int i = 0; i < k_rows; ++i) ASSERT_TRUE(q->enqueue(row("r" + std::to_string(i))));
  }
  std::vector<std::future<std::vector<std::string>>> claimers;
  for (int c = 0; c < k_claimers; ++c) {
    claimers.push_back(std::async(std::launch::async, [this, c] {
      std::vector<std::string> mine;
      auto q = WorkQueue::open(m_url);
      if (!q) return mine;
      std::string id = "w" + std::to_string(c);
      for (;;) {
        auto got = (*q)->claim(id, "v1", k_long_lease_s);
        if (!got || !*got) break;
        mine.push_back((*got)->request_id);
        if (!(*q)->complete(**got, id, "ok").value_or(false))
          mine.push_back("refused:" + (*got)->request_id);
      }
      return mine;
    }));
  }
  std::multiset<std::string> all;
  for (auto& f : claimers) {
    for (auto& id : f.get()) all.insert(id);
  }
  EXPECT_EQ(all.size(), static_cast<std::size_t>(k_rows));
  for (int i = 0; i < k_rows; ++i) EXPECT_EQ(all.count("r" + std::to_string(i)), 1u) << i;
  auto q = open();
  ASSERT_TRUE(q);
  EXPECT_EQ(q->counts("c-1").value().done, k_rows);
}

// An idle worker waiting on korch_eval_queued wakes when work arrives, and a
// coordinator waiting on korch_eval_done when a result does. The waits are
// long: a NOTIFY that never came fails the test instead of timing it.
TEST_F(WorkQueueTest, NotifyWakesIdleWorkersAndWaitingCoordinators) {
  constexpr double k_patience_s = 60;
  auto waiter = open();
  auto other = open();
  ASSERT_TRUE(waiter && other);
  // First wait LISTENs; nothing is pending yet.
  EXPECT_FALSE(waiter->wait(k_channel_queued, 0).value());
  auto woke = std::async(std::launch::async,
                         [&] { return waiter->wait(k_channel_queued, k_patience_s).value(); });
  ASSERT_TRUE(other->enqueue(row("r1")).value());
  EXPECT_TRUE(woke.get());

  EXPECT_FALSE(waiter->wait(k_channel_done, 0).value());
  auto claim = other->claim("A", "v1", k_long_lease_s).value();
  ASSERT_TRUE(claim);
  auto done = std::async(std::launch::async,
                         [&] { return waiter->wait(k_channel_done, k_patience_s).value(); });
  ASSERT_TRUE(other->complete(*claim, "A", "ok").value());
  EXPECT_TRUE(done.get());
}

TEST_F(WorkQueueTest, ServerRestartIsSurvivedByClaimsAndResults) {
  auto q = open();
  ASSERT_TRUE(q);
  ASSERT_TRUE(q->enqueue(row("r1")).value());
  auto a = q->claim("A", "v1", k_long_lease_s).value();
  ASSERT_TRUE(a);
  ASSERT_TRUE(testing::PostgresServer::shared().restart());
  // The first statement after the restart reconnects; the lease is durable.
  EXPECT_TRUE(q->heartbeat(*a, k_long_lease_s).value());
  EXPECT_TRUE(q->complete(*a, "A", "ok").value());
  EXPECT_FALSE(q->wait(k_channel_queued, 0).value());
}

TEST_F(WorkQueueTest, WorkerRowKeepsItsCountAcrossHeartbeats) {
  auto q = open();
  ASSERT_TRUE(q);
  auto w = worker("A");
  w.started_at = 5;
  ASSERT_TRUE(q->put_worker(w));
  ASSERT_TRUE(q->enqueue(row("r1")).value());
  auto a = q->claim("A", "v1", k_long_lease_s).value();
  ASSERT_TRUE(a);
  ASSERT_TRUE(q->complete(*a, "A", "ok").value());
  w.state = "draining";
  w.started_at = 99;
  ASSERT_TRUE(q->put_worker(w));
  auto rows = q->list_workers().value();
  ASSERT_EQ(rows.size(), 1u);
  EXPECT_EQ(rows[0].state, "draining");
  EXPECT_EQ(rows[0].evaluations_done, 1);
  EXPECT_EQ(rows[0].started_at, 5);
  EXPECT_GT(rows[0].heartbeat_at, 0);
}

// A row is keyed on (request id, evaluator version): the same candidate
// asked under a changed evaluator version is a new row that the new
// version's workers run; the old version's result is never handed over, and
// an old row nobody runs any more does not keep the new one out of the queue.
TEST_F(WorkQueueTest, SameRequestUnderAnotherEvaluatorVersionIsAnotherRow) {
  auto q = open();
  ASSERT_TRUE(q);
  ASSERT_TRUE(q->enqueue(row("r1", "v1")).value());
  ASSERT_TRUE(q->enqueue(row("stuck", "v1")).value());  // no v1 worker will take it
  auto a = q->claim("A", "v1", k_long_lease_s).value();
  ASSERT_TRUE(a);
  EXPECT_EQ(a->evaluator_version, "v1");
  ASSERT_TRUE(q->complete(*a, "A", "result-of-v1").value());

  EXPECT_TRUE(q->enqueue(row("r1", "v2")).value()) << "a new version queues its own row";
  EXPECT_TRUE(q->enqueue(row("stuck", "v2")).value()) << "an old row does not block it";
  EXPECT_TRUE(q->results({"r1", "stuck"}, "v2").value().empty())
      << "the v1 result is not a v2 result";
  auto b = q->claim("B", "v2", k_long_lease_s).value();
  ASSERT_TRUE(b);
  EXPECT_EQ(b->request_id, "r1");
  EXPECT_EQ(b->evaluator_version, "v2");
  EXPECT_EQ(b->lease_token, a->lease_token) << "each row counts its own claims";
  // A lease names its version: the v1 lease (same id and token) cannot end the v2 row.
  EXPECT_FALSE(q->complete(*a, "A", "late").value());
  EXPECT_TRUE(q->heartbeat(*b, k_long_lease_s).value());
  ASSERT_TRUE(q->complete(*b, "B", "result-of-v2").value());
  auto v2 = q->results({"r1"}, "v2").value();
  ASSERT_EQ(v2.size(), 1u);
  EXPECT_EQ(v2[0].second, "result-of-v2");
  auto v1 = q->results({"r1"}, "v1").value();
  ASSERT_EQ(v1.size(), 1u);
  EXPECT_EQ(v1[0].second, "result-of-v1");
  auto c = q->claim("C", "v2", k_long_lease_s).value();
  ASSERT_TRUE(c);
  EXPECT_EQ(c->request_id, "stuck");
}

// A store migrated to version 4 (eval_queue keyed on request_id alone) may
// exist: version 5 re-keys it and keeps its rows.
TEST_F(WorkQueueTest, Version4QueueIsRekeyedAndKeepsItsRows) {
  {
    auto q = open();
    ASSERT_TRUE(q);
    ASSERT_TRUE(q->enqueue(row("r1", "v1")).value());
  }
  // Turn the database back into what version 4 wrote.
  std::string cmd =
      "psql -q -X -v ON_ERROR_STOP=1 '" + m_url +
      "' -c 'ALTER TABLE eval_queue DROP CONSTRAINT eval_queue_pkey; ALTER TABLE eval_queue ADD "
      "PRIMARY KEY (request_id); DROP TABLE campaign_devices; DROP TABLE verdict_cards; "
      "DELETE FROM schema_migrations WHERE "
      "version > 4;' >/dev/null";
  ASSERT_EQ(std::system(cmd.c_str()), 0) << cmd;
  {
    // A worker (no migration) refuses the older schema; a coordinator migrates it.
    auto refused = WorkQueue::open(m_url, /*migrate=*/false);
    EXPECT_FALSE(refused);
  }
  auto q = open();
  ASSERT_TRUE(q);
  EXPECT_EQ(q->list("c-1").value().size(), 1u);
  EXPECT_TRUE(q->enqueue(row("r1", "v2")).value());
  EXPECT_FALSE(q->enqueue(row("r1", "v1")).value());
  EXPECT_EQ(q->list("c-1").value().size(), 2u);
}

TEST(WorkQueueLocation, SqliteStoreIsRefusedWithAReason) {
  auto q = WorkQueue::open("sqlite:/tmp/never-created-korch-queue.db");
  ASSERT_FALSE(q);
  EXPECT_EQ(q.error().kind, ErrorKind::invalid);
  EXPECT_NE(q.error().message.find("needs a PostgreSQL store"), std::string::npos)
      << q.error().message;
}

}  // namespace
}  // namespace korch::store
