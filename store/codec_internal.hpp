#pragma once
// Internal to korch_store: how each row struct of store.hpp maps to the
// columns of its table. This file is the one place that lists a table's
// (column, member) pairs; the column lists of every SELECT and INSERT, the
// row readers and the statement binders are derived from the codecs below.
// The CREATE TABLE statements of schema.cpp are history (a shipped migration
// is never edited); test_store checks that every codec names exactly the
// columns that the migrated schema has.
//
// A codec's columns are in the table's column order; the first column(s) form
// the key used in conflict clauses.
#include <algorithm>
#include <cstdint>
#include <initializer_list>
#include <optional>
#include <string>
#include <string_view>
#include <tuple>
#include <type_traits>
#include <utility>

#include "store/store.hpp"
#include "store/work_queue.hpp"
#include "util/enum_names.hpp"

namespace korch::store::detail {

// One column of a table and the member of Row that holds its value.
template <typename Row, typename T>
struct Column {
  std::string_view name;
  T Row::*member;
};

template <typename Row, typename... Ts>
struct Codec {
  using RowType = Row;
  static constexpr int k_size = sizeof...(Ts);

  std::string_view table;
  std::tuple<Column<Row, Ts>...> columns;

  // Calls f(column) for each column, in order.
  template <typename F>
  constexpr void for_each(F&& f) const {
    std::apply([&](const auto&... c) { (f(c), ...); }, columns);
  }
};

template <typename Row, typename T>
constexpr Column<Row, T> column(std::string_view name, T Row::*member) {
  return {name, member};
}

template <typename Row, typename... Ts>
constexpr Codec<Row, Ts...> table(std::string_view name, Column<Row, Ts>... columns) {
  return {name, {columns...}};
}

// --- the codecs (one per table) ---------------------------------------------

// clang-format off
inline constexpr auto k_campaigns = table(
    "campaigns",
    column("id", &CampaignRow::id),
    column("name", &CampaignRow::name),
    column("config_json", &CampaignRow::config_json),
    column("secret_seed", &CampaignRow::secret_seed),
    column("created_at", &CampaignRow::created_at));

inline constexpr auto k_tasks = table(
    "tasks",
    column("campaign_id", &TaskRow::campaign_id),
    column("task_id", &TaskRow::task_id),
    column("level", &TaskRow::level),
    column("number", &TaskRow::number),
    column("name", &TaskRow::name),
    column("path", &TaskRow::path),
    column("source", &TaskRow::source));

// An EpisodeRow lives in two tables: episodes holds the small, often-updated
// columns (the EpisodeSummary), episode_prompts the system prompt (several
// KB, written once), so that an EpisodeUpdate dirties a page shared by many
// episodes and a listing reads no prompt.
inline constexpr auto k_episodes = table(
    "episodes",
    column("id", &EpisodeSummary::id),
    column("campaign_id", &EpisodeSummary::campaign_id),
    column("task_id", &EpisodeSummary::task_id),
    column("model_id", &EpisodeSummary::model_id),
    column("sample_index", &EpisodeSummary::sample_index),
    column("status", &EpisodeSummary::status),
    column("active_s", &EpisodeSummary::active_s),
    column("tokens_used", &EpisodeSummary::tokens_used),
    column("cost_usd", &EpisodeSummary::cost_usd),
    column("created_at", &EpisodeSummary::created_at),
    column("updated_at", &EpisodeSummary::updated_at));

inline constexpr auto k_episode_prompts = table(
    "episode_prompts",
    column<EpisodeRow, std::string>("episode_id", &EpisodeRow::id),
    column("system_prompt", &EpisodeRow::system_prompt));

inline constexpr auto k_messages = table(
    "messages",
    column("episode_id", &MessageRow::episode_id),
    column("epoch", &MessageRow::epoch),
    column("seq", &MessageRow::seq),
    column("role", &MessageRow::role),
    column("kind", &MessageRow::kind),
    column("turn", &MessageRow::turn),
    column("content", &MessageRow::content));

inline constexpr auto k_turns = table(
    "turns",
    column("episode_id", &TurnRow::episode_id),
    column("turn", &TurnRow::turn),
    column("model_id", &TurnRow::model_id),
    column("llm_request_id", &TurnRow::llm_request_id),
    column("action", &TurnRow::action),
    column("parse_status", &TurnRow::parse_status),
    column("code", &TurnRow::code),
    column("code_sha", &TurnRow::code_sha),
    column("eval_request_id", &TurnRow::eval_request_id),
    column("eval_status", &TurnRow::eval_status),
    column("finish_reason", &TurnRow::finish_reason),
    column("prompt_tokens", &TurnRow::prompt_tokens),
    column("completion_tokens", &TurnRow::completion_tokens),
    column("llm_latency_s", &TurnRow::llm_latency_s),
    column("at", &TurnRow::at));

inline constexpr auto k_llm_calls = table(
    "llm_calls",
    column("request_id", &LlmCallRow::request_id),
    column("episode_id", &LlmCallRow::episode_id),
    column("turn", &LlmCallRow::turn),
    column("model_id", &LlmCallRow::model_id),
    column("state", &LlmCallRow::state),
    column("started_at", &LlmCallRow::started_at),
    column("finished_at", &LlmCallRow::finished_at),
    column("content", &LlmCallRow::content),
    column("reasoning", &LlmCallRow::reasoning),
    column("finish_reason", &LlmCallRow::finish_reason),
    column("prompt_tokens", &LlmCallRow::prompt_tokens),
    column("completion_tokens", &LlmCallRow::completion_tokens),
    column("cached_tokens", &LlmCallRow::cached_tokens),
    column("reasoning_tokens", &LlmCallRow::reasoning_tokens),
    column("cost_usd", &LlmCallRow::cost_usd),
    column("latency_s", &LlmCallRow::latency_s),
    column("http_attempts", &LlmCallRow::http_attempts),
    column("attempts_json", &LlmCallRow::attempts_json),
    column("provider_request_id", &LlmCallRow::provider_request_id),
    column("failure", &LlmCallRow::failure),
    column("error", &LlmCallRow::error),
    column("dup_possible", &LlmCallRow::dup_possible),
    column("sends", &LlmCallRow::sends));

inline constexpr auto k_evaluations = table(
    "evaluations",
    column("request_id", &EvaluationRow::request_id),
    column("episode_id", &EvaluationRow::episode_id),
    column("kind", &EvaluationRow::kind),
    column("code_sha", &EvaluationRow::code_sha),
    column("state", &EvaluationRow::state),
    column("owner", &EvaluationRow::owner),
    column("attempts", &EvaluationRow::attempts),
    column("verdict", &EvaluationRow::verdict),
    column("report_json", &EvaluationRow::report_json),
    column("evaluator_version", &EvaluationRow::evaluator_version),
    column("created_at", &EvaluationRow::created_at),
    column("finished_at", &EvaluationRow::finished_at),
    column("failures", &EvaluationRow::failures));

// events also has an INTEGER PRIMARY KEY id (the rowid: insertion order),
// which no row struct carries.
inline constexpr auto k_events = table(
    "events",
    column("episode_id", &EventRow::episode_id),
    column("turn", &EventRow::turn),
    column("kind", &EventRow::kind),
    column("detail", &EventRow::detail),
    column("at", &EventRow::at));

inline constexpr auto k_finals = table(
    "finals",
    column("episode_id", &FinalRow::episode_id),
    column("reason", &FinalRow::reason),
    column("verdict", &FinalRow::verdict),
    column("request_id", &FinalRow::request_id),
    column("speedup", &FinalRow::speedup),
    column("reward", &FinalRow::reward),
    column("correct", &FinalRow::correct),
    column("at", &FinalRow::at));

inline constexpr auto k_leases = table(
    "leases",
    column("campaign_id", &Lease::campaign_id),
    column("owner", &Lease::owner),
    column("heartbeat_at", &Lease::heartbeat_at),
    column("expires_at", &Lease::expires_at));

inline constexpr auto k_eval_queue = table(
    "eval_queue",
    column("request_id", &QueueRow::request_id),
    column("campaign_id", &QueueRow::campaign_id),
    column("evaluator_version", &QueueRow::evaluator_version),
    column("request_json", &QueueRow::request_json),
    column("state", &QueueRow::state),
    column("worker_id", &QueueRow::worker_id),
    column("lease_token", &QueueRow::lease_token),
    column("claims", &QueueRow::claims),
    column("lease_expires_at", &QueueRow::lease_expires_at),
    column("result_json", &QueueRow::result_json),
    column("enqueued_at", &QueueRow::enqueued_at),
    column("claimed_at", &QueueRow::claimed_at),
    column("finished_at", &QueueRow::finished_at));

inline constexpr auto k_workers = table(
    "workers",
    column("id", &WorkerRow::id),
    column("host", &WorkerRow::host),
    column("pid", &WorkerRow::pid),
    column("gpus", &WorkerRow::gpus),
    column("slots", &WorkerRow::slots),
    column("korch_version", &WorkerRow::korch_version),
    column("evaluator_version", &WorkerRow::evaluator_version),
    column("mode", &WorkerRow::mode),
    column("device_description", &WorkerRow::device_description),
    column("state", &WorkerRow::state),
    column("note", &WorkerRow::note),
    column("started_at", &WorkerRow::started_at),
    column("heartbeat_at", &WorkerRow::heartbeat_at),
    column("evaluations_done", &WorkerRow::evaluations_done));

inline constexpr auto k_campaign_devices = table(
    "campaign_devices",
    column("campaign_id", &CampaignDevice::campaign_id),
    column("device_model", &CampaignDevice::device_model),
    column("device_description", &CampaignDevice::device_description),
    column("pinned_at", &CampaignDevice::pinned_at));

inline constexpr auto k_verdict_cards = table(
    "verdict_cards",
    column("evaluator_version", &VerdictCardRow::evaluator_version),
    column("rules_version", &VerdictCardRow::rules_version),
    column("device", &VerdictCardRow::device),
    column("mode", &VerdictCardRow::mode),
    column("attacks_accepted", &VerdictCardRow::attacks_accepted),
    column("attacks", &VerdictCardRow::attacks),
    column("honest_rejected", &VerdictCardRow::honest_rejected),
    column("honest", &VerdictCardRow::honest),
    column("card_json", &VerdictCardRow::card_json),
    column("measured_at", &VerdictCardRow::measured_at));
// clang-format on

// Every codec, for checks that walk all tables (tests).
inline constexpr auto k_all_codecs = std::make_tuple(
    k_campaigns, k_tasks, k_episodes, k_episode_prompts, k_messages, k_turns, k_llm_calls,
    k_evaluations, k_events, k_finals, k_leases, k_eval_queue, k_workers, k_campaign_devices, k_verdict_cards);

// --- derived: column lists ---------------------------------------------------

// "x, y, z", or "a.x, a.y, a.z" with an alias. Columns [first, k_size).
template <typename C>
std::string column_list(const C& codec, std::string_view alias = {}, int first = 0) {
  std::string out;
  int i = 0;
  codec.for_each([&](const auto& c) {
    if (i++ < first) return;
    if (!out.empty()) out += ", ";
    if (!alias.empty()) {
      out += alias;
      out += '.';
    }
    out += c.name;
  });
  return out;
}

// "INSERT INTO t (x, y) VALUES (?1, ?2) <tail>"
template <typename C>
std::string insert_sql(const C& codec, std::string_view tail) {
  std::string out =
      "INSERT INTO " + std::string(codec.table) + " (" + column_list(codec) + ") VALUES (";
  for (int i = 1; i <= C::k_size; ++i) {
    if (i > 1) out += ", ";
    out += "?" + std::to_string(i);
  }
  out += ") ";
  out += tail;
  return out;
}

// "x = excluded.x, ..." for every column but the first (the key). Columns
// named in `sticky` keep the larger of the stored and the new value
// (in SQL both SQLite and PostgreSQL run: "x = CASE WHEN table.x > excluded.x
// THEN table.x ELSE excluded.x END"); columns named in `fixed` keep the stored
// value (they are left out: a column in the SET list costs a delete and an
// insert in every index on it, even when its value does not change).
template <typename C>
std::string excluded_set(const C& codec, std::initializer_list<std::string_view> sticky = {},
                         std::initializer_list<std::string_view> fixed = {}) {
  std::string out;
  bool key = true;
  codec.for_each([&](const auto& c) {
    if (std::exchange(key, false)) return;
    if (std::find(fixed.begin(), fixed.end(), c.name) != fixed.end()) return;
    std::string name(c.name);
    if (!out.empty()) out += ", ";
    if (std::find(sticky.begin(), sticky.end(), c.name) != sticky.end()) {
      std::string stored = std::string(codec.table) + "." + name;
      out += name + " = CASE WHEN " + stored + " > excluded." + name + " THEN " + stored +
             " ELSE excluded." + name + " END";
    } else {
      out += name + " = excluded." + name;
    }
  });
  return out;
}

// --- derived: reading and binding ---------------------------------------------
//
// Generic over the statement type Q: SQLite's Stmt (sqlite_internal.hpp) and
// PostgreSQL's PgStmt (pg_internal.hpp) offer the same accessors (text, i32,
// i64, f64, opt_f64) and bind(args...).

template <typename Q>
void read_value(const Q& q, int col, std::string& out) {
  out = q.text(col);
}
template <typename Q>
void read_value(const Q& q, int col, int& out) {
  out = q.i32(col);
}
template <typename Q>
void read_value(const Q& q, int col, std::int64_t& out) {
  out = q.i64(col);
}
template <typename Q>
void read_value(const Q& q, int col, std::uint64_t& out) {
  out = static_cast<std::uint64_t>(q.i64(col));
}
template <typename Q>
void read_value(const Q& q, int col, double& out) {
  out = q.f64(col);
}
template <typename Q>
void read_value(const Q& q, int col, bool& out) {
  out = q.i64(col) != 0;
}
template <typename Q>
void read_value(const Q& q, int col, std::optional<double>& out) {
  out = q.opt_f64(col);
}
// An enum column holds one of its type's names (store/vocabulary.hpp; the
// schema's CHECK constraints hold the same ones); any other text is a row
// this binary cannot read.
template <typename Q, NamedEnum E>
void read_value(const Q& q, int col, E& out) {
  std::string text = q.text(col);
  auto value = enum_from_name<E>(text);
  if (!value) {
    q.throw_corrupt("column " + std::to_string(col) + " holds \"" + text + "\", not one of " +
                    enum_choices<E>());
  }
  out = *value;
}

// Reads the codec's columns from the current row of `q`, starting at result
// column `offset`, into `row`.
template <typename C, typename Q>
void read_into(const C& codec, const Q& q, typename C::RowType& row, int offset = 0) {
  codec.for_each([&](const auto& c) { read_value(q, offset++, row.*(c.member)); });
}

template <typename C, typename Q>
typename C::RowType read_row(const C& codec, const Q& q) {
  typename C::RowType row;
  read_into(codec, q, row);
  return row;
}

// Binds the codec's columns of `row` to ?1..?n (in insert_sql's order).
template <typename C, typename Q>
Q& bind_row(Q& q, const C& codec, const typename C::RowType& row) {
  return std::apply([&](const auto&... c) -> Q& { return q.bind(row.*(c.member)...); },
                    codec.columns);
}

}  // namespace korch::store::detail
