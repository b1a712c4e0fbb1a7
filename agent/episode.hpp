#pragma once
// The episode state machine of DESIGN §2, as a pure component: each function
// takes the state and one event and returns a Step — the rows to commit and
// the one action to start after the commit returned. It performs no I/O, so
// the write-ahead rule is the runner's single job: commit Step::batch, then
// start Step::next.
//
// Turn protocol (t is 1-based):
//   advance(t-1) ── batch: feedback/no_code msg, LLM intent row (started)
//        │         next:  CallLlm(llm|ep|t|model)
//   on_llm_result ─ batch: LLM outcome row (done), assistant message
//        │         next:  RunEval(check|ep|t|sha) or RunEval(kernel|ep|sha)
//   on_eval_result  batch: evaluation row (done), turn row, feedback message,
//                          and advance(t)'s rows; or the final row
//                   (a worker_crash below the cap: the row back to running
//                    and RunEval again; see k_max_eval_attempts)
// resume() rebuilds the state from a store snapshot and returns the step an
// uninterrupted run would have taken next; a step whose outcome is already
// stored is never repeated.
//
// An external episode (EpisodeSpec::external: an OpenEnv client writes the
// code, no LLM is called) runs the same machine: where an LLM episode would
// send its request, it waits for on_action (Phase::awaiting_action), which
// records the action as the turn's reply and goes on exactly as
// on_llm_result does with a reply (one last-turn rule, one id scheme, one
// end-reason table, the reward the evaluator's report carries).
#include <cstdint>
#include <map>
#include <memory>
#include <optional>
#include <set>
#include <string>
#include <utility>
#include <variant>
#include <vector>

#include "agent/reply_parser.hpp"
#include "config/campaign.hpp"
#include "config/tasks.hpp"
#include "evaluator/evaluator.hpp"
#include "evaluator/retries.hpp"
#include "llm_clients/client.hpp"
#include "store/store.hpp"
#include "util/error.hpp"

namespace korch::agent {

// Fixed facts of one episode, derived from the campaign config.
struct EpisodeSpec {
  std::string campaign_id;
  std::string episode_id;
  std::shared_ptr<const config::Task> task;
  std::string model_id;  // generates every turn unless swapped
  int sample_index = 0;
  int max_turns = 5;
  std::string context;                         // optional first user message
  std::vector<config::LifecycleEvent> events;  // already filtered to this sample
  config::ResumeMode resume = config::ResumeMode::exact;
  double wall_clock_budget_s = 0;  // 0 = unlimited
  std::int64_t token_budget = 0;   // 0 = unlimited
  // For a new episode; resume uses the stored one. Shared: the campaign's
  // episodes hold one copy of the rendered prompt (~7 KB), not one each.
  std::shared_ptr<const std::string> system_prompt;
  // The turns' code comes from outside (OpenEnv) through on_action; no LLM
  // call is made, and no system message is stored when system_prompt is unset.
  bool external = false;
  // The prompt's text ("" when none is set).
  const std::string& system_prompt_text() const;
};

// The attempt cap of an evaluation (DESIGN §3). Only a failure that a live
// korch observed counts toward it: a report with Verdict::worker_crash (the
// worker ended without a result) delivered while korch runs and is not
// stopping. Such an evaluation is run again under the same request id, and
// the k_max_eval_attempts-th observed failure is recorded as its result.
// Every other verdict, timeout included, is the candidate's own and is
// recorded at once.
// An evaluation whose korch died or was stopped (kill -9, Ctrl-C, a crash, a
// reboot) has no result and did not fail: it re-runs on resume without
// counting, so interrupting korch never changes a result. A report marked
// Report::interrupted (the evaluator shut down under it) is never recorded
// or counted either. EvaluationRow::failures holds the count;
// EvaluationRow::attempts counts every start (docs/export.md). The cap is
// the evaluator's and the queue's too: one number (evaluator/retries.hpp).
inline constexpr int k_max_eval_attempts = evaluator::k_max_runs;

struct Attempt {
  int turn = 0;
  std::string model_id;
  std::string action;        // check | submit | none
  std::string parse_status;  // code | no_code | truncated
  std::string code;
  std::string eval_request_id;
  std::string eval_status;  // verdict, "" if none
  std::string result_text;  // rendered check result, "" if none
  bool passed = false;
};

enum class Phase { idle, awaiting_llm, awaiting_action, awaiting_eval, final };

struct EpisodeState {
  std::shared_ptr<const EpisodeSpec> spec;  // its system prompt is the episode's
  // The live epoch, sent as the request's messages. Its opening system
  // message, when it is the spec's system prompt (as it always is when korch
  // wrote it), is not held here: `system_from_spec` says so and call_llm puts
  // the spec's shared text in front. One copy of ~7 KB per campaign, not one
  // per episode.
  std::vector<llm::Message> conversation;
  bool system_from_spec = false;
  int epoch = 0;
  int next_seq = 0;
  int turn = 0;  // the turn being generated or evaluated
  std::vector<Attempt> attempts;
  std::set<std::pair<int, int>> fired_events;  // (kind, turn)
  Phase phase = Phase::idle;

  // The LLM call of the current turn.
  std::string turn_model;
  std::string llm_request_id;
  bool overflow_retry = false;
  int llm_sends = 0;
  bool llm_dup_possible = false;  // may have reached the server more than once
  double llm_started_at = 0;

  // The evaluation in flight.
  std::string eval_request_id;
  evaluator::Mode eval_mode = evaluator::Mode::check;
  std::string eval_code;
  std::string eval_code_sha;  // ids::code_digest(eval_code), taken once
  int eval_attempts = 0;      // starts of this evaluation (EvaluationRow::attempts)
  int eval_failures = 0;      // observed failures (EvaluationRow::failures)
  bool eval_is_fallback = false;
  std::optional<store::EndReason> end_reason;  // why the loop ended (for the final row)
  store::TurnRow pending_turn;  // the current turn's row, written with its evaluation
  // resume: (attempts, failures) of the unfinished evaluations, by request id
  std::map<std::string, std::pair<int, int>> stored_eval_counts;

  std::int64_t tokens_used = 0;
  double cost_usd = 0;
  double active_s = 0;
};

struct CallLlm {
  llm::ChatRequest request;
};
struct RunEval {
  evaluator::Request request;
};
struct SimulateCrash {};  // drop the in-memory state and rebuild from the store
struct Finished {};
struct AbortCampaign {  // a failure that must stop the run (unreachable endpoint, bad key)
  std::string reason;
};
using Next = std::variant<std::monostate, CallLlm, RunEval, SimulateCrash, Finished, AbortCampaign>;

struct Step {
  store::WriteBatch batch;
  Next next;
};

// Context the runner supplies to each transition (time is injected so the
// machine stays pure and testable).
struct Env {
  double now = 0;                  // unix seconds, stamped on rows
  double active_delta_s = 0;       // driven wall-clock time since the previous step
  bool spend_cap_reached = false;  // the campaign's spend cap is reached
  std::string owner;               // "<host>:<pid>" for evaluation rows
  std::uint64_t secret_seed = 0;
};

// A new episode: stores its opening messages and asks for turn 1.
Step start(EpisodeState& state, std::shared_ptr<const EpisodeSpec> spec, const Env& env);

// Rebuilds an episode from the store. The returned step is the next step an
// uninterrupted run would have taken; next is Finished for final episodes.
Step resume(EpisodeState& state, std::shared_ptr<const EpisodeSpec> spec,
            const store::EpisodeSnapshot& snapshot, const Env& env);

Step on_llm_result(EpisodeState& state, const llm::ChatResult& result, const Env& env);

// The reply an external action is recorded as: the code in a python block and
// its ACTION line. Fails (the reason) when the code would not read back from
// it as itself, up to a final newline (a line of three backticks inside it).
Result<std::string> action_reply(const std::string& code, Action action);

// An external episode's action for its current turn (state.phase must be
// Phase::awaiting_action): stores the action as the turn's reply and starts
// its evaluation, as on_llm_result does with a reply that holds code. The
// code is the one action_reply's text reads back (a final newline added).
Result<Step> on_action(EpisodeState& state, const std::string& code, Action action, const Env& env);

// A one-off evaluation (the API's POST /api/evaluate): no episode and no
// turn, the same evaluation row and write-ahead rule as an episode's. Its
// request id is ids::api_request_id_of_digest; a repeated request is the
// stored row's (the store keeps the first `done` row of an id).
struct OneOffEval {
  evaluator::Request request;
  std::string code_sha;
  int attempts = 0;
};

// Names the evaluation of `code` on `task` in `mode` and asks for it: the
// batch holds its `running` row, to commit before RunEval starts.
Step start_one_off(OneOffEval& eval, const config::Task& task, std::string code,
                   evaluator::Mode mode, const Env& env);

// Records its report (the `done` row); next is Finished. A report marked
// interrupted records nothing (the row stays `running`).
Step on_one_off_result(OneOffEval& eval, const evaluator::Report& report, const Env& env);

// The number of the turns whose outcome is recorded.
int turns_done(const EpisodeState& state);

// Records the evaluation's result and moves on. A worker_crash report counts
// as an observed failure and, below the cap, runs the evaluation again. A
// report marked interrupted records nothing and asks to stop the run
// (AbortCampaign): the evaluation re-runs when the campaign resumes.
Step on_eval_result(EpisodeState& state, const evaluator::Report& report, const Env& env);

}  // namespace korch::agent
