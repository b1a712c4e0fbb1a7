// The compile cache and the worker processes: identical code is never
// compiled twice, concurrent compiles of one key do not race, and a killed
// daemon's zygote is reaped.
#include <signal.h>
#include <sys/wait.h>
#include <unistd.h>

#include <filesystem>
#include <fstream>
#include <nlohmann/json.hpp>

#include "evaluator/protected_evaluator.hpp"
#include "evaluator/zygote.hpp"
#include "tests/evaluator/eval_test_support.hpp"

namespace korch::evaluator::testing {
namespace {

using json = nlohmann::json;

int misses(const Report& r) {
  const json& e = r.evidence;
  int n = 0;
  for (auto& c : e.value("compile", json::array())) n += c.value("hit", true) ? 0 : 1;
  return n;
}
int hits(const Report& r) {
  const json& e = r.evidence;
  int n = 0;
  for (auto& c : e.value("compile", json::array())) n += c.value("hit", false) ? 1 : 0;
  return n;
}

TEST(CompileCache, SecondCompileOfIdenticalCodeIsAHitWithNoCompiler) {
  auto ev = make_protected_evaluator(test_config(1, 60), k_cache_dir);
  ASSERT_TRUE(ev) << ev.error().message;
  Report first, second;
  ASSERT_NO_FATAL_FAILURE(  // may compile
      evaluate_corpus_file(**ev, "good/cpp_relu.py", "1_ReLU_small", Mode::check, first));
  ASSERT_EQ(first.status, Verdict::ok) << first.error << first.compile_log;
  ASSERT_NO_FATAL_FAILURE(
      evaluate_corpus_file(**ev, "good/cpp_relu.py", "1_ReLU_small", Mode::check, second));
  ASSERT_EQ(second.status, Verdict::ok) << second.error;
  // No compile job was spawned (what a hit saves is timed by
  // tools/bench/bench_eval, not here: a wall-clock bound fails on a loaded machine).
  EXPECT_EQ(misses(second), 0) << second.evidence.dump();
  EXPECT_GE(hits(second), 1);
}

TEST(CompileCache, ConcurrentCompilesOfOneKeyDoNotRace) {
  auto ev = make_protected_evaluator(test_config(2, 60), k_cache_dir);
  ASSERT_TRUE(ev) << ev.error().message;
  // A fresh key each run (so the test exercises the lock), cheap because it
  // fails to compile quickly; failures are cached like successes.
  CorpusFile f;
  f.name = "race";
  f.code =
      "import torch\nimport torch.nn as nn\nfrom torch.utils.cpp_extension import load_inline\n"
      "src = \"int broken( { " +
      std::to_string(::time(nullptr)) +
      " \"\n"
      "ext = load_inline(name=\"race_ext\", cpp_sources=src, functions=[\"broken\"], "
      "verbose=False)\n\nclass ModelNew(nn.Module):\n    def forward(self, x):\n"
      "        return ext.broken(x)\n";
  auto task = task_by_stem("1_ReLU_small");
  ASSERT_TRUE(task);
  auto a = submit(**ev, make_request(f, *task, Mode::check));
  auto b = submit(**ev, make_request(f, *task, Mode::check));
  Report ra = a.get(), rb = b.get();
  EXPECT_EQ(ra.status, Verdict::compile_error) << ra.error;
  EXPECT_EQ(rb.status, Verdict::compile_error) << rb.error;
  EXPECT_FALSE(ra.compile_log.empty());
  // Exactly one of them ran the compiler for the candidate's key.
  auto cand_misses = [](const Report& r) {
    const json& e = r.evidence;
    int n = 0;
    for (auto& c : e.value("compile", json::array()))
      n += (!c.value("hit", true) && !c.value("probe", false)) ? 1 : 0;
    return n;
  };
  EXPECT_EQ(cand_misses(ra) + cand_misses(rb), 1) << ra.evidence.dump() << "\n"
                                                  << rb.evidence.dump();
}

// The zygote's saving over a fresh process per job is a benchmark, not a
// test: `korch-bench-eval --fresh` (tools/bench/README.md) and
// `scripts/gpu/suite.sh overhead` time both side by side.

std::uint64_t start_time(pid_t pid) {
  std::ifstream in("/proc/" + std::to_string(pid) + "/stat");
  std::string s((std::istreambuf_iterator<char>(in)), std::istreambuf_iterator<char>());
  std::istringstream rest(s.substr(s.rfind(')') + 2));
  std::string field;
  for (int i = 3; i <= 22 && (rest >> field); ++i)
    if (i == 22) return std::stoull(field);
  return 0;
}

TEST(Zygote, ReapsTheZygoteOfAKilledDaemon) {
  const std::string run = k_cache_dir + "/reap-test";
  std::filesystem::create_directories(run);
  pid_t orphan = fork();  // stands in for a zygote whose daemon died
  if (orphan == 0) {
    execl("/bin/sleep", "sleep", "300", nullptr);
    _exit(127);
  }
  usleep(100000);
  pid_t dead = fork();
  if (dead == 0) _exit(0);
  waitpid(dead, nullptr, 0);
  json j{{"daemon_pid", dead},
         {"daemon_start", 1},
         {"zygote_pid", orphan},
         {"zygote_start", start_time(orphan)}};
  std::ofstream(run + "/zygote-dead.json") << j.dump();
  // A record whose daemon is alive (us) is left alone.
  json live{{"daemon_pid", getpid()},
            {"daemon_start", start_time(getpid())},
            {"zygote_pid", orphan},
            {"zygote_start", start_time(orphan)}};
  std::ofstream(run + "/zygote-live.json") << live.dump();
  EXPECT_EQ(reap_orphans(run), 1);
  int status = 0;
  ASSERT_EQ(waitpid(orphan, &status, 0), orphan);
  EXPECT_TRUE(WIFSIGNALED(status) && WTERMSIG(status) == SIGKILL);
  EXPECT_FALSE(std::filesystem::exists(run + "/zygote-dead.json"));
  EXPECT_TRUE(std::filesystem::exists(run + "/zygote-live.json"));
  std::filesystem::remove_all(run);
}

TEST(CacheDir, UnreachableByTheSandboxUserIsAClearError) {
  if (::geteuid() != 0) GTEST_SKIP() << "only root switches to the sandbox user";
  char tmpl[] = "/var/tmp/korch-private-XXXXXX";
  ASSERT_NE(::mkdtemp(tmpl), nullptr);  // mode 0700, like a home directory
  config::EvaluatorConfig cfg;
  cfg.mode = config::EvalMode::cpu;
  auto ev = make_protected_evaluator(cfg, std::string(tmpl) + "/cache");
  ASSERT_FALSE(ev);
  EXPECT_NE(ev.error().message.find("not searchable by others"), std::string::npos)
      << ev.error().message;
  std::filesystem::remove_all(tmpl);
}

}  // namespace
}  // namespace korch::evaluator::testing
