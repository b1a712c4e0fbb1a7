// Tests of agent/campaign_runner: a whole campaign driven through a real
// SQLite store, the mock evaluator and the fake OpenAI-compatible server on
// loopback (real HTTP through libcurl). The episode rules themselves are
// tested in test_episode.cpp; here: registration, the stored record of the
// config, the system prompt's facts, re-running, and the spend cap.
#include "agent/campaign_runner.hpp"

#include <gtest/gtest.h>
#include <unistd.h>

#include <string>

#include "config/loader.hpp"
#include "tests/support/fake_openai_server.hpp"
#include "tests/support/scripted_replies.hpp"
#include "tests/support/task_sources.hpp"
#include "tests/support/temp_dir.hpp"
#include "util/ids.hpp"

namespace korch::agent {
namespace {

using testing::k_relu_task_source;

class CampaignRunnerTest : public ::testing::Test {
 protected:
  void SetUp() override {
    testing::FakeServerOptions so;
    so.reply = testing::kernel_script_reply;
    m_server = std::make_unique<testing::FakeOpenAIServer>(so);
    ASSERT_TRUE(m_server->start());
    m_dir.write("tasks/1_Relu.py", k_relu_task_source);
    m_dir.write("tasks/2_Relu.py", k_relu_task_source);
    m_cfg.name = "runner-test";
    m_cfg.db_path = m_dir.file("korch.db").string();
    m_cfg.tasks.kernelbench_dir = m_dir.file("tasks").string();
    m_cfg.samples_per_task = 2;
    m_cfg.max_turns = 2;
    m_cfg.evaluator.mode = config::EvalMode::mock;
    m_cfg.evaluator.tolerance = config::Tolerance::tf32;
    m_cfg.evaluator.torch_ops = config::TorchOps::forbid;
    m_cfg.synchronous = config::Synchronous::off;
    config::ModelConfig m;
    m.id = "m1";
    m.base_url = m_server->base_url();
    m.model = "fake-model";
    m.max_attempts = 2;
    m_cfg.models.push_back(m);
    m_cfg.events.push_back({config::LifecycleKind::compaction, 2, "", {}});
    ASSERT_TRUE(config::validate(m_cfg));
  }

  void TearDown() override { m_server->stop(); }

  // Runs the campaign once, as `korch run` does; returns its result.
  RunResult run_once() {
    store::Options so;
    so.path = m_cfg.db_path;
    so.synchronous = to_string(m_cfg.synchronous);
    auto st = store::Store::open(so);
    EXPECT_TRUE(st) << st.error().message;
    auto ev = evaluator::make_evaluator(m_cfg.evaluator, m_dir.file("cache").string());
    EXPECT_TRUE(ev) << ev.error().message;
    auto plan = plan_campaign(m_cfg, **ev);
    EXPECT_TRUE(plan) << plan.error().message;
    m_plan = *plan;
    auto client = llm::make_curl_client();
    for (const auto& m : m_cfg.models) EXPECT_TRUE(client->add_model(m));
    RunOptions opts;
    opts.owner = "test:" + std::to_string(::getpid()) + ":1";
    opts.holds_db_lock = true;
    auto result = run_campaign(m_cfg, *plan, **st, *client, **ev, opts);
    client->shutdown();
    (*ev)->shutdown();
    EXPECT_TRUE(result) << result.error().message;
    if (result) {
      auto c = (*st)->get_campaign(ids::campaign_id(m_cfg.name));
      EXPECT_TRUE(c && *c);
      if (c && *c) m_row = **c;
      auto eps = (*st)->list_episodes(ids::campaign_id(m_cfg.name));
      EXPECT_TRUE(eps);
      if (eps) m_episodes = eps->size();
    }
    return result ? *result : RunResult{};
  }

  korch::testing::TempDir m_dir;
  std::unique_ptr<testing::FakeOpenAIServer> m_server;
  config::CampaignConfig m_cfg;
  CampaignPlan m_plan;
  store::CampaignRow m_row;
  std::size_t m_episodes = 0;
};

TEST_F(CampaignRunnerTest, RunsEveryEpisodeToTheEnd) {
  auto r = run_once();
  EXPECT_EQ(r.status, RunStatus::completed) << r.message;
  EXPECT_EQ(m_episodes, 4u);  // 2 tasks x 1 model x 2 samples
  EXPECT_EQ(r.progress.episodes, 4);
  EXPECT_EQ(r.progress.final, 4);
  EXPECT_GE(r.progress.turns, 4);
  EXPECT_EQ(m_plan.campaign_id, ids::campaign_id("runner-test"));
}

TEST_F(CampaignRunnerTest, StoresTheWholeResolvedConfig) {
  run_once();
  EXPECT_EQ(m_row.config_json, config::config_to_json(m_cfg));
  auto back = config::config_from_json(m_row.config_json);
  ASSERT_TRUE(back) << back.error().message;
  EXPECT_TRUE(*back == m_cfg) << m_row.config_json;
  // Events, budgets and the synchronous mode are part of the record.
  EXPECT_NE(m_row.config_json.find("\"events\":[{\"kind\":\"compaction\",\"turn\":2"),
            std::string::npos);
  EXPECT_NE(m_row.config_json.find("\"spend_cap_usd\":0.0"), std::string::npos)
      << m_row.config_json;
  EXPECT_NE(m_row.config_json.find("\"synchronous\":\"OFF\""), std::string::npos);
}

TEST_F(CampaignRunnerTest, SystemPromptStatesTheCampaignsVocabulary) {
  run_once();
  EXPECT_NE(m_plan.system_prompt.find(config::tolerance_summary(config::Tolerance::tf32)),
            std::string::npos)
      << m_plan.system_prompt;
  EXPECT_NE(m_plan.system_prompt.find("forbidden at run time"), std::string::npos);
  EXPECT_NE(m_plan.system_prompt.find("MOCK evaluator"), std::string::npos);
}

TEST_F(CampaignRunnerTest, RunningAgainRepeatsNothing) {
  auto first = run_once();
  ASSERT_EQ(first.status, RunStatus::completed);
  const auto requests = m_server->stats().requests;
  auto second = run_once();
  EXPECT_EQ(second.status, RunStatus::completed);
  EXPECT_EQ(second.episodes_resumed, 0);
  EXPECT_EQ(m_episodes, 4u);  // insert-if-absent: no new rows
  EXPECT_EQ(m_server->stats().requests, requests) << "a finished campaign sent new requests";
}

TEST_F(CampaignRunnerTest, SpendCapStopsNewWork) {
  m_cfg.models[0].price_prompt_per_mtok =
      1e6;  // $1 per prompt token: the first reply passes the cap
  // The same campaign uncapped (its own database): how much work it does.
  const std::string capped_db = m_cfg.db_path;
  m_cfg.db_path = m_dir.file("uncapped.db").string();
  auto uncapped = run_once();
  ASSERT_EQ(uncapped.status, RunStatus::completed);
  m_cfg.db_path = capped_db;
  m_cfg.spend_cap_usd = 0.01;
  auto r = run_once();
  EXPECT_NE(r.status, RunStatus::stopped);
  EXPECT_GE(r.progress.cost_usd, m_cfg.spend_cap_usd);
  // Episodes already in flight may finish, but the cap ends the rest:
  // strictly fewer turns than the uncapped run, and episodes whose final
  // reason is the cap.
  EXPECT_LT(r.progress.turns, uncapped.progress.turns);
  store::Options so;
  so.path = capped_db;
  auto st = store::Store::open(so);
  ASSERT_TRUE(st) << st.error().message;
  auto finals = (*st)->list_finals(ids::campaign_id(m_cfg.name));
  ASSERT_TRUE(finals) << finals.error().message;
  int capped = 0;
  for (const auto& f : *finals) capped += f.reason == store::EndReason::spend_cap;
  EXPECT_GE(capped, 1) << "no episode ended for the spend cap";
}

}  // namespace
}  // namespace korch::agent
