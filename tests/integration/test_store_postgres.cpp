// korch on PostgreSQL end to end (docs/postgres.md): a real `korch run`
// against a real PostgreSQL 15 server that the test starts
// (tests/support/postgres_server.hpp), and `korch store copy` moving a
// campaign from SQLite to PostgreSQL and back with byte-identical exports.
// A password in the store URL shows nowhere: not in korch's output, its
// errors, the exports or the database.
#include <gtest/gtest.h>

#include <filesystem>
#include <random>
#include <string>
#include <vector>

#include "tests/integration/campaign_fixture.hpp"
#include "tests/integration/export_fixture.hpp"
#include "tests/support/postgres_server.hpp"
#include "tests/support/required.hpp"

namespace korch::testing {
namespace {

constexpr const char* k_password = "hunter2-pg-secret";

// A campaign of the four bundled tasks, two samples, with a compaction (so
// an episode has two epochs of messages) and a crash event.
std::string campaign_toml(const std::string& name, const std::string& store_line,
                          const std::string& base_url, int samples = 2, double eval_latency_s = 0) {
  std::ostringstream s;
  s << "name = \"" << name << "\"\n"
    << "samples_per_task = " << samples << "\nmax_turns = 3\nlog_level = \"warn\"\n"
    << "max_inflight_episodes = 8\n"
    << store_line << "\n"
    << "[tasks]\nkernelbench_dir = \"" KORCH_EXAMPLES_DIR "/tasks\"\nids = \"1-4\"\n"
    << "[evaluator]\nmode = \"mock\"\nmock_latency_s = " << eval_latency_s << "\n"
    << "[[models]]\nid = \"m1\"\nbase_url = \"" << base_url << "\"\nmodel = \"fake-1\"\n"
    << "concurrency = 8\nmax_attempts = 3\nconnect_timeout_s = 2\n"
    << "price_prompt_per_mtok = 1.0\nprice_completion_per_mtok = 2.0\n"
    << "[[events]]\nkind = \"compaction\"\nturn = 2\nsamples = [1]\n"
    << "[[events]]\nkind = \"crash\"\nturn = 2\nsamples = [0]\n";
  return s.str();
}

// `url` with the test's password in its user part (trust auth ignores it).
std::string with_password(std::string url) {
  auto at = url.find("korch@");
  if (at != std::string::npos) url.replace(at, 6, std::string("korch:") + k_password + "@");
  return url;
}

std::string exported(const std::string& dir, const std::string& db, const std::string& format) {
  auto [rc, out] = run_capture({KORCH_BIN, "export", "--db", db, "--format", format}, dir);
  EXPECT_EQ(rc, 0) << out;
  return out;
}

// Every stderr file run_capture kept in `dir` and every other file korch
// wrote there (logs, locks, caches): none may hold the password.
void expect_no_password_in(const std::string& dir) {
  for (auto& e : std::filesystem::recursive_directory_iterator(dir)) {
    if (!e.is_regular_file() || e.file_size() > (64 << 20)) continue;
    auto ext = e.path().extension().string();
    // The campaign files hold it (the test wrote them); the SQLite files are
    // checked through their exports and queries.
    if (ext == ".toml" || ext == ".db" || ext == ".db-wal" || ext == ".db-shm") continue;
    EXPECT_EQ(slurp(e.path().string()).find(k_password), std::string::npos) << e.path();
  }
}

class StorePostgres : public ::testing::Test {
 protected:
  void SetUp() override {
    auto& pg = PostgresServer::shared();
    if (!pg.ok()) KORCH_SKIP_OR_FAIL(pg.error());
    ASSERT_TRUE(m_llm.start(m_dir.path().string(), {"--script", "kernel", "--latency-ms", "0"}));
  }

  std::string fresh_url() {
    auto url = PostgresServer::shared().fresh_database();
    EXPECT_FALSE(url.empty()) << PostgresServer::shared().error();
    return with_password(url);
  }

  // A one-value query on the PostgreSQL database `url`, through psql.
  std::string psql(const std::string& url, const std::string& sql) {
    auto [rc, out] = run_capture({"psql", "-X", "-tA", url, "-c", sql}, m_dir.path().string());
    EXPECT_EQ(rc, 0) << out;
    while (!out.empty() && out.back() == '\n') out.pop_back();
    return out;
  }

  TempDir m_dir;
  FakeLlmProcess m_llm;
};

TEST_F(StorePostgres, CampaignRunsOnPostgresLikeOnSqlite) {
  const auto d = m_dir.path().string();
  auto sqlite_toml = d + "/sqlite.toml";
  write_text(sqlite_toml,
             campaign_toml("pgrun", "db_path = \"" + d + "/ref.db\"", m_llm.base_url()));
  auto [ref_rc, ref_out] = run_capture({KORCH_BIN, "run", sqlite_toml, "--no-progress"}, d);
  ASSERT_EQ(ref_rc, 0) << ref_out;
  auto reference = normalized_export(d, sqlite_toml);
  ASSERT_GT(reference.size(), 8u);

  const auto url = fresh_url();
  auto pg_toml = d + "/pg.toml";
  write_text(pg_toml, campaign_toml("pgrun", "[store]\nurl = \"" + url + "\"", m_llm.base_url()));
  auto [rc, out] = run_capture({KORCH_BIN, "run", pg_toml, "--no-progress"}, d);
  ASSERT_EQ(rc, 0) << out;
  // Nothing in the working folder: no SQLite file, no lock file named after the URL.
  EXPECT_FALSE(std::filesystem::exists(d + "/korch.db"));

  // The same campaign, the same results (minus what describes the run).
  auto on_pg = normalized_export(d, pg_toml);
  ASSERT_EQ(on_pg.size(), reference.size());
  for (std::size_t i = 0; i < reference.size(); ++i) EXPECT_EQ(on_pg[i], reference[i]) << i;
  // Running it again resumes: nothing left to do, nothing changes.
  auto again = run_capture({KORCH_BIN, "run", pg_toml, "--no-progress"}, d);
  ASSERT_EQ(again.first, 0) << again.second;
  EXPECT_EQ(normalized_export(d, pg_toml), on_pg);

  auto [st_rc, status] = run_capture({KORCH_BIN, "status", "--db", url}, d);
  ASSERT_EQ(st_rc, 0) << status;
  EXPECT_EQ(psql(url, "SELECT count(*) FROM episodes WHERE status != 'final'"), "0");
  EXPECT_EQ(psql(url, "SELECT count(*) FROM episodes"), "8");
  // The stored config records the URL redacted.
  EXPECT_EQ(psql(url, "SELECT count(*) FROM campaigns WHERE config_json LIKE '%" +
                          std::string(k_password) + "%'"),
            "0");
  EXPECT_EQ(psql(url, "SELECT count(*) FROM campaigns WHERE config_json LIKE '%korch:****@%'"),
            "1");
  expect_no_password_in(d);
}

// `korch run CAMPAIGN.toml --db URL` runs on that store, as --db means on
// every command (issue 48: it was accepted and ignored, and the campaign went
// to the TOML's db_path); given with --set store.url= as well it is refused.
TEST_F(StorePostgres, RunDbFlagRunsOnThatStore) {
  const auto d = m_dir.path().string();
  auto toml = d + "/c.toml";
  write_text(toml,
             campaign_toml("dbflag", "db_path = \"" + d + "/not-here.db\"", m_llm.base_url()));
  const auto url = fresh_url();
  auto [rc, out] = run_capture({KORCH_BIN, "run", toml, "--db", url, "--no-progress"}, d);
  ASSERT_EQ(rc, 0) << out;
  EXPECT_FALSE(std::filesystem::exists(d + "/not-here.db"));
  EXPECT_EQ(psql(url, "SELECT count(*) FROM episodes WHERE status = 'final'"), "8");
  // resume takes it too: nothing left to do.
  auto [rrc, rout] = run_capture({KORCH_BIN, "resume", toml, "--db", url, "--no-progress"}, d);
  EXPECT_EQ(rrc, 0) << rout;
  EXPECT_FALSE(std::filesystem::exists(d + "/not-here.db"));
  auto [brc, bout] = run_capture(
      {KORCH_BIN, "run", toml, "--db", url, "--set", "store.url=" + url, "--no-progress"}, d);
  EXPECT_EQ(brc, 2) << bout;
  EXPECT_NE(bout.find("--db or --set store.url="), std::string::npos) << bout;
  expect_no_password_in(d);
}

TEST_F(StorePostgres, CopyToPostgresAndBackKeepsTheExportByteIdentical) {
  const auto d = m_dir.path().string();
  auto toml = d + "/c.toml";
  write_text(toml, campaign_toml("pgcopy", "db_path = \"" + d + "/src.db\"", m_llm.base_url()));
  auto [run_rc, run_out] = run_capture({KORCH_BIN, "run", toml, "--no-progress"}, d);
  ASSERT_EQ(run_rc, 0) << run_out;
  const auto src = d + "/src.db";
  const std::vector<std::string> formats = {"jsonl", "csv", "sft", "rl"};
  std::vector<std::string> before;
  for (const auto& f : formats) before.push_back(exported(d, src, f));
  ASSERT_GT(before[0].size(), 1000u);

  const auto url = fresh_url();
  auto [to_rc, to_out] = run_capture({KORCH_BIN, "store", "copy", "sqlite:" + src, url}, d);
  ASSERT_EQ(to_rc, 0) << to_out;
  for (std::size_t i = 0; i < formats.size(); ++i)
    EXPECT_EQ(exported(d, url, formats[i]), before[i]) << formats[i] << " from PostgreSQL";
  // Every epoch of every conversation came along, not only the live one.
  EXPECT_EQ(psql(url, "SELECT count(*) FROM messages"),
            query(src, "SELECT COUNT(*) FROM messages")[0][0]);
  EXPECT_NE(query(src, "SELECT COUNT(DISTINCT epoch) FROM messages")[0][0], "1");

  auto back = d + "/back.db";
  auto [back_rc, back_out] = run_capture({KORCH_BIN, "store", "copy", url, back}, d);
  ASSERT_EQ(back_rc, 0) << back_out;
  for (std::size_t i = 0; i < formats.size(); ++i)
    EXPECT_EQ(exported(d, back, formats[i]), before[i]) << formats[i] << " after the round trip";
  for (const char* table : {"episodes", "episode_prompts", "messages", "turns", "llm_calls",
                            "evaluations", "events", "finals", "tasks", "campaigns"}) {
    std::string sql = std::string("SELECT COUNT(*) FROM ") + table;
    EXPECT_EQ(query(back, sql), query(src, sql)) << table;
  }
  // Whole rows, not just counts: the episodes as stored (timestamps included).
  const char* episodes = "SELECT * FROM episodes ORDER BY id";
  EXPECT_EQ(query(back, episodes), query(src, episodes));
  const char* events = "SELECT episode_id, turn, kind, detail, at FROM events ORDER BY id";
  EXPECT_EQ(query(back, events), query(src, events));

  // A second copy into the same store is refused, and says why.
  auto [dup_rc, dup_out] = run_capture({KORCH_BIN, "store", "copy", src, url}, d);
  EXPECT_EQ(dup_rc, 2) << dup_out;
  EXPECT_NE(dup_out.find("already in the destination"), std::string::npos) << dup_out;
  expect_no_password_in(d);
}

// DESIGN §3's durability proof, on PostgreSQL: `korch run` killed (SIGKILL
// and SIGINT in turn) at random moments and restarted ends exactly where an
// uninterrupted SQLite run of the same campaign ends.
TEST_F(StorePostgres, RandomKillsOnPostgresLoseAndRepeatNothing) {
  constexpr int k_kills = 20;
  constexpr double k_eval_latency_s = 0.15;
  constexpr int k_samples = 15;  // 60 episodes: long enough for the kills
  const auto d = m_dir.path().string();
  auto ref_toml = d + "/ref.toml";
  write_text(ref_toml, campaign_toml("pgkill", "db_path = \"" + d + "/ref.db\"", m_llm.base_url(),
                                     k_samples, k_eval_latency_s));
  auto [ref_rc, ref_out] = run_capture({KORCH_BIN, "run", ref_toml, "--no-progress"}, d);
  ASSERT_EQ(ref_rc, 0) << ref_out;
  auto reference = normalized_export(d, ref_toml);

  const auto url = fresh_url();
  auto toml = d + "/kill.toml";
  write_text(toml, campaign_toml("pgkill", "[store]\nurl = \"" + url + "\"", m_llm.base_url(),
                                 k_samples, k_eval_latency_s));
  std::mt19937 rng(20261204);
  std::uniform_int_distribution<int> delay_ms(80, 400);
  int kills = 0, sigints = 0;
  while (kills < k_kills) {
    auto p =
        Process::start({KORCH_BIN, "run", toml, "--no-progress"}, d + "/kill.out", d + "/kill.err");
    const int sig = kills % 3 == 2 ? SIGINT : SIGKILL;
    if (auto rc = p.wait_for(std::chrono::milliseconds(delay_ms(rng)))) {
      ASSERT_EQ(*rc, 0) << slurp(d + "/kill.err");
      break;  // finished before this kill
    }
    p.signal(sig);
    auto exit = p.wait_for(std::chrono::seconds(60));
    ASSERT_TRUE(exit) << "korch did not stop after signal " << sig;
    if (sig == SIGKILL) {
      ASSERT_EQ(*exit, 128 + SIGKILL);
    } else {
      ASSERT_EQ(*exit, 130) << slurp(d + "/kill.err");
      ++sigints;
    }
    ++kills;
  }
  auto final_run = run_capture({KORCH_BIN, "run", toml, "--no-progress"}, d);
  ASSERT_EQ(final_run.first, 0) << final_run.second;
  EXPECT_GE(kills, 10) << "the campaign finished after only " << kills << " kills";
  RecordProperty("kills", kills);

  auto resumed = normalized_export(d, toml);
  ASSERT_EQ(resumed.size(), reference.size());
  for (std::size_t i = 0; i < reference.size(); ++i) EXPECT_EQ(resumed[i], reference[i]) << i;
  EXPECT_EQ(psql(url, "SELECT count(*) FROM episodes WHERE status != 'final'"), "0");
  EXPECT_EQ(psql(url, "SELECT count(*) FROM evaluations WHERE state != 'done'"), "0");
  EXPECT_EQ(psql(url, "SELECT count(*) FROM evaluations WHERE failures > 0"), "0");
  EXPECT_EQ(psql(url, "SELECT count(*) FROM finals WHERE verdict = 'worker_crash'"), "0");
  std::printf("postgres kill test: %d stops (%d SIGINT)\n", kills, sigints);
}

// One korch drives a campaign at a time on PostgreSQL too, with no lock
// file: the campaign's lease row refuses a second `korch run` while the first
// is alive.
TEST_F(StorePostgres, SecondRunOfALiveCampaignIsRefused) {
  const auto d = m_dir.path().string();
  const auto url = fresh_url();
  auto toml = d + "/c.toml";
  write_text(
      toml, campaign_toml("pgtwice", "[store]\nurl = \"" + url + "\"", m_llm.base_url(), 15, 0.15));
  auto first =
      Process::start({KORCH_BIN, "run", toml, "--no-progress"}, d + "/first.out", d + "/first.err");
  bool started = wait_until(first, [&] {
    auto [rc, out] =
        run_capture({"psql", "-X", "-tA", url, "-c", "SELECT count(*) FROM leases"}, d);
    return rc == 0 && std::atoi(out.c_str()) == 1;
  });
  ASSERT_TRUE(started) << slurp(d + "/first.err");
  auto [rc, out] = run_capture({KORCH_BIN, "run", toml, "--no-progress"}, d);
  EXPECT_NE(rc, 0) << out;
  EXPECT_NE(out.find("being driven by another korch process"), std::string::npos) << out;
  first.signal(SIGINT);
  auto exit = first.wait_for(std::chrono::seconds(60));
  ASSERT_TRUE(exit);
  EXPECT_EQ(*exit, 130) << slurp(d + "/first.err");
  // Stopped cleanly: the lease is released and the next run resumes at once.
  EXPECT_EQ(psql(url, "SELECT count(*) FROM leases"), "0");
  expect_no_password_in(d);
}

TEST_F(StorePostgres, BadStoreUrlsFailClearly) {
  const auto d = m_dir.path().string();
  auto [rc, out] = run_capture(
      {KORCH_BIN, "status", "--db",
       std::string("postgresql://korch:") + k_password + "@127.0.0.1:1/korch?connect_timeout=3"},
      d);
  // An unreachable server is the store's 'unavailable' (exit 3), not bad input.
  EXPECT_EQ(rc, 3) << out;
  EXPECT_NE(out.find("cannot connect"), std::string::npos) << out;
  EXPECT_NE(out.find("korch:****@127.0.0.1:1"), std::string::npos) << out;
  EXPECT_NE(out.find("Connection refused Is the server running"), std::string::npos) << out;
  // A URL that does not parse stays bad input (2), and its password is not echoed.
  auto [rc1, out1] =
      run_capture({KORCH_BIN, "status", "--db",
                   std::string("postgresql://korch:") + k_password + "@127.0.0.1:1/ko%zzrch"},
                  d);
  EXPECT_EQ(rc1, 2) << out1;
  EXPECT_NE(out1.find("not a valid PostgreSQL URL"), std::string::npos) << out1;
  EXPECT_EQ(out1.find(k_password), std::string::npos) << out1;
  auto [rc2, out2] = run_capture({KORCH_BIN, "store", "copy", "mysql://x/y", d + "/x.db"}, d);
  EXPECT_EQ(rc2, 2) << out2;
  EXPECT_NE(out2.find("unsupported scheme 'mysql'"), std::string::npos) << out2;
  expect_no_password_in(d);
}

}  // namespace
}  // namespace korch::testing
