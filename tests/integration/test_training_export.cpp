// Issue 46: the training exports keep what happened. A campaign whose fake
// model repeats code (a replay script: CHECK a code, then SUBMIT the same
// code; a CHECK then no code until the turns run out, so the engine submits
// it as a fallback; a hack-like verdict), with a compaction and a model swap
// on one sample, exported as RL (--gamma 0.9) and SFT. The oracle is
// tests/integration/training/check_training.py: Python's sqlite3 reading the
// store with its own SQL, never the exporter's join.
#include <gtest/gtest.h>

#include <nlohmann/json.hpp>
#include <sstream>

#include "tests/integration/campaign_fixture.hpp"
#include "util/fs.hpp"

namespace korch::testing {
namespace {

std::string code(const std::string& marker) {
  return "import torch\nclass ModelNew(torch.nn.Module):\n    def forward(self, x):\n"
         "        return torch.relu(x)  # " +
         marker + "\n";
}

std::string reply(const std::string& c, const std::string& action) {
  return "Here it is.\n\n```python\n" + c + "```\nACTION: " + action + "\n";
}

std::string replay_script() {
  const std::string a = code("MOCK_SPEEDUP: 2.0"), b = code("MOCK_SPEEDUP: 1.5"),
                    hack = code("MOCK_VERDICT: no_kernel"), c = code("MOCK_SPEEDUP: 1.25");
  nlohmann::json j = {
      {"replies",
       {// CHECK a code, then SUBMIT the same code (what the system prompt asks for).
        {{"task", "1_ReLU_small"}, {"turn", 1}, {"content", reply(a, "CHECK")}},
        {{"task", "1_ReLU_small"}, {"turn", 2}, {"content", reply(a, "SUBMIT")}},
        // A passing CHECK, then no code: the engine submits it (fallback).
        {{"task", "2_Add_small"}, {"turn", 1}, {"content", reply(b, "CHECK")}},
        {{"task", "2_Add_small"}, {"turn", 2}, {"content", "Let me think."}},
        // A hack-like verdict, then a code CHECKed twice: the last turn submits it.
        {{"task", "3_Scale_small"}, {"turn", 1}, {"content", reply(hack, "CHECK")}},
        {{"task", "3_Scale_small"}, {"turn", 2}, {"content", reply(c, "CHECK")}}}},
      {"default", "Let me think."}};
  return j.dump(1);
}

std::string campaign_toml(const std::string& db, const std::string& base_url) {
  std::ostringstream s;
  s << "name = \"trained\"\ndb_path = \"" << db << "\"\n"
    << "samples_per_task = 2\nmax_turns = 3\nmax_inflight_episodes = 8\nlog_level = \"warn\"\n"
    << "[tasks]\nkernelbench_dir = \"" KORCH_EXAMPLES_DIR "/tasks\"\nids = \"1-3\"\n"
    << "[evaluator]\nmode = \"mock\"\n"
    << "[[models]]\nid = \"m1\"\nbase_url = \"" << base_url << "\"\nmodel = \"fake-1\"\n"
    << "[[models]]\nid = \"m2\"\nbase_url = \"" << base_url << "\"\nmodel = \"fake-2\"\n"
    << "[[events]]\nkind = \"compaction\"\nturn = 2\nsamples = [1]\n"
    << "[[events]]\nkind = \"model_swap\"\nturn = 3\nmodel = \"m2\"\nsamples = [1]\n";
  return s.str();
}

TEST(TrainingExport, RecordsKeepWhatHappenedByAnIndependentReader) {
  TempDir dir;
  const std::string d = dir.path().string();
  write_text(d + "/replay.json", replay_script());
  FakeLlmProcess llm;
  ASSERT_TRUE(llm.start(d, {"--script", "replay:" + d + "/replay.json"}));
  const std::string toml = d + "/c.toml", db = d + "/c.db";
  write_text(toml, campaign_toml(db, llm.base_url()));
  auto [rc, out] = run_capture({KORCH_BIN, "run", toml, "--no-progress"}, d);
  ASSERT_EQ(rc, 0) << out;
  // The scripted cases happened (own SQL), so the oracle below has them to check.
  EXPECT_GT(std::stoi(query(db, "SELECT COUNT(*) FROM finals WHERE reason = 'fallback'")[0][0]), 0);
  EXPECT_GT(std::stoi(query(db, "SELECT COUNT(*) FROM finals WHERE reason = 'last_turn'")[0][0]),
            0);
  EXPECT_GT(std::stoi(query(db, "SELECT COUNT(*) FROM events WHERE kind = 'compaction'")[0][0]), 0);
  EXPECT_GT(std::stoi(query(db,
                            "SELECT COUNT(*) FROM turns t JOIN episodes e ON e.id = "
                            "t.episode_id WHERE e.model_id = 'm1' AND t.model_id = 'm2'")[0][0]),
            0);
  const std::string rl = d + "/rl.jsonl", sft = d + "/sft.jsonl", card = d + "/card.json";
  auto [xrc, xout] = run_capture(
      {KORCH_BIN, "export", toml, "--format", "rl", "--gamma", "0.9", "--out", rl, "--card", card},
      d);
  ASSERT_EQ(xrc, 0) << xout;
  auto [src, sout] = run_capture({KORCH_BIN, "export", toml, "--format", "sft", "--out", sft}, d);
  ASSERT_EQ(src, 0) << sout;
  const std::string campaign = query(db, "SELECT id FROM campaigns WHERE name = 'trained'")[0][0];
  auto [crc, check] = run_capture(
      {"/usr/bin/python3", KORCH_SOURCE_DIR "/tests/integration/training/check_training.py", db,
       campaign, rl, sft, "0.9"},
      d);
  ASSERT_EQ(crc, 0) << check;
  std::printf("check_training.py: %s", check.c_str());
  auto counts = nlohmann::json::parse(check.substr(check.rfind('{')));
  // Every case was seen: CHECK then SUBMIT of one code (two records), a
  // fallback final in both exports, a hack-like verdict labelled, and every
  // rewarded SUBMIT of the 12 episodes' finals.
  EXPECT_GT(counts["check_then_submit_same_code"].get<int>(), 0) << counts;
  EXPECT_GT(counts["fallback_rl"].get<int>(), 0) << counts;
  EXPECT_GT(counts["fallback_sft"].get<int>(), 0) << counts;
  EXPECT_GT(counts["hack_like"].get<int>(), 0) << counts;
  EXPECT_EQ(counts["rewarded_submits"].get<int>(), 12) << counts;
  auto c = nlohmann::json::parse(read_file(card).value_or("{}"));
  EXPECT_EQ(c["gamma"], 0.9);
  EXPECT_EQ(c["counts"]["duplicates"], 0);
  // --gamma is the RL export's, in [0, 1].
  EXPECT_EQ(run_capture({KORCH_BIN, "export", toml, "--format", "sft", "--gamma", "0.5"}, d).first,
            2);
  EXPECT_EQ(run_capture({KORCH_BIN, "export", toml, "--format", "rl", "--gamma", "1.5"}, d).first,
            2);
}

}  // namespace
}  // namespace korch::testing
