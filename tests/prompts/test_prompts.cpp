// Tests of prompts/: placeholder filling, the system prompt's facts (one per
// vocabulary value), feedback rendering and the compaction summary. Every
// template placeholder must be filled: a leftover "{{" fails the tests.
#include "prompts/prompts.hpp"

#include <gtest/gtest.h>

#include <string>

#include "util/error.hpp"

namespace korch::prompts {
namespace {

bool contains(const std::string& text, const std::string& part) {
  return text.find(part) != std::string::npos;
}

config::Task relu_task() {
  config::Task t;
  t.id = "L1/19_ReLU";
  t.name = "ReLU";
  t.source = "class Model(nn.Module):\n    def forward(self, x):\n        return torch.relu(x)\n\n";
  return t;
}

TEST(Fill, ReplacesKnownKeysAndKeepsUnknownOnes) {
  EXPECT_EQ(fill("a {{x}} b {{y}} {{x}}", {{"x", "1"}, {"y", "2"}}), "a 1 b 2 1");
  EXPECT_EQ(fill("keep {{typo}}", {{"x", "1"}}), "keep {{typo}}");
  EXPECT_EQ(fill("open {{ never closed", {}), "open {{ never closed");
  EXPECT_EQ(fill("", {{"x", "1"}}), "");
}

TEST(Templates, UnknownNameIsFatal) {
  EXPECT_THROW(template_text("no_such_template"), Fatal);
  EXPECT_FALSE(template_text("system").empty());
}

SystemFacts facts() {
  SystemFacts f;
  f.device = "CPU (test)";
  f.max_turns = 4;
  f.rules = {{"no_torch_ops", "Do not call torch ops."}};
  return f;
}

TEST(SystemPrompt, StatesTheDeviceRulesAndTurns) {
  auto p = system_prompt(facts());
  EXPECT_TRUE(contains(p, "CPU (test)")) << p;
  EXPECT_TRUE(contains(p, "- [no_torch_ops] Do not call torch ops.")) << p;
  EXPECT_TRUE(contains(p, "4")) << p;
  EXPECT_FALSE(contains(p, "{{")) << p;
}

TEST(SystemPrompt, WithoutRulesSaysSo) {
  auto f = facts();
  f.rules.clear();
  EXPECT_TRUE(contains(system_prompt(f), "no static rules are enforced"));
}

// The tolerance line quotes the one tolerance table.
class SystemPromptTolerance : public ::testing::TestWithParam<config::Tolerance> {};

TEST_P(SystemPromptTolerance, QuotesTheTable) {
  auto f = facts();
  f.tolerance = GetParam();
  auto p = system_prompt(f);
  EXPECT_TRUE(contains(p, config::tolerance_summary(GetParam()))) << p;
  EXPECT_TRUE(contains(p, config::format_tolerance(config::tolerance_profile(GetParam()).atol)))
      << p;
}

INSTANTIATE_TEST_SUITE_P(All, SystemPromptTolerance,
                         ::testing::Values(config::Tolerance::strict, config::Tolerance::tf32));

struct RewardCase {
  config::Reward reward;
  const char* phrase;
};

class SystemPromptReward : public ::testing::TestWithParam<RewardCase> {};

TEST_P(SystemPromptReward, ExplainsTheScore) {
  auto f = facts();
  f.reward = GetParam().reward;
  auto p = system_prompt(f);
  EXPECT_TRUE(contains(p, GetParam().phrase)) << p;
}

INSTANTIATE_TEST_SUITE_P(All, SystemPromptReward,
                         ::testing::Values(RewardCase{config::Reward::speedup, "log2(speedup)"},
                                           RewardCase{config::Reward::roofline, "t_min / t_yours"},
                                           RewardCase{config::Reward::beat_baseline,
                                                      "95% interval"}));

TEST(SystemPrompt, TorchOpsPolicyIsStatedOnlyWhenForbidden) {
  auto f = facts();
  f.torch_ops = config::TorchOps::allow;
  EXPECT_FALSE(contains(system_prompt(f), "forbidden at run time"));
  f.torch_ops = config::TorchOps::forbid;
  EXPECT_TRUE(contains(system_prompt(f), "forbidden at run time"));
}

TEST(Footer, CountsRepliesAndWarnsOnTheLast) {
  EXPECT_TRUE(contains(footer(3), "You have 3 replies left"));
  EXPECT_TRUE(contains(footer(1), "will be submitted"));
  EXPECT_EQ(footer(0), footer(1));
}

TEST(TaskPrompt, HoldsTheSourceAndTheFooter) {
  auto p = task_prompt(relu_task(), 2);
  EXPECT_TRUE(contains(p, "return torch.relu(x)")) << p;
  EXPECT_TRUE(contains(p, footer(2))) << p;
  EXPECT_FALSE(contains(p, "{{")) << p;
}

evaluator::Report failing_report() {
  evaluator::Report r;
  r.status = evaluator::Verdict::incorrect;
  r.error = std::string(5000, 'e');
  r.compile_log = "begin-of-log" + std::string(5000, 'c') + "end-of-log";
  r.max_abs_diff = 0.5;
  r.mismatch_frac = 0.25;
  return r;
}

TEST(RenderReport, PassingCheckShowsTheDiffAndTheMockNote) {
  evaluator::Report r;
  r.status = evaluator::Verdict::ok;
  r.max_abs_diff = 1.5e-6;
  r.mock = true;
  auto text = render_report(r);
  EXPECT_TRUE(contains(text, "ok")) << text;
  EXPECT_TRUE(contains(text, "1.5e-06")) << text;
  EXPECT_TRUE(contains(text, "MOCK evaluator")) << text;
}

TEST(RenderReport, FailureIsCutToItsLimits) {
  auto text = render_report(failing_report());
  EXPECT_TRUE(contains(text, "incorrect")) << text;
  EXPECT_TRUE(contains(text, "[... truncated]")) << text;
  // Heads of errors, tails of logs.
  EXPECT_TRUE(contains(text, "end-of-log"));
  EXPECT_FALSE(contains(text, "begin-of-log"));
  EXPECT_TRUE(contains(text, "max_abs_diff 0.5, mismatch_frac 0.25")) << text;
  EXPECT_LT(text.size(), 10000u);
  EXPECT_FALSE(contains(text, "MOCK"));
}

TEST(RenderReport, SubmitFeedbackIsLabelledSubmit) {
  auto fail = failing_report();
  EXPECT_TRUE(contains(render_report(fail), "CHECK result: incorrect"));
  auto text = render_report(fail, evaluator::Mode::submit);
  EXPECT_TRUE(contains(text, "SUBMIT result: incorrect")) << text;
  EXPECT_FALSE(contains(text, "CHECK")) << text;
  evaluator::Report ok;
  ok.status = evaluator::Verdict::ok;
  ok.speedup = 1.25;
  ok.max_abs_diff = 2e-6;
  text = render_report(ok, evaluator::Mode::submit);
  EXPECT_TRUE(contains(text, "SUBMIT result: ok")) << text;
  EXPECT_TRUE(contains(text, "speedup over the reference 1.25")) << text;
  EXPECT_FALSE(contains(text, "CHECK")) << text;
  EXPECT_FALSE(contains(text, "on one input")) << text;  // the CHECK wording
}

TEST(RenderReport, NotesFollowTheResult) {
  evaluator::Report ok;
  ok.status = evaluator::Verdict::ok;
  ok.notes = {"fragile on zeros inputs (not counted): ..."};
  const auto text = render_report(ok);
  EXPECT_TRUE(contains(text, "\nNote: fragile on zeros inputs")) << text;
  auto fail = failing_report();
  fail.notes = ok.notes;
  EXPECT_TRUE(contains(render_report(fail), "Note: fragile on zeros")) << render_report(fail);
}

TEST(CheckFeedback, IsTheReportThenTheFooter) {
  auto r = failing_report();
  EXPECT_EQ(check_feedback(r, 2), render_report(r) + "\n\n" + footer(2));
}

TEST(NoCodeMessage, TellsTruncationApart) {
  EXPECT_NE(no_code_message(true, 2), no_code_message(false, 2));
  EXPECT_TRUE(contains(no_code_message(false, 1), footer(1)));
}

TEST(CompactionSummary, ShowsTheLatestPassingCode) {
  std::vector<AttemptSummary> attempts = {
      {1, "check", "ok", "code_one", true, "result one"},
      {2, "check", "incorrect", "code_two", false, "result two"},
  };
  auto text = compaction_summary(relu_task(), attempts, false, 2);
  EXPECT_TRUE(contains(text, "turn 1 check → ok; turn 2 check → incorrect")) << text;
  EXPECT_TRUE(contains(text, "Latest code that passed a CHECK (turn 1)")) << text;
  EXPECT_TRUE(contains(text, "code_one")) << text;
  EXPECT_FALSE(contains(text, "code_two")) << text;
  EXPECT_TRUE(contains(text, "result two")) << text;
  EXPECT_FALSE(contains(text, "resumed after a restart")) << text;
  EXPECT_FALSE(contains(text, "{{")) << text;
}

TEST(CompactionSummary, WithoutAttemptsAndResumed) {
  auto text = compaction_summary(relu_task(), {}, true, 1);
  EXPECT_TRUE(contains(text, "resumed after a restart")) << text;
  EXPECT_TRUE(contains(text, "No code yet")) << text;
  EXPECT_TRUE(contains(text, "# (none)")) << text;
  EXPECT_TRUE(contains(text, footer(1))) << text;
}

}  // namespace
}  // namespace korch::prompts
