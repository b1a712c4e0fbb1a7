// The durability proof of DESIGN §3: a real `korch run` process against a
// real fake-LLM process is stopped at random moments — SIGKILL and SIGINT
// (Ctrl-C), at any point and while evaluations run — restarted each time,
// and must end exactly where an uninterrupted run ends (docs/export.md,
// "Interruptions never change results").
#include <gtest/gtest.h>

#include <functional>
#include <nlohmann/json.hpp>
#include <random>

#include "tests/integration/campaign_fixture.hpp"
#include "tests/integration/export_fixture.hpp"
#include "tests/support/required.hpp"

namespace korch::testing {
namespace {

constexpr int k_kills = KORCH_KILL_COUNT;  // >= 50 in CI; more in tools/bench
constexpr int k_exit_interrupted = 130;    // tools/korch/cli.hpp
// Simulated evaluation time: long next to the LLM latency (60 ms), so that
// kills land while evaluations run.
constexpr double k_eval_latency_s = 0.15;

// KernelBench level 1 gives 12 distinct task prompts (so the scripted model
// takes many different paths); without the shared copy, the 4 bundled tasks
// with more samples, so the campaign still outlasts the kills.
bool have_shared_kernelbench() {
  return std::filesystem::exists(KORCH_SHARED_KERNELBENCH "/level1");
}

std::string task_section() {
  if (have_shared_kernelbench()) {
    return "samples_per_task = 5\n[tasks]\nkernelbench_dir = \"" KORCH_SHARED_KERNELBENCH
           "\"\nlevels = [1]\nids = \"1-12\"\n";
  }
  std::fprintf(
      stderr,
      "note: no KernelBench copy at %s; the kill test runs 15 samples of the 4 bundled tasks\n",
      KORCH_SHARED_KERNELBENCH);
  return "samples_per_task = 15\n[tasks]\nkernelbench_dir = \"" KORCH_EXAMPLES_DIR
         "/tasks\"\nids = \"1-4\"\n";
}

std::string campaign_toml(const std::string& db, const std::string& base_url,
                          const std::string& mode) {
  std::ostringstream s;
  s << "name = \"killtest\"\n"
    << "db_path = \"" << db << "\"\n"
    << "max_turns = 4\n"
    << "max_inflight_episodes = 8\n"
    << "synchronous = \"FULL\"\n"
    << "log_level = \"warn\"\n"
    << task_section() << "[evaluator]\nmode = \"" << mode
    << "\"\nmock_latency_s = " << k_eval_latency_s << "\n"
    << "[[models]]\nid = \"m1\"\nbase_url = \"" << base_url
    << "\"\nmodel = \"fake-1\"\nconcurrency = 8\n"
    << "max_attempts = 3\nconnect_timeout_s = 2\n"
    << "price_prompt_per_mtok = 1.0\nprice_completion_per_mtok = 2.0\n"
    << "[[models]]\nid = \"m2\"\nbase_url = \"" << base_url
    << "\"\nmodel = \"fake-2\"\nconcurrency = 8\n"
    << "max_attempts = 3\nconnect_timeout_s = 2\n"
    << "[[events]]\nkind = \"crash\"\nturn = 3\nsamples = [2]\n"
    << "[[events]]\nkind = \"compaction\"\nturn = 3\nsamples = [3]\n"
    << "[[events]]\nkind = \"model_swap\"\nturn = 2\nmodel = \"m2\"\nsamples = [4]\n";
  return s.str();
}

// The fake LLM's request log past its first `skip` lines (the reference
// run's): it received some requests, and none after that call's reply was
// committed to `db` (no LLM call sent again once its reply was stored).
// Returns how many requests it received.
int expect_no_call_resent(const std::string& db, const std::string& request_log, std::size_t skip) {
  std::map<std::string, double> committed_at;
  for (auto& row : query(db, "SELECT request_id, finished_at FROM llm_calls WHERE state = 'done'"))
    committed_at[row[0]] = std::stod(row[1]);
  std::ifstream log(request_log);
  std::string line;
  for (std::size_t i = 0; i < skip; ++i) std::getline(log, line);
  double t = 0;
  std::string id;
  int received = 0;
  while (log >> t >> id) {
    ++received;
    auto it = committed_at.find(id);
    if (it != committed_at.end()) {
      EXPECT_LE(t, it->second) << id << " was received after its reply was committed";
    }
  }
  EXPECT_GT(received, 0);
  return received;
}

// Evaluations that the korch process `pid` started and that have no result.
std::string running_evals_of(const std::string& db, pid_t pid) {
  return poll_value(db,
                    "SELECT COUNT(*) FROM evaluations WHERE state = 'running' AND owner LIKE '%:" +
                        std::to_string(pid) + ":%'")
      .value_or("0");
}

TEST(KillResume, RandomSigkillsAndSigintsLoseAndRepeatNothing) {
  TempDir dir;
  auto d = dir.path().string();
  FakeLlmProcess llm;
  ASSERT_TRUE(
      llm.start(d, {"--script", "kernel", "--latency-ms", "60", "--log", d + "/requests.log"}));

  // 1. The reference: one uninterrupted run.
  auto t0 = std::chrono::steady_clock::now();
  auto seconds_since = [](auto t) {
    return std::chrono::duration<double>(std::chrono::steady_clock::now() - t).count();
  };
  auto ref_toml = d + "/ref.toml";
  write_text(ref_toml, campaign_toml(d + "/ref.db", llm.base_url(), "mock"));
  auto [ref_rc, ref_out] = run_capture({KORCH_BIN, "run", ref_toml, "--no-progress"}, d);
  ASSERT_EQ(ref_rc, 0) << ref_out;
  auto reference = normalized_export(d, ref_toml);
  ASSERT_GT(reference.size(), 40u);
  // The reference run used the same request ids; only later lines count.
  const std::size_t ref_log_lines = line_count(d + "/requests.log");
  const double ref_s = seconds_since(t0);
  t0 = std::chrono::steady_clock::now();

  // 2. The same campaign, stopped at random moments. Four kinds of stop, in
  // turn: SIGKILL or SIGINT, after a random delay or once this process has
  // an evaluation running (then a little later, well within its latency);
  // and every fourth SIGKILL once the LLM server has received a request of
  // this process (then 10 ms later, well within the server's 60 ms latency),
  // so that calls in flight at a kill are certain, not luck: on a loaded
  // machine korch's start-up alone can outlast the random delays.
  auto toml = d + "/kill.toml";
  auto db = d + "/kill.db";
  write_text(toml, campaign_toml(db, llm.base_url(), "mock"));
  std::mt19937 rng(KORCH_KILL_SEED);
  std::uniform_int_distribution<int> delay_ms(30, 350);
  std::uniform_int_distribution<int> in_eval_ms(0, static_cast<int>(k_eval_latency_s * 1000 / 2));
  int kills = 0, sigints = 0, during_eval = 0, completed_early = 0;
  while (kills < k_kills) {
    auto p =
        Process::start({KORCH_BIN, "run", toml, "--no-progress"}, d + "/kill.out", d + "/kill.err");
    const bool at_eval = kills % 2 == 1;
    const bool at_llm = kills % 8 == 0;
    const int sig = kills % 4 >= 2 ? SIGINT : SIGKILL;
    const std::size_t lines_before = line_count(d + "/requests.log");
    std::optional<int> rc;
    if (at_llm) {
      wait_until(
          p, [&] { return line_count(d + "/requests.log") > lines_before; },
          std::chrono::seconds(60));
      rc = p.wait_for(std::chrono::milliseconds(10));
    } else if (at_eval) {
      wait_until(
          p, [&] { return running_evals_of(db, p.pid()) != "0"; }, std::chrono::seconds(60));
      rc = p.wait_for(std::chrono::milliseconds(in_eval_ms(rng)));
    } else {
      rc = p.wait_for(std::chrono::milliseconds(delay_ms(rng)));
    }
    if (rc) {
      ASSERT_EQ(*rc, 0) << slurp(d + "/kill.err");
      ++completed_early;
      break;  // the campaign finished before this kill
    }
    p.signal(sig);
    auto exit = p.wait_for(std::chrono::seconds(60));
    ASSERT_TRUE(exit) << "korch did not stop after signal " << sig << "\n"
                      << slurp(d + "/kill.err");
    if (sig == SIGKILL) {
      ASSERT_EQ(*exit, 128 + SIGKILL);
    } else {
      ASSERT_EQ(*exit, k_exit_interrupted) << slurp(d + "/kill.err");
      ++sigints;
    }
    ++kills;
    if (running_evals_of(db, p.pid()) != "0") ++during_eval;
  }
  const double kill_s = seconds_since(t0);
  t0 = std::chrono::steady_clock::now();
  auto final_run = run_capture({KORCH_BIN, "run", toml, "--no-progress"}, d);
  ASSERT_EQ(final_run.first, 0) << final_run.second;
  const double final_s = seconds_since(t0);
  EXPECT_GE(kills, 50) << "the campaign finished after only " << kills << " kills; make it longer";
  // Waiting for a running evaluation makes this all but certain; the bound
  // is loose so that a stalled machine cannot turn it red.
  EXPECT_GE(during_eval, k_kills / 10) << "too few stops landed while an evaluation ran";
  RecordProperty("kills", kills);
  RecordProperty("sigints", sigints);
  RecordProperty("kills_during_evaluations", during_eval);

  // No turn lost, nothing extra, no result changed: the export equals the
  // uninterrupted run's (no interrupted evaluation became worker_crash).
  auto resumed = normalized_export(d, toml);
  ASSERT_NO_FATAL_FAILURE(expect_same_export(resumed, reference));

  // Every episode is final.
  EXPECT_EQ(query(db, "SELECT COUNT(*) FROM episodes WHERE status != 'final'")[0][0], "0");
  // No request id with two recorded results (and one evaluation per id).
  EXPECT_TRUE(
      query(db, "SELECT request_id FROM evaluations GROUP BY request_id HAVING COUNT(*) > 1")
          .empty());
  EXPECT_TRUE(query(db, "SELECT request_id FROM llm_calls GROUP BY request_id HAVING COUNT(*) > 1")
                  .empty());
  EXPECT_TRUE(
      query(db, "SELECT episode_id FROM finals GROUP BY episode_id HAVING COUNT(*) > 1").empty());
  EXPECT_EQ(query(db, "SELECT COUNT(*) FROM evaluations WHERE state != 'done'")[0][0], "0");
  // Interrupted evaluations were re-run, never counted as failures.
  EXPECT_EQ(query(db, "SELECT COUNT(*) FROM evaluations WHERE failures > 0")[0][0], "0");
  EXPECT_EQ(query(db, "SELECT COUNT(*) FROM finals WHERE verdict = 'worker_crash'")[0][0], "0");
  auto max_eval_starts = query(db, "SELECT MAX(attempts) FROM evaluations")[0][0];

  // No LLM call re-sent after its reply was committed: every time the server
  // received a request id, that id's reply was not yet committed.
  const int received = expect_no_call_resent(db, d + "/requests.log", ref_log_lines);

  // dup_possible is true for every call the server received more than once
  // (more often than the last send's own HTTP attempts), false for every
  // call sent once; the export shows what the store holds.
  auto seen = receptions(d + "/requests.log", ref_log_lines);
  int received_twice = 0, marked = 0, marked_received_once = 0;
  std::map<std::pair<std::string, int>, bool> dup_of_turn;
  for (auto& row :
       query(db,
             "SELECT l.request_id, l.sends, l.dup_possible, l.http_attempts, t.episode_id, t.turn "
             "FROM llm_calls l LEFT JOIN turns t ON t.llm_request_id = l.request_id")) {
    const auto& request_id = row[0];
    int sends = std::stoi(row[1]);
    bool dup = row[2] == "1";
    int http_attempts = std::stoi(row[3]);
    int got = seen[request_id];
    if (got > std::max(1, http_attempts)) {
      ++received_twice;
      EXPECT_TRUE(dup) << request_id << " was received " << got << " times but is not dup_possible";
    }
    if (sends == 1) {
      EXPECT_FALSE(dup) << request_id << " was sent once but is dup_possible";
    }
    if (dup) {
      ++marked;
      EXPECT_GE(sends, 2) << request_id;
      if (got <= 1) ++marked_received_once;  // killed before its first send left korch
    }
    if (!row[4].empty()) dup_of_turn[{row[4], std::stoi(row[5])}] = dup;
  }
  EXPECT_GT(received_twice, 0)
      << "no call was in flight at a kill; the test proves nothing about dup_possible";
  for (auto& rec : export_records(d, toml)) {
    if (rec["type"] != "attempt") continue;
    auto it = dup_of_turn.find({rec["episode_id"].get<std::string>(), rec["turn"].get<int>()});
    ASSERT_NE(it, dup_of_turn.end()) << rec.dump();
    EXPECT_EQ(rec["dup_possible"].get<bool>(), it->second) << rec.dump();
  }
  RecordProperty("received_more_than_once", received_twice);
  RecordProperty("dup_possible_rows", marked);
  std::printf(
      "kills %d (%d SIGINT, %d during an evaluation), completed early %d, server receptions %d, "
      "ids received more than once %d, dup_possible %d (%d of them received once), most starts of "
      "one "
      "evaluation %s; reference run %.1f s, kills %.1f s, final run %.1f s\n",
      kills, sigints, during_eval, completed_early, received, received_twice, marked,
      marked_received_once, max_eval_starts.c_str(), ref_s, kill_s, final_s);
}

}  // namespace
}  // namespace korch::testing

namespace korch::testing {
namespace {

// Zygote pids recorded by evaluators in <cache>/run (zygote-<daemon>-<pid>.json).
std::vector<int> recorded_zygotes(const std::string& cache) {
  std::vector<int> pids;
  std::error_code ec;
  for (auto& e : std::filesystem::directory_iterator(cache + "/run", ec)) {
    auto name = e.path().filename().string();
    if (!name.starts_with("zygote-")) continue;
    auto j = nlohmann::json::parse(slurp(e.path().string()), nullptr, false);
    if (j.is_object()) pids.push_back(j.value("zygote_pid", 0));
  }
  return pids;
}

bool is_live_worker(int pid) {
  if (pid <= 0 || ::kill(pid, 0) != 0) return false;
  auto stat = slurp("/proc/" + std::to_string(pid) + "/stat");
  if (stat.find(") Z ") != std::string::npos) return false;  // a zombie is not running
  return slurp("/proc/" + std::to_string(pid) + "/cmdline").find("korch-worker") !=
         std::string::npos;
}

// The same durability proof with the real CPU evaluator: kills (SIGKILL and
// SIGINT in turn) land while sandboxed workers compile, check and time
// candidates. A SIGINT makes the evaluator kill its workers; what they
// report then must never be recorded.
TEST(KillResume, CpuEvaluatorKillsLeaveNoOrphansAndNoDoubleResults) {
  if (!std::filesystem::exists(KORCH_WORKER_BIN)) KORCH_SKIP_OR_FAIL("korch-worker was not built");
  TempDir dir;
  auto d = dir.path().string();
  FakeLlmProcess llm;
  ASSERT_TRUE(
      llm.start(d, {"--script", "replay:" KORCH_SOURCE_DIR "/tests/integration/cpu_replay.json",
                    "--latency-ms", "20"}));
  // One cache per checkout: the test asserts on the zygote records in
  // <cache>/run, and a second checkout running this test at the same time
  // (a developer's tree and a CI clone) wrote its own records there.
  auto cache = std::string(KORCH_TEST_CACHE) + "/kill-cpu-" +
               std::to_string(std::hash<std::string>{}(KORCH_SOURCE_DIR) % 1000000007u);
  std::ostringstream toml;
  toml << "name = \"killcpu\"\ndb_path = \"" << d
       << "/cpu.db\"\nsamples_per_task = 4\nmax_turns = 2\n"
       << "max_inflight_episodes = 2\nlog_level = \"warn\"\n"
       << "[tasks]\nkernelbench_dir = \"" << KORCH_EXAMPLES_DIR << "/tasks\"\nids = \"1\"\n"
       << "[evaluator]\nmode = \"cpu\"\nworkers = 2\ntimeout_s = 120\ncache_dir = \"" << cache
       << "\"\n"
       << "[[models]]\nid = \"m1\"\nbase_url = \"" << llm.base_url() << "\"\nmodel = \"fake\"\n";
  auto path = d + "/cpu.toml";
  write_text(path, toml.str());

  std::mt19937 rng(KORCH_KILL_SEED);
  std::uniform_int_distribution<int> delay_ms(1500, 9000);
  std::set<int> zygotes_of_killed_runs;
  int kills = 0;
  for (int i = 0; i < KORCH_CPU_KILL_COUNT; ++i) {
    auto p =
        Process::start({KORCH_BIN, "run", path, "--no-progress"}, d + "/cpu.out", d + "/cpu.err");
    auto rc = p.wait_for(std::chrono::milliseconds(delay_ms(rng)));
    if (rc) {
      ASSERT_EQ(*rc, 0) << slurp(d + "/cpu.err");
      break;
    }
    // Zygotes this run recorded (a SIGINT'd run removes its record on exit).
    for (int z : recorded_zygotes(cache)) zygotes_of_killed_runs.insert(z);
    const int sig = i % 2 == 1 ? SIGINT : SIGKILL;
    p.signal(sig);
    auto exit = p.wait_for(std::chrono::seconds(120));
    ASSERT_TRUE(exit) << "korch did not stop after signal " << sig << "\n" << slurp(d + "/cpu.err");
    ASSERT_EQ(*exit, sig == SIGKILL ? 128 + SIGKILL : k_exit_interrupted) << slurp(d + "/cpu.err");
    ++kills;
    for (int z : recorded_zygotes(cache)) zygotes_of_killed_runs.insert(z);
  }
  // A run that finished before it was signalled tests no resume: at least
  // one SIGKILL and one SIGINT must have landed (the campaign's evaluations
  // take far longer than the 1.5-9 s between starts and kills).
  EXPECT_GE(kills, 2) << "the campaign ended before it could be killed twice";
  auto final_run = run_capture({KORCH_BIN, "run", path, "--no-progress"}, d);
  ASSERT_EQ(final_run.first, 0) << final_run.second;
  std::printf(
      "cpu kill test: %d kills (SIGKILL and SIGINT in turn), %zu zygotes recorded by killed runs\n",
      kills, zygotes_of_killed_runs.size());

  // No orphaned worker: every zygote a killed korch left behind is gone
  // after the restart, and the finished run left no record behind.
  for (int z : zygotes_of_killed_runs)
    EXPECT_FALSE(is_live_worker(z)) << "orphaned korch-worker zygote " << z;
  {
    // A record left behind: say whose (daemon pid, zygote pid, alive?).
    std::string left;
    std::error_code ec;
    for (auto& e : std::filesystem::directory_iterator(cache + "/run", ec))
      left += e.path().filename().string() + " " + slurp(e.path().string()) + "\n";
    for (int z : recorded_zygotes(cache))
      left += "zygote " + std::to_string(z) + (is_live_worker(z) ? " alive\n" : " gone\n");
    EXPECT_TRUE(recorded_zygotes(cache).empty()) << left << "final run:\n"
                                                 << final_run.second.substr(0, 3000);
  }

  auto db = d + "/cpu.db";
  EXPECT_EQ(query(db, "SELECT COUNT(*) FROM episodes WHERE status != 'final'")[0][0], "0");
  EXPECT_TRUE(
      query(db, "SELECT request_id FROM evaluations GROUP BY request_id HAVING COUNT(*) > 1")
          .empty());
  EXPECT_EQ(query(db, "SELECT COUNT(*) FROM evaluations WHERE state != 'done'")[0][0], "0");
  // The replayed kernel is correct: every episode ends with a correct
  // submission, however often its evaluations were interrupted.
  EXPECT_EQ(query(db, "SELECT COUNT(*) FROM finals WHERE verdict = 'ok' AND correct = 1")[0][0],
            "4")
      << final_run.second;
  EXPECT_EQ(query(db, "SELECT COUNT(*) FROM evaluations WHERE verdict = 'worker_crash'")[0][0],
            "0");
  std::printf("cpu kill test: most starts of one evaluation %s\n",
              query(db, "SELECT MAX(attempts) FROM evaluations")[0][0].c_str());
}

// Strategies across rounds (issue #37): a refine campaign (rounds seeded with
// the best verified kernel so far) and a budget campaign (a seeded bandit
// over two models under a spend cap), SIGKILLed at random moments, at LLM
// requests in flight and while evaluations run, and restarted each time.
// Their turns must equal an uninterrupted run's (no turn lost or repeated),
// and their strategy decisions too: the same events, decision for decision.
std::string strategy_toml(const std::string& db, const std::string& base_url,
                          const std::string& strategy) {
  std::ostringstream s;
  s << "name = \"killstrategy\"\n"
    << "db_path = \"" << db << "\"\n"
    << "max_turns = 3\nmax_inflight_episodes = 6\nsynchronous = \"FULL\"\nlog_level = \"warn\"\n"
    << "samples_per_task = 2\n"
    << "[tasks]\nkernelbench_dir = \"" KORCH_EXAMPLES_DIR "/tasks\"\nids = \"1-4\"\n"
    << "[evaluator]\nmode = \"mock\"\nmock_latency_s = " << k_eval_latency_s << "\n"
    << "[strategy]\n"
    << strategy << "[[models]]\nid = \"m1\"\nbase_url = \"" << base_url
    << "\"\nmodel = \"fake-1\"\nconcurrency = 8\nmax_attempts = 3\nconnect_timeout_s = 2\n"
    << "price_prompt_per_mtok = 1.0\nprice_completion_per_mtok = 2.0\n"
    << "[[models]]\nid = \"m2\"\nbase_url = \"" << base_url
    << "\"\nmodel = \"fake-2\"\nconcurrency = 8\nmax_attempts = 3\nconnect_timeout_s = 2\n"
    << "price_prompt_per_mtok = 3.0\nprice_completion_per_mtok = 1.0\n";
  return s.str();
}

// The strategy events of a database, without their times: (episode, turn,
// kind, detail), sorted (the order in which independent tasks' decisions
// were committed may differ; their content may not).
std::vector<std::string> strategy_events(const std::string& db) {
  std::vector<std::string> out;
  for (auto& r : query(db,
                       "SELECT episode_id, turn, kind, detail FROM events "
                       "WHERE kind = 'strategy'"))
    out.push_back(r[0] + " " + r[1] + " " + r[2] + " " + r[3]);
  std::sort(out.begin(), out.end());
  return out;
}

class StrategyKills : public ::testing::TestWithParam<const char*> {};

TEST_P(StrategyKills, DecisionsAndTurnsEqualAnUninterruptedRun) {
  const std::string strategy = GetParam();
  TempDir dir;
  auto d = dir.path().string();
  FakeLlmProcess llm;
  ASSERT_TRUE(
      llm.start(d, {"--script", "kernel", "--latency-ms", "40", "--log", d + "/requests.log"}));
  auto ref_toml = d + "/ref.toml";
  write_text(ref_toml, strategy_toml(d + "/ref.db", llm.base_url(), strategy));
  auto [ref_rc, ref_out] = run_capture({KORCH_BIN, "run", ref_toml, "--no-progress"}, d);
  ASSERT_EQ(ref_rc, 0) << ref_out;
  const auto reference = normalized_export(d, ref_toml);
  const auto ref_decisions = strategy_events(d + "/ref.db");
  ASSERT_GT(reference.size(), 40u);
  ASSERT_GT(ref_decisions.size(), 10u);
  const std::size_t ref_log_lines = line_count(d + "/requests.log");
  // The reference really ran several rounds (refine) or decisions (budget).
  const auto later = query(d + "/ref.db",
                           "SELECT COUNT(*) FROM events WHERE kind = 'strategy' AND "
                           "(detail LIKE '%\"round\":2%' OR detail LIKE '%budget|decision:3%')");
  ASSERT_NE(later[0][0], "0") << "the reference run never reached a later round";

  auto toml = d + "/kill.toml";
  auto db = d + "/kill.db";
  write_text(toml, strategy_toml(db, llm.base_url(), strategy));
  std::mt19937 rng(KORCH_KILL_SEED);
  std::uniform_int_distribution<int> delay_ms(30, 400);
  int kills = 0, at_llm_kills = 0, at_eval_kills = 0;
  const int k_strategy_kills = std::max(20, k_kills / 2);
  while (kills < k_strategy_kills) {
    auto p =
        Process::start({KORCH_BIN, "run", toml, "--no-progress"}, d + "/kill.out", d + "/kill.err");
    const std::size_t lines_before = line_count(d + "/requests.log");
    std::optional<int> rc;
    if (kills % 3 == 0) {
      // A call in flight: 10 ms after the server received one of this run.
      wait_until(
          p, [&] { return line_count(d + "/requests.log") > lines_before; },
          std::chrono::seconds(60));
      rc = p.wait_for(std::chrono::milliseconds(10));
      ++at_llm_kills;
    } else if (kills % 3 == 1) {
      wait_until(
          p, [&] { return running_evals_of(db, p.pid()) != "0"; }, std::chrono::seconds(60));
      rc = p.wait_for(std::chrono::milliseconds(20));
      ++at_eval_kills;
    } else {
      rc = p.wait_for(std::chrono::milliseconds(delay_ms(rng)));
    }
    if (rc) {
      ASSERT_EQ(*rc, 0) << slurp(d + "/kill.err");
      break;  // the campaign finished before this kill
    }
    p.signal(SIGKILL);
    auto exit = p.wait_for(std::chrono::seconds(60));
    ASSERT_TRUE(exit) << slurp(d + "/kill.err");
    ASSERT_EQ(*exit, 128 + SIGKILL);
    ++kills;
  }
  auto final_run = run_capture({KORCH_BIN, "run", toml, "--no-progress"}, d);
  ASSERT_EQ(final_run.first, 0) << final_run.second;
  EXPECT_GE(kills, 15) << "the campaign finished after only " << kills << " kills";

  // Decisions: the same events as the uninterrupted run's, none twice.
  const auto decisions = strategy_events(db);
  EXPECT_EQ(decisions.size(), ref_decisions.size());
  EXPECT_EQ(decisions, ref_decisions);
  EXPECT_TRUE(query(db,
                    "SELECT episode_id, detail FROM events WHERE kind = 'strategy' "
                    "GROUP BY episode_id, detail HAVING COUNT(*) > 1")
                  .empty());
  // Turns: the export equals the reference's record for record (rounds and
  // seed origins included): no turn lost, none repeated, no result changed.
  auto resumed = normalized_export(d, toml);
  ASSERT_NO_FATAL_FAILURE(expect_same_export(resumed, reference));
  EXPECT_EQ(query(db, "SELECT COUNT(*) FROM episodes WHERE status != 'final'")[0][0], "0");
  EXPECT_EQ(query(db, "SELECT COUNT(*) FROM evaluations WHERE state != 'done'")[0][0], "0");
  // No LLM call sent again once its reply was committed.
  expect_no_call_resent(db, d + "/requests.log", ref_log_lines);
  std::printf(
      "strategy %s: %d SIGKILLs (%d at a call in flight, %d during an evaluation), %zu "
      "decision events, %zu export records\n",
      strategy.substr(0, strategy.find('\n')).c_str(), kills, at_llm_kills, at_eval_kills,
      decisions.size(), resumed.size());
}

INSTANTIATE_TEST_SUITE_P(
    Strategies, StrategyKills,
    ::testing::Values("kind = \"refine\"\nrounds = 3\n",
                      "kind = \"budget\"\nbudget_usd = 0.12\nbatch = 3\nk = 8\nseed = 5\n"),
    [](const ::testing::TestParamInfo<const char*>& info) {
      return std::string(info.param).find("refine") != std::string::npos ? "refine" : "budget";
    });

}  // namespace
}  // namespace korch::testing
