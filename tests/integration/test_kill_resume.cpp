// The durability proof of DESIGN §3: a real `korch run` process against a
// real fake-LLM process is SIGKILLed at random moments, restarted each time,
// and must end exactly where an uninterrupted run ends.
#include <gtest/gtest.h>

#include <nlohmann/json.hpp>
#include <random>

#include "tests/integration/campaign_fixture.hpp"
#include "tools/reports/export.hpp"

namespace korch::testing {
namespace {

constexpr int k_kills = KORCH_KILL_COUNT;  // >= 50 in CI; more in tools/bench

// KernelBench level 1 gives 12 distinct task prompts (so the scripted model
// takes many different paths); without the shared copy, the 4 bundled tasks
// with more samples, so the campaign still outlasts the kills.
bool have_shared_kernelbench() { return std::filesystem::exists(KORCH_SHARED_KERNELBENCH "/level1"); }

std::string task_section() {
  if (have_shared_kernelbench()) {
    return "samples_per_task = 5\n[tasks]\nkernelbench_dir = \"" KORCH_SHARED_KERNELBENCH
           "\"\nlevels = [1]\nids = \"1-12\"\n";
  }
  return "samples_per_task = 15\n[tasks]\nkernelbench_dir = \"" KORCH_EXAMPLES_DIR "/tasks\"\nids = \"1-4\"\n";
}

std::string campaign_toml(const std::string& db, const std::string& base_url, const std::string& mode) {
  std::ostringstream s;
  s << "name = \"killtest\"\n"
    << "db_path = \"" << db << "\"\n"
    << "max_turns = 4\n"
    << "max_inflight_episodes = 3\n"
    << "synchronous = \"FULL\"\n"
    << "log_level = \"warn\"\n"
    << task_section()
    << "[evaluator]\nmode = \"" << mode << "\"\nmock_latency_s = 0.02\n"
    << "[[models]]\nid = \"m1\"\nbase_url = \"" << base_url << "\"\nmodel = \"fake-1\"\nconcurrency = 8\n"
    << "max_attempts = 3\nconnect_timeout_s = 2\n"
    << "price_prompt_per_mtok = 1.0\nprice_completion_per_mtok = 2.0\n"
    << "[[models]]\nid = \"m2\"\nbase_url = \"" << base_url << "\"\nmodel = \"fake-2\"\nconcurrency = 8\n"
    << "max_attempts = 3\nconnect_timeout_s = 2\n"
    << "[[events]]\nkind = \"crash\"\nturn = 3\nsamples = [2]\n"
    << "[[events]]\nkind = \"compaction\"\nturn = 3\nsamples = [3]\n"
    << "[[events]]\nkind = \"model_swap\"\nturn = 2\nmodel = \"m2\"\nsamples = [4]\n";
  return s.str();
}

// The export with the run-describing fields (docs/export.md, the exporter's
// own list) removed.
std::vector<nlohmann::json> normalized_export(const std::string& dir, const std::string& toml) {
  auto [rc, out] = run_capture({KORCH_BIN, "export", toml, "--format", "jsonl"}, dir);
  EXPECT_EQ(rc, 0) << out;
  std::vector<nlohmann::json> records;
  std::istringstream in(out);
  std::string line;
  while (std::getline(in, line)) {
    if (line.empty()) continue;
    auto j = nlohmann::json::parse(line);
    for (auto& f : reports::run_describing_fields()) j.erase(f);
    records.push_back(std::move(j));
  }
  return records;
}

TEST(KillResume, RandomSigkillsLoseAndRepeatNothing) {
  TempDir dir;
  auto d = dir.path().string();
  FakeLlmProcess llm;
  ASSERT_TRUE(llm.start(d, {"--script", "kernel", "--latency-ms", "60", "--log", d + "/requests.log"}));

  // 1. The reference: one uninterrupted run.
  auto ref_toml = d + "/ref.toml";
  write_text(ref_toml, campaign_toml(d + "/ref.db", llm.base_url(), "mock"));
  auto [ref_rc, ref_out] = run_capture({KORCH_BIN, "run", ref_toml, "--no-progress"}, d);
  ASSERT_EQ(ref_rc, 0) << ref_out;
  auto reference = normalized_export(d, ref_toml);
  ASSERT_GT(reference.size(), 40u);
  // The reference run used the same request ids; only later lines count.
  std::size_t ref_log_lines = 0;
  {
    std::ifstream log(d + "/requests.log");
    std::string line;
    while (std::getline(log, line)) ++ref_log_lines;
  }

  // 2. The same campaign, killed with SIGKILL at random moments.
  auto toml = d + "/kill.toml";
  write_text(toml, campaign_toml(d + "/kill.db", llm.base_url(), "mock"));
  std::mt19937 rng(KORCH_KILL_SEED);
  std::uniform_int_distribution<int> delay_ms(30, 350);
  int kills = 0;
  int completed_early = 0;
  while (kills < k_kills) {
    auto p = Process::start({KORCH_BIN, "run", toml, "--no-progress"}, d + "/kill.out", d + "/kill.err");
    auto rc = p.wait_for(std::chrono::milliseconds(delay_ms(rng)));
    if (rc) {
      ASSERT_EQ(*rc, 0) << slurp(d + "/kill.err");
      ++completed_early;
      break;  // the campaign finished before this kill
    }
    p.signal(SIGKILL);
    ASSERT_EQ(p.wait(), 128 + SIGKILL);
    ++kills;
  }
  auto final_run = run_capture({KORCH_BIN, "run", toml, "--no-progress"}, d);
  ASSERT_EQ(final_run.first, 0) << final_run.second;
  EXPECT_GE(kills, 50) << "the campaign finished after only " << kills << " kills; make it longer";
  RecordProperty("kills", kills);

  // No turn lost, nothing extra: the export equals the uninterrupted run's.
  auto resumed = normalized_export(d, toml);
  ASSERT_EQ(resumed.size(), reference.size());
  for (std::size_t i = 0; i < reference.size(); ++i) {
    EXPECT_EQ(resumed[i], reference[i]) << "record " << i;
  }

  auto db = d + "/kill.db";
  // Every episode is final.
  EXPECT_EQ(query(db, "SELECT COUNT(*) FROM episodes WHERE status != 'final'")[0][0], "0");
  // No request id with two recorded results (and one evaluation per id).
  EXPECT_TRUE(query(db, "SELECT request_id FROM evaluations GROUP BY request_id HAVING COUNT(*) > 1").empty());
  EXPECT_TRUE(query(db, "SELECT request_id FROM llm_calls GROUP BY request_id HAVING COUNT(*) > 1").empty());
  EXPECT_TRUE(query(db, "SELECT episode_id FROM finals GROUP BY episode_id HAVING COUNT(*) > 1").empty());
  EXPECT_EQ(query(db, "SELECT COUNT(*) FROM evaluations WHERE state != 'done'")[0][0], "0");

  // No LLM call re-sent after its reply was committed: every time the server
  // received a request id, that id's reply was not yet committed.
  std::map<std::string, double> committed_at;
  for (auto& row : query(db, "SELECT request_id, finished_at FROM llm_calls WHERE state = 'done'")) {
    committed_at[row[0]] = std::stod(row[1]);
  }
  std::ifstream log(d + "/requests.log");
  std::string line;
  for (std::size_t i = 0; i < ref_log_lines; ++i) std::getline(log, line);
  double t = 0;
  std::string id;
  int receptions = 0;
  int resent = 0;
  std::map<std::string, int> seen;
  while (log >> t >> id) {
    ++receptions;
    if (++seen[id] > 1) ++resent;
    auto it = committed_at.find(id);
    if (it != committed_at.end()) {
      EXPECT_LE(t, it->second) << id << " was received after its reply was committed";
    }
  }
  EXPECT_GT(receptions, 0);
  // Re-sent ids are exactly those recorded as sent more than once.
  auto multi = query(db, "SELECT COUNT(*) FROM llm_calls WHERE sends > 1");
  RecordProperty("resent_requests", resent);
  RecordProperty("dup_possible_rows", query(db, "SELECT COUNT(*) FROM llm_calls WHERE dup_possible = 1")[0][0]);
  std::printf("kills %d, completed early %d, server receptions %d, re-sent ids %d, rows with sends>1 %s\n", kills,
              completed_early, receptions, resent, multi[0][0].c_str());
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
  return slurp("/proc/" + std::to_string(pid) + "/cmdline").find("korch-worker") != std::string::npos;
}

// The same durability proof with the real CPU evaluator: kills land while
// sandboxed workers compile, check and time candidates.
TEST(KillResume, CpuEvaluatorKillsLeaveNoOrphansAndNoDoubleResults) {
  if (!std::filesystem::exists(KORCH_WORKER_BIN)) GTEST_SKIP() << "korch-worker was not built";
  TempDir dir;
  auto d = dir.path().string();
  FakeLlmProcess llm;
  ASSERT_TRUE(llm.start(d, {"--script", "replay:" KORCH_SOURCE_DIR "/tests/integration/cpu_replay.json",
                            "--latency-ms", "20"}));
  auto cache = std::string(KORCH_TEST_CACHE) + "/kill-cpu";
  std::ostringstream toml;
  toml << "name = \"killcpu\"\ndb_path = \"" << d << "/cpu.db\"\nsamples_per_task = 4\nmax_turns = 2\n"
       << "max_inflight_episodes = 2\nlog_level = \"warn\"\n"
       << "[tasks]\nkernelbench_dir = \"" << KORCH_EXAMPLES_DIR << "/tasks\"\nids = \"1\"\n"
       << "[evaluator]\nmode = \"cpu\"\nworkers = 2\ntimeout_s = 120\ncache_dir = \"" << cache << "\"\n"
       << "[[models]]\nid = \"m1\"\nbase_url = \"" << llm.base_url() << "\"\nmodel = \"fake\"\n";
  auto path = d + "/cpu.toml";
  write_text(path, toml.str());

  std::mt19937 rng(KORCH_KILL_SEED);
  std::uniform_int_distribution<int> delay_ms(1500, 9000);
  std::set<int> zygotes_of_killed_runs;
  int kills = 0;
  for (int i = 0; i < KORCH_CPU_KILL_COUNT; ++i) {
    auto p = Process::start({KORCH_BIN, "run", path, "--no-progress"}, d + "/cpu.out", d + "/cpu.err");
    auto rc = p.wait_for(std::chrono::milliseconds(delay_ms(rng)));
    if (rc) {
      ASSERT_EQ(*rc, 0) << slurp(d + "/cpu.err");
      break;
    }
    p.signal(SIGKILL);
    ASSERT_EQ(p.wait(), 128 + SIGKILL);
    ++kills;
    for (int z : recorded_zygotes(cache)) zygotes_of_killed_runs.insert(z);
  }
  auto final_run = run_capture({KORCH_BIN, "run", path, "--no-progress"}, d);
  ASSERT_EQ(final_run.first, 0) << final_run.second;
  std::printf("cpu kill test: %d kills, %zu zygotes recorded by killed runs\n", kills, zygotes_of_killed_runs.size());

  // No orphaned worker: every zygote a killed korch left behind is gone
  // after the restart, and the finished run left no record behind.
  for (int z : zygotes_of_killed_runs) EXPECT_FALSE(is_live_worker(z)) << "orphaned korch-worker zygote " << z;
  EXPECT_TRUE(recorded_zygotes(cache).empty());

  auto db = d + "/cpu.db";
  EXPECT_EQ(query(db, "SELECT COUNT(*) FROM episodes WHERE status != 'final'")[0][0], "0");
  EXPECT_TRUE(query(db, "SELECT request_id FROM evaluations GROUP BY request_id HAVING COUNT(*) > 1").empty());
  EXPECT_EQ(query(db, "SELECT COUNT(*) FROM evaluations WHERE state != 'done'")[0][0], "0");
  // The replayed kernel is correct: every episode ends with a correct submission.
  EXPECT_EQ(query(db, "SELECT COUNT(*) FROM finals WHERE verdict = 'ok' AND correct = 1")[0][0], "4")
      << final_run.second;
}

}  // namespace
}  // namespace korch::testing
