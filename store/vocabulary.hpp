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

}  // namespace korch::store

namespace korch {
template <>
struct EnumNames<store::EpisodeStatus> {
  static constexpr std::pair<store::EpisodeStatus, std::string_view> k_names[] = {
      {store::EpisodeStatus::pending, "pending"},
      {store::EpisodeStatus::running, "running"},
      {store::EpisodeStatus::final, "final"}};
};
template <>
struct EnumNames<store::Role> {
  static constexpr std::pair<store::Role, std::string_view> k_names[] = {
      {store::Role::system, "system"},
      {store::Role::user, "user"},
      {store::Role::assistant, "assistant"}};
};
template <>
struct EnumNames<store::MessageKind> {
  static constexpr std::pair<store::MessageKind, std::string_view> k_names[] = {
      {store::MessageKind::system, "system"},
      {store::MessageKind::context, "context"},
      {store::MessageKind::task, "task"},
      {store::MessageKind::reply, "reply"},
      {store::MessageKind::feedback, "feedback"},
      {store::MessageKind::no_code, "no_code"},
      {store::MessageKind::truncated, "truncated"},
      {store::MessageKind::compaction, "compaction"},
      {store::MessageKind::compaction_overflow, "compaction_overflow"},
      {store::MessageKind::resumed, "resumed"}};
};
template <>
struct EnumNames<store::CallState> {
  static constexpr std::pair<store::CallState, std::string_view> k_names[] = {
      {store::CallState::started, "started"},
      {store::CallState::done, "done"},
      {store::CallState::failed, "failed"}};
};
template <>
struct EnumNames<store::EvalState> {
  static constexpr std::pair<store::EvalState, std::string_view> k_names[] = {
      {store::EvalState::queued, "queued"},
      {store::EvalState::running, "running"},
      {store::EvalState::done, "done"}};
};
template <>
struct EnumNames<store::EndReason> {
  static constexpr std::pair<store::EndReason, std::string_view> k_names[] = {
      {store::EndReason::submitted, "submitted"},
      {store::EndReason::last_turn, "last_turn"},
      {store::EndReason::no_submission, "no_submission"},
      {store::EndReason::fallback, "fallback"},
      {store::EndReason::token_budget, "token_budget"},
      {store::EndReason::wall_clock, "wall_clock"},
      {store::EndReason::spend_cap, "spend_cap"},
      {store::EndReason::context_overflow, "context_overflow"},
      {store::EndReason::llm_failure, "llm_failure"}};
};
}  // namespace korch

namespace korch::store {

// The stored name of a value ("final", "assistant", ...), found by
// argument-dependent lookup: `to_string(row.status)`.
template <NamedEnum E>
constexpr std::string_view to_string(E value) {
  return enum_name(value);
}

// The value a stored or wire name stands for, or nullopt.
template <NamedEnum E>
constexpr std::optional<E> from_string(std::string_view text) {
  return enum_from_name<E>(text);
}

}  // namespace korch::store
