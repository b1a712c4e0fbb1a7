// `korch tasks validate` on tasks a candidate could pass without computing
// anything, or that no candidate can match: the real CLI and the real
// sandboxed reference worker.
#include <gtest/gtest.h>

#include <nlohmann/json.hpp>

#include "tests/integration/campaign_fixture.hpp"
#include "tests/support/required.hpp"

namespace korch::testing {
namespace {

std::string task_file(const std::string& forward) {
  return "import torch\nimport torch.nn as nn\n\nclass Model(nn.Module):\n    def __init__(self):\n"
         "        super().__init__()\n\n    def forward(self, x):\n        return " +
         forward +
         "\n\ndef get_inputs():\n    return [torch.randn(16, 32)]\n\ndef get_init_inputs():\n    "
         "return []\n";
}

TEST(TasksValidate, FlagsConstantAndStochasticTasksAndPassesAGoodOne) {
  if (!std::filesystem::exists(KORCH_WORKER_BIN)) KORCH_SKIP_OR_FAIL("korch-worker was not built");
  TempDir dir;
  auto d = dir.path().string();
  write_text(d + "/1_Constant.py", task_file("torch.zeros_like(x)"));
  write_text(d + "/2_Noisy.py", task_file("x + torch.rand(x.shape)"));
  write_text(d + "/3_Relu.py", task_file("torch.relu(x)"));
  // Issue #47: outputs that are float32 rounding noise of the reference. An
  // exact 0 computed as a mean of centred values (L2/23's GroupNorm then
  // mean), and an exact 0.1 left by cancelling terms of 1e4.
  write_text(d + "/4_CentredMean.py", task_file("(x - x.mean(dim=1, keepdim=True)).mean(dim=1)"));
  write_text(d + "/5_Cancelled.py", task_file("(x * 1e4 + 0.1) - x * 1e4"));
  auto [rc, out] = run_capture({KORCH_BIN, "tasks", "validate", d, "--cache-dir",
                                std::string(KORCH_TEST_CACHE) + "/validate"},
                               d);
  EXPECT_EQ(rc, 1) << out;  // some task was flagged
  EXPECT_NE(out.find("FLAGGED 1_Constant"), std::string::npos) << out;
  EXPECT_NE(out.find("nearly_constant"), std::string::npos) << out;
  EXPECT_NE(out.find("input_independent"), std::string::npos) << out;
  EXPECT_NE(out.find("FLAGGED 2_Noisy"), std::string::npos) << out;
  EXPECT_NE(out.find("nondeterministic"), std::string::npos) << out;
  EXPECT_NE(out.find("ok      3_Relu"), std::string::npos) << out;
  for (const char* noisy : {"4_CentredMean", "5_Cancelled"}) {
    const auto at = out.find(std::string("FLAGGED ") + noisy);
    ASSERT_NE(at, std::string::npos) << noisy << "\n" << out;
    const auto next = out.find("FLAGGED", at + 1);
    EXPECT_NE(out.substr(at, next == std::string::npos ? std::string::npos : next - at)
                  .find("rounding_noise"),
              std::string::npos)
        << noisy << "\n"
        << out;
  }
  // The constant and the stochastic task are not called rounding noise.
  EXPECT_EQ(out.find("rounding_noise", out.find("FLAGGED 1_Constant")),
            out.find("rounding_noise", out.find("FLAGGED 4_CentredMean")))
      << out;
}

std::string campaign_toml(const std::string& name, const std::string& tasks,
                          const std::string& exclude_flagged, const std::string& base_url) {
  std::string s = "name = \"" + name + "\"\ndb_path = \"c.db\"\nsamples_per_task = 2\n" +
                  "max_turns = 2\nlog_level = \"warn\"\n[tasks]\nkernelbench_dir = \"" + tasks +
                  "\"\n";
  if (!exclude_flagged.empty()) s += "exclude_flagged = \"" + exclude_flagged + "\"\n";
  return s + "[evaluator]\nmode = \"mock\"\n[[models]]\nid = \"m1\"\nbase_url = \"" + base_url +
         "\"\nmodel = \"fake-1\"\n";
}

// Issue #47: a campaign with tasks.exclude_flagged runs none of the tasks the
// real `korch tasks validate --out` report flags, says so in its report, and
// refuses a report that does not cover its tasks as they are now.
TEST(TasksValidate, ACampaignLeavesOutTheTasksTheReportFlags) {
  if (!std::filesystem::exists(KORCH_WORKER_BIN)) KORCH_SKIP_OR_FAIL("korch-worker was not built");
  TempDir dir;
  const auto d = dir.path().string();
  const auto tasks = d + "/tasks";
  std::filesystem::create_directories(tasks);
  write_text(tasks + "/1_Relu.py", task_file("torch.relu(x)"));
  write_text(tasks + "/2_CentredMean.py",
             task_file("(x - x.mean(dim=1, keepdim=True)).mean(dim=1)"));
  auto [vrc, vout] = run_capture({KORCH_BIN, "tasks", "validate", tasks, "--out", d + "/v.json",
                                  "--cache-dir", std::string(KORCH_TEST_CACHE) + "/validate"},
                                 d);
  ASSERT_EQ(vrc, 1) << vout;  // 2_CentredMean is flagged
  auto report = nlohmann::json::parse(slurp(d + "/v.json"));
  ASSERT_EQ(report["tasks"].size(), 2u) << report.dump();

  FakeLlmProcess llm;
  ASSERT_TRUE(llm.start(d, {"--script", "kernel"}));
  write_text(d + "/c.toml", campaign_toml("excluding", tasks, d + "/v.json", llm.base_url()));
  auto [rc, out] = run_capture({KORCH_BIN, "run", d + "/c.toml", "--no-progress"}, d);
  ASSERT_EQ(rc, 0) << out;
  // The store (read with the SQLite C API): the flagged task has no task row
  // and no episode; the other one ran.
  const auto db = d + "/c.db";
  EXPECT_EQ(query(db, "SELECT task_id, COUNT(*) FROM episodes GROUP BY task_id"),
            (std::vector<std::vector<std::string>>{{"1_Relu", "2"}}));
  EXPECT_EQ(query(db, "SELECT task_id FROM tasks"),
            (std::vector<std::vector<std::string>>{{"1_Relu"}}));
  auto [jrc, jout] = run_capture({KORCH_BIN, "report", d + "/c.toml", "--format", "json"}, d);
  ASSERT_EQ(jrc, 0) << jout;
  auto j = nlohmann::json::parse(jout.substr(jout.find('{')));
  ASSERT_EQ(j["excluded_tasks"].size(), 1u) << jout;
  EXPECT_EQ(j["excluded_tasks"][0]["task"], "2_CentredMean");
  bool noise = false;  // (the reference's output is also nearly constant: two issues)
  for (const auto& issue : j["excluded_tasks"][0]["issues"])
    noise = noise || issue.get<std::string>().rfind("rounding_noise: ", 0) == 0;
  EXPECT_TRUE(noise) << jout;
  EXPECT_EQ(j["tasks"], nlohmann::json::array({"1_Relu"})) << jout;
  auto [trc, tout] = run_capture({KORCH_BIN, "report", d + "/c.toml"}, d);
  const auto line = tout.find("excluded task 2_CentredMean (flagged by korch tasks validate): ");
  ASSERT_NE(line, std::string::npos) << tout;
  EXPECT_LT(tout.find("rounding_noise: ", line), tout.find('\n', line)) << tout;

  // Resumed without the report, the campaign would run the task it left out: refused.
  write_text(d + "/c.toml", campaign_toml("excluding", tasks, "", llm.base_url()));
  auto [r2, o2] = run_capture({KORCH_BIN, "run", d + "/c.toml", "--no-progress"}, d);
  EXPECT_EQ(r2, 2) << o2;
  EXPECT_NE(o2.find("leaves out none"), std::string::npos) << o2;
  // A task the report never saw, and a task changed since: refused before anything runs.
  write_text(tasks + "/3_Tanh.py", task_file("torch.tanh(x)"));
  write_text(d + "/n.toml", campaign_toml("unvalidated", tasks, d + "/v.json", llm.base_url()));
  auto [r3, o3] = run_capture({KORCH_BIN, "run", d + "/n.toml", "--no-progress"}, d);
  EXPECT_EQ(r3, 2) << o3;
  EXPECT_NE(o3.find("3_Tanh was not validated"), std::string::npos) << o3;
  std::filesystem::remove(tasks + "/3_Tanh.py");
  write_text(tasks + "/1_Relu.py", task_file("torch.relu(x) * 1.0"));
  auto [r4, o4] = run_capture({KORCH_BIN, "run", d + "/n.toml", "--no-progress"}, d);
  EXPECT_EQ(r4, 2) << o4;
  EXPECT_NE(o4.find("1_Relu changed since it was validated"), std::string::npos) << o4;
  EXPECT_EQ(query(db, "SELECT COUNT(*) FROM campaigns"),
            (std::vector<std::vector<std::string>>{{"1"}}));
}

}  // namespace
}  // namespace korch::testing
