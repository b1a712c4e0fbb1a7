#pragma once
// Internal to korch_store: the conflict rules of store.hpp, applied to one
// batch inside an open write transaction, for either backend's connection
// (DbT = Db for SQLite, PgConn for PostgreSQL). The SQL is written in the
// dialect both engines run (?N placeholders; PgConn turns them into $N).
#include <optional>
#include <string>
#include <variant>

#include "store/codec_internal.hpp"
#include "store/store.hpp"
#include "util/fs.hpp"

namespace korch::store::detail {

template <typename... Fs>
struct Overloaded : Fs... {
  using Fs::operator()...;
};

struct WriteSql {
  std::string insert_campaign = insert_sql(k_campaigns, "ON CONFLICT DO NOTHING");
  std::string insert_task = insert_sql(k_tasks, "ON CONFLICT DO NOTHING");
  std::string insert_episode = insert_sql(k_episodes, "ON CONFLICT DO NOTHING");
  std::string insert_episode_prompt = insert_sql(k_episode_prompts, "");
  // An EpisodeUpdate is two statements so that the common one (counters
  // only) neither touches the status index nor pays for RETURNING (an
  // ephemeral table per execution): the counters, then the status when one
  // is given and it changes (a final episode keeps its status).
  std::string update_episode =
      "UPDATE episodes SET active_s = COALESCE(?2, active_s), tokens_used = COALESCE(?3, "
      "tokens_used), cost_usd = COALESCE(?4, cost_usd), updated_at = ?5 WHERE id = ?1";
  std::string update_episode_status =
      "UPDATE episodes SET status = ?2 WHERE id = ?1 AND status != 'final' AND status != ?2";
  std::string select_episode_status = "SELECT status FROM episodes WHERE id = ?1";
  std::string insert_message = insert_sql(k_messages, "ON CONFLICT DO NOTHING");
  std::string insert_turn = insert_sql(k_turns, "ON CONFLICT DO NOTHING");
  // A request id names its episode (and turn): those columns, which the
  // by-episode indexes hold, are fixed by the first put and never rewritten.
  std::string upsert_llm_call = insert_sql(
      k_llm_calls, "ON CONFLICT (request_id) DO UPDATE SET " +
                       excluded_set(k_llm_calls, {"dup_possible"}, {"episode_id", "turn"}) +
                       " WHERE llm_calls.state != 'done'");
  std::string upsert_evaluation =
      insert_sql(k_evaluations, "ON CONFLICT (request_id) DO UPDATE SET " +
                                    excluded_set(k_evaluations, {}, {"episode_id"}) +
                                    " WHERE evaluations.state != 'done'");
  std::string insert_event = insert_sql(k_events, "");
  std::string insert_final = insert_sql(k_finals, "ON CONFLICT DO NOTHING");
  std::string upsert_verdict_card = insert_sql(
      k_verdict_cards, "ON CONFLICT (evaluator_version, rules_version, device) DO UPDATE SET " +
                           excluded_set(k_verdict_cards, {}, {"evaluator_version", "rules_version", "device"}));
  // An episode already final keeps its updated_at (a copied campaign, whose
  // episode rows arrive final, stays as it was).
  std::string finalize_episode =
      "UPDATE episodes SET status = 'final', updated_at = ?2 WHERE id = ?1 AND status != 'final'";
};

inline const WriteSql& write_sql() {
  static const WriteSql s;
  return s;
}

// A failure of one operation of a batch that is not a database error.
class BatchError : public korch::Fatal {
 public:
  using korch::Fatal::Fatal;
};

// Applies batches inside the open write transaction of `db`, enforcing the
// conflict rules of store.hpp, with statements prepared once.
template <typename DbT>
class BatchApplierT {
 public:
  using Stmt = typename DbT::Stmt;
  explicit BatchApplierT(DbT& db);
  // Throws on failure (a database error, or a rule broken by the batch); the
  // caller rolls back.
  CommitInfo apply(const WriteBatch& batch);

 private:
  void apply_op(const WriteBatch::Op& op, CommitInfo& info);

  DbT& m_db;
  Stmt& m_insert_campaign;
  Stmt& m_insert_task;
  Stmt& m_insert_episode;
  Stmt& m_insert_episode_prompt;
  Stmt& m_update_episode;
  Stmt& m_update_episode_status;
  Stmt& m_select_episode_status;
  Stmt& m_insert_message;
  Stmt& m_insert_turn;
  Stmt& m_upsert_llm_call;
  Stmt& m_upsert_evaluation;
  Stmt& m_insert_event;
  Stmt& m_insert_final;
  Stmt& m_upsert_verdict_card;
  Stmt& m_finalize_episode;
};

template <typename DbT>
BatchApplierT<DbT>::BatchApplierT(DbT& db)
    : m_db(db),
      m_insert_campaign(db.stmt(write_sql().insert_campaign)),
      m_insert_task(db.stmt(write_sql().insert_task)),
      m_insert_episode(db.stmt(write_sql().insert_episode)),
      m_insert_episode_prompt(db.stmt(write_sql().insert_episode_prompt)),
      m_update_episode(db.stmt(write_sql().update_episode)),
      m_update_episode_status(db.stmt(write_sql().update_episode_status)),
      m_select_episode_status(db.stmt(write_sql().select_episode_status)),
      m_insert_message(db.stmt(write_sql().insert_message)),
      m_insert_turn(db.stmt(write_sql().insert_turn)),
      m_upsert_llm_call(db.stmt(write_sql().upsert_llm_call)),
      m_upsert_evaluation(db.stmt(write_sql().upsert_evaluation)),
      m_insert_event(db.stmt(write_sql().insert_event)),
      m_insert_final(db.stmt(write_sql().insert_final)),
      m_upsert_verdict_card(db.stmt(write_sql().upsert_verdict_card)),
      m_finalize_episode(db.stmt(write_sql().finalize_episode)) {}

template <typename DbT>
CommitInfo BatchApplierT<DbT>::apply(const WriteBatch& batch) {
  CommitInfo info;
  for (const auto& op : batch.ops()) apply_op(op, info);
  return info;
}

// Applies one operation inside the open transaction, enforcing the conflict
// rules of store.hpp. Throws on failure.
template <typename DbT>
void BatchApplierT<DbT>::apply_op(const WriteBatch::Op& op, CommitInfo& info) {
  std::visit(
      Overloaded{
          [&](const CampaignRow& r) { bind_row(m_insert_campaign, k_campaigns, r).run(); },
          [&](const TaskRow& r) { bind_row(m_insert_task, k_tasks, r).run(); },
          [&](const EpisodeRow& r) {
            bind_row(m_insert_episode, k_episodes, r).run();
            if (m_db.changes() == 0) return;  // insert if absent
            bind_row(m_insert_episode_prompt, k_episode_prompts, r).run();
          },
          [&](const EpisodeUpdate& u) {
            m_update_episode.bind(u.id, u.active_s, u.tokens_used, u.cost_usd, now_unix()).run();
            if (m_db.changes() == 0)
              throw BatchError(m_db.path() + ": episode update: no episode " + u.id);
            if (!u.status) return;
            m_update_episode_status.bind(u.id, *u.status).run();
            if (m_db.changes() != 0) return;
            // Unchanged: already that status, or final (which wins).
            auto& q = m_select_episode_status;
            q.bind(u.id);
            std::optional<EpisodeStatus> stored;
            if (q.step()) stored = from_string<EpisodeStatus>(q.text(0));
            q.run();
            if (stored != u.status) {
              info.conflicts.push_back("episode " + u.id + " is final; status " +
                                       std::string(to_string(*u.status)) + " ignored");
            }
          },
          [&](const MessageRow& r) { bind_row(m_insert_message, k_messages, r).run(); },
          [&](const TurnRow& r) {
            bind_row(m_insert_turn, k_turns, r).run();
            if (m_db.changes() == 0) {
              info.conflicts.push_back("turn " + r.episode_id + ":" + std::to_string(r.turn) +
                                       " exists");
            }
          },
          [&](const LlmCallRow& r) {
            bind_row(m_upsert_llm_call, k_llm_calls, r).run();
            if (m_db.changes() == 0)
              info.conflicts.push_back("llm_call " + r.request_id + " is done");
          },
          [&](const EvaluationRow& r) {
            bind_row(m_upsert_evaluation, k_evaluations, r).run();
            if (m_db.changes() == 0)
              info.conflicts.push_back("evaluation " + r.request_id + " is done");
          },
          [&](const EventRow& r) { bind_row(m_insert_event, k_events, r).run(); },
          [&](const FinalRow& r) {
            bind_row(m_insert_final, k_finals, r).run();
            if (m_db.changes() == 0) {
              info.conflicts.push_back("final " + r.episode_id + " exists");
              return;
            }
            m_finalize_episode.bind(r.episode_id, now_unix()).run();
          },
          [&](const VerdictCardRow& r) {
            bind_row(m_upsert_verdict_card, k_verdict_cards, r).run();
          },
      },
      op);
}

}  // namespace korch::store::detail
