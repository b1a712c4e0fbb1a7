// The episode contract of DESIGN §2, one named test per rule. The state
// machine is pure; these tests commit each step to a real SQLite store and
// rebuild episodes from it, exactly as the runner does.
#include <gtest/gtest.h>

#include "agent/episode.hpp"
#include "prompts/prompts.hpp"
#include "tests/support/temp_dir.hpp"
#include "util/ids.hpp"

namespace korch::agent {
namespace {

using evaluator::Verdict;

std::string code_reply(const std::string& body, const char* action) {
  return "Plan.\n```python\nimport torch\nclass ModelNew(torch.nn.Module):\n    " + body +
         "\n```\nACTION: " + action + "\n";
}

llm::ChatResult ok_reply(std::string content, std::string finish = "stop") {
  llm::ChatResult r;
  r.outcome = llm::Outcome::ok;
  r.content = std::move(content);
  r.finish_reason = std::move(finish);
  r.usage.prompt_tokens = 100;
  r.usage.completion_tokens = 50;
  r.cost_usd = 0.001;
  r.attempts.push_back(llm::Attempt{200, "", 0.01});
  return r;
}

evaluator::Report report(const std::string& id, Verdict v, std::optional<double> speedup = {}) {
  evaluator::Report r;
  r.request_id = id;
  r.status = v;
  r.correct = v == Verdict::ok;
  r.speedup = speedup;
  r.reward = evaluator::reward_speedup(r.correct, speedup);
  r.max_abs_diff = r.correct ? 1e-6 : 0.5;
  r.evaluator_version = "test-1";
  r.mode = "test";
  // A worker_crash here is the host's (Report::host_fault): the evaluator's
  // infrastructure mark. The candidate's own crash is built by candidate_crash.
  if (v == Verdict::worker_crash) r.error = "infrastructure: the test's runner lost its GPU";
  return r;
}

class EpisodeTest : public ::testing::Test {
 protected:
  void SetUp() override {
    store::Options o;
    o.path = m_dir.file("korch.db").string();
    o.synchronous = "OFF";
    auto st = store::Store::open(o);
    ASSERT_TRUE(st) << st.error().message;
    m_store = std::move(*st);
    m_task = std::make_shared<config::Task>();
    m_task->id = "L1/19_ReLU";
    m_task->name = "ReLU";
    m_task->source =
        "class Model(nn.Module):\n    def forward(self, x):\n        return torch.relu(x)\n";
    m_spec = std::make_shared<EpisodeSpec>();
    m_spec->campaign_id = "c-test";
    m_spec->task = m_task;
    m_spec->model_id = "m1";
    m_spec->max_turns = 3;
    m_spec->system_prompt = std::make_shared<const std::string>("SYSTEM PROMPT v1");
    m_spec->episode_id = ids::episode_id(m_spec->campaign_id, m_task->id, "m1", 0);
    store::WriteBatch b;
    store::CampaignRow c;
    c.id = "c-test";
    c.name = "test";
    b.put(c);
    store::EpisodeRow e;
    e.id = m_spec->episode_id;
    e.campaign_id = "c-test";
    e.task_id = m_task->id;
    e.model_id = "m1";
    e.system_prompt = *m_spec->system_prompt;
    b.put(e);
    ASSERT_TRUE(m_store->commit_sync(std::move(b)));
    m_env.now = 1000;
    m_env.owner = "test:1";
  }

  // Commits a step's rows (the write-ahead rule) and returns its action.
  Next commit(Step step) {
    auto r = m_store->commit_sync(std::move(step.batch));
    EXPECT_TRUE(r) << (r ? "" : r.error().message);
    return std::move(step.next);
  }
  Next start_episode() { return commit(start(m_state, m_spec, m_env)); }
  Next reply(std::string content, std::string finish = "stop") {
    return commit(on_llm_result(m_state, ok_reply(std::move(content), std::move(finish)), m_env));
  }
  Next evaluated(Verdict v, std::optional<double> speedup = {}) {
    return commit(on_eval_result(m_state, report(m_state.eval_request_id, v, speedup), m_env));
  }
  // Drops the in-memory state and rebuilds it from the store.
  Next reload(std::shared_ptr<EpisodeSpec> spec = nullptr) {
    auto snap = m_store->load_episode(m_spec->episode_id);
    EXPECT_TRUE(snap && *snap);
    m_state = EpisodeState{};
    return commit(resume(m_state, spec ? spec : m_spec, **snap, m_env));
  }
  store::EpisodeSnapshot snapshot() { return **m_store->load_episode(m_spec->episode_id); }
  std::optional<store::FinalRow> final_row() { return snapshot().final; }

  static CallLlm as_call(const Next& n) {
    EXPECT_TRUE(std::holds_alternative<CallLlm>(n))
        << "next action is not CallLlm (index " << n.index() << ")";
    return std::holds_alternative<CallLlm>(n) ? std::get<CallLlm>(n) : CallLlm{};
  }
  static RunEval as_eval(const Next& n) {
    EXPECT_TRUE(std::holds_alternative<RunEval>(n))
        << "next action is not RunEval (index " << n.index() << ")";
    return std::holds_alternative<RunEval>(n) ? std::get<RunEval>(n) : RunEval{};
  }

  testing::TempDir m_dir;
  std::unique_ptr<store::Store> m_store;
  std::shared_ptr<config::Task> m_task;
  std::shared_ptr<EpisodeSpec> m_spec;
  EpisodeState m_state;
  Env m_env;
};

TEST_F(EpisodeTest, Rule1_FirstMessagesAreSystemContextThenTask) {
  m_spec->context = "Campaign context: be brief.";
  auto call = as_call(start_episode());
  ASSERT_EQ(call.request.messages.size(), 3u);
  EXPECT_EQ(call.request.messages[0].role, "system");
  EXPECT_EQ(call.request.messages[0].content, "SYSTEM PROMPT v1");
  EXPECT_EQ(call.request.messages[1].content, "Campaign context: be brief.");
  EXPECT_NE(call.request.messages[2].content.find("return torch.relu(x)"), std::string::npos);
  EXPECT_NE(call.request.messages[2].content.find("3 replies left"), std::string::npos);
  EXPECT_EQ(call.request.request_id, ids::llm_request_id(m_spec->episode_id, 1, "m1"));
}

TEST_F(EpisodeTest, Rule1_WithoutContextTheTaskFollowsTheSystemPrompt) {
  auto call = as_call(start_episode());
  ASSERT_EQ(call.request.messages.size(), 2u);
  EXPECT_EQ(call.request.messages[1].role, "user");
}

TEST_F(EpisodeTest, Rule1_SystemPromptStatesRulesFormatAndTarget) {
  prompts::SystemFacts f;
  f.device = "NVIDIA H200 (torch 2.11)";
  f.tolerance = config::Tolerance::strict;
  f.reward = config::Reward::speedup;
  f.max_turns = 5;
  f.rules = {{"no_try_except", "try/except is not allowed"},
             {"allowed_imports", "only allowed imports"}};
  auto text = prompts::system_prompt(f);
  EXPECT_NE(text.find("NVIDIA H200"), std::string::npos);
  EXPECT_NE(text.find("[no_try_except] try/except is not allowed"), std::string::npos);
  EXPECT_NE(text.find("ACTION: CHECK"), std::string::npos);
  EXPECT_NE(text.find("1e-4"), std::string::npos);
  EXPECT_NE(text.find("Triton"), std::string::npos);
  EXPECT_NE(text.find("load_inline"), std::string::npos);
  EXPECT_EQ(text.find("{{"), std::string::npos) << "unfilled placeholder";
}

TEST_F(EpisodeTest, Rule2_ParsedCodeAndActionDriveTheEvaluation) {
  start_episode();
  auto ev = as_eval(reply(code_reply("x = 1", "CHECK")));
  EXPECT_EQ(ev.request.mode, evaluator::Mode::check);
  EXPECT_NE(ev.request.code.find("class ModelNew"), std::string::npos);
}

TEST_F(EpisodeTest, Rule3_NoCodeIsRecordedAndTheModelIsTold) {
  start_episode();
  auto call = as_call(reply("I need to think first."));
  auto snap = snapshot();
  ASSERT_EQ(snap.turns.size(), 1u);
  EXPECT_EQ(snap.turns[0].parse_status, "no_code");
  EXPECT_EQ(snap.turns[0].action, "none");
  EXPECT_NE(call.request.messages.back().content.find("no ```python code block"),
            std::string::npos);
  EXPECT_NE(call.request.messages.back().content.find("2 replies left"), std::string::npos);
}

TEST_F(EpisodeTest, Rule4_CheckResultIsTheNextUserMessageWithRemainingReplies) {
  start_episode();
  auto ev = as_eval(reply(code_reply("x = 1", "CHECK")));
  EXPECT_EQ(ev.request.request_id.rfind("check|" + m_spec->episode_id + "|1|", 0), 0u);
  auto call = as_call(evaluated(Verdict::incorrect));
  auto& last = call.request.messages.back().content;
  EXPECT_NE(last.find("CHECK result: incorrect"), std::string::npos);
  EXPECT_NE(last.find("max_abs_diff 0.5"), std::string::npos);
  EXPECT_NE(last.find("2 replies left. SUBMIT this code or improve it and CHECK again"),
            std::string::npos);
  EXPECT_EQ(snapshot().turns[0].eval_status, "incorrect");
}

TEST_F(EpisodeTest, Rule5_SubmitEndsTheLoop) {
  start_episode();
  auto ev = as_eval(reply(code_reply("x = 1", "SUBMIT")));
  EXPECT_EQ(ev.request.mode, evaluator::Mode::submit);
  EXPECT_TRUE(std::holds_alternative<Finished>(evaluated(Verdict::ok, 1.5)));
  auto fin = final_row();
  ASSERT_TRUE(fin);
  EXPECT_EQ(fin->reason, store::EndReason::submitted);
  EXPECT_EQ(fin->verdict, "ok");
  EXPECT_TRUE(fin->correct);
}

TEST_F(EpisodeTest, Rule5_AnyCodeOnTheLastTurnIsSubmittedAndThePromptSaysSo) {
  start_episode();
  reply(code_reply("x = 1", "CHECK"));
  evaluated(Verdict::incorrect);
  reply(code_reply("x = 2", "CHECK"));
  auto call = as_call(evaluated(Verdict::incorrect));
  EXPECT_NE(call.request.messages.back().content.find(
                "1 reply left: the code in your next reply will be submitted"),
            std::string::npos);
  auto ev = as_eval(reply(code_reply("x = 3", "CHECK")));
  EXPECT_EQ(ev.request.mode, evaluator::Mode::submit);
  evaluated(Verdict::ok, 2.0);
  EXPECT_EQ(final_row()->reason, store::EndReason::last_turn);
}

TEST_F(EpisodeTest, Rule6_FallbackSubmitsTheLatestPassingCode) {
  start_episode();
  reply(code_reply("x = 1", "CHECK"));
  evaluated(Verdict::ok);
  reply(code_reply("x = 2", "CHECK"));
  evaluated(Verdict::incorrect);
  auto ev = as_eval(reply("no code on the last turn"));
  EXPECT_EQ(ev.request.mode, evaluator::Mode::submit);
  EXPECT_NE(ev.request.code.find("x = 1"), std::string::npos);
  evaluated(Verdict::ok, 1.1);
  auto fin = final_row();
  EXPECT_EQ(fin->reason, store::EndReason::fallback);
  EXPECT_EQ(fin->request_id, ids::submit_request_id(m_spec->episode_id, ev.request.code));
}

TEST_F(EpisodeTest, Rule6_NoPassingCodeEndsAsNoSubmission) {
  start_episode();
  reply(code_reply("x = 1", "CHECK"));
  evaluated(Verdict::incorrect);
  reply("nothing");
  EXPECT_TRUE(std::holds_alternative<Finished>(reply("still nothing")));
  EXPECT_EQ(final_row()->reason, store::EndReason::no_submission);
  EXPECT_EQ(final_row()->verdict, "");
}

TEST_F(EpisodeTest, Rule7_SubmitAndCheckUseDifferentRequestIds) {
  start_episode();
  auto body = code_reply("x = 1", "CHECK");
  auto check_id = as_eval(reply(body)).request.request_id;
  evaluated(Verdict::ok);
  auto submit_id = as_eval(reply(code_reply("x = 1", "SUBMIT"))).request.request_id;
  EXPECT_EQ(check_id.rfind("check|", 0), 0u);
  EXPECT_EQ(submit_id.rfind("kernel|", 0), 0u);
  EXPECT_NE(check_id, submit_id);
  // Same code → the same sha in both ids; the prefix keeps them apart.
  EXPECT_EQ(check_id.substr(check_id.size() - 24), submit_id.substr(submit_id.size() - 24));
}

TEST_F(EpisodeTest, Rule7_AStoredReportIsReusedNotReevaluated) {
  start_episode();
  auto ev = as_eval(reply(code_reply("x = 1", "SUBMIT")));
  auto id = ev.request.request_id;
  // The report is committed, then the process dies before the final row.
  store::WriteBatch b;
  store::EvaluationRow row;
  row.request_id = id;
  row.episode_id = m_spec->episode_id;
  row.kind = "submit";
  row.state = store::EvalState::done;
  row.attempts = 1;
  row.verdict = "ok";
  row.report_json = report(id, Verdict::ok, 1.7).to_json();
  b.put(row);
  ASSERT_TRUE(m_store->commit_sync(std::move(b)));
  EXPECT_TRUE(std::holds_alternative<Finished>(reload()));
  EXPECT_DOUBLE_EQ(*final_row()->speedup, 1.7);
}

TEST_F(EpisodeTest, Rule7_SubmitWithoutReportIsResentWithTheSameIdAndNoLlmCall) {
  start_episode();
  auto id = as_eval(reply(code_reply("x = 1", "SUBMIT"))).request.request_id;
  auto calls_before = snapshot().llm_calls.size();
  auto again = as_eval(reload());
  EXPECT_EQ(again.request.request_id, id);
  EXPECT_EQ(snapshot().llm_calls.size(), calls_before);
  auto evals = snapshot().evaluations;
  ASSERT_EQ(evals.size(), 1u);
  EXPECT_EQ(evals[0].attempts, 2);
}

// Interrupting korch (kill -9, Ctrl-C) during an evaluation is not a failure
// of that evaluation: however often it happens, the evaluation re-runs and
// its result is the evaluator's.
TEST_F(EpisodeTest, Rule7_InterruptedEvaluationRerunsWithoutCountingHoweverOften) {
  start_episode();
  auto id = as_eval(reply(code_reply("x = 1", "SUBMIT"))).request.request_id;
  constexpr int k_interruptions = 3 * k_max_eval_attempts;
  for (int i = 0; i < k_interruptions; ++i) EXPECT_EQ(as_eval(reload()).request.request_id, id);
  auto evals = snapshot().evaluations;
  ASSERT_EQ(evals.size(), 1u);
  EXPECT_EQ(evals[0].state, store::EvalState::running);
  EXPECT_EQ(evals[0].attempts, 1 + k_interruptions);
  EXPECT_EQ(evals[0].failures, 0);
  EXPECT_TRUE(std::holds_alternative<Finished>(evaluated(Verdict::ok, 1.83)));
  EXPECT_EQ(final_row()->verdict, "ok");
  EXPECT_DOUBLE_EQ(final_row()->reward, evaluator::reward_speedup(true, 1.83));
}

// A worker that ended without a result while korch was running is a failure
// korch observed: the evaluation runs again under the same id, and the
// k_max_eval_attempts-th such failure is its result.
TEST_F(EpisodeTest, Rule7_ObservedWorkerCrashesRetryUpToTheCap) {
  start_episode();
  auto id = as_eval(reply(code_reply("x = 1", "SUBMIT"))).request.request_id;
  for (int i = 1; i < k_max_eval_attempts; ++i) {
    EXPECT_EQ(as_eval(evaluated(Verdict::worker_crash)).request.request_id, id);
    auto e = snapshot().evaluations.at(0);
    EXPECT_EQ(e.state, store::EvalState::running);
    EXPECT_EQ(e.failures, i);
    EXPECT_EQ(e.attempts, i + 1);
    EXPECT_FALSE(final_row());
  }
  EXPECT_TRUE(std::holds_alternative<Finished>(evaluated(Verdict::worker_crash)));
  auto e = snapshot().evaluations.at(0);
  EXPECT_EQ(e.state, store::EvalState::done);
  EXPECT_EQ(e.verdict, "worker_crash");
  EXPECT_EQ(e.failures, k_max_eval_attempts);
  EXPECT_EQ(final_row()->verdict, "worker_crash");
  EXPECT_DOUBLE_EQ(final_row()->reward, 0);
}

// A runner that crashed or exited after candidate code ran is the
// candidate's verdict, final at once: no second run for the candidate to
// choose from (issue #47; hacks/native_exit_allowlist exits mid-timing).
TEST_F(EpisodeTest, Rule7_TheCandidatesOwnCrashIsFinalAtOnce) {
  start_episode();
  auto id = as_eval(reply(code_reply("x = 1", "SUBMIT"))).request.request_id;
  auto own = report(id, Verdict::worker_crash);
  own.error = "the candidate runner crashed: exited with status 0";
  ASSERT_FALSE(own.host_fault());
  EXPECT_TRUE(std::holds_alternative<Finished>(commit(on_eval_result(m_state, own, m_env))));
  auto e = snapshot().evaluations.at(0);
  EXPECT_EQ(e.state, store::EvalState::done);
  EXPECT_EQ(e.attempts, 1);
  EXPECT_EQ(e.verdict, "worker_crash");
  EXPECT_EQ(final_row()->verdict, "worker_crash");
  EXPECT_DOUBLE_EQ(final_row()->reward, 0);
}

// The cap counts runs, not reports (evaluator/retries.hpp): a host fault
// whose evaluator already ran it k_max_runs times is final, and one that
// ran twice leaves one run to the episode.
TEST_F(EpisodeTest, Rule7_TheCapCountsTheEvaluatorsRunsNotReports) {
  start_episode();
  auto id = as_eval(reply(code_reply("x = 1", "SUBMIT"))).request.request_id;
  auto twice = report(id, Verdict::worker_crash);
  twice.evidence["infrastructure"] = nlohmann::json::array({{{"run", 1}}, {{"run", 2}}});
  EXPECT_EQ(as_eval(commit(on_eval_result(m_state, twice, m_env))).request.request_id, id);
  EXPECT_EQ(snapshot().evaluations.at(0).failures, 2);
  EXPECT_TRUE(std::holds_alternative<Finished>(evaluated(Verdict::worker_crash)));
  auto e = snapshot().evaluations.at(0);
  EXPECT_EQ(e.state, store::EvalState::done);
  EXPECT_EQ(e.failures, evaluator::k_max_runs);
  EXPECT_EQ(e.attempts, 2);
}

TEST_F(EpisodeTest, Rule7_AHostFaultWithTheRunsSpentIsFinal) {
  start_episode();
  auto id2 = as_eval(reply(code_reply("x = 2", "SUBMIT"))).request.request_id;
  auto spent = report(id2, Verdict::worker_crash);
  spent.evidence["infrastructure"] = nlohmann::json::array();
  for (int run = 1; run <= evaluator::k_max_runs; ++run)
    spent.evidence["infrastructure"].push_back({{"run", run}});
  EXPECT_TRUE(std::holds_alternative<Finished>(commit(on_eval_result(m_state, spent, m_env))));
  EXPECT_EQ(snapshot().evaluations.at(0).attempts, 1);
  EXPECT_EQ(final_row()->verdict, "worker_crash");
}

// A CHECK whose worker crashed once is retried before the model hears of it:
// the feedback is the retried evaluation's.
TEST_F(EpisodeTest, Rule7_ObservedCrashOfACheckIsRetriedBeforeFeedback) {
  start_episode();
  auto id = as_eval(reply(code_reply("x = 1", "CHECK"))).request.request_id;
  EXPECT_EQ(as_eval(evaluated(Verdict::worker_crash)).request.request_id, id);
  EXPECT_TRUE(snapshot().turns.empty());
  auto call = as_call(evaluated(Verdict::ok));
  auto snap = snapshot();
  ASSERT_EQ(snap.turns.size(), 1u);
  EXPECT_EQ(snap.turns[0].eval_status, "ok");
  EXPECT_EQ(snap.evaluations.at(0).failures, 1);
  EXPECT_EQ(call.request.messages.back().role, "user");
}

// Observed failures are durable (they survive a restart); the restart itself
// adds none.
TEST_F(EpisodeTest, Rule7_ObservedFailuresSurviveResumeInterruptionsAddNone) {
  start_episode();
  reply(code_reply("x = 1", "SUBMIT"));
  for (int i = 1; i < k_max_eval_attempts; ++i) as_eval(evaluated(Verdict::worker_crash));
  for (int i = 0; i < 3; ++i) as_eval(reload());
  EXPECT_EQ(snapshot().evaluations.at(0).failures, k_max_eval_attempts - 1);
  EXPECT_TRUE(std::holds_alternative<Finished>(evaluated(Verdict::worker_crash)));
  EXPECT_EQ(final_row()->verdict, "worker_crash");
}

// What an evaluator reports while it shuts down is not a result: nothing is
// recorded or counted, the run is asked to stop, and a resume re-runs it.
TEST_F(EpisodeTest, Rule7_InterruptedReportIsNeverRecordedOrCounted) {
  start_episode();
  auto id = as_eval(reply(code_reply("x = 1", "SUBMIT"))).request.request_id;
  auto shut = report(id, Verdict::worker_crash);
  shut.error = "the evaluator shut down before this evaluation started";
  shut.interrupted = true;
  auto step = on_eval_result(m_state, shut, m_env);
  EXPECT_TRUE(step.batch.empty());
  EXPECT_TRUE(std::holds_alternative<AbortCampaign>(step.next));
  // Even an ok verdict from a killed run is not trusted.
  auto killed_ok = report(id, Verdict::ok, 9.0);
  killed_ok.interrupted = true;
  EXPECT_TRUE(on_eval_result(m_state, killed_ok, m_env).batch.empty());
  auto e = snapshot().evaluations.at(0);
  EXPECT_EQ(e.state, store::EvalState::running);
  EXPECT_EQ(e.failures, 0);
  EXPECT_EQ(as_eval(reload()).request.request_id, id);
  EXPECT_TRUE(std::holds_alternative<Finished>(evaluated(Verdict::ok, 1.5)));
  EXPECT_EQ(final_row()->verdict, "ok");
  EXPECT_DOUBLE_EQ(*final_row()->speedup, 1.5);
}

// An evaluation row left by an older korch with the cap of observed failures
// reached is given up at resume (its reports were not kept).
TEST_F(EpisodeTest, Rule7_StoredCapOfObservedFailuresIsGivenUpAtResume) {
  start_episode();
  auto id = as_eval(reply(code_reply("x = 1", "SUBMIT"))).request.request_id;
  auto e = snapshot().evaluations.at(0);
  e.failures = k_max_eval_attempts;
  store::WriteBatch b;
  b.put(e);
  ASSERT_TRUE(m_store->commit_sync(std::move(b)));
  EXPECT_TRUE(std::holds_alternative<Finished>(reload()));
  EXPECT_EQ(final_row()->verdict, "worker_crash");
  EXPECT_EQ(final_row()->request_id, id);
}

TEST_F(EpisodeTest, Rule8_TruncatedReplyWithoutCodeIsToldItWasCutOff) {
  start_episode();
  auto call = as_call(reply("```python\nclass ModelNew(nn.Module):\n    def forw", "length"));
  EXPECT_EQ(snapshot().turns[0].parse_status, "truncated");
  EXPECT_NE(call.request.messages.back().content.find("cut off"), std::string::npos);
}

TEST_F(EpisodeTest, Rule8_TruncatedReplyWithCompleteCodeIsUsedAndRecorded) {
  start_episode();
  auto ev = as_eval(reply(code_reply("x = 1", "CHECK") + "Some more expla", "length"));
  EXPECT_EQ(ev.request.mode, evaluator::Mode::check);
  evaluated(Verdict::ok);
  EXPECT_EQ(snapshot().turns[0].finish_reason, "length");
}

TEST_F(EpisodeTest, Rule8_ContextOverflowCompactsOnceThenEnds) {
  start_episode();
  llm::ChatResult overflow;
  overflow.outcome = llm::Outcome::context_overflow;
  overflow.error = "maximum context length exceeded";
  auto retry = as_call(commit(on_llm_result(m_state, overflow, m_env)));
  EXPECT_NE(retry.request.request_id, ids::llm_request_id(m_spec->episode_id, 1, "m1"));
  EXPECT_EQ(retry.request.messages.size(), 2u);
  EXPECT_NE(retry.request.messages[1].content.find("Summary of the work so far"),
            std::string::npos);
  EXPECT_TRUE(std::holds_alternative<Finished>(commit(on_llm_result(m_state, overflow, m_env))));
  EXPECT_EQ(final_row()->reason, store::EndReason::context_overflow);
}

TEST_F(EpisodeTest, Rule9_TokenBudgetEndsTheEpisode) {
  m_spec->token_budget = 120;  // one reply costs 150
  start_episode();
  reply(code_reply("x = 1", "CHECK"));
  EXPECT_TRUE(std::holds_alternative<Finished>(evaluated(Verdict::incorrect)));
  EXPECT_EQ(final_row()->reason, store::EndReason::token_budget);
}

TEST_F(EpisodeTest, Rule9_WallClockBudgetEndsTheEpisodeWithFallback) {
  m_spec->wall_clock_budget_s = 10;
  start_episode();
  auto ev = as_eval(reply(code_reply("x = 1", "CHECK")));
  (void)ev;
  m_env.active_delta_s = 11;
  auto sub = as_eval(evaluated(Verdict::ok));
  EXPECT_EQ(sub.request.mode, evaluator::Mode::submit);
  m_env.active_delta_s = 0;
  evaluated(Verdict::ok, 1.2);
  EXPECT_EQ(final_row()->reason, store::EndReason::wall_clock);
  EXPECT_EQ(final_row()->verdict, "ok");
}

TEST_F(EpisodeTest, Rule9_SpendCapEndsTheEpisode) {
  start_episode();
  reply(code_reply("x = 1", "CHECK"));
  m_env.spend_cap_reached = true;
  EXPECT_TRUE(std::holds_alternative<Finished>(evaluated(Verdict::incorrect)));
  EXPECT_EQ(final_row()->reason, store::EndReason::spend_cap);
}

TEST_F(EpisodeTest, EpisodeIdIsDeterministic) {
  EXPECT_EQ(ids::episode_id("c", "L1/1", "m", 0), ids::episode_id("c", "L1/1", "m", 0));
  EXPECT_NE(ids::episode_id("c", "L1/1", "m", 0), ids::episode_id("c", "L1/1", "m", 1));
  EXPECT_NE(ids::episode_id("c", "L1/1", "m", 0), ids::episode_id("c", "L1/1", "m2", 0));
}

TEST_F(EpisodeTest, Lifecycle_CompactionRebuildsTheConversationFromAttempts) {
  m_spec->events = {{.kind = config::LifecycleKind::compaction, .turn = 3}};
  start_episode();
  reply(code_reply("x = 1", "CHECK"));
  evaluated(Verdict::ok);
  reply(code_reply("x = 2", "CHECK"));
  auto call = as_call(evaluated(Verdict::incorrect));
  ASSERT_EQ(call.request.messages.size(), 2u);
  auto& summary = call.request.messages[1].content;
  EXPECT_NE(summary.find("2 attempt(s), 1 passed"), std::string::npos);
  EXPECT_NE(summary.find("Latest code that passed a CHECK (turn 1)"), std::string::npos);
  EXPECT_NE(summary.find("x = 1"), std::string::npos);
  EXPECT_NE(summary.find("CHECK result: incorrect"), std::string::npos);
  EXPECT_NE(summary.find("Continue: improve or fix"), std::string::npos);
  EXPECT_EQ(snapshot().epoch, 1);
}

// Only the newest passing code, the newest code and the newest result are read
// again (fallback, compaction summary); older copies are let go, in a live
// episode and in one rebuilt from the store. Rule6 and the compaction test
// above check that what is read is unchanged.
TEST_F(EpisodeTest, Memory_OlderAttemptsLetGoOfTheirCodeAndResults) {
  m_spec->max_turns = 5;
  start_episode();
  reply(code_reply("x = 1", "CHECK"));
  evaluated(Verdict::ok);
  reply(code_reply("x = 2", "CHECK"));
  evaluated(Verdict::incorrect);
  reply(code_reply("x = 3", "CHECK"));
  evaluated(Verdict::incorrect);
  auto check = [&](const char* when) {
    ASSERT_EQ(m_state.attempts.size(), 3u) << when;
    EXPECT_NE(m_state.attempts[0].code.find("x = 1"), std::string::npos) << when;  // passing
    EXPECT_TRUE(m_state.attempts[1].code.empty()) << when;
    EXPECT_NE(m_state.attempts[2].code.find("x = 3"), std::string::npos) << when;  // newest
    EXPECT_TRUE(m_state.attempts[0].result_text.empty()) << when;
    EXPECT_TRUE(m_state.attempts[1].result_text.empty()) << when;
    EXPECT_FALSE(m_state.attempts[2].result_text.empty()) << when;
    EXPECT_TRUE(m_state.attempts[0].passed) << when;
  };
  check("live");
  reload();
  check("resumed");
  // The store still holds every turn's code.
  auto turns = snapshot().turns;
  ASSERT_EQ(turns.size(), 3u);
  EXPECT_NE(turns[1].code.find("x = 2"), std::string::npos);
  // And the fallback still submits the passing code.
  reply("no code");
  auto ev = as_eval(reply("no code on the last turn"));
  EXPECT_NE(ev.request.code.find("x = 1"), std::string::npos);
}

// The system prompt is one shared string per campaign: the state does not
// hold another copy, yet every request (and the stored conversation) opens
// with it, before and after a resume.
TEST_F(EpisodeTest, Memory_TheSystemPromptIsSharedNotHeldPerEpisode) {
  auto first = as_call(start_episode());
  ASSERT_FALSE(first.request.messages.empty());
  EXPECT_EQ(first.request.messages[0].role, "system");
  EXPECT_EQ(first.request.messages[0].content, "SYSTEM PROMPT v1");
  for (auto& m : m_state.conversation) EXPECT_NE(m.content, "SYSTEM PROMPT v1");
  EXPECT_EQ(snapshot().messages[0].content, "SYSTEM PROMPT v1");
  auto again = as_call(reload());
  EXPECT_EQ(again.request.messages.size(), first.request.messages.size());
  EXPECT_EQ(again.request.messages[0].content, "SYSTEM PROMPT v1");
  for (auto& m : m_state.conversation) EXPECT_NE(m.content, "SYSTEM PROMPT v1");
}

TEST_F(EpisodeTest, Lifecycle_CrashRebuildsFromTheStoreOnce) {
  m_spec->events = {{.kind = config::LifecycleKind::crash, .turn = 2}};
  start_episode();
  reply(code_reply("x = 1", "CHECK"));
  EXPECT_TRUE(std::holds_alternative<SimulateCrash>(evaluated(Verdict::ok)));
  auto call = as_call(reload());
  EXPECT_EQ(call.request.request_id, ids::llm_request_id(m_spec->episode_id, 2, "m1"));
  EXPECT_EQ(call.request.messages.size(), 4u);
}

TEST_F(EpisodeTest, Lifecycle_ModelSwapGeneratesThatTurnWithAnotherModel) {
  m_spec->events = {{.kind = config::LifecycleKind::model_swap, .turn = 2, .model = "m2"}};
  start_episode();
  reply("thinking");
  auto snap = snapshot();
  EXPECT_EQ(snap.llm_calls.back().model_id, "m2");
  auto call = as_call(reload());
  EXPECT_EQ(call.request.model_id, "m2");
  reply("still thinking");
  EXPECT_EQ(snapshot().turns[1].model_id, "m2");
}

TEST_F(EpisodeTest, Resume_ExactRequestIsByteIdentical) {
  start_episode();
  reply(code_reply("x = 1", "CHECK"));
  auto original = as_call(evaluated(Verdict::incorrect)).request;
  auto resumed = as_call(reload()).request;
  EXPECT_EQ(resumed.request_id, original.request_id);
  ASSERT_EQ(resumed.messages.size(), original.messages.size());
  for (std::size_t i = 0; i < original.messages.size(); ++i) {
    EXPECT_EQ(resumed.messages[i].role, original.messages[i].role);
    EXPECT_EQ(resumed.messages[i].content, original.messages[i].content);
  }
  auto call = snapshot().llm_calls.back();
  EXPECT_TRUE(call.dup_possible);
  EXPECT_EQ(call.sends, 2);
}

// A call found started at resume may have reached the server before korch
// died: it is re-sent under its id and stays marked dup_possible through its
// result write.
TEST_F(EpisodeTest, Resume_ResentCallKeepsDupPossibleThroughItsResult) {
  start_episode();
  auto first = as_call(reload()).request;
  auto second = as_call(reload()).request;
  EXPECT_EQ(second.request_id, first.request_id);
  reply(code_reply("x = 1", "CHECK"));
  auto calls = snapshot().llm_calls;
  ASSERT_EQ(calls.size(), 1u);
  EXPECT_EQ(calls[0].state, store::CallState::done);
  EXPECT_EQ(calls[0].sends, 3);
  EXPECT_TRUE(calls[0].dup_possible);
  // The next turn's call was sent once: not marked.
  evaluated(Verdict::incorrect);
  reply("no code this time");
  calls = snapshot().llm_calls;
  ASSERT_GE(calls.size(), 2u);
  EXPECT_EQ(calls[1].turn, 2);
  EXPECT_EQ(calls[1].state, store::CallState::done);
  EXPECT_EQ(calls[1].sends, 1);
  EXPECT_FALSE(calls[1].dup_possible);
}

// A re-sent call that then failed (e.g. retries exhausted) and is sent again
// after another restart keeps its mark.
TEST_F(EpisodeTest, Resume_DupPossibleSurvivesAFailedResend) {
  start_episode();
  as_call(reload());
  llm::ChatResult failed;
  failed.outcome = llm::Outcome::exhausted;
  failed.error = "HTTP 503 after 3 attempts";
  failed.attempts.push_back(llm::Attempt{503, "unavailable", 0.01});
  EXPECT_TRUE(std::holds_alternative<AbortCampaign>(commit(on_llm_result(m_state, failed, m_env))));
  EXPECT_EQ(snapshot().llm_calls.at(0).state, store::CallState::failed);
  EXPECT_TRUE(snapshot().llm_calls.at(0).dup_possible);
  as_call(reload());
  reply(code_reply("x = 1", "CHECK"));
  auto call = snapshot().llm_calls.at(0);
  EXPECT_EQ(call.state, store::CallState::done);
  EXPECT_EQ(call.sends, 3);
  EXPECT_TRUE(call.dup_possible);
}

TEST_F(EpisodeTest, Resume_StoredSystemPromptIsReusedNotRerendered) {
  start_episode();
  auto spec2 = std::make_shared<EpisodeSpec>(*m_spec);
  spec2->system_prompt = std::make_shared<const std::string>("SYSTEM PROMPT v2 (a newer korch)");
  auto call = as_call(reload(spec2));
  EXPECT_EQ(call.request.messages[0].content, "SYSTEM PROMPT v1");
}

TEST_F(EpisodeTest, Resume_CommittedReplyIsNotRequestedAgain) {
  start_episode();
  reply(code_reply("x = 1", "CHECK"));  // reply committed, check in flight
  auto ev = as_eval(reload());
  EXPECT_EQ(ev.request.mode, evaluator::Mode::check);
  EXPECT_EQ(snapshot().llm_calls.size(), 1u);
  EXPECT_EQ(snapshot().llm_calls[0].sends, 1);
}

TEST_F(EpisodeTest, Resume_CompactModeContinuesFromTheSummary) {
  m_spec->resume = config::ResumeMode::compact;
  start_episode();
  reply(code_reply("x = 1", "CHECK"));
  evaluated(Verdict::ok);
  auto call = as_call(reload());
  ASSERT_EQ(call.request.messages.size(), 2u);
  EXPECT_NE(call.request.messages[1].content.find("resumed after a restart"), std::string::npos);
}

TEST_F(EpisodeTest, Resume_FinalEpisodeIsNeverRerun) {
  start_episode();
  reply(code_reply("x = 1", "SUBMIT"));
  evaluated(Verdict::ok, 1.3);
  auto before = snapshot();
  EXPECT_TRUE(std::holds_alternative<Finished>(reload()));
  auto after = snapshot();
  EXPECT_EQ(after.llm_calls.size(), before.llm_calls.size());
  EXPECT_EQ(after.evaluations.size(), before.evaluations.size());
}

TEST_F(EpisodeTest, Durability_SecondTurnRowIsAConflictAndTheStoredRowWins) {
  start_episode();
  reply("thinking");
  store::WriteBatch b;
  store::TurnRow t;
  t.episode_id = m_spec->episode_id;
  t.turn = 1;
  t.parse_status = "code";
  t.action = "submit";
  b.put(t);
  auto r = m_store->commit_sync(std::move(b));
  ASSERT_TRUE(r);
  EXPECT_EQ(r->conflicts.size(), 1u);
  EXPECT_EQ(snapshot().turns[0].parse_status, "no_code");
}

// Issue 46: one engine behind every door. The same codes, actions and
// verdicts through an LLM episode (replies), an external episode (OpenEnv's
// on_action) and one-off API evaluations give the same evaluation, turn and
// final rows and the same end reason; each door commits the `running` row
// before its evaluation is asked for.
struct DoorCase {
  const char* name;
  std::vector<std::pair<std::string, Action>> actions;              // code body, action, per turn
  std::vector<std::pair<Verdict, std::optional<double>>> verdicts;  // per evaluation
  store::EndReason reason;
};

class Doors : public ::testing::TestWithParam<DoorCase> {
 protected:
  static const config::Task& task() {
    static const config::Task t{"L1/19_ReLU", 1, 19, "ReLU", "", "class Model: pass\n"};
    return t;
  }
  static std::string code_of(const std::string& body) {
    return "import torch\nclass ModelNew(torch.nn.Module):\n    " + body + "\n";
  }

  // Runs the case through one door on a store of its own; the episode's rows.
  store::EpisodeSnapshot run(bool external) {
    const auto& c = GetParam();
    store::Options o;
    o.path = m_dir.file(external ? "external.db" : "llm.db").string();
    o.synchronous = "OFF";
    auto st = store::Store::open(o);
    EXPECT_TRUE(st);
    auto spec = std::make_shared<EpisodeSpec>();
    spec->campaign_id = "c-doors";
    spec->episode_id = "e-doors";  // one id: the request ids name it
    spec->task = std::make_shared<const config::Task>(task());
    spec->model_id = external ? "env" : "m1";
    spec->max_turns = 3;
    spec->external = external;
    if (!external) spec->system_prompt = std::make_shared<const std::string>("SYSTEM");
    store::WriteBatch b;
    store::CampaignRow camp;
    camp.id = "c-doors";
    camp.name = "doors";
    b.put(camp);
    if (!external) {
      store::EpisodeRow e;
      e.id = "e-doors";
      e.campaign_id = "c-doors";
      e.task_id = spec->task->id;
      e.model_id = "m1";
      b.put(e);
    }
    EXPECT_TRUE((*st)->commit_sync(std::move(b)));
    Env env;
    env.now = 1000;
    env.owner = "test:1";
    EpisodeState s;
    auto commit = [&](Step step) {
      EXPECT_TRUE((*st)->commit_sync(std::move(step.batch)));
      return std::move(step.next);
    };
    Next next = commit(start(s, spec, env));
    std::size_t verdict = 0;
    for (const auto& [body, action] : c.actions) {
      if (external) {
        EXPECT_EQ(s.phase, Phase::awaiting_action);
        auto step = on_action(s, code_of(body), action, env);
        EXPECT_TRUE(step) << (step ? "" : step.error().message);
        if (!step) break;
        next = commit(std::move(*step));
      } else {
        EXPECT_TRUE(std::holds_alternative<CallLlm>(next));
        next =
            commit(on_llm_result(s,
                                 ok_reply("```python\n" + code_of(body) + "```\nACTION: " +
                                          (action == Action::submit ? "SUBMIT" : "CHECK") + "\n"),
                                 env));
      }
      auto* eval = std::get_if<RunEval>(&next);
      EXPECT_TRUE(eval) << c.name;
      if (!eval) break;
      // Write-ahead: the evaluation is stored `running` before it runs.
      auto stored = (*st)->get_evaluation(eval->request.request_id);
      EXPECT_TRUE(stored && *stored && (*stored)->state == store::EvalState::running);
      auto [v, speedup] = c.verdicts.at(verdict++);
      next = commit(on_eval_result(s, report(eval->request.request_id, v, speedup), env));
    }
    EXPECT_TRUE(std::holds_alternative<Finished>(next)) << c.name;
    EXPECT_EQ(verdict, c.verdicts.size());
    return **(*st)->load_episode("e-doors");
  }

  testing::TempDir m_dir;
};

TEST_P(Doors, SameCodeAndVerdictsGiveTheSameRowsThroughEveryDoor) {
  const auto& c = GetParam();
  const auto llm = run(false), ext = run(true);
  ASSERT_TRUE(llm.final && ext.final);
  EXPECT_EQ(llm.final->reason, c.reason);
  EXPECT_EQ(ext.final->reason, c.reason);
  auto same_final = *llm.final;
  same_final.at = ext.final->at;
  EXPECT_EQ(same_final, *ext.final);
  ASSERT_EQ(llm.turns.size(), ext.turns.size());
  for (std::size_t i = 0; i < llm.turns.size(); ++i) {
    const auto &a = llm.turns[i], &b = ext.turns[i];
    EXPECT_EQ(std::tie(a.turn, a.action, a.parse_status, a.code, a.code_sha, a.eval_request_id,
                       a.eval_status),
              std::tie(b.turn, b.action, b.parse_status, b.code, b.code_sha, b.eval_request_id,
                       b.eval_status))
        << c.name << " turn " << a.turn;
  }
  ASSERT_EQ(llm.evaluations.size(), ext.evaluations.size());
  auto by_id = [](std::vector<store::EvaluationRow> v) {
    std::sort(v.begin(), v.end(), [](auto& x, auto& y) { return x.request_id < y.request_id; });
    return v;
  };
  const auto le = by_id(llm.evaluations), ee = by_id(ext.evaluations);
  for (std::size_t i = 0; i < le.size(); ++i) {
    EXPECT_EQ(le[i], ee[i]) << c.name << " " << le[i].request_id;
    // The API door: a one-off evaluation of that code and mode gets the same
    // row but for its request id (api|mode|task|sha), `running` first.
    std::string code;
    for (const auto& t : llm.turns)
      if (t.code_sha == le[i].code_sha) code = t.code;
    Env env;
    env.now = 1000;
    env.owner = "test:1";
    OneOffEval api;
    auto started = start_one_off(api, task(), code, *evaluator::mode_from_string(le[i].kind), env);
    ASSERT_EQ(started.batch.size(), 1u);
    const auto& running = std::get<store::EvaluationRow>(started.batch.ops()[0]);
    EXPECT_EQ(running.state, store::EvalState::running);
    ASSERT_TRUE(std::holds_alternative<RunEval>(started.next));
    EXPECT_EQ(api.request.request_id,
              ids::api_request_id_of_digest(le[i].kind, task().id, le[i].code_sha));
    auto rep = evaluator::Report::from_json(le[i].report_json);
    ASSERT_TRUE(rep);
    rep->request_id = api.request.request_id;
    auto done = on_one_off_result(api, *rep, env);
    ASSERT_EQ(done.batch.size(), 1u);
    auto row = std::get<store::EvaluationRow>(done.batch.ops()[0]);
    EXPECT_EQ(
        std::tie(row.kind, row.code_sha, row.state, row.verdict, row.evaluator_version),
        std::tie(le[i].kind, le[i].code_sha, le[i].state, le[i].verdict, le[i].evaluator_version));
    auto back = evaluator::Report::from_json(row.report_json);
    ASSERT_TRUE(back);
    EXPECT_EQ(back->reward, evaluator::Report::from_json(le[i].report_json)->reward);
  }
}

const DoorCase k_door_cases[] = {
    {"submitted", {{"x = 1", Action::submit}}, {{Verdict::ok, 2.0}}, store::EndReason::submitted},
    {"check_then_submit_same_code",
     {{"x = 1", Action::check}, {"x = 1", Action::submit}},
     {{Verdict::ok, {}}, {Verdict::ok, 1.5}},
     store::EndReason::submitted},
    {"hack_then_submit",
     {{"h = 1", Action::check}, {"y = 2", Action::submit}},
     {{Verdict::no_kernel, {}}, {Verdict::incorrect, {}}},
     store::EndReason::submitted},
    {"last_turn",
     {{"a = 1", Action::check}, {"b = 2", Action::check}, {"b = 2", Action::check}},
     {{Verdict::incorrect, {}}, {Verdict::ok, {}}, {Verdict::ok, 1.2}},
     store::EndReason::last_turn},
};

INSTANTIATE_TEST_SUITE_P(EndReasons, Doors, ::testing::ValuesIn(k_door_cases),
                         [](const auto& info) { return std::string(info.param.name); });

}  // namespace
}  // namespace korch::agent
