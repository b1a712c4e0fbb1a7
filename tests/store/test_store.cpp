// Tests for the store against real SQLite files in a temp dir and, for the
// contract (BackendTest), also against a real PostgreSQL 15 server that the
// test starts (tests/support/postgres_server.hpp).
#include <gtest/gtest.h>
#include <libpq-fe.h>
#include <sqlite3.h>
#include <sys/stat.h>
#include <unistd.h>

#include <atomic>
#include <chrono>
#include <condition_variable>
#include <cstdlib>
#include <filesystem>
#include <fstream>
#include <future>
#include <mutex>
#include <random>
#include <regex>
#include <set>
#include <thread>
#include <type_traits>
#include <utility>

#include "store/codec_internal.hpp"
#include "store/copy.hpp"
#include "store/schema_internal.hpp"
#include "store/sqlite_internal.hpp"
#include "store/store.hpp"
#include "tests/support/postgres_server.hpp"
#include "tests/support/required.hpp"

namespace korch::store {
namespace {

namespace fs = std::filesystem;

// The store under test lives in a temp dir (SQLite) or in a fresh database
// of the test process's PostgreSQL server (tests/support/postgres_server.hpp).
class StoreFixture : public ::testing::Test {
 protected:
  explicit StoreFixture(Backend backend = Backend::sqlite) : m_backend(backend) {}

  void SetUp() override {
    std::string tmpl = (fs::temp_directory_path() / "korch-store-XXXXXX").string();
    ASSERT_NE(::mkdtemp(tmpl.data()), nullptr);
    m_dir = tmpl;
    m_path = (m_dir / "korch.db").string();
    fresh();
  }
  void TearDown() override {
    std::error_code ec;
    fs::permissions(m_path, fs::perms::owner_all, fs::perm_options::add, ec);
    fs::remove_all(m_dir, ec);
  }

  // Points m_location at an empty store: the SQLite file removed, or a new
  // PostgreSQL database.
  void fresh() {
    if (m_backend == Backend::sqlite) {
      for (const char* suffix : {"", "-wal", "-shm"}) fs::remove(m_path + suffix);
      m_location = m_path;
      return;
    }
    auto& pg = testing::PostgresServer::shared();
    if (!pg.ok()) KORCH_SKIP_OR_FAIL(pg.error());
    m_location = pg.fresh_database();
    ASSERT_FALSE(m_location.empty()) << pg.error();
  }

  std::unique_ptr<Store> open(Options options = {}) {
    if (options.path.empty()) options.path = m_location;
    auto store = Store::open(options);
    EXPECT_TRUE(store.has_value()) << store.error().message;
    return store ? std::move(*store) : nullptr;
  }

  // Runs SQL (one or more statements) on a raw connection (outside the Store).
  void raw_exec(const std::string& sql) {
    if (m_backend == Backend::postgres) {
      PGconn* c = PQconnectdb(m_location.c_str());
      ASSERT_EQ(PQstatus(c), CONNECTION_OK) << PQerrorMessage(c);
      PGresult* r = PQexec(c, sql.c_str());
      auto status = PQresultStatus(r);
      std::string message = PQresultErrorMessage(r);
      PQclear(r);
      PQfinish(c);
      ASSERT_TRUE(status == PGRES_COMMAND_OK || status == PGRES_TUPLES_OK) << message;
      return;
    }
    sqlite3* db = nullptr;
    ASSERT_EQ(sqlite3_open(m_path.c_str(), &db), SQLITE_OK);
    char* err = nullptr;
    int rc = sqlite3_exec(db, sql.c_str(), nullptr, nullptr, &err);
    std::string message = err ? err : "";
    sqlite3_free(err);
    sqlite3_close(db);
    ASSERT_EQ(rc, SQLITE_OK) << message;
  }

  // The integer that a one-value query returns on a raw connection.
  std::int64_t raw_count(const std::string& sql) {
    if (m_backend == Backend::postgres) {
      PGconn* c = PQconnectdb(m_location.c_str());
      std::int64_t out = -1;
      if (PQstatus(c) == CONNECTION_OK) {
        PGresult* r = PQexec(c, sql.c_str());
        if (PQresultStatus(r) == PGRES_TUPLES_OK && PQntuples(r) == 1)
          out = std::atoll(PQgetvalue(r, 0, 0));
        PQclear(r);
      }
      PQfinish(c);
      return out;
    }
    sqlite3* db = nullptr;
    EXPECT_EQ(sqlite3_open(m_path.c_str(), &db), SQLITE_OK);
    sqlite3_stmt* q = nullptr;
    std::int64_t out = -1;
    if (sqlite3_prepare_v2(db, sql.c_str(), -1, &q, nullptr) == SQLITE_OK &&
        sqlite3_step(q) == SQLITE_ROW) {
      out = sqlite3_column_int64(q, 0);
    }
    sqlite3_finalize(q);
    sqlite3_close(db);
    return out;
  }

  Backend m_backend;
  fs::path m_dir;
  std::string m_path;      // the SQLite file (also set, unused, for PostgreSQL)
  std::string m_location;  // what Options::path names: m_path or a postgres:// URL
};

// Tests of SQLite's own behaviour (files, PRAGMAs, WAL).
class StoreTest : public StoreFixture {};

// Tests of the Store contract, run against each backend.
class BackendTest : public StoreFixture, public ::testing::WithParamInterface<Backend> {
 protected:
  BackendTest() : StoreFixture(GetParam()) {}
};

INSTANTIATE_TEST_SUITE_P(Backends, BackendTest,
                         ::testing::Values(Backend::sqlite, Backend::postgres),
                         [](const ::testing::TestParamInfo<Backend>& info) {
                           return info.param == Backend::sqlite ? "sqlite" : "postgres";
                         });

// --- sample rows with every field set to a non-default value ---------------

CampaignRow campaign(const std::string& id = "c-1") {
  return CampaignRow{.id = id,
                     .name = "camp " + id,
                     .config_json = R"({"turns":5})",
                     .secret_seed = 0xfedcba9876543210ULL,
                     .created_at = 1000.5};
}

TaskRow task(const std::string& campaign_id = "c-1", const std::string& task_id = "L1/1") {
  return TaskRow{.campaign_id = campaign_id,
                 .task_id = task_id,
                 .level = 1,
                 .number = 7,
                 .name = "matmul",
                 .path = "/tasks/1_matmul.py",
                 .source = "class Model: pass\n"};
}

EpisodeRow episode(const std::string& id, const std::string& campaign_id = "c-1",
                   double created = 1.0) {
  return EpisodeRow{EpisodeSummary{.id = id,
                                   .campaign_id = campaign_id,
                                   .task_id = "L1/1",
                                   .model_id = "m-a",
                                   .sample_index = 3,
                                   .status = EpisodeStatus::running,
                                   .active_s = 12.5,
                                   .tokens_used = 4242,
                                   .cost_usd = 0.25,
                                   .created_at = created,
                                   .updated_at = created + 1},
                    "You write kernels.\n"};
}

const EpisodeSummary& summary(const EpisodeRow& row) { return row; }

MessageRow message(const std::string& ep, int epoch, int seq, const std::string& content = "") {
  return MessageRow{.episode_id = ep,
                    .epoch = epoch,
                    .seq = seq,
                    .role = seq % 2 ? Role::assistant : Role::user,
                    .kind = seq % 2 ? MessageKind::reply : MessageKind::feedback,
                    .turn = seq / 2 + 1,
                    .content = content.empty()
                                   ? "msg " + std::to_string(epoch) + "/" + std::to_string(seq)
                                   : content};
}

TurnRow turn(const std::string& ep, int n, const std::string& code = "def f(): pass") {
  return TurnRow{.episode_id = ep,
                 .turn = n,
                 .model_id = "m-a",
                 .llm_request_id = "llm|" + ep + "|" + std::to_string(n),
                 .action = "check",
                 .parse_status = "code",
                 .code = code,
                 .code_sha = "abc123",
                 .eval_request_id = "check|" + ep + "|" + std::to_string(n),
                 .eval_status = "correct",
                 .finish_reason = "stop",
                 .prompt_tokens = 1000 + n,
                 .completion_tokens = 200 + n,
                 .llm_latency_s = 3.25,
                 .at = 2000.0 + n};
}

LlmCallRow llm_call(const std::string& ep, int n, CallState state = CallState::done) {
  return LlmCallRow{.request_id = "llm|" + ep + "|" + std::to_string(n),
                    .episode_id = ep,
                    .turn = n,
                    .model_id = "m-a",
                    .state = state,
                    .started_at = 10.0 + n,
                    .finished_at = 20.0 + n,
                    .content = "reply " + std::to_string(n),
                    .reasoning = "thinking",
                    .finish_reason = "stop",
                    .prompt_tokens = 100,
                    .completion_tokens = 50,
                    .cached_tokens = 10,
                    .reasoning_tokens = 5,
                    .cost_usd = 0.125,
                    .latency_s = 1.5,
                    .http_attempts = 2,
                    .attempts_json = R"([{"status":429,"error":"","latency_s":0.1}])",
                    .provider_request_id = "prov-1",
                    .failure = "",
                    .error = "",
                    .dup_possible = true,
                    .sends = 2};
}

EvaluationRow evaluation(const std::string& ep, const std::string& id, EvalState state,
                         const std::string& verdict = "") {
  return EvaluationRow{.request_id = id,
                       .episode_id = ep,
                       .kind = "submit",
                       .code_sha = "abc123",
                       .state = state,
                       .owner = "host:1234",
                       .attempts = 1,
                       .failures = 0,
                       .verdict = verdict,
                       .report_json = R"({"ok":true})",
                       .evaluator_version = "ev-1",
                       .created_at = 30.0,
                       .finished_at = 31.0};
}

FinalRow final_row(const std::string& ep, EndReason reason = EndReason::submitted) {
  return FinalRow{.episode_id = ep,
                  .reason = reason,
                  .verdict = "correct",
                  .request_id = "kernel|" + ep + "|abc",
                  .speedup = 1.75,
                  .reward = 0.5,
                  .correct = true,
                  .at = 99.0};
}

// A campaign with its task and the given episodes, committed.
void seed(Store& store, const std::vector<std::string>& episodes,
          const std::string& campaign_id = "c-1") {
  WriteBatch b;
  b.put(campaign(campaign_id));
  b.put(task(campaign_id));
  double created = 1;
  for (const auto& id : episodes) b.put(episode(id, campaign_id, created++));
  auto r = store.commit_sync(std::move(b));
  ASSERT_TRUE(r.has_value()) << r.error().message;
}

// --- round trips -------------------------------------------------------------

TEST_P(BackendTest, RoundTripsEveryRowType) {
  auto store = open();
  WriteBatch b;
  b.put(campaign());
  b.put(task());
  b.put(episode("e-1"));
  b.put(episode("e-2", "c-1", 2.0));
  b.put(message("e-1", 0, 0));
  b.put(message("e-1", 0, 1));
  b.put(turn("e-1", 1));
  b.put(llm_call("e-1", 1));
  b.put(evaluation("e-1", "check|e-1|1|abc", EvalState::done, "correct"));
  b.put(EventRow{
      .episode_id = "e-1", .turn = 1, .kind = "compaction", .detail = "rebuilt", .at = 5.5});
  b.put(final_row("e-2"));
  FinalRow no_speedup = final_row("e-2");
  auto info = store->commit_sync(std::move(b));
  ASSERT_TRUE(info.has_value()) << info.error().message;
  EXPECT_TRUE(info->conflicts.empty());

  auto c = store->get_campaign("c-1");
  ASSERT_TRUE(c.has_value());
  ASSERT_TRUE(c->has_value());
  EXPECT_EQ(**c, campaign());
  EXPECT_EQ(store->list_campaigns().value(), std::vector<CampaignRow>{campaign()});
  EXPECT_FALSE(store->get_campaign("nope").value().has_value());
  EXPECT_EQ(store->list_tasks("c-1").value(), std::vector<TaskRow>{task()});

  auto episodes = store->list_episodes("c-1").value();
  ASSERT_EQ(episodes.size(), 2u);
  EXPECT_EQ(episodes[0], summary(episode("e-1")));
  EXPECT_EQ(episodes[1].status, EpisodeStatus::final);  // the final row marks the episode final

  auto snap = store->load_episode("e-1").value();
  ASSERT_TRUE(snap.has_value());
  EXPECT_EQ(snap->episode, episode("e-1"));
  EXPECT_EQ(snap->messages, (std::vector<MessageRow>{message("e-1", 0, 0), message("e-1", 0, 1)}));
  EXPECT_EQ(snap->epoch, 0);
  EXPECT_EQ(snap->turns, std::vector<TurnRow>{turn("e-1", 1)});
  EXPECT_EQ(snap->llm_calls, std::vector<LlmCallRow>{llm_call("e-1", 1)});
  EXPECT_EQ(snap->evaluations, std::vector<EvaluationRow>{evaluation("e-1", "check|e-1|1|abc",
                                                                     EvalState::done, "correct")});
  EXPECT_FALSE(snap->final.has_value());
  EXPECT_FALSE(store->load_episode("missing").value().has_value());

  EXPECT_EQ(store->get_llm_call("llm|e-1|1").value(), llm_call("e-1", 1));
  EXPECT_EQ(store->get_evaluation("check|e-1|1|abc").value(),
            evaluation("e-1", "check|e-1|1|abc", EvalState::done, "correct"));
  EXPECT_FALSE(store->get_evaluation("x").value().has_value());
  EXPECT_EQ(store->list_turns("c-1").value(), std::vector<TurnRow>{turn("e-1", 1)});
  EXPECT_EQ(store->list_llm_calls("c-1").value(), std::vector<LlmCallRow>{llm_call("e-1", 1)});
  EXPECT_EQ(store->list_evaluations("c-1").value().size(), 1u);
  EXPECT_EQ(store->list_finals("c-1").value(), std::vector<FinalRow>{final_row("e-2")});
  EXPECT_EQ(
      store->list_events("c-1").value(),
      (std::vector<EventRow>{
          {.episode_id = "e-1", .turn = 1, .kind = "compaction", .detail = "rebuilt", .at = 5.5}}));

  auto final_snap = store->load_episode("e-2").value();
  ASSERT_TRUE(final_snap && final_snap->final);
  EXPECT_EQ(*final_snap->final, final_row("e-2"));

  auto counts = store->counts("c-1").value();
  EXPECT_EQ(counts.episodes, 2);
  EXPECT_EQ(counts.running, 1);
  EXPECT_EQ(counts.final, 1);
  EXPECT_EQ(counts.pending, 0);
  EXPECT_EQ(counts.turns, 1);
  EXPECT_EQ(counts.llm_calls, 1);
  EXPECT_EQ(counts.prompt_tokens, 100);
  EXPECT_EQ(counts.completion_tokens, 50);
  EXPECT_DOUBLE_EQ(counts.cost_usd, 0.125);
  EXPECT_EQ(counts.submitted, 1);
  EXPECT_EQ(counts.correct, 1);
  EXPECT_EQ(store->schema_version().value(), k_schema_version);
}

// The codecs are the one list of each table's columns; the CREATE TABLE
// statements of the shipped migrations are history. They must agree: every
// codec names exactly its table's columns, in the table's order (an INTEGER
// PRIMARY KEY, the rowid, belongs to no row struct).
TEST_F(StoreTest, EveryCodecNamesTheColumnsOfItsTable) {
  open().reset();  // creates and migrates the file
  sqlite3* db = nullptr;
  ASSERT_EQ(sqlite3_open(m_path.c_str(), &db), SQLITE_OK);
  std::set<std::string> tables_seen;
  auto check = [&](const auto& codec) {
    std::string table(codec.table);
    tables_seen.insert(table);
    std::vector<std::string> in_db;
    sqlite3_stmt* q = nullptr;
    ASSERT_EQ(sqlite3_prepare_v2(db, ("PRAGMA table_info(" + table + ")").c_str(), -1, &q, nullptr),
              SQLITE_OK);
    while (sqlite3_step(q) == SQLITE_ROW) {
      std::string name = reinterpret_cast<const char*>(sqlite3_column_text(q, 1));
      std::string type = reinterpret_cast<const char*>(sqlite3_column_text(q, 2));
      bool rowid_alias = sqlite3_column_int(q, 5) == 1 && type == "INTEGER";
      if (!rowid_alias) in_db.push_back(name);
    }
    sqlite3_finalize(q);
    std::vector<std::string> in_codec;
    codec.for_each([&](const auto& c) { in_codec.emplace_back(c.name); });
    EXPECT_EQ(in_codec, in_db) << "table " << table;
  };
  std::apply([&](const auto&... codec) { (check(codec), ...); }, detail::k_all_codecs);
  // Every table but the bookkeeping one has a codec.
  sqlite3_stmt* q = nullptr;
  ASSERT_EQ(
      sqlite3_prepare_v2(
          db, "SELECT name FROM sqlite_master WHERE type = 'table' AND name != 'schema_migrations'",
          -1, &q, nullptr),
      SQLITE_OK);
  while (sqlite3_step(q) == SQLITE_ROW) {
    std::string name = reinterpret_cast<const char*>(sqlite3_column_text(q, 0));
    EXPECT_TRUE(tables_seen.contains(name)) << "table " << name << " has no codec";
  }
  sqlite3_finalize(q);
  sqlite3_close(db);
}

// A version-4 file (eval_queue keyed on request_id alone) with a queued row:
// migration 5 copies the table under the (request_id, evaluator_version)
// key and keeps the row.
TEST_F(StoreTest, Version4QueueTableIsRekeyedKeepingItsRows) {
  std::string sql;
  for (const auto& m : detail::migrations()) {
    if (m.version <= 4) sql += std::string(m.sql);
  }
  sql += R"sql(
    CREATE TABLE schema_migrations (version INTEGER PRIMARY KEY, applied_at REAL NOT NULL);
    INSERT INTO schema_migrations VALUES (1, 1.0), (2, 2.0), (3, 3.0), (4, 4.0);
    PRAGMA user_version = 4;
    INSERT INTO eval_queue VALUES ('kernel|e-1|abc', 'c-1', 'v1', '{}', 'done', 'w', 1, 1, 0, '{"r":1}',
                                   1.0, 2.0, 3.0);
  )sql";
  raw_exec(sql);
  {
    auto store = open();
    ASSERT_TRUE(store);
    EXPECT_EQ(store->schema_version().value(), k_schema_version);
  }
  EXPECT_EQ(raw_count("SELECT count(*) FROM eval_queue WHERE request_id = 'kernel|e-1|abc' AND "
                      "evaluator_version = 'v1' AND result_json = '{\"r\":1}' AND finished_at = 3"),
            1);
  // The same request id under another version is another row now.
  raw_exec(
      "INSERT INTO eval_queue VALUES ('kernel|e-1|abc', 'c-1', 'v2', '{}', 'queued', '', 0, 0, 0, "
      "'', 4.0, 0, 0);");
  EXPECT_EQ(raw_count("SELECT count(*) FROM eval_queue"), 2);
  EXPECT_EQ(raw_count("SELECT count(*) FROM sqlite_master WHERE name = 'eval_queue_ready'"), 1);
}

// PostgreSQL's migrations are SQLite's in PostgreSQL's words (schema.cpp):
// numbered alike, no SQLite type name left, the events rowid an identity
// column, and the pieces the migrations share filled in for both dialects.
TEST(StoreSchema, PostgresMigrationsAreSqlitesInPostgresWords) {
  auto sqlite = detail::migrations();
  auto pg = detail::pg_migrations();
  ASSERT_EQ(sqlite.size(), pg.size());
  const std::regex sqlite_type(R"(\b(INTEGER|REAL)\b)");
  for (std::size_t i = 0; i < pg.size(); ++i) {
    EXPECT_EQ(pg[i].version, sqlite[i].version);
    std::string text(pg[i].sql);
    EXPECT_FALSE(std::regex_search(text, sqlite_type)) << "migration " << pg[i].version;
    EXPECT_EQ(text.find("{eval_queue_columns}"), std::string::npos);
    EXPECT_EQ(std::string(sqlite[i].sql).find("{eval_queue_columns}"), std::string::npos);
  }
  EXPECT_NE(std::string(pg[0].sql).find("id          BIGINT GENERATED BY DEFAULT AS IDENTITY"),
            std::string::npos);
}

// A database written by an earlier korch (the shipped migrations applied by
// hand, rows inserted by plain SQL that names its columns, not through the
// codecs) opens, and every row type reads back as written.
// The file is what version 2 wrote; opening it applies the later migrations.
TEST_F(StoreTest, DatabaseWrittenWithTheShippedSchemaOpensAndReads) {
  std::string sql;
  for (const auto& m : detail::migrations()) {
    if (m.version <= 2) sql += std::string(m.sql);
  }
  sql += R"sql(
    CREATE TABLE schema_migrations (version INTEGER PRIMARY KEY, applied_at REAL NOT NULL);
    INSERT INTO schema_migrations VALUES (1, 1.0), (2, 2.0);
    PRAGMA user_version = 2;
    INSERT INTO campaigns (name, id, secret_seed, created_at, config_json)
      VALUES ('camp c-1', 'c-1', -81985529216486896, 1000.5, '{"turns":5}');
    INSERT INTO tasks (task_id, campaign_id, level, number, name, path, source)
      VALUES ('L1/1', 'c-1', 1, 7, 'matmul', '/tasks/1_matmul.py', 'class Model: pass' || char(10));
    INSERT INTO episodes (id, campaign_id, task_id, model_id, sample_index, status, active_s, tokens_used,
                          cost_usd, created_at, updated_at)
      VALUES ('e-1', 'c-1', 'L1/1', 'm-a', 3, 'running', 12.5, 4242, 0.25, 1.0, 2.0);
    INSERT INTO episode_prompts (system_prompt, episode_id) VALUES ('You write kernels.' || char(10), 'e-1');
    INSERT INTO messages (episode_id, epoch, seq, role, kind, turn, content)
      VALUES ('e-1', 0, 1, 'assistant', 'reply', 1, 'msg 0/1');
    INSERT INTO turns (episode_id, turn, model_id, llm_request_id, action, parse_status, code, code_sha,
                       eval_request_id, eval_status, finish_reason, prompt_tokens, completion_tokens,
                       llm_latency_s, at)
      VALUES ('e-1', 1, 'm-a', 'llm|e-1|1', 'check', 'code', 'def f(): pass', 'abc123', 'check|e-1|1',
              'correct', 'stop', 1001, 201, 3.25, 2001.0);
    INSERT INTO llm_calls (request_id, episode_id, turn, model_id, state, started_at, finished_at, content,
                           reasoning, finish_reason, prompt_tokens, completion_tokens, cached_tokens,
                           reasoning_tokens, cost_usd, latency_s, http_attempts, attempts_json,
                           provider_request_id, failure, error, dup_possible, sends)
      VALUES ('llm|e-1|1', 'e-1', 1, 'm-a', 'done', 11.0, 21.0, 'reply 1', 'thinking', 'stop', 100, 50, 10, 5,
              0.125, 1.5, 2, '[{"status":429,"error":"","latency_s":0.1}]', 'prov-1', '', '', 1, 2);
    INSERT INTO evaluations (request_id, episode_id, kind, code_sha, state, owner, attempts, verdict,
                             report_json, evaluator_version, created_at, finished_at, failures)
      VALUES ('check|e-1|1|abc', 'e-1', 'submit', 'abc123', 'done', 'host:1234', 1, 'correct', '{"ok":true}',
              'ev-1', 30.0, 31.0, 0);
    INSERT INTO events (episode_id, turn, kind, detail, at) VALUES ('e-1', 1, 'compaction', 'rebuilt', 5.5);
  )sql";
  raw_exec(sql);

  ASSERT_EQ(raw_count("SELECT count(*) FROM sqlite_master WHERE name = 'evaluations_by_state'"), 1);
  auto store = open();
  ASSERT_TRUE(store);
  EXPECT_EQ(store->schema_version().value(), k_schema_version);
  // Migration 3 dropped the index that no query used.
  EXPECT_EQ(raw_count("SELECT count(*) FROM sqlite_master WHERE name = 'evaluations_by_state'"), 0);
  EXPECT_EQ(store->get_campaign("c-1").value(), campaign());
  EXPECT_EQ(store->list_tasks("c-1").value(), std::vector<TaskRow>{task()});
  auto snap = store->load_episode("e-1").value();
  ASSERT_TRUE(snap);
  EXPECT_EQ(snap->episode, episode("e-1"));
  EXPECT_EQ(snap->messages, std::vector<MessageRow>{message("e-1", 0, 1)});
  EXPECT_EQ(snap->turns, std::vector<TurnRow>{turn("e-1", 1)});
  EXPECT_EQ(snap->llm_calls, std::vector<LlmCallRow>{llm_call("e-1", 1)});
  EXPECT_EQ(snap->evaluations, std::vector<EvaluationRow>{evaluation("e-1", "check|e-1|1|abc",
                                                                     EvalState::done, "correct")});
  EXPECT_EQ(
      snap->events,
      (std::vector<EventRow>{
          {.episode_id = "e-1", .turn = 1, .kind = "compaction", .detail = "rebuilt", .at = 5.5}}));

  // And it takes new rows next to the old ones.
  WriteBatch b;
  b.put(turn("e-1", 2));
  b.put(final_row("e-1"));
  ASSERT_TRUE(store->commit_sync(std::move(b)).has_value());
  EXPECT_EQ(store->list_turns("c-1").value(),
            (std::vector<TurnRow>{turn("e-1", 1), turn("e-1", 2)}));
  EXPECT_EQ(store->list_finals("c-1").value(), std::vector<FinalRow>{final_row("e-1")});
  EXPECT_EQ(store->list_episodes("c-1").value().at(0).status, EpisodeStatus::final);
}

TEST_P(BackendTest, FinalWithoutSpeedupRoundTripsAsNull) {
  auto store = open();
  seed(*store, {"e-1"});
  WriteBatch b;
  FinalRow f = final_row("e-1", EndReason::no_submission);
  f.speedup.reset();
  f.correct = false;
  b.put(f);
  ASSERT_TRUE(store->commit_sync(std::move(b)).has_value());
  EXPECT_EQ(store->list_finals("c-1").value(), std::vector<FinalRow>{f});
}

TEST_P(BackendTest, DataSurvivesReopenAndMigrationRunsOnce) {
  {
    auto store = open();
    seed(*store, {"e-1"});
  }
  auto store = open();
  EXPECT_EQ(store->list_episodes("c-1").value().size(), 1u);
  EXPECT_EQ(store->schema_version().value(), k_schema_version);
  store.reset();
  EXPECT_EQ(raw_count("SELECT count(*) FROM schema_migrations"), k_schema_version);
  EXPECT_EQ(raw_count("SELECT max(version) FROM schema_migrations"), k_schema_version);
  if (m_backend == Backend::sqlite) {
    sqlite3* db = nullptr;
    ASSERT_EQ(sqlite3_open(m_path.c_str(), &db), SQLITE_OK);
    sqlite3_stmt* q = nullptr;
    ASSERT_EQ(sqlite3_prepare_v2(db, "PRAGMA journal_mode", -1, &q, nullptr), SQLITE_OK);
    ASSERT_EQ(sqlite3_step(q), SQLITE_ROW);
    EXPECT_STREQ(reinterpret_cast<const char*>(sqlite3_column_text(q, 0)), "wal");
    sqlite3_finalize(q);
    sqlite3_close(db);
  }
}

TEST_P(BackendTest, EpisodeUpdateIsPartial) {
  auto store = open();
  seed(*store, {"e-1"});
  WriteBatch b;
  b.update(EpisodeUpdate{.id = "e-1", .tokens_used = 9999});
  ASSERT_TRUE(store->commit_sync(std::move(b)).has_value());
  auto e = store->list_episodes("c-1").value().at(0);
  EXPECT_EQ(e.tokens_used, 9999);
  EXPECT_EQ(e.status, EpisodeStatus::running);
  EXPECT_DOUBLE_EQ(e.active_s, 12.5);
  EXPECT_DOUBLE_EQ(e.cost_usd, 0.25);
  EXPECT_GT(e.updated_at, 1e9);  // stamped with the wall clock

  WriteBatch b2;
  b2.update(EpisodeUpdate{
      .id = "e-1", .status = EpisodeStatus::pending, .active_s = 1.0, .cost_usd = 2.0});
  ASSERT_TRUE(store->commit_sync(std::move(b2)).has_value());
  e = store->list_episodes("c-1").value().at(0);
  EXPECT_EQ(e.status, EpisodeStatus::pending);
  EXPECT_DOUBLE_EQ(e.active_s, 1.0);
  EXPECT_DOUBLE_EQ(e.cost_usd, 2.0);
  EXPECT_EQ(e.tokens_used, 9999);
}

TEST_P(BackendTest, EpisodeUpdateOfUnknownEpisodeFailsTheBatch) {
  auto store = open();
  seed(*store, {"e-1"});
  WriteBatch b;
  b.put(turn("e-1", 1));
  b.update(EpisodeUpdate{.id = "nope", .status = EpisodeStatus::running});
  auto r = store->commit_sync(std::move(b));
  ASSERT_FALSE(r.has_value());
  EXPECT_NE(r.error().message.find("nope"), std::string::npos) << r.error().message;
  EXPECT_TRUE(store->list_turns("c-1").value().empty());  // nothing of the batch was written
}

TEST_P(BackendTest, FinalEpisodeStatusIsSticky) {
  auto store = open();
  seed(*store, {"e-1"});
  WriteBatch b;
  b.put(final_row("e-1"));
  ASSERT_TRUE(store->commit_sync(std::move(b)).has_value());
  WriteBatch b2;
  b2.update(EpisodeUpdate{.id = "e-1", .status = EpisodeStatus::running, .active_s = 7.0});
  auto info = store->commit_sync(std::move(b2));
  ASSERT_TRUE(info.has_value());
  ASSERT_EQ(info->conflicts.size(), 1u);
  auto e = store->list_episodes("c-1").value().at(0);
  EXPECT_EQ(e.status, EpisodeStatus::final);
  EXPECT_DOUBLE_EQ(e.active_s, 7.0);
}

// The status half of an EpisodeUpdate: the same status again is no
// conflict, "final" through an update is kept. (A status outside the
// vocabulary no longer compiles: EpisodeUpdate::status is an enum.)
TEST_P(BackendTest, EpisodeUpdateStatusSameAndFinal) {
  auto store = open();
  seed(*store, {"e-1"});
  WriteBatch b;
  b.update(EpisodeUpdate{.id = "e-1", .status = EpisodeStatus::running, .tokens_used = 1});
  auto same = store->commit_sync(std::move(b));
  ASSERT_TRUE(same.has_value()) << same.error().message;
  EXPECT_TRUE(same->conflicts.empty());
  EXPECT_EQ(store->list_episodes("c-1").value().at(0).tokens_used, 1);

  WriteBatch fin;
  fin.update(EpisodeUpdate{.id = "e-1", .status = EpisodeStatus::final});
  ASSERT_TRUE(store->commit_sync(std::move(fin)).value().conflicts.empty());
  WriteBatch again;
  again.update(EpisodeUpdate{.id = "e-1", .status = EpisodeStatus::final});
  ASSERT_TRUE(store->commit_sync(std::move(again)).value().conflicts.empty());
  EXPECT_EQ(store->list_episodes("c-1").value().at(0).status, EpisodeStatus::final);
}

// Enum columns are spelt by their names (store/vocabulary.hpp) and read back
// into the enums; a word this binary does not know (a newer korch, a hand
// edit) is a read error naming the column's choices, not a silent default.
TEST_P(BackendTest, EnumColumnsRoundTripAndUnknownWordsAreReadErrors) {
  auto store = open();
  seed(*store, {"e-1"});
  WriteBatch b;
  b.put(message("e-1", 0, 1));  // assistant / reply
  b.put(final_row("e-1", EndReason::fallback));
  ASSERT_TRUE(store->commit_sync(std::move(b)).has_value());
  EXPECT_EQ(raw_count("SELECT COUNT(*) FROM messages WHERE role = 'assistant' AND kind = 'reply'"),
            1);
  EXPECT_EQ(raw_count("SELECT COUNT(*) FROM finals WHERE reason = 'fallback'"), 1);
  auto snap = store->load_episode("e-1").value();
  ASSERT_TRUE(snap && snap->final);
  EXPECT_EQ(snap->messages.at(0).role, Role::assistant);
  EXPECT_EQ(snap->messages.at(0).kind, MessageKind::reply);
  EXPECT_EQ(snap->final->reason, EndReason::fallback);
  EXPECT_EQ(snap->episode.status, EpisodeStatus::final);

  raw_exec("UPDATE messages SET kind = 'haiku' WHERE episode_id = 'e-1'");
  auto bad = store->load_episode("e-1");
  ASSERT_FALSE(bad.has_value());
  EXPECT_NE(bad.error().message.find("\"haiku\", not one of \"system\""), std::string::npos)
      << bad.error().message;
}

// --- conflict rules ------------------------------------------------------------

TEST_P(BackendTest, TurnConflictIsReportedAndStoredRowWins) {
  auto store = open();
  seed(*store, {"e-1"});
  WriteBatch b;
  b.put(turn("e-1", 3, "first"));
  auto first = store->commit_sync(std::move(b));
  ASSERT_TRUE(first.has_value());
  EXPECT_TRUE(first->conflicts.empty());

  WriteBatch again;
  again.put(turn("e-1", 3, "second"));
  again.put(message("e-1", 0, 0));  // the rest of the batch still commits
  auto second = store->commit_sync(std::move(again));
  ASSERT_TRUE(second.has_value()) << second.error().message;
  ASSERT_EQ(second->conflicts.size(), 1u);
  EXPECT_NE(second->conflicts[0].find("turn e-1:3"), std::string::npos) << second->conflicts[0];

  auto turns = store->list_turns("c-1").value();
  ASSERT_EQ(turns.size(), 1u);
  EXPECT_EQ(turns[0].code, "first");
  EXPECT_EQ(store->load_episode("e-1").value()->messages.size(), 1u);
}

TEST_P(BackendTest, DoneEvaluationIsNeverOverwritten) {
  auto store = open();
  seed(*store, {"e-1"});
  const std::string id = "kernel|e-1|abc";
  for (EvalState state : {EvalState::queued, EvalState::running}) {
    WriteBatch b;
    b.put(evaluation("e-1", id, state));
    auto r = store->commit_sync(std::move(b));
    ASSERT_TRUE(r && r->conflicts.empty());
    EXPECT_EQ(store->get_evaluation(id).value()->state, state);
  }
  WriteBatch done;
  done.put(evaluation("e-1", id, EvalState::done, "correct"));
  ASSERT_TRUE(store->commit_sync(std::move(done)).value().conflicts.empty());

  for (EvalState state : {EvalState::running, EvalState::done}) {
    WriteBatch b;
    auto row = evaluation("e-1", id, state, "incorrect");
    row.attempts = 5;
    b.put(row);
    auto r = store->commit_sync(std::move(b));
    ASSERT_TRUE(r.has_value());
    ASSERT_EQ(r->conflicts.size(), 1u);
    auto stored = store->get_evaluation(id).value();
    EXPECT_EQ(stored->state, EvalState::done);
    EXPECT_EQ(stored->verdict, "correct");
    EXPECT_EQ(stored->attempts, 1);
  }
}

TEST_P(BackendTest, DoneLlmCallIsNeverOverwritten) {
  auto store = open();
  seed(*store, {"e-1"});
  WriteBatch started;
  started.put(llm_call("e-1", 1, CallState::started));
  ASSERT_TRUE(store->commit_sync(std::move(started)).has_value());

  auto resent = llm_call("e-1", 1, CallState::started);
  resent.sends = 3;
  WriteBatch b;
  b.put(resent);
  ASSERT_TRUE(store->commit_sync(std::move(b)).value().conflicts.empty());
  EXPECT_EQ(store->get_llm_call(resent.request_id).value()->sends, 3);

  auto done = llm_call("e-1", 1, CallState::done);
  WriteBatch b2;
  b2.put(done);
  ASSERT_TRUE(store->commit_sync(std::move(b2)).value().conflicts.empty());

  auto late = llm_call("e-1", 1, CallState::failed);
  late.content = "other";
  WriteBatch b3;
  b3.put(late);
  auto r = store->commit_sync(std::move(b3));
  ASSERT_TRUE(r.has_value());
  EXPECT_EQ(r->conflicts.size(), 1u);
  EXPECT_EQ(store->get_llm_call(done.request_id).value(), done);
}

// A request id names its episode (and, for a call, its turn): a later put
// updates the row's outcome but keeps where it belongs.
TEST_P(BackendTest, RequestKeepsTheEpisodeOfItsFirstPut) {
  auto store = open();
  seed(*store, {"e-1", "e-2"});
  WriteBatch first;
  first.put(llm_call("e-1", 1, CallState::started));
  first.put(evaluation("e-1", "check|e-1|1|abc", EvalState::running));
  ASSERT_TRUE(store->commit_sync(std::move(first)).has_value());

  auto call = llm_call("e-2", 4, CallState::done);
  call.request_id = llm_call("e-1", 1).request_id;
  auto eval = evaluation("e-2", "check|e-1|1|abc", EvalState::done, "correct");
  WriteBatch later;
  later.put(call);
  later.put(eval);
  ASSERT_TRUE(store->commit_sync(std::move(later)).value().conflicts.empty());

  auto stored_call = store->get_llm_call(call.request_id).value();
  ASSERT_TRUE(stored_call);
  EXPECT_EQ(stored_call->state, CallState::done);
  EXPECT_EQ(stored_call->episode_id, "e-1");
  EXPECT_EQ(stored_call->turn, 1);
  auto stored_eval = store->get_evaluation(eval.request_id).value();
  ASSERT_TRUE(stored_eval);
  EXPECT_EQ(stored_eval->verdict, "correct");
  EXPECT_EQ(stored_eval->episode_id, "e-1");
}

// A call that may have reached the server twice stays marked through its
// result write (which carries no flag of its own) and any later write.
TEST_P(BackendTest, DupPossibleIsStickyThroughLaterWrites) {
  auto store = open();
  seed(*store, {"e-1"});
  auto resent = llm_call("e-1", 1, CallState::started);
  resent.dup_possible = true;
  WriteBatch b;
  b.put(resent);
  ASSERT_TRUE(store->commit_sync(std::move(b)).has_value());

  auto done = llm_call("e-1", 1, CallState::done);
  done.dup_possible = false;
  WriteBatch b2;
  b2.put(done);
  ASSERT_TRUE(store->commit_sync(std::move(b2)).value().conflicts.empty());
  auto stored = store->get_llm_call(done.request_id).value();
  ASSERT_TRUE(stored);
  EXPECT_EQ(stored->state, CallState::done);
  EXPECT_TRUE(stored->dup_possible);
  EXPECT_EQ(store->list_llm_calls("c-1").value().at(0).dup_possible, true);

  // A call sent once is not marked.
  auto once = llm_call("e-1", 2, CallState::started);
  once.dup_possible = false;
  auto once_done = llm_call("e-1", 2, CallState::done);
  once_done.dup_possible = false;
  WriteBatch b3;
  b3.put(once);
  b3.put(once_done);
  ASSERT_TRUE(store->commit_sync(std::move(b3)).has_value());
  EXPECT_FALSE(store->get_llm_call(once.request_id).value()->dup_possible);
}

TEST_P(BackendTest, EvaluationCountsStartsAndObservedFailuresApart) {
  auto store = open();
  seed(*store, {"e-1"});
  auto row = evaluation("e-1", "kernel|e-1|abc", EvalState::running);
  row.attempts = 4;
  row.failures = 1;
  WriteBatch b;
  b.put(row);
  ASSERT_TRUE(store->commit_sync(std::move(b)).has_value());
  auto stored = store->get_evaluation(row.request_id).value();
  ASSERT_TRUE(stored);
  EXPECT_EQ(*stored, row);
  auto snap = store->load_episode("e-1").value();
  ASSERT_TRUE(snap);
  ASSERT_EQ(snap->evaluations.size(), 1u);
  EXPECT_EQ(snap->evaluations[0].failures, 1);
  EXPECT_EQ(snap->evaluations[0].attempts, 4);
}

// A version-1 database (attempts counted every start, interrupted ones
// included) migrates with failures = 0: interruptions no longer count.
TEST_P(BackendTest, Version1DatabaseMigratesWithNoCountedFailures) {
  {
    auto store = open();
    seed(*store, {"e-1"});
    WriteBatch b;
    auto row = evaluation("e-1", "kernel|e-1|abc", EvalState::running);
    row.attempts = 2;
    b.put(row);
    ASSERT_TRUE(store->commit_sync(std::move(b)).has_value());
  }
  // Turn the file back into what version 1 wrote.
  raw_exec(
      "ALTER TABLE evaluations DROP COLUMN failures; DROP TABLE eval_queue; DROP TABLE workers; "
      "DROP TABLE campaign_devices; DROP TABLE verdict_cards; "
      "DELETE FROM schema_migrations WHERE version > 1;" +
      std::string(m_backend == Backend::sqlite ? " PRAGMA user_version = 1;" : ""));
  auto store = open();
  EXPECT_EQ(store->schema_version().value(), k_schema_version);
  auto stored = store->get_evaluation("kernel|e-1|abc").value();
  ASSERT_TRUE(stored);
  EXPECT_EQ(stored->attempts, 2);
  EXPECT_EQ(stored->failures, 0);
}

TEST_P(BackendTest, FirstFinalWins) {
  auto store = open();
  seed(*store, {"e-1"});
  WriteBatch b;
  b.put(final_row("e-1", EndReason::submitted));
  ASSERT_TRUE(store->commit_sync(std::move(b)).has_value());
  WriteBatch b2;
  b2.put(final_row("e-1", EndReason::wall_clock));
  auto r = store->commit_sync(std::move(b2));
  ASSERT_TRUE(r.has_value());
  EXPECT_EQ(r->conflicts.size(), 1u);
  EXPECT_EQ(store->list_finals("c-1").value().at(0).reason, EndReason::submitted);
}

TEST_P(BackendTest, InsertIfAbsentNeverOverwritesCampaignTaskEpisode) {
  auto store = open();
  seed(*store, {"e-1"});
  WriteBatch b;
  auto c = campaign();
  c.name = "renamed";
  auto t = task();
  t.source = "changed";
  auto e = episode("e-1");
  e.system_prompt = "changed";
  b.put(c);
  b.put(t);
  b.put(e);
  ASSERT_TRUE(store->commit_sync(std::move(b)).has_value());
  EXPECT_EQ(store->get_campaign("c-1").value()->name, campaign().name);
  EXPECT_EQ(store->list_tasks("c-1").value().at(0).source, task().source);
  EXPECT_EQ(store->load_episode("e-1").value()->episode.system_prompt,
            episode("e-1").system_prompt);
}

// list_episodes returns summaries: its row type has no system prompt field,
// and the query does not touch the prompts' table (with that table gone, the
// listing still works while a full read of one episode fails).
template <typename T>
concept HasSystemPrompt = requires(const T& row) {
  row.system_prompt;
};
static_assert(!HasSystemPrompt<EpisodeSummary>);
static_assert(HasSystemPrompt<EpisodeRow>);
static_assert(std::is_same_v<decltype(std::declval<Store&>().list_episodes("")),
                             Result<std::vector<EpisodeSummary>>>);

TEST_P(BackendTest, ListEpisodesReadsNoSystemPrompt) {
  {
    auto store = open();
    WriteBatch b;
    b.put(campaign());
    b.put(task());
    for (int i = 0; i < 3; ++i) {
      EpisodeRow e = episode("e-" + std::to_string(i), "c-1", 1.0 + i);
      e.system_prompt = std::string(64 * 1024, 'p');
      b.put(e);
    }
    ASSERT_TRUE(store->commit_sync(std::move(b)).has_value());
    ASSERT_EQ(store->load_episode("e-0").value()->episode.system_prompt.size(), 64u * 1024);
  }
  raw_exec("ALTER TABLE episode_prompts RENAME TO episode_prompts_hidden");
  auto store = open(Options{.read_only = true});  // a writer would prepare its inserts
  auto listed = store->list_episodes("c-1");
  ASSERT_TRUE(listed.has_value()) << listed.error().message;
  ASSERT_EQ(listed->size(), 3u);
  for (int i = 0; i < 3; ++i) {
    EXPECT_EQ(listed->at(static_cast<std::size_t>(i)),
              summary(episode("e-" + std::to_string(i), "c-1", 1.0 + i)));
  }
  // The control: a full read needs the prompts' table.
  auto full = store->load_episode("e-0");
  ASSERT_FALSE(full.has_value());
  EXPECT_NE(full.error().message.find("episode_prompts"), std::string::npos)
      << full.error().message;
}

TEST_P(BackendTest, MessagesUseTheLiveEpochAndIgnoreDuplicates) {
  auto store = open();
  seed(*store, {"e-1"});
  WriteBatch b;
  for (int seq : {2, 0, 1}) b.put(message("e-1", 0, seq));
  b.put(message("e-1", 1, 1));
  b.put(message("e-1", 1, 0));
  b.put(message("e-1", 1, 0, "duplicate, ignored"));
  auto r = store->commit_sync(std::move(b));
  ASSERT_TRUE(r.has_value()) << r.error().message;
  EXPECT_TRUE(r->conflicts.empty());  // message duplicates are silent

  auto snap = store->load_episode("e-1").value();
  ASSERT_TRUE(snap.has_value());
  EXPECT_EQ(snap->epoch, 1);
  EXPECT_EQ(snap->messages, (std::vector<MessageRow>{message("e-1", 1, 0), message("e-1", 1, 1)}));

  auto unfinished = store->load_unfinished("c-1").value();
  ASSERT_EQ(unfinished.size(), 1u);
  EXPECT_EQ(unfinished[0].epoch, 1);
  EXPECT_EQ(unfinished[0].messages, snap->messages);
}

// --- open errors -----------------------------------------------------------------

TEST_F(StoreTest, NewerUserVersionIsRefused) {
  { auto store = open(); }
  raw_exec("PRAGMA user_version = 99");
  auto r = Store::open(Options{.path = m_path});
  ASSERT_FALSE(r.has_value());
  const auto& msg = r.error().message;
  EXPECT_NE(msg.find("newer"), std::string::npos) << msg;
  EXPECT_NE(msg.find("99"), std::string::npos) << msg;
  EXPECT_NE(msg.find(m_path), std::string::npos) << msg;
  EXPECT_EQ(msg.find('\n'), std::string::npos);
  // Nothing was rewritten.
  r = Store::open(Options{.path = m_path, .read_only = true});
  ASSERT_FALSE(r.has_value());
  EXPECT_NE(r.error().message.find("newer"), std::string::npos);
}

TEST_P(BackendTest, NewerMigrationRowIsRefused) {
  { auto store = open(); }
  raw_exec("INSERT INTO schema_migrations (version, applied_at) VALUES (99, 0)");
  auto r = Store::open(Options{.path = m_location});
  ASSERT_FALSE(r.has_value());
  EXPECT_NE(r.error().message.find("newer"), std::string::npos) << r.error().message;
}

TEST_F(StoreTest, GarbageFileIsRefused) {
  {
    std::ofstream out(m_path, std::ios::binary);
    for (int i = 0; i < 500; ++i) out << "this is certainly not an SQLite database\n";
  }
  auto r = Store::open(Options{.path = m_path});
  ASSERT_FALSE(r.has_value());
  const auto& msg = r.error().message;
  EXPECT_NE(msg.find(m_path), std::string::npos) << msg;
  EXPECT_NE(msg.find("not a SQLite database"), std::string::npos) << msg;
  EXPECT_EQ(msg.find('\n'), std::string::npos);
  auto ro = Store::open(Options{.path = m_path, .read_only = true});
  ASSERT_FALSE(ro.has_value());
  EXPECT_NE(ro.error().message.find("not a SQLite database"), std::string::npos)
      << ro.error().message;
}

TEST_F(StoreTest, ReadOnlyFileIsRefusedForWritingButOpensReadOnly) {
  {
    auto store = open();
    seed(*store, {"e-1"});
  }
  ASSERT_EQ(::chmod(m_path.c_str(), 0444), 0);
  auto r = Store::open(Options{.path = m_path});
  ASSERT_FALSE(r.has_value());
  EXPECT_NE(r.error().message.find("read-only"), std::string::npos) << r.error().message;
  EXPECT_NE(r.error().message.find(m_path), std::string::npos) << r.error().message;

  auto ro = open(Options{.path = m_path, .read_only = true});
  ASSERT_NE(ro, nullptr);
  EXPECT_EQ(ro->list_episodes("c-1").value().size(), 1u);
  EXPECT_EQ(ro->counts("c-1").value().episodes, 1);
  WriteBatch b;
  b.put(turn("e-1", 1));
  auto w = ro->commit_sync(std::move(b));
  ASSERT_FALSE(w.has_value());
  EXPECT_NE(w.error().message.find("read-only"), std::string::npos) << w.error().message;
  EXPECT_FALSE(ro->acquire_lease("c-1", "me", 10).has_value());
}

TEST_F(StoreTest, ReadOnlyOpenOfMissingFileFails) {
  auto r = Store::open(Options{.path = m_path, .read_only = true});
  ASSERT_FALSE(r.has_value());
  EXPECT_FALSE(fs::exists(m_path));
}

TEST_P(BackendTest, BadSynchronousIsRefused) {
  auto r = Store::open(Options{.path = m_location, .synchronous = "SOMETIMES"});
  ASSERT_FALSE(r.has_value());
  EXPECT_NE(r.error().message.find("synchronous"), std::string::npos);
  EXPECT_TRUE(Store::open(Options{.path = m_location, .synchronous = "normal"}).has_value());
}

// --- writer thread -------------------------------------------------------------

TEST_P(BackendTest, GroupCommitOf10000BatchesFrom8Threads) {
  auto store = open();
  constexpr int k_threads = 8;
  constexpr int k_per_thread = 1250;
  std::vector<std::string> eps;
  for (int t = 0; t < k_threads; ++t) eps.push_back("e-" + std::to_string(t));
  seed(*store, eps);

  std::atomic<int> ok{0}, failed{0}, done{0};
  std::mutex mutex;
  std::condition_variable cv;
  std::atomic<bool> stop_reader{false};
  std::atomic<int> reads{0};
  // Reads run concurrently with the writer on their own connections.
  std::thread reader([&] {
    while (!stop_reader) {
      auto c = store->counts("c-1");
      ASSERT_TRUE(c.has_value()) << c.error().message;
      ++reads;
    }
  });
  std::vector<std::thread> producers;
  for (int t = 0; t < k_threads; ++t) {
    producers.emplace_back([&, t] {
      for (int i = 1; i <= k_per_thread; ++i) {
        WriteBatch b;
        b.put(turn(eps[t], i));
        b.put(message(eps[t], 0, i));
        b.update(EpisodeUpdate{.id = eps[t], .tokens_used = i});
        store->commit(std::move(b), [&](Result<CommitInfo> r) {
          (r && r->conflicts.empty() ? ok : failed)++;
          if (++done == k_threads * k_per_thread) {
            std::lock_guard lock(mutex);
            cv.notify_all();
          }
        });
      }
    });
  }
  for (auto& p : producers) p.join();
  {
    std::unique_lock lock(mutex);
    ASSERT_TRUE(cv.wait_for(lock, std::chrono::seconds(120),
                            [&] { return done == k_threads * k_per_thread; }));
  }
  stop_reader = true;
  reader.join();
  EXPECT_EQ(ok, k_threads * k_per_thread);
  EXPECT_EQ(failed, 0);
  EXPECT_GT(reads, 0);
  auto counts = store->counts("c-1").value();
  EXPECT_EQ(counts.turns, k_threads * k_per_thread);
  auto snaps = store->load_unfinished("c-1").value();
  ASSERT_EQ(snaps.size(), static_cast<std::size_t>(k_threads));
  for (const auto& s : snaps) {
    EXPECT_EQ(s.turns.size(), static_cast<std::size_t>(k_per_thread));
    EXPECT_EQ(s.messages.size(), static_cast<std::size_t>(k_per_thread));
    EXPECT_EQ(s.episode.tokens_used, k_per_thread);  // updates applied in submission order
  }
}

TEST_P(BackendTest, CallbackRunsOnlyAfterCommit) {
  auto store = open();
  seed(*store, {"e-1"});
  constexpr int k_batches = 200;
  std::atomic<int> visible{0}, done{0};
  std::mutex mutex;
  std::condition_variable cv;
  for (int i = 1; i <= k_batches; ++i) {
    WriteBatch b;
    b.put(turn("e-1", i));
    store->commit(std::move(b), [&, i](Result<CommitInfo> r) {
      EXPECT_TRUE(r.has_value());
      // A separate raw connection must already see the row.
      if (raw_count("SELECT count(*) FROM turns WHERE episode_id = 'e-1' AND turn = " +
                    std::to_string(i)) == 1)
        ++visible;
      // And so must the store's own read path.
      auto turns = store->list_turns("c-1");
      EXPECT_TRUE(turns.has_value() && static_cast<int>(turns->size()) >= i);
      if (++done == k_batches) {
        std::lock_guard lock(mutex);
        cv.notify_all();
      }
    });
  }
  std::unique_lock lock(mutex);
  ASSERT_TRUE(cv.wait_for(lock, std::chrono::seconds(60), [&] { return done == k_batches; }));
  EXPECT_EQ(visible, k_batches);
}

TEST_P(BackendTest, BadBatchFailsAloneInItsGroup) {
  auto store = open();
  seed(*store, {"e-1"});
  constexpr int k_batches = 300;
  constexpr int k_bad = 150;
  std::vector<std::optional<Result<CommitInfo>>> results(k_batches + 1);
  std::atomic<int> done{0};
  std::mutex mutex;
  std::condition_variable cv;
  for (int i = 1; i <= k_batches; ++i) {
    WriteBatch b;
    b.put(turn(i == k_bad ? "no-such-episode" : "e-1", i));  // foreign key violation
    store->commit(std::move(b), [&, i](Result<CommitInfo> r) {
      results[i] = std::move(r);
      if (++done == k_batches) {
        std::lock_guard lock(mutex);
        cv.notify_all();
      }
    });
  }
  {
    std::unique_lock lock(mutex);
    ASSERT_TRUE(cv.wait_for(lock, std::chrono::seconds(60), [&] { return done == k_batches; }));
  }
  for (int i = 1; i <= k_batches; ++i) {
    ASSERT_TRUE(results[i].has_value());
    EXPECT_EQ(results[i]->has_value(), i != k_bad) << i;
  }
  EXPECT_EQ(store->counts("c-1").value().turns, k_batches - 1);
}

// Callbacks run on the syncer thread with FULL and on the writer thread
// otherwise: both may commit again from inside a callback, and close().
TEST_P(BackendTest, CommitSyncFromInsideACallbackWorks) {
  for (std::string sync : {"FULL", "NORMAL", "EXTRA"}) {
    SCOPED_TRACE(sync);
    fresh();
    auto store = open(Options{.synchronous = sync});
    seed(*store, {"e-1"});
    std::promise<bool> nested;
    WriteBatch b;
    b.put(turn("e-1", 1));
    store->commit(std::move(b), [&](Result<CommitInfo>) {
      WriteBatch inner;
      inner.put(turn("e-1", 2));
      nested.set_value(store->commit_sync(std::move(inner)).has_value());
    });
    EXPECT_TRUE(nested.get_future().get());
    EXPECT_EQ(store->list_turns("c-1").value().size(), 2u);
  }
}

TEST_P(BackendTest, CloseFromInsideACallbackDrainsTheQueue) {
  for (std::string sync : {"FULL", "NORMAL"}) {
    SCOPED_TRACE(sync);
    fresh();
    auto store = open(Options{.synchronous = sync});
    seed(*store, {"e-1"});
    std::atomic<int> ok{0};
    std::promise<void> submitted;  // all 50 queued before the first callback closes
    auto all_queued = submitted.get_future().share();
    std::promise<void> closed;
    for (int i = 1; i <= 50; ++i) {
      WriteBatch b;
      b.put(turn("e-1", i));
      store->commit(std::move(b), [&, i](Result<CommitInfo> r) {
        ok += r.has_value();
        if (i == 1) {
          all_queued.wait();
          store->close();
          closed.set_value();
        }
      });
    }
    submitted.set_value();
    closed.get_future().get();
    store->close();
    EXPECT_EQ(ok, 50);
    EXPECT_EQ(store->counts("c-1").value().turns, 50);
    store.reset();
  }
}

TEST_P(BackendTest, CloseDrainsAndLaterCommitsFail) {
  auto store = open();
  seed(*store, {"e-1"});
  std::atomic<int> ok{0};
  for (int i = 1; i <= 100; ++i) {
    WriteBatch b;
    b.put(turn("e-1", i));
    store->commit(std::move(b), [&](Result<CommitInfo> r) { ok += r.has_value(); });
  }
  store->close();
  EXPECT_EQ(ok, 100);
  store->close();  // idempotent
  WriteBatch b;
  b.put(turn("e-1", 101));
  auto r = store->commit_sync(std::move(b));
  ASSERT_FALSE(r.has_value());
  EXPECT_NE(r.error().message.find("closed"), std::string::npos);
  EXPECT_EQ(store->counts("c-1").value().turns, 100);  // reads still work
}

TEST_P(BackendTest, ThrowingCallbackDoesNotKillTheWriter) {
  auto store = open();
  seed(*store, {"e-1"});
  WriteBatch b;
  b.put(turn("e-1", 1));
  store->commit(std::move(b), [](Result<CommitInfo>) { throw std::runtime_error("boom"); });
  WriteBatch b2;
  b2.put(turn("e-1", 2));
  EXPECT_TRUE(store->commit_sync(std::move(b2)).has_value());
}

// --- leases --------------------------------------------------------------------

TEST_P(BackendTest, LeaseIsExclusiveAcrossTwoStores) {
  auto a = open();
  auto b = open();
  auto first = a->acquire_lease("c-1", "host:1", 30);
  ASSERT_TRUE(first.has_value()) << first.error().message;
  EXPECT_FALSE(first->has_value());
  EXPECT_FALSE(a->acquire_lease("c-1", "host:1", 30).value().has_value());  // already ours

  auto other = b->acquire_lease("c-1", "host:2", 30);
  ASSERT_TRUE(other.has_value());
  ASSERT_TRUE(other->has_value());
  EXPECT_EQ((*other)->owner, "host:1");
  EXPECT_EQ((*other)->campaign_id, "c-1");
  EXPECT_GT((*other)->expires_at, (*other)->heartbeat_at);

  EXPECT_TRUE(a->heartbeat_lease("c-1", "host:1", 30).has_value());
  auto stolen = b->heartbeat_lease("c-1", "host:2", 30);
  ASSERT_FALSE(stolen.has_value());
  EXPECT_NE(stolen.error().message.find("host:1"), std::string::npos) << stolen.error().message;

  // Another campaign is independent.
  EXPECT_FALSE(b->acquire_lease("c-2", "host:2", 30).value().has_value());

  EXPECT_TRUE(a->release_lease("c-1", "host:1").has_value());
  EXPECT_FALSE(b->acquire_lease("c-1", "host:2", 30).value().has_value());
  EXPECT_TRUE(a->acquire_lease("c-1", "host:1", 30).value().has_value());
}

TEST_P(BackendTest, ExpiredLeaseCanBeTaken) {
  auto a = open();
  auto b = open();
  ASSERT_FALSE(a->acquire_lease("c-1", "host:1", 0.05).value().has_value());
  ASSERT_TRUE(b->acquire_lease("c-1", "host:2", 30).value().has_value());
  std::this_thread::sleep_for(std::chrono::milliseconds(120));
  EXPECT_FALSE(b->acquire_lease("c-1", "host:2", 30).value().has_value());
  EXPECT_FALSE(a->heartbeat_lease("c-1", "host:1", 30).has_value());  // lost
}

TEST_P(BackendTest, ConcurrentLeaseRaceHasOneWinner) {
  constexpr int k_contenders = 6;
  std::vector<std::unique_ptr<Store>> stores;
  for (int i = 0; i < k_contenders; ++i) stores.push_back(open());
  std::atomic<int> winners{0};
  std::vector<std::thread> threads;
  for (int i = 0; i < k_contenders; ++i) {
    threads.emplace_back([&, i] {
      auto r = stores[i]->acquire_lease("c-1", "owner-" + std::to_string(i), 30);
      ASSERT_TRUE(r.has_value()) << r.error().message;
      if (!r->has_value()) ++winners;
    });
  }
  for (auto& t : threads) t.join();
  EXPECT_EQ(winners, 1);
}

// --- resume ----------------------------------------------------------------------

TEST_P(BackendTest, LoadUnfinishedExcludesFinalEpisodes) {
  auto store = open();
  seed(*store, {"e-1", "e-2", "e-3"});
  seed(*store, {"x-1"}, "c-other");
  WriteBatch b;
  for (const char* ep : {"e-1", "e-2", "e-3", "x-1"}) {
    for (int t = 1; t <= 2; ++t) {
      b.put(turn(ep, t));
      b.put(llm_call(ep, t));
      b.put(message(ep, 0, t));
    }
    b.put(evaluation(ep, std::string("check|") + ep, EvalState::done, "correct"));
  }
  b.put(final_row("e-2"));
  ASSERT_TRUE(store->commit_sync(std::move(b)).has_value());

  auto snaps = store->load_unfinished("c-1").value();
  ASSERT_EQ(snaps.size(), 2u);
  EXPECT_EQ(snaps[0].episode.id, "e-1");
  EXPECT_EQ(snaps[1].episode.id, "e-3");
  for (const auto& s : snaps) {
    EXPECT_EQ(s.turns.size(), 2u);
    EXPECT_EQ(s.llm_calls.size(), 2u);
    EXPECT_EQ(s.messages.size(), 2u);
    EXPECT_EQ(s.evaluations.size(), 1u);
    EXPECT_EQ(s.turns[0].episode_id, s.episode.id);
    EXPECT_FALSE(s.final.has_value());
  }
  EXPECT_TRUE(store->load_unfinished("c-none").value().empty());
}

TEST_P(BackendTest, LoadUnfinishedOfManyEpisodesIsFast) {
  auto store = open(Options{.synchronous = "OFF"});
  constexpr int k_episodes = 2000;
  {
    WriteBatch b;
    b.put(campaign());
    for (int i = 0; i < k_episodes; ++i) b.put(episode("e-" + std::to_string(i), "c-1", i));
    ASSERT_TRUE(store->commit_sync(std::move(b)).has_value());
  }
  WriteBatch b;
  for (int i = 0; i < k_episodes; ++i) {
    std::string ep = "e-" + std::to_string(i);
    for (int t = 1; t <= 3; ++t) {
      b.put(turn(ep, t, std::string(500, 'c')));
      b.put(llm_call(ep, t));
      b.put(message(ep, 0, 2 * t));
      b.put(message(ep, 0, 2 * t + 1));
    }
  }
  ASSERT_TRUE(store->commit_sync(std::move(b)).has_value());
  auto start = std::chrono::steady_clock::now();
  auto snaps = store->load_unfinished("c-1").value();
  auto elapsed = std::chrono::duration<double>(std::chrono::steady_clock::now() - start).count();
  ASSERT_EQ(snaps.size(), static_cast<std::size_t>(k_episodes));
  for (const auto& s : snaps) {
    ASSERT_EQ(s.turns.size(), 3u);
    ASSERT_EQ(s.messages.size(), 6u);
    ASSERT_EQ(s.llm_calls.size(), 3u);
    EXPECT_EQ(s.turns[2].turn, 3);
    EXPECT_EQ(s.messages[0].seq, 2);
  }
  // A bound a loaded 2-core machine meets that still catches a load that
  // grows quadratically; tools/bench/bench_store times it.
  EXPECT_LT(elapsed, 30.0);
}

// --- locations and the PostgreSQL backend ------------------------------------------

TEST(StoreLocation, PathsAndUrlsPickTheirBackend) {
  struct Case {
    std::string text;
    std::optional<Backend> backend;  // nullopt: refused
    std::string target;
  };
  const Case cases[] = {
      {"korch.db", Backend::sqlite, "korch.db"},
      {"/abs/dir/korch.db", Backend::sqlite, "/abs/dir/korch.db"},
      {"sqlite:runs/korch.db", Backend::sqlite, "runs/korch.db"},
      {"postgres://db.example/korch", Backend::postgres, "postgres://db.example/korch"},
      {"postgresql:///korch?host=/run/pg", Backend::postgres, "postgresql:///korch?host=/run/pg"},
      {"", std::nullopt, ""},
      {"sqlite:", std::nullopt, ""},
      {"sqlite:///x.db", std::nullopt, ""},
      {"mysql://u:hunter2@h/db", std::nullopt, ""},
  };
  for (const auto& c : cases) {
    SCOPED_TRACE(c.text);
    auto loc = parse_location(c.text);
    ASSERT_EQ(loc.has_value(), c.backend.has_value());
    if (!loc) {
      EXPECT_EQ(loc.error().kind, ErrorKind::invalid);
      EXPECT_EQ(loc.error().message.find("hunter2"), std::string::npos) << loc.error().message;
      continue;
    }
    EXPECT_EQ(loc->backend, *c.backend);
    EXPECT_EQ(loc->target, c.target);
  }
}

TEST(StoreLocation, RedactUrlHidesEveryPassword) {
  const std::pair<std::string, std::string> cases[] = {
      {"postgres://korch:hunter2@db:5432/k", "postgres://korch:****@db:5432/k"},
      {"postgresql://korch:p%40ss@db/k?sslmode=require",
       "postgresql://korch:****@db/k?sslmode=require"},
      {"postgres://korch@db/k?password=hunter2&sslmode=disable",
       "postgres://korch@db/k?password=****&sslmode=disable"},
      {"postgres://db/k?sslmode=disable&password=hunter2",
       "postgres://db/k?sslmode=disable&password=****"},
      {"postgres://korch@db/k", "postgres://korch@db/k"},
      {"korch.db", "korch.db"},
      {"sqlite:a:b@c.db", "sqlite:a:b@c.db"},
  };
  for (const auto& [in, out] : cases) EXPECT_EQ(redact_url(in), out) << in;
}

TEST(StoreLocation, UnsupportedSchemeIsAClearError) {
  auto r = Store::open(Options{.path = "mysql://korch:hunter2@localhost/korch"});
  ASSERT_FALSE(r.has_value());
  EXPECT_EQ(r.error().kind, ErrorKind::invalid);
  EXPECT_NE(r.error().message.find("unsupported scheme 'mysql'"), std::string::npos)
      << r.error().message;
  EXPECT_EQ(r.error().message.find("hunter2"), std::string::npos) << r.error().message;
}

// Port 1 on loopback has no server: a quick "connection refused".
TEST(StoreLocation, UnreachableServerIsAClearErrorWithoutThePassword) {
  auto r = Store::open(
      Options{.path = "postgresql://korch:hunter2@127.0.0.1:1/korch?connect_timeout=5"});
  ASSERT_FALSE(r.has_value());
  const auto& msg = r.error().message;
  EXPECT_EQ(r.error().kind, ErrorKind::unavailable);
  EXPECT_NE(msg.find("postgresql://korch:****@127.0.0.1:1/korch"), std::string::npos) << msg;
  EXPECT_NE(msg.find("cannot connect"), std::string::npos) << msg;
  EXPECT_EQ(msg.find("hunter2"), std::string::npos) << msg;
  EXPECT_EQ(msg.find('\n'), std::string::npos) << msg;
  auto ro = Store::open(Options{
      .path = "postgresql://korch:hunter2@127.0.0.1:1/korch?connect_timeout=5", .read_only = true});
  ASSERT_FALSE(ro.has_value());
  EXPECT_EQ(ro.error().message.find("hunter2"), std::string::npos) << ro.error().message;
}

TEST_F(StoreTest, SqlitePrefixNamesTheSameFile) {
  {
    auto store = open(Options{.path = "sqlite:" + m_path});
    ASSERT_TRUE(store);
    seed(*store, {"e-1"});
  }
  EXPECT_TRUE(fs::exists(m_path));
  auto store = open();
  EXPECT_EQ(store->list_episodes("c-1").value().size(), 1u);
}

class PostgresStoreTest : public StoreFixture {
 protected:
  PostgresStoreTest() : StoreFixture(Backend::postgres) {}
};

// The codecs against the PostgreSQL schema (EveryCodecNamesTheColumnsOfItsTable's twin).
TEST_F(PostgresStoreTest, EveryCodecNamesTheColumnsOfItsTable) {
  open().reset();
  PGconn* c = PQconnectdb(m_location.c_str());
  ASSERT_EQ(PQstatus(c), CONNECTION_OK) << PQerrorMessage(c);
  auto column_names = [&](const std::string& sql) {
    std::vector<std::string> out;
    PGresult* r = PQexec(c, sql.c_str());
    EXPECT_EQ(PQresultStatus(r), PGRES_TUPLES_OK) << PQresultErrorMessage(r);
    for (int i = 0; i < PQntuples(r); ++i) out.emplace_back(PQgetvalue(r, i, 0));
    PQclear(r);
    return out;
  };
  std::set<std::string> tables_seen;
  auto check = [&](const auto& codec) {
    std::string table(codec.table);
    tables_seen.insert(table);
    // The identity column (events.id, insertion order) belongs to no row struct.
    auto in_db = column_names(
        "SELECT column_name FROM information_schema.columns WHERE table_schema = current_schema() "
        "AND table_name = '" +
        table + "' AND is_identity = 'NO' ORDER BY ordinal_position");
    std::vector<std::string> in_codec;
    codec.for_each([&](const auto& col) { in_codec.emplace_back(col.name); });
    EXPECT_EQ(in_codec, in_db) << "table " << table;
  };
  std::apply([&](const auto&... codec) { (check(codec), ...); }, detail::k_all_codecs);
  for (const auto& name : column_names(
           "SELECT table_name FROM information_schema.tables WHERE table_schema = current_schema() "
           "AND table_name != 'schema_migrations'")) {
    EXPECT_TRUE(tables_seen.contains(name)) << "table " << name << " has no codec";
  }
  PQfinish(c);
}

// A password in the URL reaches libpq and nothing else: not the errors, not
// the logs' store name.
TEST_F(PostgresStoreTest, PasswordInTheUrlNeverShowsInErrors) {
  std::string with_password = m_location;
  auto at = with_password.find("korch@");
  ASSERT_NE(at, std::string::npos);
  with_password.replace(at, 6, "korch:hunter2@");  // trust auth: accepted, unused
  auto store = open(Options{.path = with_password});
  ASSERT_TRUE(store);
  seed(*store, {"e-1"});
  WriteBatch b;
  b.update(EpisodeUpdate{.id = "nope", .tokens_used = 1});
  auto r = store->commit_sync(std::move(b));
  ASSERT_FALSE(r.has_value());
  EXPECT_NE(r.error().message.find("korch:****@"), std::string::npos) << r.error().message;
  EXPECT_EQ(r.error().message.find("hunter2"), std::string::npos) << r.error().message;
  store.reset();
  raw_exec("INSERT INTO schema_migrations (version, applied_at) VALUES (99, 0)");
  auto newer = Store::open(Options{.path = with_password});
  ASSERT_FALSE(newer.has_value());
  EXPECT_NE(newer.error().message.find("newer"), std::string::npos) << newer.error().message;
  EXPECT_EQ(newer.error().message.find("hunter2"), std::string::npos) << newer.error().message;
}

// The server goes away and comes back (a restart drops every connection):
// the next commit, lease call and read run on new connections; nothing
// committed before is lost.
TEST_F(PostgresStoreTest, ServerRestartIsSurvivedByWritesLeasesAndReads) {
  auto store = open();
  seed(*store, {"e-1"});
  ASSERT_FALSE(store->acquire_lease("c-1", "host:1", 30).value().has_value());
  WriteBatch b;
  b.put(turn("e-1", 1));
  ASSERT_TRUE(store->commit_sync(std::move(b)).has_value());
  ASSERT_EQ(store->counts("c-1").value().turns, 1);  // a pooled read connection exists

  ASSERT_TRUE(testing::PostgresServer::shared().restart());
  WriteBatch after;
  after.put(turn("e-1", 2));
  auto r = store->commit_sync(std::move(after));
  ASSERT_TRUE(r.has_value()) << r.error().message;
  EXPECT_TRUE(r->conflicts.empty());
  auto counts = store->counts("c-1");
  ASSERT_TRUE(counts.has_value()) << counts.error().message;
  EXPECT_EQ(counts->turns, 2);

  ASSERT_TRUE(testing::PostgresServer::shared().restart());
  auto hb = store->heartbeat_lease("c-1", "host:1", 30);
  EXPECT_TRUE(hb.has_value()) << hb.error().message;
  EXPECT_EQ(store->list_turns("c-1").value().size(), 2u);
}

// Text holding a NUL byte: SQLite stores it whole; PostgreSQL's text cannot,
// and the batch fails with a clear error instead of storing it cut short.
TEST_P(BackendTest, TextWithANulByteIsStoredWholeOrRefused) {
  auto store = open();
  seed(*store, {"e-1"});
  WriteBatch b;
  b.put(message("e-1", 0, 0, std::string("before\0after", 12)));
  auto r = store->commit_sync(std::move(b));
  if (m_backend == Backend::sqlite) {
    ASSERT_TRUE(r.has_value()) << r.error().message;
    EXPECT_EQ(store->load_episode("e-1").value()->messages.at(0).content,
              std::string("before\0after", 12));
    return;
  }
  ASSERT_FALSE(r.has_value());
  EXPECT_NE(r.error().message.find("NUL byte"), std::string::npos) << r.error().message;
  EXPECT_TRUE(store->load_episode("e-1").value()->messages.empty());
  // The store goes on: the next batch commits.
  WriteBatch ok;
  ok.put(message("e-1", 0, 0, "after the refusal"));
  ASSERT_TRUE(store->commit_sync(std::move(ok)).has_value());
}

TEST_F(PostgresStoreTest, DatabaseNotInUtf8IsRefused) {
  raw_exec("SELECT 1");  // the database exists
  std::string latin1 = testing::PostgresServer::shared().url("korch_latin1");
  {
    PGconn* c = PQconnectdb(testing::PostgresServer::shared().url("postgres").c_str());
    PGresult* r = PQexec(c, "CREATE DATABASE korch_latin1 ENCODING 'LATIN1' TEMPLATE template0");
    ASSERT_EQ(PQresultStatus(r), PGRES_COMMAND_OK) << PQresultErrorMessage(r);
    PQclear(r);
    PQfinish(c);
  }
  auto s = Store::open(Options{.path = latin1});
  ASSERT_FALSE(s.has_value());
  EXPECT_NE(s.error().message.find("not UTF8"), std::string::npos) << s.error().message;
}

TEST_F(PostgresStoreTest, ReadOnlyOpenOfAnEmptyDatabaseFails) {
  auto r = Store::open(Options{.path = m_location, .read_only = true});
  ASSERT_FALSE(r.has_value());
  EXPECT_NE(r.error().message.find("no korch store"), std::string::npos) << r.error().message;
  // And a read-only store refuses writes.
  open().reset();
  auto ro = open(Options{.read_only = true});
  ASSERT_TRUE(ro);
  WriteBatch b;
  b.put(campaign());
  auto w = ro->commit_sync(std::move(b));
  ASSERT_FALSE(w.has_value());
  EXPECT_NE(w.error().message.find("read-only"), std::string::npos) << w.error().message;
}

TEST_P(BackendTest, ListMessagesHoldsEveryEpoch) {
  auto store = open();
  seed(*store, {"e-1", "e-2"});
  WriteBatch b;
  b.put(message("e-2", 0, 0));
  b.put(message("e-1", 1, 0));
  b.put(message("e-1", 0, 1));
  b.put(message("e-1", 0, 0));
  ASSERT_TRUE(store->commit_sync(std::move(b)).has_value());
  EXPECT_EQ(store->list_messages("c-1").value(),
            (std::vector<MessageRow>{message("e-1", 0, 0), message("e-1", 0, 1),
                                     message("e-1", 1, 0), message("e-2", 0, 0)}));
  EXPECT_EQ(store->load_episode("e-1").value()->messages.size(), 1u);  // the live epoch
  EXPECT_TRUE(store->list_messages("c-none").value().empty());
}

// Everything a campaign holds, read back through the interface.
struct CampaignDump {
  std::optional<CampaignRow> campaign;
  std::vector<TaskRow> tasks;
  std::vector<EpisodeSummary> episodes;
  std::vector<std::string> prompts;
  std::vector<MessageRow> messages;
  std::vector<TurnRow> turns;
  std::vector<LlmCallRow> calls;
  std::vector<EvaluationRow> evaluations;
  std::vector<EventRow> events;
  std::vector<FinalRow> finals;
  bool operator==(const CampaignDump&) const = default;
};

CampaignDump dump(Store& s, const std::string& id) {
  CampaignDump d;
  d.campaign = s.get_campaign(id).value();
  d.tasks = s.list_tasks(id).value();
  d.episodes = s.list_episodes(id).value();
  for (const auto& e : d.episodes)
    d.prompts.push_back(s.load_episode(e.id).value()->episode.system_prompt);
  d.messages = s.list_messages(id).value();
  d.turns = s.list_turns(id).value();
  d.calls = s.list_llm_calls(id).value();
  d.evaluations = s.list_evaluations(id).value();
  d.events = s.list_events(id).value();
  d.finals = s.list_finals(id).value();
  return d;
}

// copy_campaigns from this backend to the other and back loses and changes
// nothing: every row, every column (a final episode's updated_at included).
TEST_P(BackendTest, CopyCampaignsToTheOtherBackendAndBack) {
  auto& pg = testing::PostgresServer::shared();
  if (!pg.ok()) KORCH_SKIP_OR_FAIL(pg.error());
  auto src = open();
  seed(*src, {"e-1", "e-2", "e-3"});
  seed(*src, {"x-1"}, "c-2");
  WriteBatch b;
  for (const char* ep : {"e-1", "e-2", "e-3", "x-1"}) {
    b.put(message(ep, 0, 0));
    b.put(message(ep, 1, 0, "after compaction"));
    b.put(turn(ep, 1));
    b.put(llm_call(ep, 1));
    b.put(evaluation(ep, std::string("check|") + ep, EvalState::done, "correct"));
    b.put(EventRow{.episode_id = ep, .turn = 1, .kind = "resumed", .detail = ep, .at = 7.5});
  }
  b.put(EventRow{.episode_id = "e-1", .turn = 2, .kind = "crash", .detail = "late", .at = 8.5});
  b.put(final_row("e-2"));
  FinalRow no_speedup = final_row("e-3", EndReason::no_submission);
  no_speedup.speedup.reset();
  b.put(no_speedup);
  ASSERT_TRUE(src->commit_sync(std::move(b)).has_value());
  const auto before = dump(*src, "c-1");
  ASSERT_EQ(before.episodes.size(), 3u);
  ASSERT_EQ(before.messages.size(), 6u);

  // The other backend: a fresh PostgreSQL database, or a SQLite file.
  std::string other =
      m_backend == Backend::sqlite ? pg.fresh_database() : (m_dir / "other.db").string();
  ASSERT_FALSE(other.empty());
  auto dst = open(Options{.path = other});
  auto copied = copy_campaigns(*src, *dst, "c-1");
  ASSERT_TRUE(copied.has_value()) << copied.error().message;
  EXPECT_EQ(copied->campaigns, 1);
  EXPECT_EQ(copied->episodes, 3);
  EXPECT_EQ(dump(*dst, "c-1"), before);
  EXPECT_FALSE(dst->get_campaign("c-2").value().has_value());  // only the one asked for

  auto again = copy_campaigns(*src, *dst, "c-1");
  ASSERT_FALSE(again.has_value());
  EXPECT_NE(again.error().message.find("already in the destination"), std::string::npos)
      << again.error().message;

  // And back, into an empty store of this backend.
  src.reset();
  fresh();
  auto back = open();
  ASSERT_TRUE(copy_campaigns(*dst, *back).has_value());
  EXPECT_EQ(dump(*back, "c-1"), before);
}

// --- internals -------------------------------------------------------------------

TEST(RetryDelay, GrowsIsJitteredAndCapped) {
  std::mt19937_64 rng(42);
  for (int attempt = 0; attempt < 30; ++attempt) {
    int d = detail::retry_delay_ms(attempt, rng);
    EXPECT_GE(d, 1);
    EXPECT_LE(d, detail::k_max_retry_delay_ms);
  }
  int early = 0, late = 0;
  for (int i = 0; i < 100; ++i) {
    early += detail::retry_delay_ms(0, rng);
    late += detail::retry_delay_ms(10, rng);
  }
  EXPECT_LT(early, late);
  std::set<int> distinct;
  for (int i = 0; i < 50; ++i) distinct.insert(detail::retry_delay_ms(5, rng));
  EXPECT_GT(distinct.size(), 3u);  // jittered
}

}  // namespace
}  // namespace korch::store
