#include "agent/episode.hpp"

#include <fmt/format.h>

#include <algorithm>
#include <map>

#include "evaluator/retries.hpp"
#include "prompts/prompts.hpp"
#include "util/ids.hpp"

namespace korch::agent {
namespace {

constexpr std::string_view k_overflow_suffix = "|compacted";
// The finish_reason of an external episode's turns (no LLM produced them).
constexpr const char* k_external_finish = "env";

// Keys of fired_events: the lifecycle kind as an int.
int kind_key(config::LifecycleKind k) { return static_cast<int>(k); }

// The event row's kind: the lifecycle kind's one name (config/vocabulary.hpp).
std::string kind_name(config::LifecycleKind k) { return std::string(to_string(k)); }

const config::LifecycleEvent* find_event(const EpisodeSpec& spec, config::LifecycleKind kind,
                                         int turn) {
  for (auto& e : spec.events) {
    if (e.kind == kind && e.turn == turn) return &e;
  }
  return nullptr;
}

// Appends to the live epoch; an opening system message that is the spec's
// prompt is only noted (EpisodeState::system_from_spec).
void append_to_conversation(EpisodeState& s, store::Role role, std::string content) {
  if (role == store::Role::system && s.conversation.empty() && !s.system_from_spec &&
      content == s.spec->system_prompt_text()) {
    s.system_from_spec = true;
    return;
  }
  s.conversation.push_back(llm::Message{std::string(to_string(role)), std::move(content)});
}

void add_message(EpisodeState& s, store::WriteBatch& batch, store::Role role,
                 store::MessageKind kind, std::string content, int turn) {
  store::MessageRow row;
  row.episode_id = s.spec->episode_id;
  row.epoch = s.epoch;
  row.seq = s.next_seq++;
  row.role = role;
  row.kind = kind;
  row.turn = turn;
  row.content = content;
  batch.put(std::move(row));
  append_to_conversation(s, role, std::move(content));
}

void add_event(EpisodeState& s, store::WriteBatch& batch, const Env& env, std::string kind,
               int turn, std::string detail) {
  store::EventRow row;
  row.episode_id = s.spec->episode_id;
  row.turn = turn;
  row.kind = std::move(kind);
  row.detail = std::move(detail);
  row.at = env.now;
  batch.put(std::move(row));
}

void update_episode(EpisodeState& s, store::WriteBatch& batch,
                    std::optional<store::EpisodeStatus> status = {}) {
  store::EpisodeUpdate u;
  u.id = s.spec->episode_id;
  u.status = status;
  u.active_s = s.active_s;
  u.tokens_used = s.tokens_used;
  u.cost_usd = s.cost_usd;
  batch.update(std::move(u));
}

int replies_left_after(const EpisodeState& s, int turn) { return s.spec->max_turns - turn; }

std::vector<prompts::AttemptSummary> summaries(const EpisodeState& s) {
  std::vector<prompts::AttemptSummary> out;
  for (auto& a : s.attempts) {
    prompts::AttemptSummary sum;
    sum.turn = a.turn;
    sum.action = a.action;
    sum.status = a.eval_status.empty() ? a.parse_status : a.eval_status;
    sum.code = a.code;
    sum.passed = a.passed;
    sum.result_text = a.result_text;
    out.push_back(std::move(sum));
  }
  return out;
}

// Replaces the conversation by a new epoch: the system prompt and the
// compaction summary (DESIGN §2 lifecycle `compaction`).
void compact(EpisodeState& s, store::WriteBatch& batch, int turn, bool resumed,
             store::MessageKind kind) {
  ++s.epoch;
  s.next_seq = 0;
  s.conversation.clear();
  s.system_from_spec = false;
  add_message(s, batch, store::Role::system, store::MessageKind::system,
              s.spec->system_prompt_text(), 0);
  add_message(s, batch, store::Role::user, kind,
              prompts::compaction_summary(*s.spec->task, summaries(s), resumed,
                                          replies_left_after(s, turn - 1)),
              turn);
}

bool compaction_fired(const EpisodeState& s, int turn) {
  return s.fired_events.contains({kind_key(config::LifecycleKind::compaction), turn});
}

// Of the attempts' texts only these are read again: the newest passing
// attempt's code (passing_code, the compaction summary), the newest code and
// the newest check result (the summary) and the current attempt's (its turn
// row). Every other copy of a code block — each also lies in its reply in the
// conversation and in the store — and of a rendered result is let go, so an
// episode's memory does not grow by a code block per turn.
void prune_attempts(EpisodeState& s) {
  const std::size_t n = s.attempts.size();
  std::size_t passing = n, code = n, result = n;
  for (std::size_t i = 0; i < n; ++i) {
    const auto& a = s.attempts[i];
    if (a.passed) passing = i;
    if (!a.code.empty()) code = i;
    if (!a.result_text.empty()) result = i;
  }
  for (std::size_t i = 0; i + 1 < n; ++i) {
    auto& a = s.attempts[i];
    if (i != passing && i != code) std::string().swap(a.code);
    if (i != result) std::string().swap(a.result_text);
  }
}

std::string passing_code(const EpisodeState& s) {
  for (auto it = s.attempts.rbegin(); it != s.attempts.rend(); ++it) {
    if (it->passed) return it->code;
  }
  return {};
}

store::LlmCallRow intent_row(const EpisodeState& s, const Env& env) {
  store::LlmCallRow row;
  row.request_id = s.llm_request_id;
  row.episode_id = s.spec->episode_id;
  row.turn = s.turn;
  row.model_id = s.turn_model;
  row.state = store::CallState::started;
  row.started_at = env.now;
  row.sends = s.llm_sends;
  row.dup_possible = s.llm_dup_possible;
  return row;
}

Next call_llm(EpisodeState& s) {
  s.phase = Phase::awaiting_llm;
  llm::ChatRequest req;
  req.model_id = s.turn_model;
  req.request_id = s.llm_request_id;
  req.messages.reserve(s.conversation.size() + 1);
  if (s.system_from_spec) {
    req.messages.push_back(
        llm::Message{std::string(to_string(store::Role::system)), s.spec->system_prompt_text()});
  }
  req.messages.insert(req.messages.end(), s.conversation.begin(), s.conversation.end());
  return CallLlm{std::move(req)};
}

void finalize(EpisodeState& s, store::WriteBatch& batch, const Env& env, store::EndReason reason,
              const evaluator::Report* report) {
  store::FinalRow row;
  row.episode_id = s.spec->episode_id;
  row.reason = reason;
  if (report) {
    row.verdict = evaluator::to_string(report->status);
    row.request_id = report->request_id;
    row.speedup = report->speedup;
    row.reward = report->reward;
    row.correct = report->correct;
  }
  row.at = env.now;
  batch.put(std::move(row));
  s.phase = Phase::final;
  update_episode(s, batch, store::EpisodeStatus::final);
}

// The row of the evaluation in flight, in `state`, with its counts.
store::EvaluationRow evaluation_row(const EpisodeState& s, const Env& env, store::EvalState state) {
  store::EvaluationRow row;
  row.request_id = s.eval_request_id;
  row.episode_id = s.spec->episode_id;
  row.kind = to_string(s.eval_mode);
  row.code_sha = s.eval_code_sha;
  row.state = state;
  row.owner = env.owner;
  row.attempts = s.eval_attempts;
  row.failures = s.eval_failures;
  row.created_at = env.now;
  return row;
}

// Marks the evaluation in flight running (one more start; its failures stay
// what they were) and asks for it.
Next run_eval(EpisodeState& s, store::WriteBatch& batch, const Env& env) {
  s.phase = Phase::awaiting_eval;
  ++s.eval_attempts;
  batch.put(evaluation_row(s, env, store::EvalState::running));
  evaluator::Request req;
  req.request_id = s.eval_request_id;
  req.mode = s.eval_mode;
  req.task = *s.spec->task;
  req.code = s.eval_code;
  req.secret_seed = env.secret_seed;
  return RunEval{std::move(req)};
}

// Starts the evaluation of `code` in `mode`: the code is hashed once, for its
// request id (a check is named by its turn too) and for every row that names it.
Next start_eval(EpisodeState& s, store::WriteBatch& batch, const Env& env, evaluator::Mode mode,
                std::string code, bool fallback) {
  s.eval_mode = mode;
  s.eval_code = std::move(code);
  s.eval_code_sha = ids::code_digest(s.eval_code);
  s.eval_request_id =
      mode == evaluator::Mode::submit
          ? ids::submit_request_id_of_digest(s.spec->episode_id, s.eval_code_sha)
          : ids::check_request_id_of_digest(s.spec->episode_id, s.turn, s.eval_code_sha);
  s.eval_is_fallback = fallback;
  // A resumed evaluation keeps its counts: the interrupted start stays
  // counted as a start, never as a failure.
  auto seen = s.stored_eval_counts.find(s.eval_request_id);
  s.eval_attempts = seen == s.stored_eval_counts.end() ? 0 : seen->second.first;
  s.eval_failures = seen == s.stored_eval_counts.end() ? 0 : seen->second.second;
  return run_eval(s, batch, env);
}

Next begin_turn(EpisodeState& s, store::WriteBatch& batch, const Env& env, int turn);

// The loop ended without a submission: the turns ran out (no `limit`) or a
// budget or failure named by `limit` ended it. Submits the latest passing
// code (DESIGN §2 rule 6), or ends as no_submission / `limit`.
Next end_loop(EpisodeState& s, store::WriteBatch& batch, const Env& env,
              std::optional<store::EndReason> limit = {}) {
  auto code = passing_code(s);
  if (code.empty()) {
    finalize(s, batch, env, limit.value_or(store::EndReason::no_submission), nullptr);
    return Finished{};
  }
  s.end_reason = limit.value_or(store::EndReason::fallback);
  return start_eval(s, batch, env, evaluator::Mode::submit, std::move(code), true);
}

// Turn s.turn is complete: decide what happens next.
Next advance(EpisodeState& s, store::WriteBatch& batch, const Env& env) {
  if (s.turn >= s.spec->max_turns) return end_loop(s, batch, env);
  if (s.spec->token_budget > 0 && s.tokens_used >= s.spec->token_budget) {
    add_event(s, batch, env, "budget", s.turn,
              fmt::format("token budget {} reached", s.spec->token_budget));
    return end_loop(s, batch, env, store::EndReason::token_budget);
  }
  if (s.spec->wall_clock_budget_s > 0 && s.active_s >= s.spec->wall_clock_budget_s) {
    add_event(s, batch, env, "budget", s.turn,
              fmt::format("wall-clock budget {:.0f} s reached", s.spec->wall_clock_budget_s));
    return end_loop(s, batch, env, store::EndReason::wall_clock);
  }
  if (env.spend_cap_reached) {
    add_event(s, batch, env, "budget", s.turn, "campaign spend cap reached");
    return end_loop(s, batch, env, store::EndReason::spend_cap);
  }
  return begin_turn(s, batch, env, s.turn + 1);
}

Next begin_turn(EpisodeState& s, store::WriteBatch& batch, const Env& env, int turn) {
  using config::LifecycleKind;
  s.turn = turn;
  if (find_event(*s.spec, LifecycleKind::crash, turn) &&
      !s.fired_events.contains({kind_key(LifecycleKind::crash), turn})) {
    s.fired_events.insert({kind_key(LifecycleKind::crash), turn});
    add_event(s, batch, env, kind_name(LifecycleKind::crash), turn,
              "simulated crash before the turn");
    s.turn = turn - 1;
    return SimulateCrash{};
  }
  if (find_event(*s.spec, LifecycleKind::compaction, turn) && !compaction_fired(s, turn)) {
    s.fired_events.insert({kind_key(LifecycleKind::compaction), turn});
    add_event(s, batch, env, kind_name(LifecycleKind::compaction), turn, "scheduled compaction");
    compact(s, batch, turn, false, store::MessageKind::compaction);
  }
  s.turn_model = s.spec->model_id;
  if (auto* swap = find_event(*s.spec, LifecycleKind::model_swap, turn)) {
    s.turn_model = swap->model;
    if (!s.fired_events.contains({kind_key(LifecycleKind::model_swap), turn})) {
      s.fired_events.insert({kind_key(LifecycleKind::model_swap), turn});
      add_event(s, batch, env, kind_name(LifecycleKind::model_swap), turn,
                "turn generated by " + swap->model);
    }
  }
  if (s.spec->external) {
    // The turn's code comes from outside: wait for on_action.
    s.phase = Phase::awaiting_action;
    return std::monostate{};
  }
  s.overflow_retry = false;
  s.llm_request_id = ids::llm_request_id(s.spec->episode_id, turn, s.turn_model);
  s.llm_sends = 1;
  s.llm_dup_possible = false;
  s.llm_started_at = env.now;
  batch.put(intent_row(s, env));
  update_episode(s, batch);
  return call_llm(s);
}

// Acts on a reply whose outcome row is (being) committed: no code → next
// turn; code → check or submission.
Next dispatch_reply(EpisodeState& s, store::WriteBatch& batch, const Env& env,
                    const std::string& content, const std::string& finish_reason,
                    std::int64_t prompt_tokens, std::int64_t completion_tokens, double latency_s) {
  auto parsed = parse_reply(content);
  bool last_turn = s.turn >= s.spec->max_turns;
  store::TurnRow turn;
  turn.episode_id = s.spec->episode_id;
  turn.turn = s.turn;
  turn.model_id = s.turn_model;
  turn.llm_request_id = s.llm_request_id;
  turn.finish_reason = finish_reason;
  turn.prompt_tokens = prompt_tokens;
  turn.completion_tokens = completion_tokens;
  turn.llm_latency_s = latency_s;
  turn.at = env.now;
  if (!parsed.has_code) {
    bool truncated = llm::hit_max_tokens(finish_reason);
    turn.action = "none";
    turn.parse_status = truncated ? "truncated" : "no_code";
    s.attempts.push_back(
        Attempt{s.turn, s.turn_model, "none", turn.parse_status, "", "", "", "", false});
    prune_attempts(s);
    batch.put(std::move(turn));
    if (!last_turn) {
      add_message(s, batch, store::Role::user,
                  truncated ? store::MessageKind::truncated : store::MessageKind::no_code,
                  prompts::no_code_message(truncated, replies_left_after(s, s.turn)), s.turn);
    }
    return advance(s, batch, env);
  }
  bool submit = parsed.action == Action::submit || last_turn;
  auto mode = submit ? evaluator::Mode::submit : evaluator::Mode::check;
  if (submit) {
    s.end_reason =
        parsed.action == Action::submit ? store::EndReason::submitted : store::EndReason::last_turn;
  }
  // The turn row is written with the evaluation's outcome; keep its facts.
  s.pending_turn = std::move(turn);
  auto next = start_eval(s, batch, env, mode, parsed.code, false);
  s.attempts.push_back(Attempt{s.turn, s.turn_model, to_string(mode), "code", parsed.code,
                               s.eval_request_id, "", "", false});
  prune_attempts(s);
  return next;
}

// The current turn's row, complete now that its evaluation is known.
store::TurnRow evaluated_turn(const EpisodeState& s, const Attempt& a) {
  auto turn = s.pending_turn;
  turn.action = a.action;
  turn.parse_status = "code";
  turn.code = a.code;
  turn.code_sha = a.code == s.eval_code ? s.eval_code_sha : ids::code_digest(a.code);
  turn.eval_request_id = s.eval_request_id;
  turn.eval_status = a.eval_status;
  return turn;
}

// The result of an evaluation found at resume with the cap of observed
// failures already reached (their reports were not kept).
evaluator::Report crash_report(const std::string& request_id, int failures) {
  evaluator::Report r;
  r.request_id = request_id;
  r.status = evaluator::Verdict::worker_crash;
  r.error =
      fmt::format("the evaluation's worker ended without a result {} times; giving up", failures);
  return r;
}

}  // namespace

const std::string& EpisodeSpec::system_prompt_text() const {
  static const std::string k_none;
  return system_prompt ? *system_prompt : k_none;
}

Step start(EpisodeState& s, std::shared_ptr<const EpisodeSpec> spec, const Env& env) {
  Step step;
  s = EpisodeState{};
  s.spec = std::move(spec);
  s.active_s = 0;
  if (s.spec->external) {
    // An LLM campaign registers its episodes up front; an external one
    // starts when its client asks.
    store::EpisodeRow row;
    row.id = s.spec->episode_id;
    row.campaign_id = s.spec->campaign_id;
    row.task_id = s.spec->task->id;
    row.model_id = s.spec->model_id;
    row.sample_index = s.spec->sample_index;
    row.status = store::EpisodeStatus::running;
    row.created_at = row.updated_at = env.now;
    step.batch.put(std::move(row));
  }
  if (!s.spec->external || s.spec->system_prompt) {
    add_message(s, step.batch, store::Role::system, store::MessageKind::system,
                s.spec->system_prompt_text(), 0);
  }
  if (!s.spec->context.empty()) {
    add_message(s, step.batch, store::Role::user, store::MessageKind::context, s.spec->context, 0);
  }
  add_message(s, step.batch, store::Role::user, store::MessageKind::task,
              prompts::task_prompt(*s.spec->task, s.spec->max_turns), 1);
  store::EpisodeUpdate running;
  running.id = s.spec->episode_id;
  running.status = store::EpisodeStatus::running;
  step.batch.update(std::move(running));
  step.next = begin_turn(s, step.batch, env, 1);
  return step;
}

Step on_llm_result(EpisodeState& s, const llm::ChatResult& r, const Env& env) {
  Step step;
  s.active_s += env.active_delta_s;
  store::LlmCallRow row;
  row.request_id = s.llm_request_id;
  row.episode_id = s.spec->episode_id;
  row.turn = s.turn;
  row.model_id = s.turn_model;
  row.started_at = s.llm_started_at;
  row.finished_at = env.now;
  // The reply text is stored once, as the assistant message committed in the
  // same batch (resume reads it from there); only a failed call keeps text
  // here. Storing it twice halved durable turns/s (tools/bench).
  if (r.outcome != llm::Outcome::ok) row.content = r.content;
  row.reasoning = r.reasoning;
  row.finish_reason = r.finish_reason;
  row.prompt_tokens = r.usage.prompt_tokens;
  row.completion_tokens = r.usage.completion_tokens;
  row.cached_tokens = r.usage.cached_tokens;
  row.reasoning_tokens = r.usage.reasoning_tokens;
  row.cost_usd = r.cost_usd;
  row.latency_s = r.latency_s;
  row.http_attempts = static_cast<int>(r.attempts.size());
  std::string attempts_json = "[";
  for (std::size_t i = 0; i < r.attempts.size(); ++i) {
    auto& a = r.attempts[i];
    attempts_json +=
        fmt::format("{}{{\"status\":{},\"latency_s\":{:.4f},\"error\":\"{}\"}}", i ? "," : "",
                    a.http_status, a.latency_s, a.error.empty() ? "" : "see error");
  }
  row.attempts_json = attempts_json + "]";
  row.provider_request_id = r.provider_request_id;
  row.sends = s.llm_sends;
  row.dup_possible = s.llm_dup_possible;
  row.error = r.error;

  if (r.outcome == llm::Outcome::cancelled) {
    // The run is stopping: record nothing; resume re-sends this call.
    step.next = std::monostate{};
    return step;
  }
  if (r.outcome != llm::Outcome::ok) {
    row.state = store::CallState::failed;
    row.failure = llm::to_string(r.outcome);
    step.batch.put(std::move(row));
    if (r.outcome == llm::Outcome::context_overflow && !s.overflow_retry) {
      add_event(s, step.batch, env, "compaction_overflow", s.turn,
                "prompt rejected for context length");
      compact(s, step.batch, s.turn, false, store::MessageKind::compaction_overflow);
      s.overflow_retry = true;
      s.llm_request_id = ids::llm_request_id(s.spec->episode_id, s.turn, s.turn_model) +
                         std::string(k_overflow_suffix);
      s.llm_sends = 1;
      s.llm_dup_possible = false;
      s.llm_started_at = env.now;
      step.batch.put(intent_row(s, env));
      update_episode(s, step.batch);
      step.next = call_llm(s);
      return step;
    }
    if (r.outcome == llm::Outcome::context_overflow) {
      step.next = end_loop(s, step.batch, env, store::EndReason::context_overflow);
      return step;
    }
    if (r.outcome == llm::Outcome::exhausted) {
      update_episode(s, step.batch);
      s.phase = Phase::idle;
      step.next = AbortCampaign{fmt::format("model {}: {}", s.turn_model, r.error)};
      return step;
    }
    // Permanent: 401/403/404 mean the endpoint or key is wrong for every
    // episode; anything else is this conversation's problem.
    bool endpoint_wrong = false;
    for (auto& a : r.attempts) {
      endpoint_wrong |= a.http_status == 401 || a.http_status == 403 || a.http_status == 404;
    }
    if (endpoint_wrong) {
      update_episode(s, step.batch);
      s.phase = Phase::idle;
      step.next = AbortCampaign{fmt::format("model {}: {}", s.turn_model, r.error)};
      return step;
    }
    add_event(s, step.batch, env, "llm_failure", s.turn, r.error);
    step.next = end_loop(s, step.batch, env, store::EndReason::llm_failure);
    return step;
  }

  row.state = store::CallState::done;
  step.batch.put(std::move(row));
  s.tokens_used += r.usage.prompt_tokens + r.usage.completion_tokens;
  s.cost_usd += r.cost_usd;
  add_message(s, step.batch, store::Role::assistant, store::MessageKind::reply, r.content, s.turn);
  update_episode(s, step.batch);
  step.next = dispatch_reply(s, step.batch, env, r.content, r.finish_reason, r.usage.prompt_tokens,
                             r.usage.completion_tokens, r.latency_s);
  return step;
}

Step on_eval_result(EpisodeState& s, const evaluator::Report& report, const Env& env) {
  Step step;
  if (report.interrupted) {
    // Not a result: the evaluator stopped under it. Nothing is recorded or
    // counted; the evaluation stays `running` and re-runs on resume.
    step.next = AbortCampaign{
        fmt::format("the evaluator shut down during evaluation {}", s.eval_request_id)};
    return step;
  }
  s.active_s += env.active_delta_s;
  if (report.host_fault()) {
    // The host's fault, observed by this (live) korch: it counts toward the
    // cap and the evaluation runs again. A worker_crash without the
    // evaluator's infrastructure mark happened after candidate code ran
    // (a runner that crashed or exited): it is the candidate's verdict,
    // final at once -- a candidate must not choose which run counts (issue
    // #47; hacks/native_exit_allowlist exits mid-timing). The cap counts
    // runs, not reports (evaluator/retries.hpp): a report whose evaluator
    // already ran it k_max_runs times is final, so one evaluation gets at
    // most k_max_runs runs over evaluator, queue and episode together.
    s.eval_failures += evaluator::host_fault_runs(report.evidence, true);
    if (s.eval_failures < k_max_eval_attempts) {
      add_event(s, step.batch, env, "eval_failure", s.turn,
                fmt::format("{} (failure {} of {}): {}", s.eval_request_id, s.eval_failures,
                            k_max_eval_attempts, report.error.substr(0, report.error.find('\n'))));
      update_episode(s, step.batch);
      step.next = run_eval(s, step.batch, env);
      return step;
    }
  }
  auto row = evaluation_row(s, env, store::EvalState::done);
  row.verdict = evaluator::to_string(report.status);
  row.report_json = report.to_json();
  row.evaluator_version = report.evaluator_version;
  row.finished_at = env.now;
  step.batch.put(std::move(row));

  if (s.eval_mode == evaluator::Mode::check) {
    auto& a = s.attempts.back();
    a.eval_status = evaluator::to_string(report.status);
    a.result_text = prompts::render_report(report);
    a.passed = report.status == evaluator::Verdict::ok;
    step.batch.put(evaluated_turn(s, a));
    prune_attempts(s);
    std::string().swap(s.eval_code);  // recorded; the attempt keeps its own copy while needed
    if (s.turn < s.spec->max_turns) {
      add_message(s, step.batch, store::Role::user, store::MessageKind::feedback,
                  prompts::check_feedback(report, replies_left_after(s, s.turn)), s.turn);
    }
    s.phase = Phase::idle;
    step.next = advance(s, step.batch, env);
    return step;
  }

  if (!s.eval_is_fallback) {
    auto& a = s.attempts.back();
    a.eval_status = evaluator::to_string(report.status);
    step.batch.put(evaluated_turn(s, a));
  }
  finalize(s, step.batch, env, s.end_reason.value_or(store::EndReason::submitted), &report);
  step.next = Finished{};
  return step;
}

Step resume(EpisodeState& s, std::shared_ptr<const EpisodeSpec> spec,
            const store::EpisodeSnapshot& snap, const Env& env) {
  Step step;
  if (snap.final || snap.episode.status == store::EpisodeStatus::final) {
    s = EpisodeState{};
    s.spec = std::move(spec);
    s.phase = Phase::final;
    step.next = Finished{};
    return step;
  }
  // The stored system prompt wins; the spec is copied only when it differs
  // (the runner builds specs from the stored rows, so it rarely does).
  if (!snap.episode.system_prompt.empty() &&
      snap.episode.system_prompt != spec->system_prompt_text()) {
    auto spec_copy = std::make_shared<EpisodeSpec>(*spec);
    spec_copy->system_prompt = std::make_shared<const std::string>(snap.episode.system_prompt);
    spec = std::move(spec_copy);
  }
  if (snap.messages.empty()) return start(s, std::move(spec), env);

  s = EpisodeState{};
  s.spec = std::move(spec);
  s.epoch = snap.epoch;
  for (auto& m : snap.messages) {
    append_to_conversation(s, m.role, m.content);
    s.next_seq = std::max(s.next_seq, m.seq + 1);
  }
  s.tokens_used = snap.episode.tokens_used;
  s.cost_usd = snap.episode.cost_usd;
  s.active_s = snap.episode.active_s;
  for (auto& e : snap.events) {
    if (auto k = config::from_string<config::LifecycleKind>(e.kind))
      s.fired_events.insert({kind_key(*k), e.turn});
  }
  std::map<std::string, const store::EvaluationRow*> evals;
  for (auto& e : snap.evaluations) {
    evals[e.request_id] = &e;
    if (e.state != store::EvalState::done)
      s.stored_eval_counts[e.request_id] = {e.attempts, e.failures};
  }
  for (auto& t : snap.turns) {
    Attempt a{t.turn,        t.model_id, t.action, t.parse_status, t.code, t.eval_request_id,
              t.eval_status, "",         false};
    if (evaluator::mode_from_string(t.action) == evaluator::Mode::check) {
      a.passed = evaluator::verdict_from_string(t.eval_status) == evaluator::Verdict::ok;
      if (auto it = evals.find(t.eval_request_id);
          it != evals.end() && it->second->state == store::EvalState::done) {
        if (auto rep = evaluator::Report::from_json(it->second->report_json))
          a.result_text = prompts::render_report(*rep);
      }
    }
    s.attempts.push_back(std::move(a));
  }
  prune_attempts(s);

  // The current turn: the highest turn with an LLM call (its latest send).
  const store::LlmCallRow* call = nullptr;
  for (auto& c : snap.llm_calls) {
    if (!call || c.turn > call->turn ||
        (c.turn == call->turn && std::string_view(c.request_id).ends_with(k_overflow_suffix))) {
      call = &c;
    }
  }
  int last_turn_row = snap.turns.empty() ? 0 : snap.turns.back().turn;
  bool compact_mode = s.spec->resume == config::ResumeMode::compact;

  auto resend_or_begin = [&](Next next) -> Next {
    if (compact_mode && std::holds_alternative<CallLlm>(next) && !s.attempts.empty()) {
      add_event(s, step.batch, env, "resumed", s.turn,
                "conversation rebuilt from the compaction summary");
      compact(s, step.batch, s.turn, true, store::MessageKind::resumed);
      return call_llm(s);
    }
    return next;
  };

  if (s.spec->external) {
    // No LLM call: an action whose reply is stored and whose turn is not is
    // the one in flight; else the episode waits for the next action.
    const store::MessageRow* pending = nullptr;
    for (auto& m : snap.messages) {
      if (m.role == store::Role::assistant && m.turn > last_turn_row) pending = &m;
    }
    if (pending) {
      s.turn = pending->turn;
      s.turn_model = s.spec->model_id;
      step.next = dispatch_reply(s, step.batch, env, pending->content, k_external_finish, 0, 0, 0);
    } else {
      s.turn = last_turn_row;
      step.next = advance(s, step.batch, env);
    }
  } else if (!call) {
    s.turn = 0;
    step.next = resend_or_begin(advance(s, step.batch, env));
    return step;
  } else {
    s.turn = call->turn;
    s.turn_model = call->model_id;
    s.llm_request_id = call->request_id;
    s.overflow_retry = std::string_view(call->request_id).ends_with(k_overflow_suffix);
    s.llm_started_at = call->started_at;

    if (last_turn_row >= call->turn) {
      // That turn is complete; continue after it (a fallback submission whose
      // report is stored is picked up below).
      s.turn = last_turn_row;
      step.next = resend_or_begin(advance(s, step.batch, env));
    } else if (call->state == store::CallState::done) {
      // The reply is the assistant message of that turn, committed with the call.
      std::string reply = call->content;
      for (auto it = snap.messages.rbegin(); it != snap.messages.rend(); ++it) {
        if (it->role == store::Role::assistant && it->turn == call->turn) {
          reply = it->content;
          break;
        }
      }
      step.next = dispatch_reply(s, step.batch, env, reply, call->finish_reason,
                                 call->prompt_tokens, call->completion_tokens, call->latency_s);
    } else {
      // Started (or failed transiently) without a stored reply: send it again
      // under the same id. `started` means the earlier send's outcome was never
      // committed: it may have reached the server, and a reply may have been
      // produced and paid for before the process died or stopped.
      s.llm_sends = call->sends + 1;
      s.llm_dup_possible = call->dup_possible || call->state == store::CallState::started;
      s.llm_started_at = env.now;
      s.phase = Phase::awaiting_llm;
      step.batch.put(intent_row(s, env));
      step.next = resend_or_begin(call_llm(s));
      return step;
    }
  }

  // An evaluation the step wants to start may already be stored.
  if (auto* run = std::get_if<RunEval>(&step.next)) {
    auto it = evals.find(run->request.request_id);
    if (it != evals.end()) {
      const auto& stored = *it->second;
      std::optional<evaluator::Report> known;
      if (stored.state == store::EvalState::done) {
        if (auto rep = evaluator::Report::from_json(stored.report_json)) known = std::move(*rep);
      } else if (stored.failures >= k_max_eval_attempts) {
        known = crash_report(stored.request_id, stored.failures);
      }
      if (known) {
        auto rest = on_eval_result(s, *known, env);
        step.batch.append(std::move(rest.batch));
        step.next = std::move(rest.next);
      }
    }
  }
  return step;
}

Result<std::string> action_reply(const std::string& code, Action action) {
  if (code.find_first_not_of(" \t\r\n") == std::string::npos)
    return fail(ErrorKind::invalid, "'code' is empty");
  std::string want = code;
  if (!want.ends_with('\n')) want += '\n';
  std::string reply = "```python\n" + want +
                      "```\nACTION: " + (action == Action::submit ? "SUBMIT" : "CHECK") + "\n";
  auto parsed = parse_reply(reply);
  if (!parsed.has_code || parsed.code != want || parsed.action != action) {
    return fail(ErrorKind::invalid,
                "'code' cannot be stored as a reply and read back as itself: it may not hold a "
                "line of three backticks (a Markdown fence) or \\r\\n line ends");
  }
  return reply;
}

Result<Step> on_action(EpisodeState& s, const std::string& code, Action action, const Env& env) {
  if (!s.spec->external) return fail("on_action: the episode's turns come from an LLM");
  if (s.phase == Phase::final) return fail(ErrorKind::invalid, "the episode is done");
  if (s.phase != Phase::awaiting_action)
    return fail(ErrorKind::invalid, "the episode is not waiting for an action");
  auto reply = action_reply(code, action);
  if (!reply) return std::unexpected(reply.error());
  Step step;
  s.active_s += env.active_delta_s;
  add_message(s, step.batch, store::Role::assistant, store::MessageKind::reply, *reply, s.turn);
  update_episode(s, step.batch);
  step.next = dispatch_reply(s, step.batch, env, *reply, k_external_finish, 0, 0, 0);
  return step;
}

int turns_done(const EpisodeState& s) {
  int n = 0;
  for (const auto& a : s.attempts) n += a.parse_status != "code" || !a.eval_status.empty();
  return n;
}

Step start_one_off(OneOffEval& e, const config::Task& task, std::string code, evaluator::Mode mode,
                   const Env& env) {
  e.code_sha = ids::code_digest(code);
  e.request.request_id = ids::api_request_id_of_digest(to_string(mode), task.id, e.code_sha);
  e.request.mode = mode;
  e.request.task = task;
  e.request.code = std::move(code);
  e.request.secret_seed = ids::stable_hash64(e.request.request_id);
  e.attempts = 1;
  Step step;
  store::EvaluationRow row;
  row.request_id = e.request.request_id;
  row.kind = to_string(mode);
  row.code_sha = e.code_sha;
  row.state = store::EvalState::running;
  row.owner = env.owner;
  row.attempts = e.attempts;
  row.created_at = env.now;
  step.batch.put(std::move(row));
  step.next = RunEval{e.request};
  return step;
}

Step on_one_off_result(OneOffEval& e, const evaluator::Report& report, const Env& env) {
  Step step;
  if (report.interrupted) {
    step.next = AbortCampaign{"the evaluator shut down during evaluation " + e.request.request_id};
    return step;
  }
  store::EvaluationRow row;
  row.request_id = e.request.request_id;
  row.kind = to_string(e.request.mode);
  row.code_sha = e.code_sha;
  row.state = store::EvalState::done;
  row.owner = env.owner;
  row.attempts = e.attempts;
  row.failures = report.status == evaluator::Verdict::worker_crash ? 1 : 0;
  row.verdict = evaluator::to_string(report.status);
  row.report_json = report.to_json();
  row.evaluator_version = report.evaluator_version;
  row.created_at = env.now;
  row.finished_at = env.now;
  step.batch.put(std::move(row));
  step.next = Finished{};
  return step;
}

}  // namespace korch::agent
