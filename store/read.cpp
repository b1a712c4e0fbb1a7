// The read side of the SQLite backend: the read connection pool, the row
// queries and episode snapshots. Column lists and readers come from the
// codecs (codec_internal.hpp).
#include <algorithm>
#include <unordered_map>
#include <utility>

#include "store/codec_internal.hpp"
#if KORCH_WITH_POSTGRES
#include "store/pg_internal.hpp"
#endif
#include "store/read_internal.hpp"

namespace korch::store::detail {
namespace {

// Read connections map the database file (address space only) so that a
// resume of thousands of episodes copies pages once.
constexpr std::int64_t k_reader_mmap_bytes = std::int64_t{1} << 32;
// Idle read connections kept open for reuse.
constexpr std::size_t k_max_idle_readers = 16;

// --- episodes: two tables, one row ------------------------------------------

// "p.episode_id, p.system_prompt, e.id, e.campaign_id, ..." from
// k_episode_from. The prompt comes first: read_episode reads it, then the
// episode's own columns, so that e.id (never NULL) overwrites p.episode_id
// (NULL when an episode has no prompt row; read as "").
std::string episode_select() {
  return column_list(k_episode_prompts, "p") + ", " + column_list(k_episodes, "e");
}
constexpr std::string_view k_episode_from =
    "episodes e LEFT JOIN episode_prompts p ON p.episode_id = e.id";

template <typename Q>
EpisodeRow read_episode(const Q& q) {
  EpisodeRow r;
  read_into(k_episode_prompts, q, r, 0);
  read_into(k_episodes, q, r, decltype(k_episode_prompts)::k_size);
  return r;
}

// --- SQL text, generated once from the codecs --------------------------------

// "SELECT a.<cols> FROM episodes e JOIN <table> a ON a.episode_id = e.id"
template <typename C>
std::string select_by_episode(const C& codec, std::string_view alias) {
  return "SELECT " + column_list(codec, alias) + " FROM episodes e JOIN " +
         std::string(codec.table) + " " + std::string(alias) + " ON " + std::string(alias) +
         ".episode_id = e.id";
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
  s.episodes = "SELECT " + episode_select() + " FROM " + std::string(k_episode_from) + where;
  s.messages = select_by_episode(k_messages, "m") + where +
               " AND m.epoch = (SELECT MAX(x.epoch) FROM messages x WHERE x.episode_id = e.id)";
  s.turns = select_by_episode(k_turns, "t") + where;
  s.llm_calls = select_by_episode(k_llm_calls, "l") + where;
  s.evaluations = select_by_episode(k_evaluations, "v") + where;
  s.finals = select_by_episode(k_finals, "f") + where;
  s.events = select_by_episode(k_events, "v") + where + " ORDER BY v.id";
  return s;
}

struct Sql {
  std::string get_campaign = "SELECT " + column_list(k_campaigns) + " FROM campaigns WHERE id = ?1";
  std::string list_campaigns =
      "SELECT " + column_list(k_campaigns) + " FROM campaigns ORDER BY created_at, id";
  std::string list_tasks = "SELECT " + column_list(k_tasks) +
                           " FROM tasks WHERE campaign_id = ?1 ORDER BY level, number, task_id";
  // Summaries only: the prompts stay unread (episode_prompts is not joined).
  std::string list_episodes = "SELECT " + column_list(k_episodes) +
                              " FROM episodes WHERE campaign_id = ?1 ORDER BY created_at, id";
  std::string get_evaluation =
      "SELECT " + column_list(k_evaluations) + " FROM evaluations WHERE request_id = ?1";
  std::string get_llm_call =
      "SELECT " + column_list(k_llm_calls) + " FROM llm_calls WHERE request_id = ?1";
  std::string get_lease = "SELECT " + column_list(k_leases) + " FROM leases WHERE campaign_id = ?1";
  std::string list_messages = select_by_episode(k_messages, "m") +
                              " WHERE e.campaign_id = ?1 ORDER BY m.episode_id, m.epoch, m.seq";
  std::string list_turns =
      select_by_episode(k_turns, "t") + " WHERE e.campaign_id = ?1 ORDER BY t.episode_id, t.turn";
  std::string list_llm_calls =
      select_by_episode(k_llm_calls, "l") +
      " WHERE e.campaign_id = ?1 ORDER BY l.episode_id, l.turn, l.started_at";
  std::string list_evaluations = select_by_episode(k_evaluations, "v") +
                                 " WHERE e.campaign_id = ?1 ORDER BY v.episode_id, v.created_at";
  std::string list_finals =
      select_by_episode(k_finals, "f") + " WHERE e.campaign_id = ?1 ORDER BY f.episode_id";
  std::string list_events =
      select_by_episode(k_events, "v") + " WHERE e.campaign_id = ?1 ORDER BY v.id";

  SnapshotSql unfinished = make_snapshot_sql(k_unfinished_filter);
  SnapshotSql one_episode = make_snapshot_sql(k_one_episode_filter);
};

const Sql& sql() {
  static const Sql s;
  return s;
}

template <typename Row, typename DbT, typename Reader, typename... Args>
std::vector<Row> query_rows(DbT& db, const std::string& text, Reader reader, const Args&... args) {
  auto& q = db.stmt(text);
  q.bind(args...);
  std::vector<Row> rows;
  while (q.step()) rows.push_back(reader(q));
  return rows;
}

template <typename Row, typename DbT, typename Reader, typename... Args>
std::optional<Row> query_one(DbT& db, const std::string& text, Reader reader, const Args&... args) {
  auto& q = db.stmt(text);
  q.bind(args...);
  std::optional<Row> row;
  if (q.step()) row = reader(q);
  q.run();
  return row;
}

// A reader of the codec's row type (for query_rows / query_one).
template <typename C>
auto reader(const C& codec) {
  return [&codec](const auto& q) { return read_row(codec, q); };
}

// Runs `text` (bound to `key`) and hands each row, read with `codec`, to
// `add`.
template <typename DbT, typename C, typename Add>
void each_row(DbT& db, const std::string& text, const C& codec, const std::string& key, Add add) {
  auto& q = db.stmt(text);
  q.bind(key);
  while (q.step()) add(read_row(codec, q));
}

// Loads snapshots of the episodes `snap` selects, one query per table.
template <typename DbT>
std::vector<EpisodeSnapshot> load_snapshots(DbT& db, const SnapshotSql& snap,
                                            const std::string& key) {
  std::vector<EpisodeSnapshot> out;
  std::unordered_map<std::string, std::size_t> index;
  {
    auto& q = db.stmt(snap.episodes);
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
  each_row(db, snap.messages, k_messages, key, [&](MessageRow m) {
    if (auto* s = find(m.episode_id)) {
      s->epoch = m.epoch;
      s->messages.push_back(std::move(m));
    }
  });
  each_row(db, snap.turns, k_turns, key, [&](TurnRow t) {
    if (auto* s = find(t.episode_id)) s->turns.push_back(std::move(t));
  });
  each_row(db, snap.llm_calls, k_llm_calls, key, [&](LlmCallRow l) {
    if (auto* s = find(l.episode_id)) s->llm_calls.push_back(std::move(l));
  });
  each_row(db, snap.evaluations, k_evaluations, key, [&](EvaluationRow v) {
    if (auto* s = find(v.episode_id)) s->evaluations.push_back(std::move(v));
  });
  each_row(db, snap.finals, k_finals, key, [&](FinalRow f) {
    if (auto* s = find(f.episode_id)) s->final = std::move(f);
  });
  each_row(db, snap.events, k_events, key, [&](EventRow v) {
    if (auto* s = find(v.episode_id)) s->events.push_back(std::move(v));
  });
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
    std::sort(s.evaluations.begin(), s.evaluations.end(),
              [](const EvaluationRow& a, const EvaluationRow& b) {
                return a.created_at != b.created_at ? a.created_at < b.created_at
                                                    : a.request_id < b.request_id;
              });
  }
  std::sort(out.begin(), out.end(), [](const EpisodeSnapshot& a, const EpisodeSnapshot& b) {
    return a.episode.created_at != b.episode.created_at
               ? a.episode.created_at < b.episode.created_at
               : a.episode.id < b.episode.id;
  });
  return out;
}

}  // namespace

// --- ReadPool ------------------------------------------------------------------

ReadPool::ReadPool(std::string path, int busy_timeout_ms)
    : m_path(std::move(path)), m_busy_timeout_ms(busy_timeout_ms) {}

ReadPool::Handle ReadPool::take() {
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

void ReadPool::give_back(std::unique_ptr<Db> db) {
  std::lock_guard lock(m_mutex);
  if (db && m_idle.size() < k_max_idle_readers) m_idle.push_back(std::move(db));
}

// --- queries ---------------------------------------------------------------------

template <typename DbT>
std::optional<CampaignRow> query_campaign(DbT& db, const std::string& id) {
  return query_one<CampaignRow>(db, sql().get_campaign, reader(k_campaigns), id);
}

template <typename DbT>
std::vector<CampaignRow> query_campaigns(DbT& db) {
  return query_rows<CampaignRow>(db, sql().list_campaigns, reader(k_campaigns));
}

template <typename DbT>
std::vector<TaskRow> query_tasks(DbT& db, const std::string& campaign_id) {
  return query_rows<TaskRow>(db, sql().list_tasks, reader(k_tasks), campaign_id);
}

template <typename DbT>
std::vector<EpisodeSummary> query_episodes(DbT& db, const std::string& campaign_id) {
  return query_rows<EpisodeSummary>(db, sql().list_episodes, reader(k_episodes), campaign_id);
}

template <typename DbT>
std::vector<EpisodeSnapshot> query_unfinished(DbT& db, const std::string& campaign_id) {
  return load_snapshots(db, sql().unfinished, campaign_id);
}

template <typename DbT>
std::optional<EpisodeSnapshot> query_episode(DbT& db, const std::string& episode_id) {
  auto all = load_snapshots(db, sql().one_episode, episode_id);
  if (all.empty()) return std::nullopt;
  return std::move(all.front());
}

template <typename DbT>
std::optional<EvaluationRow> query_evaluation(DbT& db, const std::string& request_id) {
  return query_one<EvaluationRow>(db, sql().get_evaluation, reader(k_evaluations), request_id);
}

template <typename DbT>
std::optional<LlmCallRow> query_llm_call(DbT& db, const std::string& request_id) {
  return query_one<LlmCallRow>(db, sql().get_llm_call, reader(k_llm_calls), request_id);
}

template <typename DbT>
std::vector<MessageRow> query_messages(DbT& db, const std::string& campaign_id) {
  return query_rows<MessageRow>(db, sql().list_messages, reader(k_messages), campaign_id);
}

template <typename DbT>
std::vector<TurnRow> query_turns(DbT& db, const std::string& campaign_id) {
  return query_rows<TurnRow>(db, sql().list_turns, reader(k_turns), campaign_id);
}

template <typename DbT>
std::vector<LlmCallRow> query_llm_calls(DbT& db, const std::string& campaign_id) {
  return query_rows<LlmCallRow>(db, sql().list_llm_calls, reader(k_llm_calls), campaign_id);
}

template <typename DbT>
std::vector<EvaluationRow> query_evaluations(DbT& db, const std::string& campaign_id) {
  return query_rows<EvaluationRow>(db, sql().list_evaluations, reader(k_evaluations), campaign_id);
}

template <typename DbT>
std::vector<FinalRow> query_finals(DbT& db, const std::string& campaign_id) {
  return query_rows<FinalRow>(db, sql().list_finals, reader(k_finals), campaign_id);
}

template <typename DbT>
std::vector<VerdictCardRow> query_verdict_cards(DbT& db) {
  static const std::string q = "SELECT " + column_list(k_verdict_cards) +
                               " FROM verdict_cards ORDER BY evaluator_version, rules_version, device";
  return query_rows<VerdictCardRow>(db, q, reader(k_verdict_cards));
}

template <typename DbT>
std::vector<EventRow> query_events(DbT& db, const std::string& campaign_id) {
  return query_rows<EventRow>(db, sql().list_events, reader(k_events), campaign_id);
}

template <typename DbT>
std::optional<Lease> query_lease(DbT& db, const std::string& campaign_id) {
  return query_one<Lease>(db, sql().get_lease, reader(k_leases), campaign_id);
}

template <typename DbT>
CampaignCounts query_counts(DbT& db, const std::string& campaign_id) {
  CampaignCounts c;
  {
    auto& q = db.stmt(
        "SELECT count(*), "
        "COALESCE(SUM(CASE WHEN status = 'pending' THEN 1 ELSE 0 END), 0), "
        "COALESCE(SUM(CASE WHEN status = 'running' THEN 1 ELSE 0 END), 0), "
        "COALESCE(SUM(CASE WHEN status = 'final' THEN 1 ELSE 0 END), 0) "
        "FROM episodes WHERE campaign_id = ?1");
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
    auto& q = db.stmt(
        "SELECT count(*) FROM episodes e JOIN turns t ON t.episode_id = e.id WHERE e.campaign_id = "
        "?1");
    q.bind(campaign_id);
    if (q.step()) c.turns = q.i64(0);
    q.run();
  }
  {
    auto& q = db.stmt(
        "SELECT count(*), COALESCE(SUM(l.prompt_tokens), 0), COALESCE(SUM(l.completion_tokens), "
        "0), "
        "COALESCE(SUM(l.cost_usd), 0.0) FROM episodes e JOIN llm_calls l ON l.episode_id = e.id "
        "WHERE "
        "e.campaign_id = "
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
    auto& q = db.stmt(
        "SELECT COALESCE(SUM(CASE WHEN f.reason = 'submitted' THEN 1 ELSE 0 END), 0), "
        "COALESCE(SUM(CASE WHEN f.correct != 0 THEN 1 ELSE 0 END), 0) "
        "FROM episodes e JOIN finals f ON f.episode_id = e.id WHERE e.campaign_id = ?1");
    q.bind(campaign_id);
    if (q.step()) {
      c.submitted = q.i64(0);
      c.correct = q.i64(1);
    }
    q.run();
  }
  return c;
}

// The two backends' connections (SQL above is written in the dialect both
// run; PgConn turns ?N into $N).
#define KORCH_STORE_QUERIES(DbT)                                                    \
  template std::optional<CampaignRow> query_campaign(DbT&, const std::string&);     \
  template std::vector<CampaignRow> query_campaigns(DbT&);                          \
  template std::vector<TaskRow> query_tasks(DbT&, const std::string&);              \
  template std::vector<EpisodeSummary> query_episodes(DbT&, const std::string&);    \
  template std::vector<EpisodeSnapshot> query_unfinished(DbT&, const std::string&); \
  template std::optional<EpisodeSnapshot> query_episode(DbT&, const std::string&);  \
  template std::optional<EvaluationRow> query_evaluation(DbT&, const std::string&); \
  template std::optional<LlmCallRow> query_llm_call(DbT&, const std::string&);      \
  template std::vector<TurnRow> query_turns(DbT&, const std::string&);              \
  template std::vector<MessageRow> query_messages(DbT&, const std::string&);        \
  template std::vector<LlmCallRow> query_llm_calls(DbT&, const std::string&);       \
  template std::vector<EvaluationRow> query_evaluations(DbT&, const std::string&);  \
  template std::vector<FinalRow> query_finals(DbT&, const std::string&);            \
  template std::vector<EventRow> query_events(DbT&, const std::string&);            \
  template std::vector<VerdictCardRow> query_verdict_cards(DbT&);                   \
  template CampaignCounts query_counts(DbT&, const std::string&);                   \
  template std::optional<Lease> query_lease(DbT&, const std::string&);
KORCH_STORE_QUERIES(Db)
#if KORCH_WITH_POSTGRES
KORCH_STORE_QUERIES(PgConn)
#endif
#undef KORCH_STORE_QUERIES

}  // namespace korch::store::detail
