// Tests of evaluator/evaluator.cpp: the verdict and request-mode names, the
// report's JSON encoding, the reward functions and reward_for(), the one
// place a campaign's reward option meets a report (DESIGN §5 stage 4).
#include "evaluator/evaluator.hpp"

#include <gtest/gtest.h>

#include <cmath>
#include <functional>
#include <future>
#include <optional>
#include <set>
#include <string>
#include <vector>

namespace korch::evaluator {
namespace {

TEST(VerdictNames, RoundTrip) {
  for (auto v :
       {Verdict::ok, Verdict::rule_violation, Verdict::compile_error, Verdict::runtime_error,
        Verdict::incorrect, Verdict::timeout, Verdict::worker_crash, Verdict::impossible_timing,
        Verdict::no_kernel, Verdict::task_too_large}) {
    EXPECT_EQ(verdict_from_string(to_string(v)), v) << to_string(v);
  }
  EXPECT_EQ(verdict_from_string("OK"), std::nullopt);
}

TEST(ModeNames, AreTheWireValues) {
  EXPECT_STREQ(to_string(Mode::check), "check");
  EXPECT_STREQ(to_string(Mode::submit), "submit");
  EXPECT_EQ(mode_from_string("check"), Mode::check);
  EXPECT_EQ(mode_from_string("submit"), Mode::submit);
  EXPECT_EQ(mode_from_string("none"), std::nullopt);
}

TEST(ReportJson, RoundTripsTheVerdictFields) {
  Report r;
  r.request_id = "kernel|x";
  r.status = Verdict::incorrect;
  r.speedup = 1.5;
  r.reward = 0.25;
  r.max_abs_diff = 0.5;
  r.protections = {"seccomp", "netns"};
  r.mode = "cpu";
  r.evidence = {{"trials", nlohmann::json::array()}};
  auto back = Report::from_json(r.to_json());
  ASSERT_TRUE(back) << back.error().message;
  EXPECT_EQ(back->request_id, r.request_id);
  EXPECT_EQ(back->status, Verdict::incorrect);
  EXPECT_EQ(back->speedup, 1.5);
  EXPECT_EQ(back->reward, 0.25);
  EXPECT_EQ(back->protections, r.protections);
  EXPECT_EQ(back->mode, "cpu");
  EXPECT_EQ(back->ref_time_ms, std::nullopt);
  EXPECT_EQ(back->evidence, r.evidence);
  EXPECT_EQ(back->to_json(), r.to_json());
  EXPECT_FALSE(Report::from_json("not json"));
}

TEST(RewardSpeedup, Shape) {
  EXPECT_EQ(reward_speedup(false, 10.0), 0.0);
  EXPECT_DOUBLE_EQ(reward_speedup(true, std::nullopt), 0.3);
  EXPECT_DOUBLE_EQ(reward_speedup(true, 1.0), 0.3);
  EXPECT_DOUBLE_EQ(reward_speedup(true, 4.0), 2.3);
  EXPECT_DOUBLE_EQ(reward_speedup(true, 1e6), 3.3);  // log2 clamped at 3
  EXPECT_DOUBLE_EQ(reward_speedup(true, 0.1), 0.1);  // clamped at -0.2
}

TEST(RewardRoofline, Shape) {
  EXPECT_EQ(reward_roofline(false, 1.0, 1.0), 0.0);
  EXPECT_DOUBLE_EQ(reward_roofline(true, 1.0, 1.0), 3.0);
  EXPECT_DOUBLE_EQ(reward_roofline(true, 1.0, 2.0), 0.3 + 2.7 / 2);
  EXPECT_DOUBLE_EQ(reward_roofline(true, 2.0, 1.0), 3.0);  // faster than t_min: capped
  EXPECT_DOUBLE_EQ(reward_roofline(true, 0.0, 1.0), 0.3);  // unknown t_min
}

TEST(RewardBeatBaseline, Shape) {
  EXPECT_EQ(reward_beat_baseline(true, 1.01), 1.0);
  EXPECT_EQ(reward_beat_baseline(true, 1.0), 0.0);
  EXPECT_EQ(reward_beat_baseline(true, std::nullopt), 0.0);
  EXPECT_EQ(reward_beat_baseline(false, 5.0), 0.0);
}

struct RewardCase {
  const char* name;
  config::Reward reward;
  bool correct;
  std::optional<double> speedup, ci_low, t_min_ms, cand_ms;
  double expected;
};

class RewardFor : public ::testing::TestWithParam<RewardCase> {};

TEST_P(RewardFor, AppliesTheCampaignsOption) {
  const auto& c = GetParam();
  Report r;
  r.correct = c.correct;
  r.speedup = c.speedup;
  r.speedup_ci_low = c.ci_low;
  r.t_min_ms = c.t_min_ms;
  r.cand_time_ms = c.cand_ms;
  EXPECT_DOUBLE_EQ(reward_for(c.reward, r), c.expected);
}

INSTANTIATE_TEST_SUITE_P(
    Table, RewardFor,
    ::testing::Values(
        RewardCase{"speedup", config::Reward::speedup, true, 2.0, 1.5, 1.0, 2.0, 1.3},
        RewardCase{"speedup_incorrect", config::Reward::speedup, false, 2.0, 1.5, 1.0, 2.0, 0.0},
        RewardCase{"beat_baseline", config::Reward::beat_baseline, true, 2.0, 1.5, 1.0, 2.0, 1.0},
        RewardCase{
            "beat_baseline_ci_at_one", config::Reward::beat_baseline, true, 2.0, 0.9, {}, {}, 0.0},
        RewardCase{"roofline", config::Reward::roofline, true, 2.0, 1.5, 1.0, 2.0, 0.3 + 2.7 / 2},
        // Without t_min (cpu or mock mode) roofline falls back to the speedup reward.
        RewardCase{
            "roofline_without_t_min", config::Reward::roofline, true, 2.0, 1.5, {}, 2.0, 1.3}),
    [](const auto& info) { return std::string(info.param.name); });

TEST(MakeEvaluator, MockModeIsLabelledMock) {
  config::EvaluatorConfig cfg;
  cfg.mode = config::EvalMode::mock;
  cfg.reward = config::Reward::beat_baseline;
  auto ev = make_evaluator(cfg, "");
  ASSERT_TRUE(ev) << ev.error().message;
  EXPECT_EQ((*ev)->mode(), config::EvalMode::mock);
  Request req;
  req.request_id = "kernel|mock";
  req.mode = Mode::submit;
  req.code = "class ModelNew: pass\n";
  std::promise<Report> done;
  (*ev)->evaluate(req, [&](Report r) { done.set_value(std::move(r)); });
  auto r = done.get_future().get();
  (*ev)->shutdown();
  EXPECT_TRUE(r.mock);
  EXPECT_EQ(r.mode, "mock");
  // The mock applies the campaign's reward option like every other mode:
  // beat_baseline pays 1 only for a correct kernel whose speedup interval
  // lies above 1 (derived by hand from the report, not by reward_for).
  ASSERT_TRUE(r.speedup_ci_low.has_value());
  EXPECT_DOUBLE_EQ(r.reward, r.correct && *r.speedup_ci_low > 1.0 ? 1.0 : 0.0);
}

// The mock runs no code but echoes a digest of what a verdict rests on
// besides the code (issue #47): equal requests give equal digests, and each
// of the seed, the task's source, id and path, the rules flag and the device
// changes it.
// The one factory builds the remote evaluator too (issue #49): with
// evaluator.remote it opens the store's work queue (evaluator/remote/), never
// an in-process evaluator; a queue needs a PostgreSQL store. (The queue
// itself, on a real PostgreSQL server: tests/integration/test_eval_queue.cpp.)
TEST(MakeEvaluator, RemoteIsTheQueue) {
  config::EvaluatorConfig cfg;
  cfg.mode = config::EvalMode::mock;
  cfg.remote = true;
  auto no_store = make_evaluator(cfg, "");
  ASSERT_FALSE(no_store);
  EXPECT_EQ(no_store.error().kind, ErrorKind::invalid);
  EXPECT_NE(no_store.error().message.find("store.url"), std::string::npos)
      << no_store.error().message;
  auto sqlite = make_evaluator(cfg, "", {"sqlite:/nonexistent/k.db", "c-1"});
  ASSERT_FALSE(sqlite);
  EXPECT_EQ(sqlite.error().kind, ErrorKind::invalid);
  EXPECT_EQ(sqlite.error().message.rfind("evaluator.remote: ", 0), 0u) << sqlite.error().message;
  EXPECT_NE(sqlite.error().message.find("PostgreSQL"), std::string::npos) << sqlite.error().message;
  cfg.remote = false;  // the same config in-process
  auto local = make_evaluator(cfg, "", {"sqlite:/nonexistent/k.db", "c-1"});
  ASSERT_TRUE(local) << local.error().message;
  EXPECT_EQ((*local)->mode(), config::EvalMode::mock);
  (*local)->shutdown();
}

TEST(MakeEvaluator, MockEchoesADigestOfTheRequest) {
  config::EvaluatorConfig cfg;
  cfg.mode = config::EvalMode::mock;
  auto ev = make_evaluator(cfg, "");
  ASSERT_TRUE(ev) << ev.error().message;
  auto digest = [&](const Request& req) {
    std::promise<Report> done;
    (*ev)->evaluate(req, [&](Report r) { done.set_value(std::move(r)); });
    return done.get_future().get().evidence.value("request_digest", "");
  };
  Request base;
  base.request_id = "kernel|digest";
  base.code = "class ModelNew: pass\n";
  base.secret_seed = 7;
  base.task = {"L1/19_ReLU", 1, 19, "ReLU", "/k/level1/19_ReLU.py", "class Model: pass\n"};
  const std::string d0 = digest(base);
  EXPECT_EQ(d0.size(), 64u);
  EXPECT_EQ(digest(base), d0);
  std::vector<std::function<void(Request&)>> changes = {
      [](Request& r) { r.secret_seed = 8; },
      [](Request& r) { r.task.source += " "; },
      [](Request& r) { r.task.id = "L1/20_LeakyReLU"; },
      [](Request& r) { r.task.path = "/other/19_ReLU.py"; },
      [](Request& r) { r.rules = false; },
      [](Request& r) { r.device = config::EvalMode::cpu; },
  };
  std::set<std::string> seen = {d0};
  for (auto& change : changes) {
    Request r = base;
    change(r);
    EXPECT_TRUE(seen.insert(digest(r)).second) << seen.size();
  }
  (*ev)->shutdown();
}

// The markers tests and benchmarks script the mock with
// (evaluator/mock_evaluator.hpp): MOCK_SPEEDUP makes a SUBMIT measure exactly
// that speedup and the code ok unless MOCK_VERDICT says otherwise.
Report mock_evaluate(Evaluator& ev, const std::string& code, Mode mode) {
  Request req;
  req.request_id = std::string(mode == Mode::submit ? "kernel|" : "check|") + code;
  req.mode = mode;
  req.code = code;
  std::promise<Report> done;
  ev.evaluate(req, [&](Report r) { done.set_value(std::move(r)); });
  return done.get_future().get();
}

TEST(MakeEvaluator, MockScriptsVerdictAndSpeedupFromMarkers) {
  config::EvaluatorConfig cfg;
  cfg.mode = config::EvalMode::mock;
  auto made = make_evaluator(cfg, "");
  ASSERT_TRUE(made) << made.error().message;
  auto& ev = **made;
  // Several codes, so that the hash's own 30% of failures would show.
  for (int i = 0; i < 8; ++i) {
    const std::string code = "# MOCK_SPEEDUP: 1.75\nclass ModelNew: pass  # " + std::to_string(i);
    auto r = mock_evaluate(ev, code, Mode::submit);
    EXPECT_EQ(r.status, Verdict::ok) << code;
    ASSERT_TRUE(r.speedup.has_value()) << code;
    EXPECT_EQ(*r.speedup, 1.75);
    EXPECT_EQ(r.speedup_ci_low, std::optional<double>(1.75));
    EXPECT_EQ(r.speedup_ci_high, std::optional<double>(1.75));
    EXPECT_DOUBLE_EQ(r.reward, reward_speedup(true, 1.75));
    // A CHECK is ok and measures nothing.
    auto c = mock_evaluate(ev, code, Mode::check);
    EXPECT_EQ(c.status, Verdict::ok);
    EXPECT_FALSE(c.speedup.has_value());
  }
  // MOCK_VERDICT wins over the speedup.
  auto bad = mock_evaluate(ev, "# MOCK_SPEEDUP: 1.75\n# MOCK_VERDICT: incorrect\n", Mode::submit);
  EXPECT_EQ(bad.status, Verdict::incorrect);
  EXPECT_FALSE(bad.correct);
  EXPECT_FALSE(bad.speedup.has_value());
  // A speedup that is not a number above 0 is no marker: the hash decides,
  // and a hashed speedup lies in 0.5x-3.5x.
  for (const char* v : {"-1", "0", "fast", "nan"}) {
    auto r = mock_evaluate(ev, std::string("# MOCK_SPEEDUP: ") + v + "\n", Mode::submit);
    if (r.speedup) {
      EXPECT_GE(*r.speedup, 0.5) << v;
      EXPECT_LT(*r.speedup, 3.5) << v;
    }
  }
  ev.shutdown();
}

}  // namespace
}  // namespace korch::evaluator
