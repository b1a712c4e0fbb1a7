// Interruptions never change results (docs/export.md): the two repros of
// issue 7 as tests, with real `korch run` processes, a real fake-LLM process,
// real signals and a real SQLite file. Every wait is for a state (a row in
// the database, a line in the server's reception log), never a fixed sleep.
#include <gtest/gtest.h>

#include <nlohmann/json.hpp>

#include "tests/integration/campaign_fixture.hpp"
#include "tests/integration/export_fixture.hpp"

namespace korch::testing {
namespace {

constexpr int k_exit_interrupted = 130;  // tools/korch/cli.hpp
constexpr auto k_state_timeout = std::chrono::seconds(120);

// A reply that submits at once a code the mock evaluator passes.
std::string submitting_replay(const std::string& dir) {
  nlohmann::json content =
      "A fused kernel.\n\n```python\nimport torch\nimport torch.nn as nn\n\n# MOCK_VERDICT: ok\n"
      "class ModelNew(nn.Module):\n    def forward(self, x):\n        return torch.relu(x)\n```\n\n"
      "ACTION: SUBMIT\n";
  auto path = dir + "/replay.json";
  write_text(path,
             nlohmann::json{{"replies", nlohmann::json::array()}, {"default", content}}.dump());
  return path;
}

// One task, one sample, one turn. Campaigns of one name have the same ids
// (episodes, request ids) in any database, so their exports compare.
std::string one_turn_toml(const std::string& name, const std::string& db,
                          const std::string& base_url, double mock_latency_s) {
  std::ostringstream s;
  s << "name = \"" << name << "\"\n"
    << "db_path = \"" << db << "\"\n"
    << "max_turns = 1\nsamples_per_task = 1\nlog_level = \"warn\"\n"
    << "[tasks]\nkernelbench_dir = \"" KORCH_EXAMPLES_DIR "/tasks\"\nids = \"1\"\n"
    << "[evaluator]\nmode = \"mock\"\nmock_latency_s = " << mock_latency_s << "\n"
    << "[[models]]\nid = \"m1\"\nbase_url = \"" << base_url << "\"\nmodel = \"fake\"\n";
  return s.str();
}

struct Final {
  std::string verdict;
  double reward = 0;
};

Final final_of(const std::string& db) {
  auto rows = query(db, "SELECT verdict, reward FROM finals");
  if (rows.size() != 1) {
    ADD_FAILURE() << db << ": " << rows.size() << " final rows";
    return {};
  }
  return {rows[0][0], std::stod(rows[0][1])};
}

// Issue 7, repro 1: Ctrl-C three times while the submission is being
// evaluated, then run to the end: the same verdict and reward as a run that
// was never interrupted (it used to end worker_crash with reward 0).
TEST(Interruptions, SigintDuringTheEvaluationThreeTimesKeepsTheResult) {
  TempDir dir;
  auto d = dir.path().string();
  FakeLlmProcess llm;
  ASSERT_TRUE(
      llm.start(d, {"--script", "replay:" + submitting_replay(d), "--log", d + "/requests.log"}));
  constexpr double k_eval_s = 3;

  auto ref_toml = d + "/ref.toml";
  write_text(ref_toml, one_turn_toml("sigint", d + "/ref.db", llm.base_url(), k_eval_s));
  auto [ref_rc, ref_out] = run_capture({KORCH_BIN, "run", ref_toml, "--no-progress"}, d);
  ASSERT_EQ(ref_rc, 0) << ref_out;
  auto reference = final_of(d + "/ref.db");
  ASSERT_EQ(reference.verdict, "ok");
  ASSERT_GT(reference.reward, 0);

  auto toml = d + "/c.toml";
  auto db = d + "/c.db";
  write_text(toml, one_turn_toml("sigint", db, llm.base_url(), k_eval_s));
  constexpr int k_interrupts = 3;
  for (int i = 1; i <= k_interrupts; ++i) {
    auto p =
        Process::start({KORCH_BIN, "run", toml, "--no-progress"}, d + "/run.out", d + "/run.err");
    // This run's start of the evaluation is committed (attempts = i) and the
    // mock evaluator is holding it for k_eval_s.
    auto running = [&] {
      return poll_value(db, "SELECT attempts FROM evaluations WHERE state = 'running'") ==
             std::to_string(i);
    };
    ASSERT_TRUE(wait_until(p, running, k_state_timeout))
        << "run " << i << ": " << slurp(d + "/run.err");
    p.signal(SIGINT);
    ASSERT_TRUE(p.wait_for(std::chrono::seconds(60))) << "korch did not stop after SIGINT";
    EXPECT_EQ(p.wait(), k_exit_interrupted) << slurp(d + "/run.err");
    // The interruption is not a result and not a failure.
    auto row = query(db, "SELECT state, attempts, failures FROM evaluations");
    ASSERT_EQ(row.size(), 1u);
    ASSERT_EQ(row[0][0], "running") << "the evaluation finished before the SIGINT of run " << i;
    EXPECT_EQ(row[0][2], "0");
    EXPECT_EQ(query(db, "SELECT COUNT(*) FROM finals")[0][0], "0");
  }

  auto [rc, out] = run_capture({KORCH_BIN, "run", toml, "--no-progress"}, d);
  ASSERT_EQ(rc, 0) << out;
  auto result = final_of(db);
  EXPECT_EQ(result.verdict, "ok");
  EXPECT_NE(result.verdict, "worker_crash");
  EXPECT_DOUBLE_EQ(result.reward, reference.reward);
  auto row = query(db, "SELECT state, verdict, attempts, failures FROM evaluations");
  ASSERT_EQ(row.size(), 1u);
  EXPECT_EQ(row[0],
            (std::vector<std::string>{"done", "ok", std::to_string(k_interrupts + 1), "0"}));

  // The whole export equals the uninterrupted run's, bar the run-describing
  // fields; the one LLM call was sent once and is not marked.
  ASSERT_NO_FATAL_FAILURE(
      expect_same_export(normalized_export(d, toml), normalized_export(d, ref_toml)));
  EXPECT_EQ(query(db, "SELECT sends, dup_possible FROM llm_calls"),
            (std::vector<std::vector<std::string>>{{"1", "0"}}));
}

// Issue 7, repro 2: kill -9 while the LLM call is at the server, run again:
// the call was received twice, and says so in the store, the export and the
// report (dup_possible used to be erased by the result write).
TEST(Interruptions, SigkillDuringTheLlmCallMarksItDupPossible) {
  TempDir dir;
  auto d = dir.path().string();
  FakeLlmProcess llm;
  auto log = d + "/requests.log";
  ASSERT_TRUE(llm.start(
      d, {"--script", "replay:" + submitting_replay(d), "--latency-ms", "2000", "--log", log}));

  auto toml = d + "/c.toml";
  auto db = d + "/c.db";
  // Prices and max_tokens: the report bounds what the unknown sends may cost.
  write_text(toml, one_turn_toml("sigkill", db, llm.base_url(), 0) +
                       "price_prompt_per_mtok = 1.0\nprice_completion_per_mtok = 2.0\n"
                       "max_tokens = 1000\n");
  {
    auto p =
        Process::start({KORCH_BIN, "run", toml, "--no-progress"}, d + "/run.out", d + "/run.err");
    // The server has the request (and holds it for 2 s).
    ASSERT_TRUE(wait_until(
        p, [&] { return line_count(log) >= 1; }, k_state_timeout))
        << slurp(d + "/run.err");
    p.signal(SIGKILL);
    ASSERT_EQ(p.wait(), 128 + SIGKILL);
  }
  EXPECT_EQ(query(db, "SELECT state, sends, dup_possible FROM llm_calls"),
            (std::vector<std::vector<std::string>>{{"started", "1", "0"}}));
  // Issue 46: the request in flight at the kill is recorded as sent; the
  // report says "recorded + up to 1 unknown request", bounded by max_tokens
  // of completion at the model's price (no prompt size is known yet).
  {
    auto [rc, report] = run_capture({KORCH_BIN, "report", toml, "--json"}, d);
    ASSERT_EQ(rc, 0) << report;
    auto m = nlohmann::json::parse(report)["models"]["m1"];
    EXPECT_EQ(m["cost_usd"], 0.0);
    EXPECT_EQ(m["unknown_requests"], 1);
    EXPECT_NEAR(m["unknown_cost_bound_usd"].get<double>(), 1000 * 2.0 / 1e6, 1e-12);
  }

  auto [rc, out] = run_capture({KORCH_BIN, "run", toml, "--no-progress"}, d);
  ASSERT_EQ(rc, 0) << out;
  auto calls = query(db, "SELECT request_id, state, sends, dup_possible FROM llm_calls");
  ASSERT_EQ(calls.size(), 1u);
  EXPECT_EQ(calls[0][1], "done");
  EXPECT_EQ(calls[0][2], "2");
  EXPECT_EQ(calls[0][3], "1");
  EXPECT_EQ(receptions(log)[calls[0][0]], 2) << "the server's reception log";
  EXPECT_EQ(final_of(db).verdict, "ok");

  auto records = export_records(d, toml);
  ASSERT_EQ(records.size(), 2u);
  EXPECT_EQ(records[0]["type"], "attempt");
  EXPECT_EQ(records[0]["llm_sends"], 2);
  EXPECT_EQ(records[0]["dup_possible"], true);

  auto [report_rc, report] = run_capture({KORCH_BIN, "report", toml, "--json"}, d);
  ASSERT_EQ(report_rc, 0) << report;
  auto j = nlohmann::json::parse(report);
  EXPECT_EQ(j["models"]["m1"]["llm_calls"], 1);
  EXPECT_EQ(j["models"]["m1"]["dup_possible_calls"], 1);
  auto [text_rc, text] = run_capture({KORCH_BIN, "report", toml}, d);
  ASSERT_EQ(text_rc, 0) << text;
  EXPECT_NE(text.find("llm calls 1 (dup_possible 1)"), std::string::npos) << text;
  // The server saw two requests, korch recorded one outcome: one unknown,
  // bounded by the call's prompt and max_tokens at the model's prices.
  const auto unknown = receptions(log)[calls[0][0]] - 1;
  EXPECT_EQ(j["models"]["m1"]["unknown_requests"], unknown);
  const double prompt = std::stod(query(db, "SELECT prompt_tokens FROM llm_calls")[0][0]);
  EXPECT_NEAR(j["models"]["m1"]["unknown_cost_bound_usd"].get<double>(),
              unknown * (prompt * 1.0 + 1000 * 2.0) / 1e6, 1e-12);
  EXPECT_NE(text.find("recorded + up to 1 unknown request(s)"), std::string::npos) << text;
}

}  // namespace
}  // namespace korch::testing
