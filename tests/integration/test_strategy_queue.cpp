// A strategy campaign on the evaluation queue (issue #37, docs/cluster.md): a
// real `korch run` coordinator with evaluator.remote = true on a real
// PostgreSQL 15 server, its evaluations served by a real `korch worker
// --evaluator mock` process, against the same campaign run by `korch run` on
// a SQLite file with the evaluator in-process. The replies come from
// korch-fake-llm's refine script (a seeded reply runs at 1.2x its seed), the
// speedups from the mock evaluator's MOCK_SPEEDUP markers: what differs
// between the runs is only where the evaluations ran, so the strategy's
// decisions (its events) and the exports must be the same.
#include <gtest/gtest.h>

#include <algorithm>
#include <csignal>
#include <cstdio>
#include <nlohmann/json.hpp>
#include <sstream>
#include <string>
#include <vector>

#include "tests/integration/campaign_fixture.hpp"
#include "tests/integration/export_fixture.hpp"
#include "tests/support/postgres_server.hpp"
#include "tests/support/required.hpp"

namespace korch::testing {
namespace {

constexpr int k_rounds = 3;
constexpr int k_tasks = 4;
constexpr int k_models = 2;

std::string refine_toml(const std::string& store_line, const std::string& base_url, bool remote) {
  std::ostringstream s;
  s << "name = \"refine-queued\"\n"
    << "samples_per_task = 1\nmax_turns = 2\nlog_level = \"warn\"\n"
    << "max_inflight_episodes = 8\n"
    << store_line << "\n"
    << "[tasks]\nkernelbench_dir = \"" KORCH_EXAMPLES_DIR "/tasks\"\nids = \"1-" << k_tasks
    << "\"\n"
    << "[strategy]\nkind = \"refine\"\nrounds = " << k_rounds << "\n"
    << "[evaluator]\nmode = \"mock\"\nremote = " << (remote ? "true" : "false") << "\n";
  for (int m = 1; m <= k_models; ++m) {
    s << "[[models]]\nid = \"m" << m << "\"\nbase_url = \"" << base_url << "\"\nmodel = \"fake-"
      << m << "\"\nconcurrency = 8\nmax_attempts = 3\nconnect_timeout_s = 2\n"
      << "price_prompt_per_mtok = 1.0\nprice_completion_per_mtok = 2.0\n";
  }
  return s.str();
}

// Rows of `sql` from PostgreSQL, fields split (psql with unit and record
// separators that JSON text never holds unescaped).
std::vector<std::vector<std::string>> pg_rows(const std::string& url, const std::string& sql,
                                              const std::string& dir) {
  auto [rc, out] =
      run_capture({"psql", "-X", "-tA", "-F", "\x1f", "-R", "\x1e", url, "-c", sql}, dir);
  EXPECT_EQ(rc, 0) << out;
  std::vector<std::vector<std::string>> rows;
  if (!out.empty() && out.back() == '\n') out.pop_back();
  std::istringstream in(out);
  for (std::string rec; std::getline(in, rec, '\x1e');) {
    std::vector<std::string> fields;
    std::istringstream rf(rec);
    for (std::string f; std::getline(rf, f, '\x1f');) fields.push_back(f);
    rows.push_back(std::move(fields));
  }
  return rows;
}

// The strategy events, as "episode_id turn detail" (without their times),
// sorted: the decisions, whatever order they were written in.
const char* const k_events_sql =
    "SELECT episode_id, turn, detail FROM events WHERE kind = 'strategy'";

std::vector<std::string> decision_lines(const std::vector<std::vector<std::string>>& rows) {
  std::vector<std::string> out;
  for (auto& r : rows) {
    EXPECT_EQ(r.size(), 3u);
    if (r.size() == 3) out.push_back(r[0] + " " + r[1] + " " + r[2]);
  }
  std::sort(out.begin(), out.end());
  return out;
}

class StrategyQueue : public ::testing::Test {
 protected:
  void SetUp() override {
    auto& pg = PostgresServer::shared();
    if (!pg.ok()) KORCH_SKIP_OR_FAIL(pg.error());
    ASSERT_TRUE(m_llm.start(m_dir.path().string(), {"--script", "refine", "--latency-ms", "0"}));
    m_url = pg.fresh_database();
    ASSERT_FALSE(m_url.empty()) << pg.error();
  }

  TempDir m_dir;
  FakeLlmProcess m_llm;
  std::string m_url;
};

TEST_F(StrategyQueue, RefineThroughKorchWorkerDecidesAndExportsAsInProcessOnSqlite) {
  const auto d = m_dir.path().string();
  // The reference: the evaluator in the coordinator's process, a SQLite file.
  const auto ref_db = d + "/ref.db";
  const auto ref_toml = d + "/ref.toml";
  write_text(ref_toml, refine_toml("db_path = \"" + ref_db + "\"", m_llm.base_url(), false));
  auto [ref_rc, ref_out] = run_capture({KORCH_BIN, "run", ref_toml, "--no-progress"}, d);
  ASSERT_EQ(ref_rc, 0) << ref_out;

  // The queue: PostgreSQL, evaluator.remote = true, one korch worker.
  const auto toml = d + "/queue.toml";
  write_text(toml, refine_toml("[store]\nurl = \"" + m_url + "\"", m_llm.base_url(), true));
  auto worker = Process::start(
      {KORCH_BIN, "worker", "--store", m_url, "--evaluator", "mock", "--id", "w-refine"},
      d + "/worker.out", d + "/worker.err");
  auto coordinator =
      Process::start({KORCH_BIN, "run", toml, "--no-progress"}, d + "/run.out", d + "/run.err");
  auto rc = coordinator.wait_for(std::chrono::seconds(180));
  if (!rc) coordinator.signal(SIGKILL);
  ASSERT_TRUE(rc) << "the queued campaign did not finish: " << slurp(d + "/run.err")
                  << slurp(d + "/worker.err");
  ASSERT_EQ(*rc, 0) << slurp(d + "/run.err") << slurp(d + "/worker.err");
  worker.signal(SIGTERM);
  auto wrc = worker.wait_for(std::chrono::seconds(60));
  ASSERT_TRUE(wrc) << slurp(d + "/worker.err");
  EXPECT_EQ(*wrc, 0) << slurp(d + "/worker.err");

  // Every evaluation of the queued campaign went through the queue, and the
  // worker ran them all (the coordinator evaluated nothing itself).
  auto one = [&](const std::string& sql) {
    auto rows = pg_rows(m_url, sql, d);
    return rows.size() == 1 && rows[0].size() == 1 ? rows[0][0] : std::string("?");
  };
  const auto evaluations = one("SELECT count(*) FROM evaluations");
  EXPECT_NE(evaluations, "0");
  EXPECT_EQ(one("SELECT count(*) FROM eval_queue WHERE state = 'done'"), evaluations);
  EXPECT_EQ(one("SELECT evaluations_done FROM workers WHERE id = 'w-refine'"), evaluations);

  // The decisions: the same events, one per episode started, with the same
  // rounds and seeds (and seed prompts, code and measured result included).
  const auto reference = decision_lines(query(ref_db, k_events_sql));
  const auto queued = decision_lines(pg_rows(m_url, k_events_sql, d));
  ASSERT_EQ(reference.size(), static_cast<std::size_t>(k_tasks * k_models * k_rounds));
  int seeded = 0;
  for (auto& line : reference) {
    auto detail = nlohmann::json::parse(line.substr(line.find('{')));
    seeded += detail["episode"]["seed"].is_object();
  }
  // The refine script gives a correct kernel to 65% of unseeded replies: 8
  // of them per round make a task without any seed in round 1 and 2 unlikely,
  // and a run with no seed would not test seeds at all.
  EXPECT_GE(seeded, k_models * (k_rounds - 1)) << "too few seeded episodes to compare";
  ASSERT_EQ(queued.size(), reference.size());
  for (std::size_t i = 0; i < reference.size(); ++i)
    EXPECT_EQ(queued[i], reference[i]) << "strategy event " << i;

  // The exports: every record but the run-describing fields, in order.
  const auto want = normalized_export(d, ref_toml);
  const auto got = normalized_export(d, toml);
  ASSERT_EQ(got.size(), want.size());
  int rounds_seen = 0, seeds_seen = 0;
  for (std::size_t i = 0; i < want.size(); ++i) {
    EXPECT_EQ(got[i], want[i]) << "export record " << i;
    if (want[i]["type"] == "episode") {
      rounds_seen = std::max(rounds_seen, want[i]["round"].get<int>() + 1);
      seeds_seen += !want[i]["seed_episode_id"].is_null();
    }
  }
  EXPECT_EQ(rounds_seen, k_rounds);
  EXPECT_EQ(seeds_seen, seeded);
  std::printf(
      "refine on the queue: %s evaluations by the worker, %zu strategy events (%d seeded), "
      "%zu export records, equal to the in-process run\n",
      evaluations.c_str(), queued.size(), seeded, got.size());
}

}  // namespace
}  // namespace korch::testing
