// Unit tests of agent/strategy: the pure decisions (best_of_k's early stop,
// refine's rounds and seeds, the budget bandit's determinism) on facts the
// tests write. Whole strategy campaigns (a real store, the fake LLM, the mock
// evaluator, the queue) are in tests/integration/test_strategy_campaigns.cpp.
#include "agent/strategy.hpp"

#include <gtest/gtest.h>

#include <algorithm>
#include <map>
#include <nlohmann/json.hpp>
#include <random>
#include <set>
#include <string>
#include <utility>
#include <vector>

#include "config/vocabulary.hpp"
#include "util/ids.hpp"

namespace korch::agent {
namespace {

config::CampaignConfig base_config(config::StrategyKind kind) {
  config::CampaignConfig cfg;
  cfg.name = "strategy-test";
  cfg.strategy.kind = kind;
  for (auto id : {"m1", "m2"}) {
    config::ModelConfig m;
    m.id = id;
    cfg.models.push_back(m);
  }
  return cfg;
}

StrategyFacts facts_for(std::vector<std::string> tasks) {
  StrategyFacts f;
  f.campaign_id = "c-test";
  f.tasks = std::move(tasks);
  return f;
}

// Records a decision as the runner does: its key, and its episodes (not final).
void apply(StrategyFacts& f, const Decision& d) {
  f.decided.insert(d.key);
  for (auto& e : d.start) {
    StrategyEpisode se;
    se.id = e.id;
    se.task_id = e.task_id;
    se.model_id = e.model_id;
    se.sample = e.sample;
    f.episodes.push_back(se);
  }
}

void finish(StrategyFacts& f, const std::string& task, const std::string& model, int sample,
            bool correct, std::optional<double> speedup, double cost = 0.01, double eval_s = 1) {
  for (auto& e : f.episodes) {
    if (e.task_id == task && e.model_id == model && e.sample == sample) {
      e.final = true;
      e.correct = correct;
      e.speedup = speedup;
      e.cost_usd = cost;
      e.eval_s = eval_s;
      return;
    }
  }
  FAIL() << "no episode " << task << " " << model << " " << sample;
}

const Decision* find_key(const std::vector<Decision>& ds, const std::string& key) {
  for (auto& d : ds)
    if (d.key == key) return &d;
  return nullptr;
}

// --- best_of_k -----------------------------------------------------------------

TEST(BestOfK, StopsATaskAndModelOnceACorrectKernelReachesTheTarget) {
  auto cfg = base_config(config::StrategyKind::best_of_k);
  cfg.strategy.k = 4;
  cfg.strategy.target_speedup = 1.5;
  auto f = facts_for({"T1"});
  auto first = decide(cfg, f);
  ASSERT_EQ(first.size(), 2u);  // wave 0 of (T1, m1) and (T1, m2)
  for (auto& d : first) {
    EXPECT_EQ(d.action, "start");
    ASSERT_EQ(d.start.size(), 1u);
    EXPECT_EQ(d.start[0].sample, 0);
    apply(f, d);
  }
  // Nothing is decided while a wave's episode runs.
  EXPECT_TRUE(decide(cfg, f).empty());
  finish(f, "T1", "m1", 0, true, 1.6);   // reaches the target
  finish(f, "T1", "m2", 0, true, 1.49);  // correct, but below it
  auto second = decide(cfg, f);
  ASSERT_EQ(second.size(), 2u);
  auto* stop = find_key(second, "best_of_k|T1|m1|stop");
  ASSERT_NE(stop, nullptr);
  EXPECT_EQ(stop->action, "stop");
  EXPECT_TRUE(stop->start.empty());
  EXPECT_EQ(stop->anchor_episode, ids::episode_id("c-test", "T1", "m1", 0));
  auto* more = find_key(second, "best_of_k|T1|m2|wave:1");
  ASSERT_NE(more, nullptr);
  ASSERT_EQ(more->start.size(), 1u);
  EXPECT_EQ(more->start[0].sample, 1);
  for (auto& d : second) apply(f, d);
  // m1 is done for good: no further decision for it, ever.
  finish(f, "T1", "m2", 1, false, std::nullopt);
  auto third = decide(cfg, f);
  ASSERT_EQ(third.size(), 1u);
  EXPECT_EQ(third[0].key, "best_of_k|T1|m2|wave:2");
}

TEST(BestOfK, SpendsKSamplesWithoutAHitThenStops) {
  auto cfg = base_config(config::StrategyKind::best_of_k);
  cfg.models.resize(1);
  cfg.strategy.k = 3;
  cfg.strategy.parallel = 2;  // waves of 2, 1
  auto f = facts_for({"T1"});
  int samples = 0;
  for (int round = 0; round < 10; ++round) {
    auto ds = decide(cfg, f);
    if (ds.empty()) break;
    ASSERT_EQ(ds.size(), 1u);
    if (ds[0].action == "exhausted") {
      EXPECT_EQ(samples, 3);
      EXPECT_EQ(ds[0].key, "best_of_k|T1|m1|exhausted");
      apply(f, ds[0]);
      EXPECT_TRUE(decide(cfg, f).empty());
      return;
    }
    apply(f, ds[0]);
    EXPECT_LE(ds[0].start.size(), 2u);
    for (auto& e : ds[0].start) {
      finish(f, "T1", "m1", e.sample, e.sample % 2 == 0, 0.9);  // never fast enough
      ++samples;
    }
  }
  FAIL() << "best_of_k never stopped";
}

// --- refine ----------------------------------------------------------------------

TEST(Refine, WaitsForTheWholeRoundAndSeedsFromTheBestOfAnyModel) {
  auto cfg = base_config(config::StrategyKind::refine);
  cfg.samples_per_task = 2;
  cfg.strategy.rounds = 3;
  auto f = facts_for({"T1", "T2"});
  auto r0 = decide(cfg, f);
  ASSERT_EQ(r0.size(), 2u);
  for (auto& d : r0) {
    EXPECT_EQ(d.start.size(), 4u);  // 2 samples x 2 models
    for (auto& e : d.start) EXPECT_FALSE(e.seed);
    apply(f, d);
  }
  // T1's round 0 ends out of order; its round 1 waits for the last episode.
  finish(f, "T1", "m2", 1, true, 1.3);
  finish(f, "T1", "m1", 0, true, 1.1);
  finish(f, "T1", "m1", 1, false, std::nullopt);
  EXPECT_TRUE(decide(cfg, f).empty());
  finish(f, "T1", "m2", 0, true, 1.3);  // ties the best: the earlier sample wins
  auto r1 = decide(cfg, f);
  ASSERT_EQ(r1.size(), 1u);
  EXPECT_EQ(r1[0].key, "refine|T1|round:1");
  ASSERT_EQ(r1[0].start.size(), 4u);
  for (auto& e : r1[0].start) {
    EXPECT_EQ(e.round, 1);
    EXPECT_GE(e.sample, 2);
    ASSERT_TRUE(e.seed);
    EXPECT_EQ(e.seed->episode_id, ids::episode_id("c-test", "T1", "m2", 0));
    EXPECT_EQ(e.seed->model_id, "m2");
    EXPECT_DOUBLE_EQ(e.seed->speedup, 1.3);
  }
  // The event detail carries the origin, and reads back.
  auto detail = strategy_event_detail(r1[0], &r1[0].start[0], "seed text");
  auto parsed = parse_strategy_event(detail);
  ASSERT_TRUE(parsed);
  EXPECT_EQ(parsed->key, "refine|T1|round:1");
  EXPECT_EQ(parsed->round, 1);
  ASSERT_TRUE(parsed->seed);
  EXPECT_EQ(*parsed->seed, *r1[0].start[0].seed);
  EXPECT_EQ(parsed->seed_prompt, "seed text");
  apply(f, r1[0]);
  // A task with no correct kernel yet starts its next round unseeded.
  for (auto m : {"m1", "m2"})
    for (int s = 0; s < 2; ++s) finish(f, "T2", m, s, false, std::nullopt);
  auto t2 = decide(cfg, f);
  ASSERT_EQ(t2.size(), 1u);
  EXPECT_EQ(t2[0].key, "refine|T2|round:1");
  for (auto& e : t2[0].start) EXPECT_FALSE(e.seed);
}

TEST(Refine, SeedPromptCarriesCodeResultAndOrigin) {
  SeedOrigin s{"e-abc", "m2", 1, 1.2345};
  auto text = seed_prompt(s, "class ModelNew: pass", "SUBMIT result: ok");
  EXPECT_NE(text.find("a measured speedup of 1.234x"), std::string::npos) << text;
  EXPECT_NE(text.find("model m2"), std::string::npos);
  EXPECT_NE(text.find("episode e-abc"), std::string::npos);
  EXPECT_NE(text.find("```python\nclass ModelNew: pass\n```"), std::string::npos) << text;
  EXPECT_NE(text.find("SUBMIT result: ok"), std::string::npos);
}

// --- budget ----------------------------------------------------------------------

config::CampaignConfig budget_config(config::Bandit bandit) {
  auto cfg = base_config(config::StrategyKind::budget);
  cfg.models.push_back(cfg.models[0]);
  cfg.models.back().id = "m3";
  cfg.strategy.budget_usd = 1.0;
  cfg.strategy.batch = 4;
  cfg.strategy.k = 100;
  cfg.strategy.bandit = bandit;
  cfg.strategy.seed = 7;
  return cfg;
}

// Drives the budget strategy to its end with results that depend only on the
// episode (model m2 succeeds most, m3 is the cheapest), finishing each
// decision's episodes, and holding the facts, in the order `shuffle` gives. Returns the decisions'
// records in order.
std::vector<std::string> run_budget(const config::CampaignConfig& cfg, std::uint32_t shuffle) {
  auto f = facts_for({"T1", "T2", "T3"});
  std::vector<std::string> records;
  std::mt19937 rng(shuffle);
  for (int step = 0; step < 1000; ++step) {
    // Facts arrive in any order (a resumed run loads them from the store, an
    // uninterrupted one appends them as episodes end).
    std::shuffle(f.episodes.begin(), f.episodes.end(), rng);
    auto ds = decide(cfg, f);
    if (ds.empty()) break;
    for (auto& d : ds) {
      records.push_back(d.detail_json);
      apply(f, d);
      auto eps = d.start;
      std::shuffle(eps.begin(), eps.end(), rng);
      for (auto& e : eps) {
        auto h = ids::stable_hash64(e.id);
        int rate = e.model_id == "m2" ? 70 : e.model_id == "m1" ? 30 : 20;
        bool ok = static_cast<int>(h % 100) < rate;
        // Costs whose sums depend on the order they are added in.
        double cost = (e.model_id == "m3" ? 0.005 : 0.02) + 1e-3 / static_cast<double>(3 + h % 7);
        finish(f, e.task_id, e.model_id, e.sample, ok,
               ok ? std::optional<double>(1.2) : std::nullopt, cost);
      }
    }
  }
  return records;
}

TEST(BudgetBandit, SameStoreAndSeedGiveTheSameDecisionsWhateverTheFinishOrder) {
  for (auto bandit : {config::Bandit::thompson, config::Bandit::ucb}) {
    auto cfg = budget_config(bandit);
    auto a = run_budget(cfg, 1);
    auto b = run_budget(cfg, 2);
    ASSERT_GT(a.size(), 5u);
    EXPECT_EQ(a, b) << config::to_string(bandit);
    // The last decision is the stop, at the cap.
    auto last = nlohmann::json::parse(a.back());
    EXPECT_EQ(last["key"], "budget|stop");
    EXPECT_EQ(last["action"], "stop");
    EXPECT_GE(last["spent_usd"].get<double>(), 1.0);
    // The one before it had spent less than the cap.
    auto before = nlohmann::json::parse(a[a.size() - 2]);
    EXPECT_LT(before["spent_usd"].get<double>(), 1.0);
  }
}

TEST(BudgetBandit, TheSeedMattersAndEveryArmIsTriedFirst) {
  auto cfg = budget_config(config::Bandit::thompson);
  auto a = run_budget(cfg, 1);
  cfg.strategy.seed = 8;
  auto b = run_budget(cfg, 1);
  EXPECT_NE(a, b) << "Thompson sampling with another seed made every decision alike";
  auto first = nlohmann::json::parse(a.front());
  std::set<std::string> first_models;
  for (auto& s : first["slots"]) first_models.insert(s["model_id"].get<std::string>());
  EXPECT_EQ(first_models, (std::set<std::string>{"m1", "m2", "m3"}));
}

TEST(BudgetBandit, FavoursTheModelWithTheMostSuccessesPerDollar) {
  for (auto bandit : {config::Bandit::thompson, config::Bandit::ucb}) {
    auto cfg = budget_config(bandit);
    cfg.strategy.budget_usd = 3.0;
    std::map<std::string, int> chosen;
    for (auto& r : run_budget(cfg, 1)) {
      auto j = nlohmann::json::parse(r);
      for (auto& s : j.value("slots", nlohmann::json::array()))
        ++chosen[s["model_id"].get<std::string>()];
    }
    // m2: 70% at $0.02 (35 successes per dollar); m3: 20% at $0.005 (40);
    // m1: 30% at $0.02 (15): m1 must get the fewest.
    EXPECT_LT(chosen["m1"], chosen["m2"]) << config::to_string(bandit);
    EXPECT_LT(chosen["m1"], chosen["m3"]) << config::to_string(bandit);
  }
}

TEST(BudgetBandit, AGpuHourCapCountsEvaluationTimeAndPrefersTheCheapestArmPerGpuSecond) {
  auto cfg = budget_config(config::Bandit::ucb);
  cfg.strategy.budget_usd = 0;
  cfg.strategy.budget_gpu_hours = 0.02;  // 72 evaluation seconds
  auto f = facts_for({"T1"});
  std::map<std::string, int> after_first;
  int started = 0;
  for (int step = 0; step < 200; ++step) {
    auto ds = decide(cfg, f);
    ASSERT_EQ(ds.size(), 1u);
    if (ds[0].action == "stop") {
      auto j = nlohmann::json::parse(ds[0].detail_json);
      EXPECT_DOUBLE_EQ(j["spent_gpu_hours"].get<double>(), 72.0 / 3600);
      // The first decision tries every arm (m1, m2, m3, then m1 again): 61 s;
      // then m3, 1 s per episode, until the cap: 11 more. Spend (USD 100 an
      // episode) plays no part.
      EXPECT_EQ(started, 15);
      EXPECT_EQ(after_first, (std::map<std::string, int>{{"m3", 11}}));
      return;
    }
    apply(f, ds[0]);
    for (auto& e : ds[0].start) {
      double eval_s = e.model_id == "m3" ? 1.0 : 20.0;
      finish(f, e.task_id, e.model_id, e.sample, true, 1.5, 100.0, eval_s);
      if (step > 0) ++after_first[e.model_id];
      ++started;
    }
    cfg.strategy.batch = 1;
  }
  FAIL() << "the GPU-hour cap never stopped the campaign";
}

TEST(BudgetBandit, BetaDrawsAreSeededAndInRange) {
  EXPECT_EQ(beta_draw(2, 3, 42), beta_draw(2, 3, 42));
  EXPECT_NE(beta_draw(2, 3, 42), beta_draw(2, 3, 43));
  double sum = 0;
  for (std::uint64_t s = 0; s < 2000; ++s) {
    double x = beta_draw(8, 2, s);
    ASSERT_GE(x, 0.0);
    ASSERT_LE(x, 1.0);
    sum += x;
  }
  EXPECT_NEAR(sum / 2000, 0.8, 0.02);  // the mean of Beta(8, 2)
}

TEST(BudgetBandit, BetaDrawsHaveBetasMomentsForSmallAndLargeShapes) {
  // korch's own gamma sampler (shape < 1 goes through Gamma(a + 1) U^(1/a)):
  // Beta(a, b) has mean a / (a + b) and variance ab / ((a + b)^2 (a + b + 1)).
  for (auto [a, b] :
       {std::pair{0.5, 0.5}, std::pair{1.0, 1.0}, std::pair{2.0, 5.0}, std::pair{30.0, 3.0}}) {
    const int n = 20000;
    double sum = 0;
    double sq = 0;
    for (int s = 0; s < n; ++s) {
      const double x = beta_draw(a, b, static_cast<std::uint64_t>(s) * 7919 + 1);
      sum += x;
      sq += x * x;
    }
    const double mean = sum / n;
    const double var = sq / n - mean * mean;
    const double want_var = a * b / ((a + b) * (a + b) * (a + b + 1));
    EXPECT_NEAR(mean, a / (a + b), 0.01) << "Beta(" << a << ", " << b << ")";
    EXPECT_NEAR(var, want_var, 0.1 * want_var + 1e-4) << "Beta(" << a << ", " << b << ")";
  }
}

}  // namespace
}  // namespace korch::agent
