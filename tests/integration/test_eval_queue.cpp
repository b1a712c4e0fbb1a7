// Evaluations through the store's work queue, end to end (docs/cluster.md):
// a real `korch run` coordinator with evaluator.remote = true and real
// `korch worker` processes against a real PostgreSQL 15 server. The workers
// run the mock evaluator: these tests check the queue (claims, leases,
// re-claims, drains, version checks), not the evaluator.
#include <gtest/gtest.h>

#include <algorithm>
#include <csignal>
#include <cstdlib>
#include <filesystem>
#include <future>
#include <map>
#include <random>
#include <string>
#include <vector>

#include "evaluator/evaluator.hpp"
#include "evaluator/remote/queue_evaluator.hpp"
#include "store/work_queue.hpp"
#include "tests/integration/campaign_fixture.hpp"
#include "tests/integration/export_fixture.hpp"
#include "tests/support/postgres_server.hpp"
#include "tests/support/required.hpp"

namespace korch::testing {
namespace remote = evaluator::remote;
namespace {

std::string campaign_toml(const std::string& store_line, const std::string& base_url, int samples,
                          double eval_latency_s, bool remote,
                          const std::string& extra_evaluator = "") {
  std::ostringstream s;
  s << "name = \"queued\"\n"
    << "samples_per_task = " << samples << "\nmax_turns = 3\nlog_level = \"warn\"\n"
    << "max_inflight_episodes = 16\n"
    << store_line << "\n"
    << "[tasks]\nkernelbench_dir = \"" KORCH_EXAMPLES_DIR "/tasks\"\nids = \"1-4\"\n"
    << "[evaluator]\nmode = \"mock\"\nmock_latency_s = " << eval_latency_s << "\n"
    << "remote = " << (remote ? "true" : "false") << "\n"
    << extra_evaluator << "[[models]]\nid = \"m1\"\nbase_url = \"" << base_url
    << "\"\nmodel = \"fake-1\"\n"
    << "concurrency = 16\nmax_attempts = 3\nconnect_timeout_s = 2\n";
  return s.str();
}

int env_int(const char* name, int fallback) {
  const char* v = std::getenv(name);
  return v != nullptr && *v != '\0' ? std::atoi(v) : fallback;
}

class EvalQueue : public ::testing::Test {
 protected:
  void SetUp() override {
    auto& pg = PostgresServer::shared();
    if (!pg.ok()) KORCH_SKIP_OR_FAIL(pg.error());
    ASSERT_TRUE(m_llm.start(m_dir.path().string(), {"--script", "kernel", "--latency-ms", "0"}));
    m_url = pg.fresh_database();
    ASSERT_FALSE(m_url.empty()) << pg.error();
  }

  std::string psql(const std::string& sql) {
    auto [rc, out] = run_capture({"psql", "-X", "-tA", m_url, "-c", sql}, m_dir.path().string());
    EXPECT_EQ(rc, 0) << out;
    while (!out.empty() && out.back() == '\n') out.pop_back();
    return out;
  }

  Process start_worker(const std::string& id, double latency_s, double lease_s) {
    const auto d = m_dir.path().string();
    return Process::start(
        {KORCH_BIN, "worker", "--store", m_url, "--evaluator", "mock", "--mock-latency-s",
         std::to_string(latency_s), "--lease-s", std::to_string(lease_s), "--id", id},
        d + "/" + id + ".out", d + "/" + id + ".err");
  }

  // Polls `sql` until it returns `want`; false after `patience`.
  bool wait_for_value(const std::string& sql, const std::string& want,
                      std::chrono::seconds patience = std::chrono::seconds(120)) {
    const auto until = std::chrono::steady_clock::now() + patience;
    while (std::chrono::steady_clock::now() < until) {
      // Quietly: the tables appear once the coordinator has migrated the store.
      auto [rc, out] = run_capture({"psql", "-X", "-tA", m_url, "-c", sql}, m_dir.path().string());
      while (!out.empty() && out.back() == '\n') out.pop_back();
      if (rc == 0 && out == want) return true;
      std::this_thread::sleep_for(std::chrono::milliseconds(100));
    }
    return false;
  }

  TempDir m_dir;
  FakeLlmProcess m_llm;
  std::string m_url;
};

// The chaos test: a coordinator and 4 workers while workers and the
// coordinator are killed with SIGKILL at random and PostgreSQL restarts
// twice. The campaign ends exactly as an uninterrupted in-process run on
// SQLite: every evaluation ran through the queue, none lost, each result
// written once.
TEST_F(EvalQueue, WorkersAndCoordinatorKilledAtRandomLoseAndRepeatNothing) {
  constexpr int k_workers = 4;
  // KORCH_QUEUE_CHAOS_SAMPLES makes the campaign longer (and the kills more
  // numerous) for a soak run: docs/cluster.md reports one with 64 samples.
  const int k_samples = env_int("KORCH_QUEUE_CHAOS_SAMPLES", 16);  // 64 episodes by default
  constexpr double k_latency_s = 0.3;
  constexpr double k_lease_s = 1.5;  // killed workers' claims expire quickly
  const int k_min_kills = std::max(20, k_samples * 5 / 4);
  const auto d = m_dir.path().string();
  auto ref_toml = d + "/ref.toml";
  write_text(ref_toml, campaign_toml("db_path = \"" + d + "/ref.db\"", m_llm.base_url(), k_samples,
                                     k_latency_s, false));
  auto [ref_rc, ref_out] = run_capture({KORCH_BIN, "run", ref_toml, "--no-progress"}, d);
  ASSERT_EQ(ref_rc, 0) << ref_out;
  auto reference = normalized_export(d, ref_toml);
  ASSERT_GT(reference.size(), 32u);

  auto toml = d + "/queue.toml";
  write_text(toml, campaign_toml("[store]\nurl = \"" + m_url + "\"", m_llm.base_url(), k_samples,
                                 k_latency_s, true));
  std::vector<Process> workers;
  std::vector<std::string> worker_ids;
  for (int i = 0; i < k_workers; ++i) {
    worker_ids.push_back("w" + std::to_string(i));
    workers.push_back(start_worker(worker_ids.back(), k_latency_s, k_lease_s));
  }
  auto start_coordinator = [&] {
    return Process::start({KORCH_BIN, "run", toml, "--no-progress"}, d + "/run.out",
                          d + "/run.err");
  };
  auto coordinator = start_coordinator();
  std::mt19937 rng(20261204);
  std::uniform_int_distribution<int> delay_ms(100, 500);
  std::uniform_int_distribution<int> pick(0, k_workers + 1);  // k_workers and up: the coordinator
  int worker_kills = 0, coordinator_kills = 0, restarts = 0, coordinator_exits = 0;
  const auto deadline =
      std::chrono::steady_clock::now() + std::chrono::seconds(240 * std::max(1, k_samples / 16));
  bool finished = false;
  while (std::chrono::steady_clock::now() < deadline) {
    if (auto rc = coordinator.wait_for(std::chrono::milliseconds(delay_ms(rng)))) {
      if (*rc == 0) {
        finished = true;
        break;
      }
      // A store write that failed during a server restart ends the run (an
      // exit code, never a signal: a crash is a failure); it resumes.
      EXPECT_LT(*rc, 128) << "the coordinator died of signal " << *rc - 128 << ": "
                          << slurp(d + "/run.err");
      ++coordinator_exits;
      coordinator = start_coordinator();
      continue;
    }
    const int target = pick(rng);
    if (target < k_workers) {
      workers[target].signal(SIGKILL);
      ASSERT_TRUE(workers[target].wait_for(std::chrono::seconds(30)));
      worker_ids[target] = "w" + std::to_string(target) + "-" + std::to_string(worker_kills);
      workers[target] = start_worker(worker_ids[target], k_latency_s, k_lease_s);
      ++worker_kills;
    } else {
      coordinator.signal(SIGKILL);
      ASSERT_TRUE(coordinator.wait_for(std::chrono::seconds(30)));
      coordinator = start_coordinator();
      ++coordinator_kills;
    }
    if ((worker_kills + coordinator_kills) % 12 == 11 && restarts < 2) {
      ASSERT_TRUE(PostgresServer::shared().restart());
      ++restarts;
    }
  }
  ASSERT_TRUE(finished) << "the campaign did not finish: " << slurp(d + "/run.err");
  // A worker started just before the end may not have installed its SIGTERM
  // handler yet (it would die of the signal, 143): each has registered its
  // row, which it does after installing it, before it is told to drain.
  for (const auto& id : worker_ids)
    ASSERT_TRUE(wait_for_value("SELECT count(*) FROM workers WHERE id = '" + id + "'", "1"))
        << id << " never registered";
  for (auto& w : workers) {
    w.signal(SIGTERM);
    auto rc = w.wait_for(std::chrono::seconds(60));
    ASSERT_TRUE(rc);
    EXPECT_EQ(*rc, 0);
  }
  EXPECT_GE(worker_kills + coordinator_kills, k_min_kills);
  // Only the server's restarts end a coordinator on their own (at most its
  // write in flight, then its restart's first open).
  EXPECT_LE(coordinator_exits, 2 * restarts) << slurp(d + "/run.err");
  RecordProperty("worker_kills", worker_kills);
  RecordProperty("coordinator_kills", coordinator_kills);
  std::printf(
      "queue chaos: %d worker kills, %d coordinator kills, %d coordinator exits, %d "
      "server restarts\n",
      worker_kills, coordinator_kills, coordinator_exits, restarts);

  auto exported = normalized_export(d, toml);
  ASSERT_EQ(exported.size(), reference.size());
  for (std::size_t i = 0; i < reference.size(); ++i) EXPECT_EQ(exported[i], reference[i]) << i;
  // 0 lost: every evaluation of the campaign went through the queue and is done.
  const auto evaluations = psql("SELECT count(*) FROM evaluations");
  EXPECT_EQ(psql("SELECT count(*) FROM eval_queue"), evaluations);
  EXPECT_EQ(psql("SELECT count(*) FROM eval_queue WHERE state <> 'done'"), "0");
  EXPECT_EQ(psql("SELECT count(*) FROM evaluations WHERE state <> 'done'"), "0");
  // 0 duplicated: each result was written once (complete() counts it in the
  // same transaction), although killed workers' evaluations were re-claimed.
  EXPECT_EQ(psql("SELECT COALESCE(SUM(evaluations_done), 0) FROM workers"), evaluations);
  const auto reclaimed = psql("SELECT count(*) FROM eval_queue WHERE claims > 1");
  std::printf("queue chaos: %s evaluations, %s of them claimed more than once\n",
              evaluations.c_str(), reclaimed.c_str());
  EXPECT_NE(reclaimed, "0") << "no kill hit a worker mid-evaluation: the test proved nothing";
  EXPECT_EQ(psql("SELECT count(*) FROM evaluations WHERE failures > 0"), "0");
  EXPECT_EQ(psql("SELECT count(*) FROM finals WHERE verdict = 'worker_crash'"), "0");
}

// SIGTERM drains: the worker finishes the evaluation it holds, writes it,
// takes nothing new, marks its row stopped and exits 0.
TEST_F(EvalQueue, SigtermFinishesTheClaimedEvaluationAndTakesNoNewOne) {
  constexpr double k_latency_s = 3;
  const auto d = m_dir.path().string();
  auto toml = d + "/queue.toml";
  write_text(toml, campaign_toml("[store]\nurl = \"" + m_url + "\"", m_llm.base_url(), 2,
                                 k_latency_s, true));
  auto coordinator =
      Process::start({KORCH_BIN, "run", toml, "--no-progress"}, d + "/run.out", d + "/run.err");
  auto worker = start_worker("drainer", k_latency_s, 30);
  ASSERT_TRUE(wait_for_value(
      "SELECT count(*) FROM eval_queue WHERE state = 'claimed' AND worker_id = 'drainer'", "1"))
      << slurp(d + "/drainer.err");
  worker.signal(SIGTERM);
  auto rc = worker.wait_for(std::chrono::seconds(60));
  ASSERT_TRUE(rc);
  EXPECT_EQ(*rc, 0) << slurp(d + "/drainer.err");
  EXPECT_EQ(psql("SELECT count(*) FROM eval_queue WHERE worker_id = 'drainer'"), "1");
  EXPECT_EQ(psql("SELECT state FROM eval_queue WHERE worker_id = 'drainer'"), "done");
  EXPECT_EQ(psql("SELECT state || ' ' || evaluations_done FROM workers WHERE id = 'drainer'"),
            "stopped 1");
  EXPECT_NE(psql("SELECT count(*) FROM eval_queue WHERE state = 'queued'"), "0")
      << "work was left for others";
  coordinator.signal(SIGINT);
  auto crc = coordinator.wait_for(std::chrono::seconds(60));
  ASSERT_TRUE(crc);
  EXPECT_EQ(*crc, 130) << slurp(d + "/run.err");
}

// A drain that outlasts --drain-s hands the evaluation back: the row is
// queued again (its claim not counted, its token kept, so the old lease can
// no longer write), another worker runs it, and it is counted once.
TEST_F(EvalQueue, DrainPastItsTimeHandsTheEvaluationBackToAnotherWorker) {
  constexpr double k_latency_s = 30;  // the first worker never finishes on its own
  const auto d = m_dir.path().string();
  auto toml = d + "/queue.toml";
  write_text(toml, campaign_toml("[store]\nurl = \"" + m_url + "\"", m_llm.base_url(), 1, 0, true));
  auto coordinator =
      Process::start({KORCH_BIN, "run", toml, "--no-progress"}, d + "/run.out", d + "/run.err");
  auto slow = Process::start(
      {KORCH_BIN, "worker", "--store", m_url, "--evaluator", "mock", "--mock-latency-s",
       std::to_string(k_latency_s), "--lease-s", "600", "--drain-s", "0.5", "--id", "slow"},
      d + "/slow.out", d + "/slow.err");
  ASSERT_TRUE(wait_for_value(
      "SELECT count(*) FROM eval_queue WHERE state = 'claimed' AND worker_id = 'slow'", "1"))
      << slurp(d + "/slow.err");
  const std::string id = psql("SELECT request_id FROM eval_queue WHERE worker_id = 'slow'");
  const auto t0 = std::chrono::steady_clock::now();
  slow.signal(SIGTERM);
  auto rc = slow.wait_for(std::chrono::seconds(20));
  ASSERT_TRUE(rc) << "the drain did not end at --drain-s";
  EXPECT_EQ(*rc, 0) << slurp(d + "/slow.err");
  EXPECT_LT(std::chrono::steady_clock::now() - t0, std::chrono::seconds(10));
  EXPECT_NE(slurp(d + "/slow.err").find("1 handed back"), std::string::npos)
      << slurp(d + "/slow.err");
  // Back in the queue at once (a 600 s lease would otherwise hold it), its
  // claim not counted, its token kept.
  EXPECT_EQ(psql("SELECT state || ' ' || claims || ' ' || lease_token FROM eval_queue WHERE "
                 "request_id = '" +
                 id + "'"),
            "queued 0 1");
  EXPECT_EQ(psql("SELECT state || ' ' || evaluations_done FROM workers WHERE id = 'slow'"),
            "stopped 0");
  auto fast = start_worker("fast", 0, 30);
  auto crc = coordinator.wait_for(std::chrono::seconds(120));
  ASSERT_TRUE(crc);
  EXPECT_EQ(*crc, 0) << slurp(d + "/run.err");
  EXPECT_EQ(psql("SELECT state || ' ' || worker_id || ' ' || claims || ' ' || lease_token FROM "
                 "eval_queue WHERE request_id = '" +
                 id + "'"),
            "done fast 1 2");
  const auto evaluations = psql("SELECT count(*) FROM evaluations");
  EXPECT_EQ(psql("SELECT count(*) FROM eval_queue WHERE state = 'done'"), evaluations);
  EXPECT_EQ(psql("SELECT SUM(evaluations_done) FROM workers"), evaluations) << "counted once";
  EXPECT_EQ(psql("SELECT count(*) FROM evaluations WHERE verdict = 'worker_crash'"), "0");
  fast.signal(SIGTERM);
  ASSERT_TRUE(fast.wait_for(std::chrono::seconds(60)));
}

// A worker process holds two connections whatever its slots: one for
// statements, shared by the slots, and one that LISTENs and wakes them
// (docs/cluster.md sizes max_connections by it). It was 1 + 2 per slot.
TEST_F(EvalQueue, WorkerProcessHoldsTwoConnectionsWhateverItsSlots) {
  const auto d = m_dir.path().string();
  auto worker = Process::start({KORCH_BIN, "worker", "--store", m_url, "--evaluator", "mock",
                                "--slots", "4", "--lease-s", "2", "--id", "four"},
                               d + "/four.out", d + "/four.err");
  const std::string sql =
      "SELECT count(*) FROM pg_stat_activity WHERE datname = current_database() AND "
      "application_name = 'korch'";
  ASSERT_TRUE(wait_for_value("SELECT count(*) FROM workers WHERE id = 'four'", "1"))
      << slurp(d + "/four.err");
  ASSERT_TRUE(wait_for_value(sql, "2", std::chrono::seconds(30))) << psql(sql);
  // Idle slots polling (every lease_s / 2) and heartbeats open nothing more.
  std::this_thread::sleep_for(std::chrono::seconds(3));
  EXPECT_EQ(psql(sql), "2");
  worker.signal(SIGTERM);
  auto rc = worker.wait_for(std::chrono::seconds(60));
  ASSERT_TRUE(rc);
  EXPECT_EQ(*rc, 0) << slurp(d + "/four.err");
}

// Without --config, korch worker takes the same layers as korch run:
// defaults < KORCH_* < --set (a KORCH_EVALUATOR_* variable changes the
// version it serves), and its row names the real korch version.
TEST_F(EvalQueue, WorkerWithoutConfigReadsTheEnvironmentAndSetFlags) {
  const auto d = m_dir.path().string();
  std::map<std::string, std::string> env = {{"KORCH_STORE_URL", m_url},
                                            {"KORCH_EVALUATOR_TIMEOUT_S", "77"},
                                            {"KORCH_EVALUATOR_TOLERANCE", "tf32"}};
  auto worker =
      Process::start({KORCH_BIN, "worker", "--id", "layered", "--set", "evaluator.timeout_s=88"},
                     d + "/layered.out", d + "/layered.err", env);
  ASSERT_TRUE(wait_for_value("SELECT count(*) FROM workers WHERE id = 'layered'", "1"))
      << slurp(d + "/layered.err");
  const auto version = psql("SELECT evaluator_version FROM workers WHERE id = 'layered'");
  EXPECT_NE(version.find("tolerance=tf32"), std::string::npos) << version;
  EXPECT_NE(version.find("timeout_s=88"), std::string::npos) << "--set wins over env: " << version;
  EXPECT_EQ(psql("SELECT korch_version FROM workers WHERE id = 'layered'"), KORCH_VERSION_TEXT);
  auto [vrc, vout] = run_capture({KORCH_BIN, "--version"}, d);
  EXPECT_EQ(vrc, 0);
  EXPECT_EQ(vout.rfind(std::string("korch ") + KORCH_VERSION_TEXT + " ", 0), 0u) << vout;
  worker.signal(SIGTERM);
  auto rc = worker.wait_for(std::chrono::seconds(60));
  ASSERT_TRUE(rc);
  EXPECT_EQ(*rc, 0) << slurp(d + "/layered.err");
  // A bad value in the environment layer is reported as korch run reports it.
  auto [brc, bout] = run_capture({KORCH_BIN, "worker", "--store", m_url}, d,
                                 {{"KORCH_EVALUATOR_TIMEOUT_S", "soon"}});
  EXPECT_EQ(brc, 2) << bout;
  EXPECT_NE(bout.find("KORCH_EVALUATOR_TIMEOUT_S"), std::string::npos) << bout;
}

// A worker whose evaluator differs from the campaign's (here: another
// timeout, a setting verdicts rest on) takes none of its work and says why,
// in its log and in `korch status`.
TEST_F(EvalQueue, WorkerOfAnotherEvaluatorVersionRefusesAndSaysWhy) {
  const auto d = m_dir.path().string();
  auto toml = d + "/queue.toml";
  write_text(toml, campaign_toml("[store]\nurl = \"" + m_url + "\"", m_llm.base_url(), 1, 0, true,
                                 "timeout_s = 120\n"));
  auto coordinator =
      Process::start({KORCH_BIN, "run", toml, "--no-progress"}, d + "/run.out", d + "/run.err");
  auto worker = start_worker("other", 0, 30);  // timeout_s 300, the default
  ASSERT_TRUE(
      wait_for_value("SELECT count(*) > 0 FROM workers WHERE id = 'other' AND note LIKE "
                     "'refusing %timeout_s=120%timeout_s=300%'",
                     "t"))
      << slurp(d + "/other.err");
  EXPECT_EQ(psql("SELECT count(*) FROM eval_queue WHERE worker_id = 'other'"), "0");
  auto [st_rc, status] = run_capture({KORCH_BIN, "status", "--db", m_url}, d);
  EXPECT_EQ(st_rc, 0) << status;
  EXPECT_NE(status.find("note: refusing"), std::string::npos) << status;
  worker.signal(SIGTERM);
  ASSERT_TRUE(worker.wait_for(std::chrono::seconds(60)));
  EXPECT_NE(slurp(d + "/other.err").find("refusing"), std::string::npos);
  // A worker of the campaign's version finishes it.
  auto right =
      Process::start({KORCH_BIN, "worker", "--store", m_url, "--config", toml, "--id", "right"},
                     d + "/right.out", d + "/right.err");
  auto crc = coordinator.wait_for(std::chrono::seconds(120));
  ASSERT_TRUE(crc);
  EXPECT_EQ(*crc, 0) << slurp(d + "/run.err");
  right.signal(SIGTERM);
  ASSERT_TRUE(right.wait_for(std::chrono::seconds(60)));
}

// korch serve as the coordinator: a campaign submitted through the API with
// `[evaluator] remote = true` is evaluated by a worker through the queue.
TEST_F(EvalQueue, ServeSendsASubmittedCampaignsEvaluationsToTheWorkers) {
  const auto d = m_dir.path().string();
  write_text(d + "/token", "queue-test-token\n");
  // Port 0: the kernel picks a free port, which serve prints ("LISTEN api <port>").
  auto serve =
      Process::start({KORCH_BIN, "serve", "--db", m_url, "--listen", "127.0.0.1:0", "--env-listen",
                      "off", "--token-file", d + "/token", "--state-dir", d + "/serve-state"},
                     d + "/serve.out", d + "/serve.err");
  int port = 0;
  for (int i = 0; i < 1500 && port == 0; ++i) {
    auto text = slurp(d + "/serve.out");
    if (auto pos = text.find("LISTEN api ");
        pos != std::string::npos && text.find('\n', pos) != std::string::npos)
      port = std::stoi(text.substr(pos + 11));
    else if (serve.wait_for(std::chrono::milliseconds(20)))
      break;
  }
  ASSERT_GT(port, 0) << slurp(d + "/serve.err");
  const std::string base = "http://127.0.0.1:" + std::to_string(port);
  auto worker = start_worker("served", 0, 30);
  auto curl = [&](std::vector<std::string> extra) {
    std::vector<std::string> argv = {"curl", "-s", "-H", "Authorization: Bearer queue-test-token"};
    argv.insert(argv.end(), extra.begin(), extra.end());
    return run_capture(argv, d);
  };
  bool up = false;
  for (int i = 0; i < 300 && !up; ++i) {
    up = curl({base + "/api/campaigns"}).second.find("campaigns") != std::string::npos;
    if (!up) std::this_thread::sleep_for(std::chrono::milliseconds(100));
  }
  ASSERT_TRUE(up) << slurp(d + "/serve.err");
  write_text(d + "/submit.toml", campaign_toml("", m_llm.base_url(), 1, 0, true));
  auto [rc, created] = curl({"--data-binary", "@" + d + "/submit.toml", base + "/api/campaigns"});
  ASSERT_EQ(rc, 0);
  ASSERT_NE(created.find("\"id\""), std::string::npos) << created;
  bool completed = false;
  for (int i = 0; i < 1200 && !completed; ++i) {
    completed = curl({base + "/api/campaigns"}).second.find("\"completed\"") != std::string::npos;
    if (!completed) std::this_thread::sleep_for(std::chrono::milliseconds(100));
  }
  EXPECT_TRUE(completed) << slurp(d + "/serve.err");
  const auto evaluations = psql("SELECT count(*) FROM evaluations");
  EXPECT_NE(evaluations, "0");
  EXPECT_EQ(psql("SELECT count(*) FROM eval_queue WHERE state = 'done' AND worker_id = 'served'"),
            evaluations);
  // The API lists the fleet as `korch status` does.
  auto workers = curl({base + "/api/workers"}).second;
  EXPECT_NE(workers.find("\"id\":\"served\""), std::string::npos) << workers;
  EXPECT_NE(workers.find("\"evaluations_done\":" + evaluations), std::string::npos) << workers;
  serve.signal(SIGTERM);
  worker.signal(SIGTERM);
  EXPECT_TRUE(serve.wait_for(std::chrono::seconds(60)));
  EXPECT_TRUE(worker.wait_for(std::chrono::seconds(60)));
}

// DESIGN §3's attempt cap: an evaluation whose holders were all lost (here:
// claimed 3 times by a test client that never answers) is not run again; the
// worker that claims it past --max-claims writes worker_crash and says why.
TEST_F(EvalQueue, EvaluationClaimedPastTheCapIsAWorkerCrash) {
  const auto d = m_dir.path().string();
  auto toml = d + "/queue.toml";
  write_text(toml, campaign_toml("[store]\nurl = \"" + m_url + "\"", m_llm.base_url(), 1, 0, true));
  auto coordinator =
      Process::start({KORCH_BIN, "run", toml, "--no-progress"}, d + "/run.out", d + "/run.err");
  ASSERT_TRUE(wait_for_value("SELECT count(*) > 0 FROM eval_queue", "t")) << slurp(d + "/run.err");
  // Three lost holders: claims whose leases expire at once.
  const std::string id = psql("SELECT request_id FROM eval_queue ORDER BY request_id LIMIT 1");
  for (int i = 0; i < 3; ++i) {
    psql(
        "UPDATE eval_queue SET state = 'claimed', claims = claims + 1, lease_token = lease_token + "
        "1, "
        "lease_expires_at = 0 WHERE request_id = '" +
        id + "'");
  }
  auto worker = Process::start({KORCH_BIN, "worker", "--store", m_url, "--evaluator", "mock",
                                "--max-claims", "3", "--id", "capped"},
                               d + "/capped.out", d + "/capped.err");
  auto crc = coordinator.wait_for(std::chrono::seconds(120));
  ASSERT_TRUE(crc);
  EXPECT_EQ(*crc, 0) << slurp(d + "/run.err");
  EXPECT_EQ(psql("SELECT claims FROM eval_queue WHERE request_id = '" + id + "'"), "4");
  EXPECT_EQ(psql("SELECT verdict FROM evaluations WHERE request_id = '" + id + "'"),
            "worker_crash");
  EXPECT_NE(psql("SELECT result_json FROM eval_queue WHERE request_id = '" + id + "'")
                .find("claimed 4 times"),
            std::string::npos);
  EXPECT_EQ(psql("SELECT count(*) FROM evaluations WHERE verdict = 'worker_crash'"), "1");
  worker.signal(SIGTERM);
  ASSERT_TRUE(worker.wait_for(std::chrono::seconds(60)));
}

// A remote gpu campaign's queue version names the GPU model of the first
// worker that registered, pinned with its device text at the campaign's
// first start: an A100 worker never takes an H100 campaign's rows, and a
// resumed coordinator says and asks for the same device without asking the
// workers again.
TEST_F(EvalQueue, GpuCampaignPinsTheFirstWorkersModelAndDevice) {
  config::EvaluatorConfig cfg;
  cfg.mode = config::EvalMode::gpu;
  cfg.remote = true;
  const std::string plain(evaluator::schema::k_evaluator_version);
  const std::string h100 = remote::queue_version(cfg, plain, "NVIDIA H100 80GB HBM3");
  const std::string a100 = remote::queue_version(cfg, plain, "NVIDIA A100-SXM4-80GB");
  ASSERT_NE(h100, a100);
  EXPECT_EQ(remote::device_model_of(h100, remote::queue_version_for(cfg)), "NVIDIA H100 80GB HBM3");
  auto q = store::WorkQueue::open(m_url);
  ASSERT_TRUE(q) << q.error().message;
  auto register_worker = [&](const std::string& id, const std::string& version,
                             const std::string& text) {
    store::WorkerRow w;
    w.id = id;
    w.host = id;
    w.gpus = "0";
    w.slots = 1;
    w.evaluator_version = version;
    w.mode = "gpu";
    w.device_description = text;
    w.state = "running";
    ASSERT_TRUE((*q)->put_worker(w));
  };
  register_worker("h", h100, "NVIDIA H100 80GB HBM3 (compute capability 9.0)");
  std::string first_text;
  {
    auto ev = remote::make_queue_evaluator(cfg, m_url, "camp-gpu");
    ASSERT_TRUE(ev) << ev.error().message;
    first_text = (*ev)->device_description();
    EXPECT_EQ(first_text, "NVIDIA H100 80GB HBM3 (compute capability 9.0)");
    evaluator::Request r;
    r.request_id = "kernel|x|1";
    r.task.id = "L1/1";
    (*ev)->evaluate(r, [](evaluator::Report) {});
    ASSERT_TRUE(wait_for_value("SELECT evaluator_version FROM eval_queue", h100));
    (*ev)->shutdown();
  }
  // The A100 worker takes none of it; the H100 one does.
  EXPECT_FALSE((*q)->claim("a", a100, 60).value());
  auto foreign = (*q)->foreign_work(a100).value();
  ASSERT_EQ(foreign.size(), 1u);
  EXPECT_EQ(foreign[0].evaluator_version, h100);
  // A resume, with only an A100 worker left: the pinned device holds.
  psql("DELETE FROM workers");
  ASSERT_EQ(psql("SELECT count(*) FROM workers"), "0");
  register_worker("a", a100, "NVIDIA A100-SXM4-80GB (compute capability 8.0)");
  auto ev = remote::make_queue_evaluator(cfg, m_url, "camp-gpu");
  ASSERT_TRUE(ev) << ev.error().message;
  const auto t0 = std::chrono::steady_clock::now();
  EXPECT_EQ((*ev)->device_description(), first_text);
  EXPECT_LT(std::chrono::steady_clock::now() - t0, std::chrono::seconds(5)) << "no wait on resume";
  EXPECT_EQ(psql("SELECT device_model FROM campaign_devices WHERE campaign_id = 'camp-gpu'"),
            "NVIDIA H100 80GB HBM3");
  (*ev)->shutdown();
  auto claim = (*q)->claim("h", h100, 60).value();
  ASSERT_TRUE(claim);
  EXPECT_EQ(claim->request_id, "kernel|x|1");
}

TEST_F(EvalQueue, RemoteEvaluatorOnSqliteIsAClearError) {
  const auto d = m_dir.path().string();
  auto toml = d + "/sqlite.toml";
  write_text(toml, campaign_toml("db_path = \"" + d + "/x.db\"", m_llm.base_url(), 1, 0, true));
  auto [rc, out] = run_capture({KORCH_BIN, "run", toml, "--no-progress"}, d);
  EXPECT_NE(rc, 0);
  EXPECT_NE(out.find("needs a PostgreSQL store"), std::string::npos) << out;
  auto [wrc, wout] = run_capture({KORCH_BIN, "worker", "--store", d + "/x.db"}, d);
  EXPECT_EQ(wrc, 2) << wout;
  EXPECT_NE(wout.find("--db must name the PostgreSQL store"), std::string::npos) << wout;
}

// A worker evaluates the request the coordinator sent, not the code and
// mode alone (issue #47): the mock echoes a digest of the seed, the task,
// the rules flag and the device, and a `korch worker` process's report
// through the queue carries the digest of the same request evaluated in
// process.
TEST_F(EvalQueue, TheWorkerEvaluatesTheRequestTheCoordinatorSent) {
  config::EvaluatorConfig cfg;
  cfg.mode = config::EvalMode::mock;
  auto worker = start_worker("w-digest", 0, 30);
  evaluator::Request r;
  r.request_id = "kernel|digest|1";
  r.mode = evaluator::Mode::submit;
  r.task = {"L2/23_Conv3d_GroupNorm_Mean",
            2,
            23,
            "Conv3d_GroupNorm_Mean",
            "/k/level2/23_Conv3d_GroupNorm_Mean.py",
            "class Model:\n    pass\n"};
  r.code = "class ModelNew: pass  # MOCK_SPEEDUP: 1.5\n";
  r.secret_seed = 0xF00DCAFE12345678ULL;
  r.rules = false;
  r.device = config::EvalMode::cpu;
  auto evaluate = [&](evaluator::Evaluator& ev) {
    std::promise<evaluator::Report> done;
    ev.evaluate(r, [&](evaluator::Report rep) { done.set_value(std::move(rep)); });
    auto f = done.get_future();
    EXPECT_EQ(f.wait_for(std::chrono::seconds(120)), std::future_status::ready);
    return f.get();
  };
  auto queued = remote::make_queue_evaluator(cfg, m_url, "camp-digest");
  ASSERT_TRUE(queued) << queued.error().message;
  const auto remote = evaluate(**queued);
  (*queued)->shutdown();
  auto local = evaluator::make_evaluator(cfg, "");
  ASSERT_TRUE(local) << local.error().message;
  const auto here = evaluate(**local);
  (*local)->shutdown();
  worker.signal(SIGTERM);
  worker.wait_for(std::chrono::seconds(60));
  EXPECT_EQ(remote.status, evaluator::Verdict::ok) << remote.error;
  const std::string want = here.evidence.value("request_digest", "");
  ASSERT_EQ(want.size(), 64u);
  EXPECT_EQ(remote.evidence.value("request_digest", ""), want) << remote.evidence.dump();
  EXPECT_EQ(psql("SELECT worker_id FROM eval_queue WHERE request_id = 'kernel|digest|1'"),
            "w-digest");
}

// An evaluation the host failed on a worker (the evaluator's
// "infrastructure: ..." outcome) goes back to the queue and runs again; the
// result is the re-run's (issue #47: the episode's re-run found the stored
// row and got the same outcome in milliseconds). The mock's
// MOCK_INFRASTRUCTURE marker fails the request's first run on this worker.
TEST_F(EvalQueue, AnEvaluationTheHostFailedRunsAgainAndTheResultIsTheRerun) {
  config::EvaluatorConfig cfg;
  cfg.mode = config::EvalMode::mock;
  auto worker = start_worker("w-host", 0, 30);
  evaluator::Request r;
  r.request_id = "kernel|host|1";
  r.mode = evaluator::Mode::submit;
  r.task.id = "L1/1";
  r.code = "class ModelNew: pass  # MOCK_INFRASTRUCTURE: 1 MOCK_SPEEDUP: 1.5\n";
  auto ev = remote::make_queue_evaluator(cfg, m_url, "camp-host");
  ASSERT_TRUE(ev) << ev.error().message;
  std::promise<evaluator::Report> done;
  (*ev)->evaluate(r, [&](evaluator::Report rep) { done.set_value(std::move(rep)); });
  auto f = done.get_future();
  ASSERT_EQ(f.wait_for(std::chrono::seconds(60)), std::future_status::ready);
  const auto rep = f.get();
  (*ev)->shutdown();
  worker.signal(SIGTERM);
  worker.wait_for(std::chrono::seconds(60));
  EXPECT_EQ(rep.status, evaluator::Verdict::ok) << rep.error;
  ASSERT_TRUE(rep.speedup.has_value());
  EXPECT_DOUBLE_EQ(*rep.speedup, 1.5);
  // Two runs (the hand-back counted as a claim), one result, written once.
  EXPECT_EQ(
      psql("SELECT claims || ' ' || state FROM eval_queue WHERE request_id = 'kernel|host|1'"),
      "2 done");
  EXPECT_EQ(psql("SELECT evaluations_done FROM workers WHERE id = 'w-host'"), "1");
  const auto log = slurp(m_dir.path().string() + "/w-host.err");
  EXPECT_NE(log.find("infrastructure: mock: the host failed run 1"), std::string::npos) << log;
  EXPECT_NE(log.find("handed back to run again"), std::string::npos) << log;
}

// A `korch worker --evaluator cpu` process evaluates a real candidate
// through the queue (issue #47: every other queue test runs the mock): the
// corpus's cpp_relu (its library in the shared test cache), CHECK on the
// ReLU task, is `ok`, run by the CPU evaluator with its rules.
TEST_F(EvalQueue, ACpuWorkerEvaluatesARealCandidate) {
  if (!std::filesystem::exists(KORCH_WORKER_BIN)) KORCH_SKIP_OR_FAIL("korch-worker was not built");
  const auto d = m_dir.path().string();
  auto worker =
      Process::start({KORCH_BIN, "worker", "--store", m_url, "--evaluator", "cpu", "--cache-dir",
                      KORCH_TEST_CACHE, "--lease-s", "60", "--id", "w-cpu"},
                     d + "/w-cpu.out", d + "/w-cpu.err");
  config::EvaluatorConfig cfg;
  cfg.mode = config::EvalMode::cpu;
  auto task = config::load_task_file(KORCH_SOURCE_DIR "/examples/tasks/1_ReLU_small.py");
  ASSERT_TRUE(task) << task.error().message;
  evaluator::Request r;
  r.request_id = "check|cpp_relu|1";
  r.mode = evaluator::Mode::check;
  r.task = *task;
  r.code = slurp(KORCH_SOURCE_DIR "/tests/evaluator/corpus/good/cpp_relu.py");
  r.secret_seed = 20261206;
  auto ev = remote::make_queue_evaluator(cfg, m_url, "camp-cpu");
  ASSERT_TRUE(ev) << ev.error().message;
  std::promise<evaluator::Report> done;
  (*ev)->evaluate(r, [&](evaluator::Report rep) { done.set_value(std::move(rep)); });
  auto f = done.get_future();
  ASSERT_EQ(f.wait_for(std::chrono::seconds(240)), std::future_status::ready)
      << slurp(d + "/w-cpu.err");
  const auto rep = f.get();
  (*ev)->shutdown();
  worker.signal(SIGTERM);
  worker.wait_for(std::chrono::seconds(60));
  EXPECT_EQ(rep.status, evaluator::Verdict::ok) << rep.error << "\n" << rep.runtime_detail;
  EXPECT_EQ(rep.mode, "cpu");
  EXPECT_FALSE(rep.mock);
  EXPECT_FALSE(rep.rules_skipped);
  EXPECT_TRUE(rep.correct);
  EXPECT_EQ(psql("SELECT worker_id FROM eval_queue WHERE request_id = 'check|cpp_relu|1'"),
            "w-cpu");
}

// The queue carries every field of a Request to the worker (issue #47): the
// queue tests above run the mock evaluator, which reads only the code and the
// mode, so a secret_seed, a task source, a rules flag or a device lost on
// the way would pass all of them. Each field is set to a value unlike its
// default (the seed above 2^63) and compared after the round trip. The
// structured bindings stop the build when Request or Task gains a field,
// until this test sets it too.
TEST(EvalQueueCodec, EveryRequestFieldTravelsToTheWorker) {
  evaluator::Request r;
  r.request_id = "kernel|5e3d";
  r.mode = evaluator::Mode::submit;
  r.task = {"L2/23_Conv3d_GroupNorm_Mean",
            2,
            23,
            "Conv3d_GroupNorm_Mean",
            "/k/level2/23_Conv3d_GroupNorm_Mean.py",
            "class Model:\n    \"\u00e9\"\n"};
  r.code = "class ModelNew:\n    pass  # \"quoted\" \\ \u00fc\n";
  r.secret_seed = 0xF00DCAFE12345678ULL;
  r.rules = false;
  r.device = config::EvalMode::gpu;
  const auto& [id, mode, task, code, seed, rules, device] = r;
  const auto& [task_id, level, number, name, path, source] = r.task;

  auto back = remote::decode_request(remote::encode_request(r));
  ASSERT_TRUE(back) << back.error().message;
  EXPECT_EQ(back->request_id, id);
  EXPECT_EQ(back->mode, mode);
  EXPECT_EQ(back->task.id, task_id);
  EXPECT_EQ(back->task.level, level);
  EXPECT_EQ(back->task.number, number);
  EXPECT_EQ(back->task.name, name);
  EXPECT_EQ(back->task.path, path);
  EXPECT_EQ(back->task.source, source);
  EXPECT_EQ(back->code, code);
  EXPECT_EQ(back->secret_seed, seed);
  EXPECT_EQ(back->rules, rules);
  EXPECT_EQ(back->device, device);

  // The other values of the flags and the device: each travels as set.
  r.mode = evaluator::Mode::check;
  r.rules = true;
  r.device.reset();
  back = remote::decode_request(remote::encode_request(r));
  ASSERT_TRUE(back) << back.error().message;
  EXPECT_EQ(back->mode, evaluator::Mode::check);
  EXPECT_TRUE(back->rules);
  EXPECT_FALSE(back->device.has_value());
  r.device = config::EvalMode::cpu;
  EXPECT_EQ(remote::decode_request(remote::encode_request(r))->device, config::EvalMode::cpu);
}

}  // namespace
}  // namespace korch::testing
