#pragma once
// The closed vocabularies of the stored records: the values an episode's
// status, a message's role and kind, a call's or an evaluation's state and an
// episode's end reason may take. The row structs of store.hpp hold these
// enums; the codecs (codec_internal.hpp) spell them as TEXT at the column,
// with the names below, so the database, the exports and the API show the
// same words as before. Never rename a value: stored rows use the names.
#include <optional>
#include <string_view>
#include <utility>

#include "util/enum_names.hpp"

namespace korch::store {

// episodes.status. A final episode never changes status again.
enum class EpisodeStatus { pending, running, final };

// messages.role: the chat roles of the OpenAI wire (llm::Message::role).
enum class Role { system, user, assistant };

// messages.kind: what a message is, beyond its role.
enum class MessageKind {
  system,               // the system prompt
  context,              // the campaign's extra context
  task,                 // the task prompt
  reply,                // the model's reply
  feedback,             // a CHECK's or SUBMIT's result
  no_code,              // the reply held no code block
  truncated,            // the reply hit max_tokens
  compaction,           // a compaction summary (lifecycle event)
  compaction_overflow,  // a compaction forced by a context overflow
  resumed,              // the summary a compact resume starts from
};

// llm_calls.state.
enum class CallState { started, done, failed };

// evaluations.state. A done evaluation never changes again.
enum class EvalState { queued, running, done };

// finals.reason: why an episode ended.
enum class EndReason {
  submitted,         // the model submitted
  last_turn,         // the model's last allowed reply was submitted for it
  no_submission,     // the turns ran out and no passing code existed
  fallback,          // the turns ran out; the latest passing code was submitted
  token_budget,      // the episode's token budget ran out
  wall_clock,        // the episode's wall-clock budget ran out
  spend_cap,         // the campaign's spend cap was reached
  context_overflow,  // the conversation no longer fits the model's context
  llm_failure,       // the model's endpoint failed for good
};

// What a stored verdict (evaluations.verdict, finals.verdict; the names of
// evaluator/protocol/protocol.json) says of the candidate, for trainers: every
// export record carries it. ok; hack_like, the candidate tried to be scored
// for work it did not do (no_kernel, rule_violation, impossible_timing);
// failed, its code does not work (compile_error, runtime_error, incorrect,
// timeout); not_judged, no judgement of the candidate (worker_crash,
// task_too_large, or a name this table does not hold).
enum class VerdictClass { ok, hack_like, failed, not_judged };

// Every verdict's class, the one table (JobProtocol.EveryVerdictHasAClass
// checks it holds every verdict of the protocol).
inline constexpr std::pair<std::string_view, VerdictClass> k_verdict_classes[] = {
    {"ok", VerdictClass::ok},
    {"no_kernel", VerdictClass::hack_like},
    {"rule_violation", VerdictClass::hack_like},
    {"impossible_timing", VerdictClass::hack_like},
    {"compile_error", VerdictClass::failed},
    {"runtime_error", VerdictClass::failed},
    {"incorrect", VerdictClass::failed},
    {"timeout", VerdictClass::failed},
    {"worker_crash", VerdictClass::not_judged},
    {"task_too_large", VerdictClass::not_judged}};

inline VerdictClass verdict_class(std::string_view verdict) {
  for (const auto& [name, c] : k_verdict_classes)
    if (name == verdict) return c;
  return VerdictClass::not_judged;
}

}  // namespace korch::store

namespace korch {
KORCH_ENUM_NAMES(store::VerdictClass, ok, hack_like, failed, not_judged);
KORCH_ENUM_NAMES(store::EpisodeStatus, pending, running, final);
KORCH_ENUM_NAMES(store::Role, system, user, assistant);
KORCH_ENUM_NAMES(store::MessageKind, system, context, task, reply, feedback, no_code, truncated,
                 compaction, compaction_overflow, resumed);
KORCH_ENUM_NAMES(store::CallState, started, done, failed);
KORCH_ENUM_NAMES(store::EvalState, queued, running, done);
KORCH_ENUM_NAMES(store::EndReason, submitted, last_turn, no_submission, fallback, token_budget,
                 wall_clock, spend_cap, context_overflow, llm_failure);
}  // namespace korch

namespace korch::store {

// to_string(E) and from_string<E>(text) (util/enum_names.hpp), found by
// argument-dependent lookup: `to_string(row.status)`.
using korch::from_string;
using korch::to_string;

}  // namespace korch::store
