#include "store/store.hpp"

#include <pthread.h>
#include <sys/stat.h>

#include <algorithm>
#include <cctype>
#include <condition_variable>
#include <deque>
#include <future>
#include <initializer_list>
#include <mutex>
#include <thread>
#include <unordered_map>
#include <utility>

#include "store/schema_internal.hpp"
#include "store/sqlite_internal.hpp"
#include "util/fs.hpp"
#include "util/log.hpp"

namespace korch::store {

// --- WriteBatch --------------------------------------------------------------

void WriteBatch::put(CampaignRow row) { m_ops.emplace_back(std::move(row)); }
void WriteBatch::put(TaskRow row) { m_ops.emplace_back(std::move(row)); }
void WriteBatch::put(EpisodeRow row) { m_ops.emplace_back(std::move(row)); }
void WriteBatch::update(EpisodeUpdate update) { m_ops.emplace_back(std::move(update)); }
void WriteBatch::put(MessageRow row) { m_ops.emplace_back(std::move(row)); }
void WriteBatch::put(TurnRow row) { m_ops.emplace_back(std::move(row)); }
void WriteBatch::put(LlmCallRow row) { m_ops.emplace_back(std::move(row)); }
void WriteBatch::put(EvaluationRow row) { m_ops.emplace_back(std::move(row)); }
void WriteBatch::put(EventRow row) { m_ops.emplace_back(std::move(row)); }
void WriteBatch::put(FinalRow row) { m_ops.emplace_back(std::move(row)); }

namespace {

using detail::Db;
using detail::SqliteError;
using detail::Stmt;
using detail::Txn;

// Page size of newly created databases. Each group commit rewrites one index
// leaf per touched episode and index, so small pages write less; large
// values spill to overflow pages either way.
constexpr int k_page_size = 4096;
// WAL pages between automatic checkpoints (~40 MB at 4 KiB pages): fewer,
// larger checkpoints keep the writer's fsyncs mostly on the WAL.
constexpr int k_wal_autocheckpoint_pages = 10000;
// Page cache of the write connection. A group of 512 turns dirties ~20 MB of
// pages; a smaller cache spills them to the WAL mid-transaction.
constexpr int k_writer_cache_kib = 64 * 1024;
// Read connections map the database file (address space only) so that a
// resume of thousands of episodes copies pages once.
constexpr std::int64_t k_reader_mmap_bytes = std::int64_t{1} << 32;
// Idle read connections kept open for reuse.
constexpr std::size_t k_max_idle_readers = 16;

template <typename... Fs>
struct Overloaded : Fs... {
  using Fs::operator()...;
};

// --- SQL text, generated once from the column lists -------------------------

constexpr std::string_view k_campaign_cols = "id, name, config_json, secret_seed, created_at";
constexpr std::string_view k_task_cols = "campaign_id, task_id, level, number, name, path, source";
// The episodes table holds the small, often-updated columns; the system
// prompt (several KB, written once) lives in episode_prompts so that an
// EpisodeUpdate dirties a page shared by many episodes.
constexpr std::string_view k_episode_cols =
    "id, campaign_id, task_id, model_id, sample_index, status, active_s, tokens_used, cost_usd, created_at, "
    "updated_at";
// Reads an EpisodeRow (read_episode's column order) from k_episode_from.
constexpr std::string_view k_episode_select =
    "e.id, e.campaign_id, e.task_id, e.model_id, e.sample_index, COALESCE(p.system_prompt, ''), e.status, "
    "e.active_s, e.tokens_used, e.cost_usd, e.created_at, e.updated_at";
constexpr std::string_view k_episode_from = "episodes e LEFT JOIN episode_prompts p ON p.episode_id = e.id";
constexpr std::string_view k_message_cols = "episode_id, epoch, seq, role, kind, turn, content";
constexpr std::string_view k_turn_cols =
    "episode_id, turn, model_id, llm_request_id, action, parse_status, code, code_sha, "
    "eval_request_id, eval_status, finish_reason, prompt_tokens, completion_tokens, llm_latency_s, at";
constexpr std::string_view k_llm_call_cols =
    "request_id, episode_id, turn, model_id, state, started_at, finished_at, content, reasoning, "
    "finish_reason, prompt_tokens, completion_tokens, cached_tokens, reasoning_tokens, cost_usd, "
    "latency_s, http_attempts, attempts_json, provider_request_id, failure, error, dup_possible, sends";
constexpr std::string_view k_evaluation_cols =
    "request_id, episode_id, kind, code_sha, state, owner, attempts, verdict, report_json, "
    "evaluator_version, created_at, finished_at, failures";
constexpr std::string_view k_event_cols = "episode_id, turn, kind, detail, at";
constexpr std::string_view k_final_cols =
    "episode_id, reason, verdict, request_id, speedup, reward, correct, at";

std::vector<std::string> split_cols(std::string_view cols) {
  std::vector<std::string> out;
  std::string current;
  for (char c : cols) {
    if (c == ',') {
      out.push_back(current);
      current.clear();
    } else if (c != ' ') {
      current += c;
    }
  }
  if (!current.empty()) out.push_back(current);
  return out;
}

// "a.x, a.y, ..."
std::string prefixed(std::string_view alias, std::string_view cols) {
  std::string out;
  for (const auto& col : split_cols(cols)) {
    if (!out.empty()) out += ", ";
    out += std::string(alias) + "." + col;
  }
  return out;
}

// "?1, ?2, ..., ?n" for the columns of `cols`.
std::string placeholders(std::string_view cols) {
  std::string out;
  auto n = split_cols(cols).size();
  for (std::size_t i = 1; i <= n; ++i) {
    if (i > 1) out += ", ";
    out += "?" + std::to_string(i);
  }
  return out;
}

// "x = excluded.x, ..." for every column but the first (the key). Columns
// named in `sticky` keep the larger of the stored and the new value
// ("x = MAX(table.x, excluded.x)").
std::string excluded_set(std::string_view table, std::string_view cols,
                         std::initializer_list<std::string_view> sticky = {}) {
  std::string out;
  auto list = split_cols(cols);
  for (std::size_t i = 1; i < list.size(); ++i) {
    if (!out.empty()) out += ", ";
    if (std::find(sticky.begin(), sticky.end(), list[i]) != sticky.end()) {
      out += list[i] + " = MAX(" + std::string(table) + "." + list[i] + ", excluded." + list[i] + ")";
    } else {
      out += list[i] + " = excluded." + list[i];
    }
  }
  return out;
}

std::string insert_sql(std::string_view table, std::string_view cols, std::string_view tail) {
  return "INSERT INTO " + std::string(table) + " (" + std::string(cols) + ") VALUES (" + placeholders(cols) +
         ") " + std::string(tail);
}

// Filters that pick the episodes a snapshot query covers (alias e).
constexpr std::string_view k_unfinished_filter =
    "e.campaign_id = ?1 AND e.status != 'final' AND "
    "NOT EXISTS (SELECT 1 FROM finals fx WHERE fx.episode_id = e.id)";
constexpr std::string_view k_one_episode_filter = "e.id = ?1";

struct SnapshotSql {
  std::string episodes, messages, turns, llm_calls, evaluations, finals, events;
};

SnapshotSql make_snapshot_sql(std::string_view filter) {
  std::string where = " WHERE " + std::string(filter);
  SnapshotSql s;
  s.episodes = "SELECT " + std::string(k_episode_select) + " FROM " + std::string(k_episode_from) + where;
  s.messages = "SELECT " + prefixed("m", k_message_cols) +
               " FROM episodes e JOIN messages m ON m.episode_id = e.id" + where +
               " AND m.epoch = (SELECT MAX(x.epoch) FROM messages x WHERE x.episode_id = e.id)";
  s.turns =
      "SELECT " + prefixed("t", k_turn_cols) + " FROM episodes e JOIN turns t ON t.episode_id = e.id" + where;
  s.llm_calls = "SELECT " + prefixed("l", k_llm_call_cols) +
                " FROM episodes e JOIN llm_calls l ON l.episode_id = e.id" + where;
  s.evaluations = "SELECT " + prefixed("v", k_evaluation_cols) +
                  " FROM episodes e JOIN evaluations v ON v.episode_id = e.id" + where;
  s.finals = "SELECT " + prefixed("f", k_final_cols) +
             " FROM episodes e JOIN finals f ON f.episode_id = e.id" + where;
  s.events = "SELECT " + prefixed("v", k_event_cols) +
             " FROM episodes e JOIN events v ON v.episode_id = e.id" + where + " ORDER BY v.rowid";
  return s;
}

struct Sql {
  std::string insert_campaign = insert_sql("campaigns", k_campaign_cols, "ON CONFLICT DO NOTHING");
  std::string insert_task = insert_sql("tasks", k_task_cols, "ON CONFLICT DO NOTHING");
  std::string insert_episode = insert_sql("episodes", k_episode_cols, "ON CONFLICT DO NOTHING");
  std::string insert_message = insert_sql("messages", k_message_cols, "ON CONFLICT DO NOTHING");
  std::string insert_turn = insert_sql("turns", k_turn_cols, "ON CONFLICT DO NOTHING");
  std::string upsert_llm_call =
      insert_sql("llm_calls", k_llm_call_cols,
                 "ON CONFLICT (request_id) DO UPDATE SET " +
                     excluded_set("llm_calls", k_llm_call_cols, {"dup_possible"}) +
                     " WHERE llm_calls.state != 'done'");
  std::string upsert_evaluation =
      insert_sql("evaluations", k_evaluation_cols,
                 "ON CONFLICT (request_id) DO UPDATE SET " + excluded_set("evaluations", k_evaluation_cols) +
                     " WHERE evaluations.state != 'done'");
  std::string insert_event = insert_sql("events", k_event_cols, "");
  std::string insert_final = insert_sql("finals", k_final_cols, "ON CONFLICT DO NOTHING");

  std::string get_campaign = "SELECT " + std::string(k_campaign_cols) + " FROM campaigns WHERE id = ?1";
  std::string list_campaigns =
      "SELECT " + std::string(k_campaign_cols) + " FROM campaigns ORDER BY created_at, id";
  std::string list_tasks = "SELECT " + std::string(k_task_cols) +
                           " FROM tasks WHERE campaign_id = ?1 ORDER BY level, number, task_id";
  std::string list_episodes = "SELECT " + std::string(k_episode_select) + " FROM " +
                              std::string(k_episode_from) +
                              " WHERE e.campaign_id = ?1 ORDER BY e.created_at, e.id";
  std::string get_evaluation =
      "SELECT " + std::string(k_evaluation_cols) + " FROM evaluations WHERE request_id = ?1";
  std::string get_llm_call =
      "SELECT " + std::string(k_llm_call_cols) + " FROM llm_calls WHERE request_id = ?1";
  std::string list_turns = "SELECT " + prefixed("t", k_turn_cols) +
                           " FROM episodes e JOIN turns t ON t.episode_id = e.id WHERE e.campaign_id = ?1"
                           " ORDER BY t.episode_id, t.turn";
  std::string list_llm_calls = "SELECT " + prefixed("l", k_llm_call_cols) +
                               " FROM episodes e JOIN llm_calls l ON l.episode_id = e.id"
                               " WHERE e.campaign_id = ?1 ORDER BY l.episode_id, l.turn, l.started_at";
  std::string list_evaluations = "SELECT " + prefixed("v", k_evaluation_cols) +
                                 " FROM episodes e JOIN evaluations v ON v.episode_id = e.id"
                                 " WHERE e.campaign_id = ?1 ORDER BY v.episode_id, v.created_at";
  std::string list_finals = "SELECT " + prefixed("f", k_final_cols) +
                            " FROM episodes e JOIN finals f ON f.episode_id = e.id"
                            " WHERE e.campaign_id = ?1 ORDER BY f.episode_id";
  std::string list_events = "SELECT " + prefixed("v", k_event_cols) +
                            " FROM episodes e JOIN events v ON v.episode_id = e.id"
                            " WHERE e.campaign_id = ?1 ORDER BY v.id";

  SnapshotSql unfinished = make_snapshot_sql(k_unfinished_filter);
  SnapshotSql one_episode = make_snapshot_sql(k_one_episode_filter);
};

const Sql& sql() {
  static const Sql s;
  return s;
}

// --- row readers (columns in the order of the k_*_cols lists) ---------------

CampaignRow read_campaign(const Stmt& q) {
  CampaignRow r;
  r.id = q.text(0);
  r.name = q.text(1);
  r.config_json = q.text(2);
  r.secret_seed = static_cast<std::uint64_t>(q.i64(3));
  r.created_at = q.f64(4);
  return r;
}

TaskRow read_task(const Stmt& q) {
  TaskRow r;
  r.campaign_id = q.text(0);
  r.task_id = q.text(1);
  r.level = q.i32(2);
  r.number = q.i32(3);
  r.name = q.text(4);
  r.path = q.text(5);
  r.source = q.text(6);
  return r;
}

EpisodeRow read_episode(const Stmt& q) {
  EpisodeRow r;
  r.id = q.text(0);
  r.campaign_id = q.text(1);
  r.task_id = q.text(2);
  r.model_id = q.text(3);
  r.sample_index = q.i32(4);
  r.system_prompt = q.text(5);
  r.status = q.text(6);
  r.active_s = q.f64(7);
  r.tokens_used = q.i64(8);
  r.cost_usd = q.f64(9);
  r.created_at = q.f64(10);
  r.updated_at = q.f64(11);
  return r;
}

MessageRow read_message(const Stmt& q) {
  MessageRow r;
  r.episode_id = q.text(0);
  r.epoch = q.i32(1);
  r.seq = q.i32(2);
  r.role = q.text(3);
  r.kind = q.text(4);
  r.turn = q.i32(5);
  r.content = q.text(6);
  return r;
}

TurnRow read_turn(const Stmt& q) {
  TurnRow r;
  r.episode_id = q.text(0);
  r.turn = q.i32(1);
  r.model_id = q.text(2);
  r.llm_request_id = q.text(3);
  r.action = q.text(4);
  r.parse_status = q.text(5);
  r.code = q.text(6);
  r.code_sha = q.text(7);
  r.eval_request_id = q.text(8);
  r.eval_status = q.text(9);
  r.finish_reason = q.text(10);
  r.prompt_tokens = q.i64(11);
  r.completion_tokens = q.i64(12);
  r.llm_latency_s = q.f64(13);
  r.at = q.f64(14);
  return r;
}

LlmCallRow read_llm_call(const Stmt& q) {
  LlmCallRow r;
  r.request_id = q.text(0);
  r.episode_id = q.text(1);
  r.turn = q.i32(2);
  r.model_id = q.text(3);
  r.state = q.text(4);
  r.started_at = q.f64(5);
  r.finished_at = q.f64(6);
  r.content = q.text(7);
  r.reasoning = q.text(8);
  r.finish_reason = q.text(9);
  r.prompt_tokens = q.i64(10);
  r.completion_tokens = q.i64(11);
  r.cached_tokens = q.i64(12);
  r.reasoning_tokens = q.i64(13);
  r.cost_usd = q.f64(14);
  r.latency_s = q.f64(15);
  r.http_attempts = q.i32(16);
  r.attempts_json = q.text(17);
  r.provider_request_id = q.text(18);
  r.failure = q.text(19);
  r.error = q.text(20);
  r.dup_possible = q.i64(21) != 0;
  r.sends = q.i32(22);
  return r;
}

EvaluationRow read_evaluation(const Stmt& q) {
  EvaluationRow r;
  r.request_id = q.text(0);
  r.episode_id = q.text(1);
  r.kind = q.text(2);
  r.code_sha = q.text(3);
  r.state = q.text(4);
  r.owner = q.text(5);
  r.attempts = q.i32(6);
  r.verdict = q.text(7);
  r.report_json = q.text(8);
  r.evaluator_version = q.text(9);
  r.created_at = q.f64(10);
  r.finished_at = q.f64(11);
  r.failures = q.i32(12);
  return r;
}

EventRow read_event(const Stmt& q) {
  EventRow r;
  r.episode_id = q.text(0);
  r.turn = q.i32(1);
  r.kind = q.text(2);
  r.detail = q.text(3);
  r.at = q.f64(4);
  return r;
}

FinalRow read_final(const Stmt& q) {
  FinalRow r;
  r.episode_id = q.text(0);
  r.reason = q.text(1);
  r.verdict = q.text(2);
  r.request_id = q.text(3);
  r.speedup = q.opt_f64(4);
  r.reward = q.f64(5);
  r.correct = q.i64(6) != 0;
  r.at = q.f64(7);
  return r;
}

template <typename Row, typename Reader, typename... Args>
std::vector<Row> query_rows(Db& db, const std::string& text, Reader reader, const Args&... args) {
  Stmt& q = db.stmt(text);
  q.bind(args...);
  std::vector<Row> rows;
  while (q.step()) rows.push_back(reader(q));
  return rows;
}

template <typename Row, typename Reader, typename... Args>
std::optional<Row> query_one(Db& db, const std::string& text, Reader reader, const Args&... args) {
  Stmt& q = db.stmt(text);
  q.bind(args...);
  std::optional<Row> row;
  if (q.step()) row = reader(q);
  q.run();
  return row;
}

// Loads snapshots of the episodes `snap` selects, one query per table.
std::vector<EpisodeSnapshot> load_snapshots(Db& db, const SnapshotSql& snap, const std::string& key) {
  std::vector<EpisodeSnapshot> out;
  std::unordered_map<std::string, std::size_t> index;
  {
    Stmt& q = db.stmt(snap.episodes);
    q.bind(key);
    while (q.step()) {
      EpisodeSnapshot s;
      s.episode = read_episode(q);
      index.emplace(s.episode.id, out.size());
      out.push_back(std::move(s));
    }
  }
  if (out.empty()) return out;
  auto find = [&](const std::string& episode_id) -> EpisodeSnapshot* {
    auto it = index.find(episode_id);
    return it == index.end() ? nullptr : &out[it->second];
  };
  {
    Stmt& q = db.stmt(snap.messages);
    q.bind(key);
    while (q.step()) {
      MessageRow m = read_message(q);
      if (auto* s = find(m.episode_id)) {
        s->epoch = m.epoch;
        s->messages.push_back(std::move(m));
      }
    }
  }
  {
    Stmt& q = db.stmt(snap.turns);
    q.bind(key);
    while (q.step()) {
      TurnRow t = read_turn(q);
      if (auto* s = find(t.episode_id)) s->turns.push_back(std::move(t));
    }
  }
  {
    Stmt& q = db.stmt(snap.llm_calls);
    q.bind(key);
    while (q.step()) {
      LlmCallRow l = read_llm_call(q);
      if (auto* s = find(l.episode_id)) s->llm_calls.push_back(std::move(l));
    }
  }
  {
    Stmt& q = db.stmt(snap.evaluations);
    q.bind(key);
    while (q.step()) {
      EvaluationRow v = read_evaluation(q);
      if (auto* s = find(v.episode_id)) s->evaluations.push_back(std::move(v));
    }
  }
  {
    Stmt& q = db.stmt(snap.finals);
    q.bind(key);
    while (q.step()) {
      FinalRow f = read_final(q);
      if (auto* s = find(f.episode_id)) s->final = std::move(f);
    }
  }
  {
    Stmt& q = db.stmt(snap.events);
    q.bind(key);
    while (q.step()) {
      EventRow v = read_event(q);
      if (auto* s = find(v.episode_id)) s->events.push_back(std::move(v));
    }
  }
  // Rows arrive grouped by episode in index order; sort in memory rather than
  // have SQLite sort whole rows.
  for (auto& s : out) {
    std::sort(s.messages.begin(), s.messages.end(),
              [](const MessageRow& a, const MessageRow& b) { return a.seq < b.seq; });
    std::sort(s.turns.begin(), s.turns.end(),
              [](const TurnRow& a, const TurnRow& b) { return a.turn < b.turn; });
    std::sort(s.llm_calls.begin(), s.llm_calls.end(), [](const LlmCallRow& a, const LlmCallRow& b) {
      return a.turn != b.turn ? a.turn < b.turn : a.started_at < b.started_at;
    });
    std::sort(s.evaluations.begin(), s.evaluations.end(), [](const EvaluationRow& a, const EvaluationRow& b) {
      return a.created_at != b.created_at ? a.created_at < b.created_at : a.request_id < b.request_id;
    });
  }
  std::sort(out.begin(), out.end(), [](const EpisodeSnapshot& a, const EpisodeSnapshot& b) {
    return a.episode.created_at != b.episode.created_at ? a.episode.created_at < b.episode.created_at
                                                        : a.episode.id < b.episode.id;
  });
  return out;
}

// --- writes --------------------------------------------------------------------

// A failure of one operation of a batch that is not an SQLite error.
class BatchError : public korch::Fatal {
 public:
  using korch::Fatal::Fatal;
};

// Applies one operation inside the open transaction, enforcing the conflict
// rules of store.hpp. Throws on failure.
void apply_op(Db& db, const WriteBatch::Op& op, CommitInfo& info) {
  const Sql& s = sql();
  std::visit(
      Overloaded{
          [&](const CampaignRow& r) {
            db.stmt(s.insert_campaign)
                .bind(r.id, r.name, r.config_json, static_cast<std::int64_t>(r.secret_seed), r.created_at)
                .run();
          },
          [&](const TaskRow& r) {
            db.stmt(s.insert_task)
                .bind(r.campaign_id, r.task_id, r.level, r.number, r.name, r.path, r.source)
                .run();
          },
          [&](const EpisodeRow& r) {
            db.stmt(s.insert_episode)
                .bind(r.id, r.campaign_id, r.task_id, r.model_id, r.sample_index, r.status, r.active_s,
                      r.tokens_used, r.cost_usd, r.created_at, r.updated_at)
                .run();
            if (db.changes() == 0) return;  // insert if absent
            db.stmt("INSERT INTO episode_prompts (episode_id, system_prompt) VALUES (?1, ?2)")
                .bind(r.id, r.system_prompt)
                .run();
          },
          [&](const EpisodeUpdate& u) {
            // A final episode keeps its status; RETURNING tells what is stored.
            Stmt& q = db.stmt(
                "UPDATE episodes SET status = CASE WHEN status = 'final' THEN status ELSE COALESCE(?2, "
                "status) END, "
                "active_s = COALESCE(?3, active_s), tokens_used = COALESCE(?4, tokens_used), "
                "cost_usd = COALESCE(?5, cost_usd), updated_at = ?6 WHERE id = ?1 RETURNING status");
            q.bind(u.id, u.status, u.active_s, u.tokens_used, u.cost_usd, now_unix());
            if (!q.step()) throw BatchError(db.path() + ": episode update: no episode " + u.id);
            std::string stored = q.text(0);
            q.run();
            if (u.status && *u.status != stored) {
              info.conflicts.push_back("episode " + u.id + " is final; status " + *u.status + " ignored");
            }
          },
          [&](const MessageRow& r) {
            db.stmt(s.insert_message)
                .bind(r.episode_id, r.epoch, r.seq, r.role, r.kind, r.turn, r.content)
                .run();
          },
          [&](const TurnRow& r) {
            db.stmt(s.insert_turn)
                .bind(r.episode_id, r.turn, r.model_id, r.llm_request_id, r.action, r.parse_status, r.code,
                      r.code_sha, r.eval_request_id, r.eval_status, r.finish_reason, r.prompt_tokens,
                      r.completion_tokens, r.llm_latency_s, r.at)
                .run();
            if (db.changes() == 0) {
              info.conflicts.push_back("turn " + r.episode_id + ":" + std::to_string(r.turn) + " exists");
            }
          },
          [&](const LlmCallRow& r) {
            db.stmt(s.upsert_llm_call)
                .bind(r.request_id, r.episode_id, r.turn, r.model_id, r.state, r.started_at, r.finished_at,
                      r.content, r.reasoning, r.finish_reason, r.prompt_tokens, r.completion_tokens,
                      r.cached_tokens, r.reasoning_tokens, r.cost_usd, r.latency_s, r.http_attempts,
                      r.attempts_json, r.provider_request_id, r.failure, r.error, r.dup_possible, r.sends)
                .run();
            if (db.changes() == 0) info.conflicts.push_back("llm_call " + r.request_id + " is done");
          },
          [&](const EvaluationRow& r) {
            db.stmt(s.upsert_evaluation)
                .bind(r.request_id, r.episode_id, r.kind, r.code_sha, r.state, r.owner, r.attempts, r.verdict,
                      r.report_json, r.evaluator_version, r.created_at, r.finished_at, r.failures)
                .run();
            if (db.changes() == 0) info.conflicts.push_back("evaluation " + r.request_id + " is done");
          },
          [&](const EventRow& r) {
            db.stmt(s.insert_event).bind(r.episode_id, r.turn, r.kind, r.detail, r.at).run();
          },
          [&](const FinalRow& r) {
            db.stmt(s.insert_final)
                .bind(r.episode_id, r.reason, r.verdict, r.request_id, r.speedup, r.reward, r.correct, r.at)
                .run();
            if (db.changes() == 0) {
              info.conflicts.push_back("final " + r.episode_id + " exists");
              return;
            }
            db.stmt("UPDATE episodes SET status = 'final', updated_at = ?2 WHERE id = ?1")
                .bind(r.episode_id, now_unix())
                .run();
          },
      },
      op);
}

CommitInfo apply_batch(Db& db, const WriteBatch& batch) {
  CommitInfo info;
  for (const auto& op : batch.ops()) apply_op(db, op, info);
  return info;
}

// The largest schema version recorded in the file: PRAGMA user_version or
// the schema_migrations table, whichever is larger.
int recorded_version(Db& db) {
  auto version = db.query_i64("PRAGMA user_version");
  bool has_table =
      db.query_i64("SELECT count(*) FROM sqlite_master WHERE type = 'table' AND name = 'schema_migrations'") >
      0;
  if (has_table)
    version = std::max(version, db.query_i64("SELECT COALESCE(MAX(version), 0) FROM schema_migrations"));
  return static_cast<int>(version);
}

std::string newer_message(const std::string& path, int version) {
  return path + ": schema version " + std::to_string(version) + " is newer than this korch (" +
         std::to_string(k_schema_version) + "); upgrade korch";
}

// Applies the missing migrations in one write transaction.
void migrate(Db& db) {
  Txn txn(db, Txn::Kind::immediate);
  db.exec(
      "CREATE TABLE IF NOT EXISTS schema_migrations (version INTEGER PRIMARY KEY, applied_at REAL NOT NULL)",
      "creating schema_migrations");
  int version = recorded_version(db);
  if (version > k_schema_version) throw BatchError(newer_message(db.path(), version));
  if (version == k_schema_version) return;  // nothing to do; the txn rolls back
  for (const auto& m : detail::migrations()) {
    if (m.version <= version) continue;
    db.exec(m.sql, "applying migration " + std::to_string(m.version));
    db.stmt("INSERT INTO schema_migrations (version, applied_at) VALUES (?1, ?2)")
        .bind(m.version, now_unix())
        .run();
    KLOG_INFO("[store] {}: applied schema migration {}", db.path(), m.version);
  }
  db.exec("PRAGMA user_version = " + std::to_string(k_schema_version), "setting user_version");
  txn.commit();
}

// Pool of read-only connections. A caller checks one out for the duration of
// one read, so no connection is ever used by two threads at once and reads
// never wait for the writer.
class ReadPool {
 public:
  ReadPool(std::string path, int busy_timeout_ms)
      : m_path(std::move(path)), m_busy_timeout_ms(busy_timeout_ms) {}

  class Handle {
   public:
    Handle(ReadPool& pool, std::unique_ptr<Db> db) : m_pool(pool), m_db(std::move(db)) {}
    ~Handle() { m_pool.give_back(std::move(m_db)); }
    Handle(const Handle&) = delete;
    Handle& operator=(const Handle&) = delete;
    Db& db() { return *m_db; }

   private:
    ReadPool& m_pool;
    std::unique_ptr<Db> m_db;
  };

  // Checks out an idle connection or opens a new one. Throws SqliteError.
  Handle take() {
    {
      std::lock_guard lock(m_mutex);
      if (!m_idle.empty()) {
        auto db = std::move(m_idle.back());
        m_idle.pop_back();
        return Handle(*this, std::move(db));
      }
    }
    auto db = std::make_unique<Db>(m_path, Db::Mode::read_only, m_busy_timeout_ms);
    db->exec("PRAGMA mmap_size = " + std::to_string(k_reader_mmap_bytes), "setting mmap_size");
    return Handle(*this, std::move(db));
  }

 private:
  void give_back(std::unique_ptr<Db> db) {
    std::lock_guard lock(m_mutex);
    if (db && m_idle.size() < k_max_idle_readers) m_idle.push_back(std::move(db));
  }

  std::string m_path;
  int m_busy_timeout_ms;
  std::mutex m_mutex;
  std::vector<std::unique_ptr<Db>> m_idle;
};

void invoke_safely(const CommitCallback& done, Result<CommitInfo> result) {
  if (!done) return;
  try {
    done(std::move(result));
  } catch (const std::exception& e) {
    KLOG_ERROR("[store] commit callback threw: {}", e.what());
  } catch (...) {
    KLOG_ERROR("[store] commit callback threw a non-standard exception");
  }
}

// --- the store -------------------------------------------------------------------

class StoreImpl final : public Store {
 public:
  StoreImpl(Options options, std::unique_ptr<Db> writer_db)
      : m_options(std::move(options)),
        m_writer_db(std::move(writer_db)),
        m_readers(m_options.path, m_options.busy_timeout_ms) {
    if (m_writer_db) {
      m_writer = std::thread([this] { writer_main(); });
      m_writer_id = m_writer.get_id();
    } else {
      m_stopping = true;  // read-only: no writer
    }
  }

  ~StoreImpl() override {
    close();
    std::lock_guard lock(m_join_mutex);
    if (m_writer.joinable()) m_writer.detach();  // only when destroyed from its own callback
  }

  void commit(WriteBatch batch, CommitCallback done) override {
    {
      std::unique_lock lock(m_mutex);
      if (!m_stopping) {
        m_queue.push_back(Job{std::move(batch), std::move(done), {}});
        lock.unlock();
        m_cv.notify_one();
        return;
      }
    }
    invoke_safely(done, fail(closed_message()));
  }

  Result<CommitInfo> commit_sync(WriteBatch batch) override {
    if (on_writer_thread()) {
      // Called from a commit callback: the writer is between transactions.
      return run_alone(batch);
    }
    auto promise = std::make_shared<std::promise<Result<CommitInfo>>>();
    auto future = promise->get_future();
    commit(std::move(batch), [promise](Result<CommitInfo> r) { promise->set_value(std::move(r)); });
    return future.get();
  }

  void close() override {
    {
      std::lock_guard lock(m_mutex);
      m_stopping = true;
    }
    m_cv.notify_all();
    if (on_writer_thread()) return;  // the loop ends after draining; the destructor joins
    std::lock_guard lock(m_join_mutex);
    if (m_writer.joinable()) m_writer.join();
  }

  // --- leases ----------------------------------------------------------------

  Result<std::optional<Lease>> acquire_lease(const std::string& campaign_id, const std::string& owner,
                                             double ttl_s) override {
    return run_task<std::optional<Lease>>([&](Db& db) -> std::optional<Lease> {
      Txn txn(db, Txn::Kind::immediate);
      double now = now_unix();
      auto held = current_lease(db, campaign_id);
      if (held && held->owner != owner && held->expires_at > now) return held;
      db.stmt(
            "INSERT INTO leases (campaign_id, owner, heartbeat_at, expires_at) VALUES (?1, ?2, ?3, ?4) "
            "ON CONFLICT (campaign_id) DO UPDATE SET owner = excluded.owner, "
            "heartbeat_at = excluded.heartbeat_at, expires_at = excluded.expires_at")
          .bind(campaign_id, owner, now, now + ttl_s)
          .run();
      txn.commit();
      return std::nullopt;
    });
  }

  Result<void> heartbeat_lease(const std::string& campaign_id, const std::string& owner,
                               double ttl_s) override {
    auto r = run_task<std::string>([&](Db& db) -> std::string {
      Txn txn(db, Txn::Kind::immediate);
      double now = now_unix();
      db.stmt("UPDATE leases SET heartbeat_at = ?3, expires_at = ?4 WHERE campaign_id = ?1 AND owner = ?2")
          .bind(campaign_id, owner, now, now + ttl_s)
          .run();
      if (db.changes() == 0) {
        auto held = current_lease(db, campaign_id);
        return "campaign " + campaign_id + ": lease lost" +
               (held ? " (now held by " + held->owner + ")" : "");
      }
      txn.commit();
      return {};
    });
    if (!r) return std::unexpected(r.error());
    if (!r->empty()) return fail(*r);
    return {};
  }

  Result<void> release_lease(const std::string& campaign_id, const std::string& owner) override {
    auto r = run_task<bool>([&](Db& db) {
      Txn txn(db, Txn::Kind::immediate);
      db.stmt("DELETE FROM leases WHERE campaign_id = ?1 AND owner = ?2").bind(campaign_id, owner).run();
      txn.commit();
      return true;
    });
    if (!r) return std::unexpected(r.error());
    return {};
  }

  // --- reads -----------------------------------------------------------------

  Result<std::optional<CampaignRow>> get_campaign(const std::string& id) override {
    return read<std::optional<CampaignRow>>(
        [&](Db& db) { return query_one<CampaignRow>(db, sql().get_campaign, read_campaign, id); });
  }

  Result<std::vector<CampaignRow>> list_campaigns() override {
    return read<std::vector<CampaignRow>>(
        [&](Db& db) { return query_rows<CampaignRow>(db, sql().list_campaigns, read_campaign); });
  }

  Result<std::vector<TaskRow>> list_tasks(const std::string& campaign_id) override {
    return read<std::vector<TaskRow>>(
        [&](Db& db) { return query_rows<TaskRow>(db, sql().list_tasks, read_task, campaign_id); });
  }

  Result<std::vector<EpisodeRow>> list_episodes(const std::string& campaign_id) override {
    return read<std::vector<EpisodeRow>>(
        [&](Db& db) { return query_rows<EpisodeRow>(db, sql().list_episodes, read_episode, campaign_id); });
  }

  Result<std::vector<EpisodeSnapshot>> load_unfinished(const std::string& campaign_id) override {
    return read<std::vector<EpisodeSnapshot>>(
        [&](Db& db) { return load_snapshots(db, sql().unfinished, campaign_id); });
  }

  Result<std::optional<EpisodeSnapshot>> load_episode(const std::string& episode_id) override {
    return read<std::optional<EpisodeSnapshot>>([&](Db& db) -> std::optional<EpisodeSnapshot> {
      auto all = load_snapshots(db, sql().one_episode, episode_id);
      if (all.empty()) return std::nullopt;
      return std::move(all.front());
    });
  }

  Result<std::optional<EvaluationRow>> get_evaluation(const std::string& request_id) override {
    return read<std::optional<EvaluationRow>>([&](Db& db) {
      return query_one<EvaluationRow>(db, sql().get_evaluation, read_evaluation, request_id);
    });
  }

  Result<std::optional<LlmCallRow>> get_llm_call(const std::string& request_id) override {
    return read<std::optional<LlmCallRow>>(
        [&](Db& db) { return query_one<LlmCallRow>(db, sql().get_llm_call, read_llm_call, request_id); });
  }

  Result<std::vector<TurnRow>> list_turns(const std::string& campaign_id) override {
    return read<std::vector<TurnRow>>(
        [&](Db& db) { return query_rows<TurnRow>(db, sql().list_turns, read_turn, campaign_id); });
  }

  Result<std::vector<LlmCallRow>> list_llm_calls(const std::string& campaign_id) override {
    return read<std::vector<LlmCallRow>>(
        [&](Db& db) { return query_rows<LlmCallRow>(db, sql().list_llm_calls, read_llm_call, campaign_id); });
  }

  Result<std::vector<EvaluationRow>> list_evaluations(const std::string& campaign_id) override {
    return read<std::vector<EvaluationRow>>([&](Db& db) {
      return query_rows<EvaluationRow>(db, sql().list_evaluations, read_evaluation, campaign_id);
    });
  }

  Result<std::vector<FinalRow>> list_finals(const std::string& campaign_id) override {
    return read<std::vector<FinalRow>>(
        [&](Db& db) { return query_rows<FinalRow>(db, sql().list_finals, read_final, campaign_id); });
  }

  Result<std::vector<EventRow>> list_events(const std::string& campaign_id) override {
    return read<std::vector<EventRow>>(
        [&](Db& db) { return query_rows<EventRow>(db, sql().list_events, read_event, campaign_id); });
  }

  Result<CampaignCounts> counts(const std::string& campaign_id) override {
    return read<CampaignCounts>([&](Db& db) {
      CampaignCounts c;
      {
        Stmt& q = db.stmt(
            "SELECT count(*), COALESCE(SUM(status = 'pending'), 0), COALESCE(SUM(status = 'running'), 0), "
            "COALESCE(SUM(status = 'final'), 0) FROM episodes WHERE campaign_id = ?1");
        q.bind(campaign_id);
        if (q.step()) {
          c.episodes = q.i64(0);
          c.pending = q.i64(1);
          c.running = q.i64(2);
          c.final = q.i64(3);
        }
        q.run();
      }
      {
        Stmt& q = db.stmt(
            "SELECT count(*) FROM episodes e JOIN turns t ON t.episode_id = e.id WHERE e.campaign_id = ?1");
        q.bind(campaign_id);
        if (q.step()) c.turns = q.i64(0);
        q.run();
      }
      {
        Stmt& q = db.stmt(
            "SELECT count(*), COALESCE(SUM(l.prompt_tokens), 0), COALESCE(SUM(l.completion_tokens), 0), "
            "TOTAL(l.cost_usd) FROM episodes e JOIN llm_calls l ON l.episode_id = e.id WHERE e.campaign_id = "
            "?1");
        q.bind(campaign_id);
        if (q.step()) {
          c.llm_calls = q.i64(0);
          c.prompt_tokens = q.i64(1);
          c.completion_tokens = q.i64(2);
          c.cost_usd = q.f64(3);
        }
        q.run();
      }
      {
        Stmt& q = db.stmt(
            "SELECT COALESCE(SUM(f.reason = 'submitted'), 0), COALESCE(SUM(f.correct != 0), 0) "
            "FROM episodes e JOIN finals f ON f.episode_id = e.id WHERE e.campaign_id = ?1");
        q.bind(campaign_id);
        if (q.step()) {
          c.submitted = q.i64(0);
          c.correct = q.i64(1);
        }
        q.run();
      }
      return c;
    });
  }

  Result<int> schema_version() override {
    return read<int>([&](Db& db) { return recorded_version(db); });
  }

 private:
  // A queued unit of writer work: a batch (with its callback), or a task
  // (lease operations) that runs alone with its own transaction.
  struct Job {
    WriteBatch batch;
    CommitCallback done;
    std::function<void(Db&)> task;
  };

  bool on_writer_thread() const { return std::this_thread::get_id() == m_writer_id; }

  std::string closed_message() const {
    return m_options.path + (m_options.read_only ? ": store is open read-only" : ": store is closed");
  }

  static std::optional<Lease> current_lease(Db& db, const std::string& campaign_id) {
    Stmt& q = db.stmt("SELECT owner, heartbeat_at, expires_at FROM leases WHERE campaign_id = ?1");
    q.bind(campaign_id);
    std::optional<Lease> lease;
    if (q.step()) lease = Lease{campaign_id, q.text(0), q.f64(1), q.f64(2)};
    q.run();
    return lease;
  }

  // Runs `fn` on the writer thread (in queue order) and returns its value.
  template <typename T, typename F>
  Result<T> run_task(F&& fn) {
    auto promise = std::make_shared<std::promise<Result<T>>>();
    auto future = promise->get_future();
    auto body = [promise, &fn](Db& db) {
      try {
        promise->set_value(fn(db));
      } catch (const std::exception& e) {
        promise->set_value(fail(e.what()));
      }
    };
    if (on_writer_thread()) {
      body(*m_writer_db);
      return future.get();
    }
    {
      std::unique_lock lock(m_mutex);
      if (m_stopping) return fail(closed_message());
      m_queue.push_back(Job{{}, {}, body});
    }
    m_cv.notify_one();
    return future.get();
  }

  template <typename T, typename F>
  Result<T> read(F&& fn) {
    try {
      auto handle = m_readers.take();
      std::optional<T> out;
      detail::retry_busy(
          [&] {
            Txn txn(handle.db(), Txn::Kind::deferred);
            out.emplace(fn(handle.db()));
            txn.commit();
          },
          m_options.busy_timeout_ms);
      return std::move(*out);
    } catch (const std::exception& e) {
      return fail(e.what());
    }
  }

  Result<CommitInfo> run_alone(const WriteBatch& batch) {
    try {
      Txn txn(*m_writer_db, Txn::Kind::immediate);
      CommitInfo info = apply_batch(*m_writer_db, batch);
      txn.commit();
      return info;
    } catch (const std::exception& e) {
      return fail(e.what());
    }
  }

  // Commits `group` in one transaction. When a batch fails, that batch gets
  // the error and the transaction is rolled back and retried without it, so
  // only bad batches fail. A failure outside any batch (BEGIN, COMMIT) fails
  // the whole group. Callbacks run after COMMIT returned.
  void run_group(std::vector<Job>& group) {
    std::vector<std::optional<Result<CommitInfo>>> results(group.size());
    for (;;) {
      std::vector<std::size_t> pending;
      for (std::size_t i = 0; i < group.size(); ++i) {
        if (!results[i]) pending.push_back(i);
      }
      if (pending.empty()) break;
      std::optional<std::size_t> failed;  // index into group
      std::vector<CommitInfo> infos(pending.size());
      try {
        Txn txn(*m_writer_db, Txn::Kind::immediate);
        for (std::size_t k = 0; k < pending.size(); ++k) {
          failed = pending[k];
          infos[k] = apply_batch(*m_writer_db, group[pending[k]].batch);
        }
        failed.reset();
        txn.commit();
        for (std::size_t k = 0; k < pending.size(); ++k) results[pending[k]] = std::move(infos[k]);
      } catch (const std::exception& e) {
        if (failed) {
          KLOG_WARN("[store] batch failed, retrying the rest of its group: {}", e.what());
          results[*failed] = fail(e.what());
        } else {
          for (auto i : pending) results[i] = fail(e.what());
        }
      }
    }
    for (std::size_t i = 0; i < group.size(); ++i) invoke_safely(group[i].done, std::move(*results[i]));
  }

  void writer_main() {
    pthread_setname_np(pthread_self(), "korch-store-w");
    for (;;) {
      std::vector<Job> group;
      {
        std::unique_lock lock(m_mutex);
        m_cv.wait(lock, [&] { return !m_queue.empty() || m_stopping; });
        if (m_queue.empty()) break;
        if (m_queue.front().task) {
          group.push_back(std::move(m_queue.front()));
          m_queue.pop_front();
        } else {
          auto limit = static_cast<std::size_t>(std::max(1, m_options.max_batches_per_txn));
          while (!m_queue.empty() && !m_queue.front().task && group.size() < limit) {
            group.push_back(std::move(m_queue.front()));
            m_queue.pop_front();
          }
        }
      }
      try {
        if (group.front().task) {
          group.front().task(*m_writer_db);
        } else {
          run_group(group);
        }
      } catch (const std::exception& e) {
        KLOG_ERROR("[store] writer: {}", e.what());
      } catch (...) {
        KLOG_ERROR("[store] writer: non-standard exception");
      }
    }
    try {
      m_writer_db.reset();
    } catch (...) {
    }
  }

  Options m_options;
  std::unique_ptr<Db> m_writer_db;
  ReadPool m_readers;
  std::mutex m_mutex;
  std::condition_variable m_cv;
  std::deque<Job> m_queue;
  bool m_stopping = false;
  std::mutex m_join_mutex;
  std::thread m_writer;
  std::thread::id m_writer_id;  // set once in the constructor
};

std::string upper(std::string s) {
  for (auto& c : s) c = static_cast<char>(std::toupper(static_cast<unsigned char>(c)));
  return s;
}

// Turns SQLite's wording for a non-database file into one line naming the path.
std::string describe_open_error(const std::string& path, const SqliteError& e) {
  int primary = e.code() & 0xff;
  if (primary == SQLITE_NOTADB) return path + ": not a SQLite database (corrupt or not a korch.db)";
  if (primary == SQLITE_CORRUPT) return path + ": database is corrupt";
  return e.what();
}

Result<std::unique_ptr<Store>> open_store(const Options& options) {
  const std::string& path = options.path;
  if (path.empty()) return fail("store: empty database path");
  std::string sync = upper(options.synchronous);
  if (sync != "OFF" && sync != "NORMAL" && sync != "FULL" && sync != "EXTRA") {
    return fail(path + ": synchronous must be OFF, NORMAL, FULL or EXTRA, not '" + options.synchronous + "'");
  }
  if (options.max_batches_per_txn < 1) return fail(path + ": max_batches_per_txn must be at least 1");

  struct stat st {};
  bool exists = ::stat(path.c_str(), &st) == 0;
  if (exists && !S_ISREG(st.st_mode)) return fail(path + ": not a regular file");
  if (!exists && options.read_only) return fail(path + ": no such database");
  // Respect a write-protected file even when running as root (where SQLite
  // itself would happily write to it).
  if (exists && !options.read_only && (st.st_mode & (S_IWUSR | S_IWGRP | S_IWOTH)) == 0) {
    return fail(path + ": database file is read-only; open it read-only (status/export) or make it writable");
  }

  try {
    auto mode = options.read_only ? Db::Mode::read_only : Db::Mode::read_write;
    auto db = std::make_unique<Db>(path, mode, options.busy_timeout_ms);
    if (!options.read_only && sqlite3_db_readonly(db->get(), "main") == 1) {
      return fail(path +
                  ": database file is read-only; open it read-only (status/export) or make it writable");
    }
    // Touches the file: a non-database fails here with SQLITE_NOTADB.
    int version = 0;
    detail::retry_busy([&] { version = recorded_version(*db); }, options.busy_timeout_ms);
    if (version > k_schema_version) return fail(newer_message(path, version));

    if (options.read_only) {
      if (version < k_schema_version) {
        return fail(path + ": schema version " + std::to_string(version) + " is older than this korch (" +
                    std::to_string(k_schema_version) + "); open it once for writing to migrate");
      }
      db.reset();
      return std::unique_ptr<Store>(std::make_unique<StoreImpl>(options, nullptr));
    }

    db->exec("PRAGMA page_size = " + std::to_string(k_page_size), "setting page_size");
    std::string journal;
    detail::retry_busy([&] { journal = db->query_text("PRAGMA journal_mode = WAL"); },
                       options.busy_timeout_ms);
    if (upper(journal) != "WAL")
      return fail(path + ": cannot switch to WAL mode (journal_mode is " + journal + ")");
    db->exec("PRAGMA synchronous = " + sync, "setting synchronous");
    db->exec("PRAGMA foreign_keys = ON", "enabling foreign keys");
    db->exec("PRAGMA cache_size = -" + std::to_string(k_writer_cache_kib), "setting cache_size");
    db->exec("PRAGMA wal_autocheckpoint = " + std::to_string(k_wal_autocheckpoint_pages),
             "setting wal_autocheckpoint");
    migrate(*db);
    return std::unique_ptr<Store>(std::make_unique<StoreImpl>(options, std::move(db)));
  } catch (const SqliteError& e) {
    return fail(describe_open_error(path, e));
  } catch (const std::exception& e) {
    return fail(e.what());
  }
}

}  // namespace

Result<std::unique_ptr<Store>> Store::open(const Options& options) { return open_store(options); }

}  // namespace korch::store
