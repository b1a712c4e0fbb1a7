// Whole strategy campaigns (issue #37) in-process, through a real SQLite
// store, the fake OpenAI-compatible server on loopback and the mock evaluator
// (speedups scripted by the replies' MOCK_SPEEDUP markers: these tests are
// about the strategies, not the evaluator): best_of_k's early stop, a budget
// campaign stopped and resumed many times, refine's seeds in the store, the
// exports and the report. The strategies' pure decisions are unit-tested in
// tests/agent/test_strategy.cpp.
#include <fmt/format.h>
#include <gtest/gtest.h>
#include <unistd.h>

#include <algorithm>
#include <atomic>
#include <functional>
#include <map>
#include <nlohmann/json.hpp>
#include <set>
#include <sstream>
#include <string>
#include <vector>

#include "agent/campaign_runner.hpp"
#include "agent/strategy.hpp"
#include "config/loader.hpp"
#include "evaluator/evaluator.hpp"
#include "reports/export.hpp"
#include "reports/report.hpp"
#include "reports/training_export.hpp"
#include "tests/support/fake_openai_server.hpp"
#include "tests/support/scripted_replies.hpp"
#include "tests/support/task_sources.hpp"
#include "tests/support/temp_dir.hpp"
#include "util/ids.hpp"

namespace korch::agent {
namespace {

using testing::k_relu_task_source;

// One SUBMIT per episode whose speedup is scripted by task: task 1 runs at
// 1.5x from its first sample, task 2 at 0.5x forever.
testing::ScriptedReply by_task_reply(const std::string&, const std::vector<llm::Message>& msgs) {
  bool fast = false;
  for (auto& m : msgs)
    if (m.role == "user" && m.content.find("1_Relu") != std::string::npos) fast = true;
  testing::ScriptedReply r;
  r.content =
      fmt::format("```python\n# MOCK_SPEEDUP: {}\nclass ModelNew:\n    pass\n```\nACTION: SUBMIT\n",
                  fast ? "1.5" : "0.5");
  r.prompt_tokens = 1000;
  r.completion_tokens = 100;
  return r;
}

class StrategyCampaign : public ::testing::Test {
 protected:
  void start_server(testing::ReplyFn reply) {
    testing::FakeServerOptions so;
    so.reply = std::move(reply);
    m_server = std::make_unique<testing::FakeOpenAIServer>(so);
    ASSERT_TRUE(m_server->start());
  }
  void start_server_with_id(testing::ReplyWithIdFn reply) {
    testing::FakeServerOptions so;
    so.reply_with_id = std::move(reply);
    m_server = std::make_unique<testing::FakeOpenAIServer>(so);
    ASSERT_TRUE(m_server->start());
  }
  void SetUp() override {
    m_dir.write("tasks/1_Relu.py", k_relu_task_source);
    m_dir.write("tasks/2_Relu.py", k_relu_task_source);
    m_dir.write("tasks/3_Relu.py", k_relu_task_source);
    m_cfg.name = "strategy-campaign";
    m_cfg.tasks.kernelbench_dir = m_dir.file("tasks").string();
    m_cfg.max_turns = 2;
    m_cfg.max_inflight_episodes = 3;
    m_cfg.evaluator.mode = config::EvalMode::mock;
    m_cfg.synchronous = config::Synchronous::off;
  }
  void add_model(const std::string& id, double price) {
    config::ModelConfig m;
    m.id = id;
    m.base_url = m_server->base_url();
    m.model = "fake-" + id;
    m.max_attempts = 2;
    m.price_prompt_per_mtok = price;
    m_cfg.models.push_back(m);
  }
  void TearDown() override {
    if (m_server) m_server->stop();
  }

  // Runs the campaign into `db` as `korch run` does. `stop_after`: finals
  // after which a stop is requested (0 = run to the end).
  RunResult run(const std::string& db, int stop_after = 0) {
    auto r = try_run(db, stop_after);
    EXPECT_TRUE(r) << r.error().message;
    return r ? *r : RunResult{};
  }
  Result<RunResult> try_run(const std::string& db, int stop_after = 0) {
    m_cfg.db_path = m_dir.file(db).string();
    EXPECT_TRUE(config::validate(m_cfg));
    store::Options so;
    so.path = m_cfg.db_path;
    so.synchronous = "OFF";
    auto st = store::Store::open(so);
    EXPECT_TRUE(st) << st.error().message;
    auto made = evaluator::make_evaluator(m_cfg.evaluator, "");
    EXPECT_TRUE(made) << made.error().message;
    if (!made) return std::unexpected(made.error());
    auto& ev = *made;
    auto plan = plan_campaign(m_cfg, *ev);
    EXPECT_TRUE(plan) << plan.error().message;
    auto client = llm::make_curl_client();
    for (const auto& m : m_cfg.models) EXPECT_TRUE(client->add_model(m));
    std::atomic<bool> stop{false};
    RunOptions opts;
    opts.owner = "test:" + std::to_string(::getpid()) + ":x";
    opts.progress_interval_s = 0;
    opts.stop = &stop;
    if (stop_after > 0) {
      opts.on_progress = [&](const Progress& p) {
        if (p.final >= stop_after) stop = true;
      };
    }
    auto r = run_campaign(m_cfg, *plan, **st, *client, *ev, opts);
    ev->shutdown();
    (*st)->close();
    return r;
  }

  std::unique_ptr<store::Store> open(const std::string& db) {
    store::Options so;
    so.path = m_dir.file(db).string();
    so.read_only = true;
    auto st = store::Store::open(so);
    EXPECT_TRUE(st);
    return std::move(*st);
  }

  // The strategy events of a campaign, without their times, sorted.
  std::vector<std::string> decisions(const std::string& db) {
    auto st = open(db);
    auto evs = st->list_events(ids::campaign_id(m_cfg.name));
    EXPECT_TRUE(evs);
    std::vector<std::string> out;
    for (auto& e : *evs)
      if (e.kind == k_strategy_event_kind) out.push_back(e.episode_id + " " + e.detail);
    std::sort(out.begin(), out.end());
    return out;
  }

  testing::TempDir m_dir;
  std::unique_ptr<testing::FakeOpenAIServer> m_server;
  config::CampaignConfig m_cfg;
};

TEST_F(StrategyCampaign, BestOfKStopsEarlyOnlyWhereTheTargetIsReached) {
  start_server(by_task_reply);
  add_model("m1", 1.0);
  m_cfg.strategy.kind = config::StrategyKind::best_of_k;
  m_cfg.strategy.k = 4;
  m_cfg.strategy.target_speedup = 1.2;
  auto r = run("bok.db");
  ASSERT_EQ(r.status, RunStatus::completed) << r.message;
  auto st = open("bok.db");
  auto eps = st->list_episodes(ids::campaign_id(m_cfg.name));
  ASSERT_TRUE(eps);
  std::map<std::string, int> per_task;
  for (auto& e : *eps) {
    EXPECT_EQ(e.status, store::EpisodeStatus::final);
    ++per_task[e.task_id];
  }
  // Task 1 reached 1.5x at its first sample; tasks 2 and 3 (0.5x) spent all k.
  ASSERT_EQ(per_task.size(), 3u);
  for (auto& [task, n] : per_task)
    EXPECT_EQ(n, task.find("1_") != std::string::npos ? 1 : 4) << task;
  int stops = 0, exhausted = 0;
  for (auto& d : decisions("bok.db")) {
    stops += d.find("\"action\":\"stop\"") != std::string::npos;
    exhausted += d.find("\"action\":\"exhausted\"") != std::string::npos;
  }
  EXPECT_EQ(stops, 1);
  EXPECT_EQ(exhausted, 2);
  // Running it again decides nothing new.
  auto before = decisions("bok.db");
  ASSERT_EQ(run("bok.db").status, RunStatus::completed);
  EXPECT_EQ(decisions("bok.db"), before);
  // Resumed under another strategy (or another k): refused, nothing started.
  for (auto change :
       {std::function<void()>([&] { m_cfg.strategy.kind = config::StrategyKind::refine; }),
        std::function<void()>([&] { m_cfg.strategy.k = 6; }),
        std::function<void()>([&] { m_cfg.strategy.kind = config::StrategyKind::grid; })}) {
    const auto saved = m_cfg.strategy;
    change();
    auto again = try_run("bok.db");
    ASSERT_FALSE(again) << "a changed [strategy] was resumed";
    EXPECT_EQ(again.error().kind, ErrorKind::invalid);
    EXPECT_NE(again.error().message.find("keeps its strategy"), std::string::npos)
        << again.error().message;
    m_cfg.strategy = saved;
  }
  EXPECT_EQ(decisions("bok.db"), before);
  ASSERT_EQ(run("bok.db").status, RunStatus::completed);  // the same table resumes
}

TEST_F(StrategyCampaign, BudgetStoppedAndResumedDecidesAsAnUninterruptedRun) {
  start_server_with_id(
      [](const std::string& model, const std::vector<llm::Message>& messages,
         const std::string& id) { return testing::refine_script_reply(model, messages, id); });
  add_model("m1", 10.0);
  add_model("m2", 4.0);
  m_cfg.strategy.kind = config::StrategyKind::budget;
  m_cfg.strategy.budget_usd = 0.2;
  m_cfg.strategy.batch = 3;
  m_cfg.strategy.k = 50;
  m_cfg.strategy.seed = 11;
  auto full = run("full.db");
  ASSERT_EQ(full.status, RunStatus::completed) << full.message;
  auto reference = decisions("full.db");
  ASSERT_GT(reference.size(), 6u);
  // The same campaign stopped after every few finals and resumed each time.
  int runs = 0;
  for (int stop_after = 2; runs < 40; stop_after += 2, ++runs) {
    auto r = run("stopped.db", stop_after);
    if (r.status == RunStatus::completed) break;
    ASSERT_EQ(r.status, RunStatus::stopped) << r.message;
  }
  EXPECT_GT(runs, 2) << "the campaign ended before it was stopped";
  const auto resumed = decisions("stopped.db");
  EXPECT_EQ(resumed.size(), reference.size());
  // On a difference, the first records that differ (not both whole lists).
  for (std::size_t i = 0; i < std::min(resumed.size(), reference.size()); ++i) {
    ASSERT_EQ(resumed[i], reference[i]) << "decision event " << i;
  }
  // And the spend stayed at the cap plus at most one decision's episodes.
  auto st = open("full.db");
  auto counts = st->counts(ids::campaign_id(m_cfg.name));
  ASSERT_TRUE(counts);
  EXPECT_GE(counts->cost_usd, 0.2);
  EXPECT_LT(counts->cost_usd, 0.2 + 3 * 2 * 0.012);  // batch x turns x the dearest call
}

TEST_F(StrategyCampaign, RefineSeedsLaterRoundsWithTheBestVerifiedKernel) {
  start_server_with_id(
      [](const std::string& model, const std::vector<llm::Message>& messages,
         const std::string& id) { return testing::refine_script_reply(model, messages, id); });
  add_model("m1", 1.0);
  add_model("m2", 1.0);
  m_cfg.strategy.kind = config::StrategyKind::refine;
  m_cfg.strategy.rounds = 3;
  m_cfg.samples_per_task = 1;
  auto r = run("refine.db");
  ASSERT_EQ(r.status, RunStatus::completed) << r.message;
  auto st = open("refine.db");
  const auto cid = ids::campaign_id(m_cfg.name);
  auto eps = st->list_episodes(cid);
  ASSERT_TRUE(eps);
  EXPECT_EQ(eps->size(), 3u * 2 * 3);  // tasks x models x rounds
  auto finals = st->list_finals(cid);
  ASSERT_TRUE(finals);
  std::map<std::string, const store::FinalRow*> final_of;
  for (auto& f : *finals) final_of[f.episode_id] = &f;
  int seeded = 0;
  auto events = st->list_events(cid);
  ASSERT_TRUE(events);
  for (auto& ev : *events) {
    if (ev.kind != k_strategy_event_kind) continue;
    auto p = parse_strategy_event(ev.detail);
    ASSERT_TRUE(p);
    if (!p->seed) continue;
    ++seeded;
    ASSERT_GE(p->round.value_or(0), 1);
    // The seed is a correct final of an earlier round, with its speedup...
    auto* seed_final = final_of.at(p->seed->episode_id);
    EXPECT_TRUE(seed_final->correct);
    EXPECT_DOUBLE_EQ(seed_final->speedup.value_or(-1), p->seed->speedup);
    // ...its code opened the episode's first user message...
    auto snap = st->load_episode(ev.episode_id);
    ASSERT_TRUE(snap && *snap);
    std::string first_user;
    for (auto& m : (*snap)->messages) {
      if (m.role == store::Role::user) {
        first_user = m.content;
        break;
      }
    }
    EXPECT_NE(first_user.find(p->seed->episode_id), std::string::npos);
    EXPECT_NE(first_user.find("MOCK_SPEEDUP"), std::string::npos) << first_user;
    // ...and the seeded reply improved on it (the refine script: 1.2x the seed).
    auto* f = final_of.at(ev.episode_id);
    EXPECT_TRUE(f->correct);
    EXPECT_NEAR(f->speedup.value_or(0), p->seed->speedup * 1.2, 1e-3);
  }
  EXPECT_GT(seeded, 0);

  // The exports say where each seeded episode came from.
  std::map<std::string, std::string> seed_of;  // episode -> seed episode
  for (auto& ev : *events)
    if (auto p = parse_strategy_event(ev.detail); p && p->seed)
      seed_of[ev.episode_id] = p->seed->episode_id;
  std::ostringstream jsonl, sft;
  ASSERT_TRUE(reports::write_export(*st, cid, reports::ExportFormat::jsonl, jsonl));
  int with_origin = 0;
  std::istringstream in(jsonl.str());
  for (std::string line; std::getline(in, line);) {
    auto rec = nlohmann::json::parse(line);
    if (rec["type"] != "episode") continue;
    auto it = seed_of.find(rec["episode_id"]);
    if (it == seed_of.end()) {
      EXPECT_TRUE(rec["seed_episode_id"].is_null());
      continue;
    }
    ++with_origin;
    EXPECT_EQ(rec["seed_episode_id"], it->second);
    EXPECT_EQ(rec["seed_speedup"].get<double>(), final_of.at(it->second)->speedup.value_or(-1));
    EXPECT_GE(rec["round"].get<int>(), 1);
  }
  EXPECT_EQ(with_origin, seeded);
  reports::TrainingOptions to;
  ASSERT_TRUE(reports::write_training_export(*st, cid, to, sft));
  int sft_seeded = 0;
  std::istringstream sin(sft.str());
  for (std::string line; std::getline(sin, line);) {
    auto rec = nlohmann::json::parse(line);
    auto& md = rec["metadata"];
    if (md["seed"].is_null()) continue;
    ++sft_seeded;
    EXPECT_EQ(md["seed"]["episode_id"], seed_of.at(md["episode_id"]));
    // The conversation as sent: the seed's block is in its first user message.
    std::string first_user;
    for (auto& m : rec["messages"]) {
      if (m["role"] == "user") {
        first_user = m["content"];
        break;
      }
    }
    EXPECT_NE(first_user.find("a measured speedup of"), std::string::npos) << first_user;
  }
  EXPECT_GT(sft_seeded, 0);

  // The report: one point per round, fast_1 never falling, every episode once.
  auto rep = reports::build_report(*st, cid);
  ASSERT_TRUE(rep);
  EXPECT_EQ(rep->strategy.kind, "refine");
  ASSERT_EQ(rep->strategy.by_round.size(), 3u);
  double f1 = 0;
  for (int r = 0; r < 3; ++r) {
    auto& p = rep->strategy.by_round[r];
    EXPECT_EQ(p.round, r);
    EXPECT_EQ(p.episodes, 6 * (r + 1));
    EXPECT_GE(p.fast_p[3].second, f1);
    f1 = p.fast_p[3].second;
  }
  EXPECT_EQ(rep->strategy.by_episode.size(), 18u);
  // Decisions, not events: a refine decision starts several episodes, and
  // records an event for each.
  auto evs = st->list_events(cid);
  ASSERT_TRUE(evs);
  std::set<std::string> keys;
  std::size_t strategy_events = 0;
  for (auto& e : *evs) {
    if (e.kind != k_strategy_event_kind) continue;
    ++strategy_events;
    if (auto parsed = parse_strategy_event(e.detail)) keys.insert(parsed->key);
  }
  EXPECT_EQ(rep->strategy.decisions, static_cast<std::int64_t>(keys.size()));
  EXPECT_LT(keys.size(), strategy_events);
  // The two curves end at the same point, to the bit (one summation).
  EXPECT_EQ(rep->strategy.by_round.back().cost_usd, rep->strategy.by_episode.back().cost_usd);
  EXPECT_EQ(rep->strategy.by_round.back().gpu_hours, rep->strategy.by_episode.back().gpu_hours);

  // Resumed with another samples_per_task (refine's rounds are made of it):
  // refused, nothing started.
  st.reset();
  m_cfg.samples_per_task = 2;
  auto again = try_run("refine.db");
  ASSERT_FALSE(again) << "a changed samples_per_task was resumed under refine";
  EXPECT_EQ(again.error().kind, ErrorKind::invalid);
  EXPECT_NE(again.error().message.find("samples_per_task = 1"), std::string::npos)
      << again.error().message;
  EXPECT_EQ(open("refine.db")->list_episodes(cid)->size(), 3u * 2 * 3);
}

}  // namespace
}  // namespace korch::agent
