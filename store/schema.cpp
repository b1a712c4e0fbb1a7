// The schema migrations of both backends, each written once: SQLite's text
// as it shipped, PostgreSQL's derived from it (k_postgres_words below).
#include <algorithm>
#include <cctype>
#include <iterator>
#include <span>
#include <string>
#include <utility>
#include <vector>

#include "store/schema_internal.hpp"
#include "store/store.hpp"

namespace korch::store::detail {
namespace {

// Version 1: the initial schema (DESIGN §3). Never edit a migration that has
// shipped; add a new one and bump k_schema_version.
//
// Foreign keys tie conversation state to its episode (messages, turns,
// finals) and episodes/tasks to their campaign. llm_calls, evaluations and
// events carry an episode id without a foreign key: the evaluator also serves
// requests that belong to no episode (`korch eval`, RL reward use).
constexpr std::string_view k_migration_1 = R"sql(
CREATE TABLE campaigns (
  id           TEXT PRIMARY KEY,
  name         TEXT NOT NULL,
  config_json  TEXT NOT NULL,
  secret_seed  INTEGER NOT NULL,
  created_at   REAL NOT NULL
);

CREATE TABLE tasks (
  campaign_id  TEXT NOT NULL REFERENCES campaigns(id),
  task_id      TEXT NOT NULL,
  level        INTEGER NOT NULL,
  number       INTEGER NOT NULL,
  name         TEXT NOT NULL,
  path         TEXT NOT NULL,
  source       TEXT NOT NULL,
  PRIMARY KEY (campaign_id, task_id)
);

CREATE TABLE episodes (
  id             TEXT PRIMARY KEY,
  campaign_id    TEXT NOT NULL REFERENCES campaigns(id),
  task_id        TEXT NOT NULL,
  model_id       TEXT NOT NULL,
  sample_index   INTEGER NOT NULL,
  status         TEXT NOT NULL CHECK (status IN ('pending', 'running', 'final')),
  active_s       REAL NOT NULL,
  tokens_used    INTEGER NOT NULL,
  cost_usd       REAL NOT NULL,
  created_at     REAL NOT NULL,
  updated_at     REAL NOT NULL
);
CREATE INDEX episodes_by_campaign ON episodes (campaign_id, status);

-- Written once per episode; kept apart so that the frequent EpisodeUpdates
-- rewrite small rows.
CREATE TABLE episode_prompts (
  episode_id     TEXT PRIMARY KEY REFERENCES episodes(id),
  system_prompt  TEXT NOT NULL
);

CREATE TABLE messages (
  episode_id  TEXT NOT NULL REFERENCES episodes(id),
  epoch       INTEGER NOT NULL,
  seq         INTEGER NOT NULL,
  role        TEXT NOT NULL,
  kind        TEXT NOT NULL,
  turn        INTEGER NOT NULL,
  content     TEXT NOT NULL,
  PRIMARY KEY (episode_id, epoch, seq)
);

CREATE TABLE turns (
  episode_id         TEXT NOT NULL REFERENCES episodes(id),
  turn               INTEGER NOT NULL,
  model_id           TEXT NOT NULL,
  llm_request_id     TEXT NOT NULL,
  action             TEXT NOT NULL,
  parse_status       TEXT NOT NULL,
  code               TEXT NOT NULL,
  code_sha           TEXT NOT NULL,
  eval_request_id    TEXT NOT NULL,
  eval_status        TEXT NOT NULL,
  finish_reason      TEXT NOT NULL,
  prompt_tokens      INTEGER NOT NULL,
  completion_tokens  INTEGER NOT NULL,
  llm_latency_s      REAL NOT NULL,
  at                 REAL NOT NULL,
  PRIMARY KEY (episode_id, turn)
);

CREATE TABLE llm_calls (
  request_id           TEXT PRIMARY KEY,
  episode_id           TEXT NOT NULL,
  turn                 INTEGER NOT NULL,
  model_id             TEXT NOT NULL,
  state                TEXT NOT NULL CHECK (state IN ('started', 'done', 'failed')),
  started_at           REAL NOT NULL,
  finished_at          REAL NOT NULL,
  content              TEXT NOT NULL,
  reasoning            TEXT NOT NULL,
  finish_reason        TEXT NOT NULL,
  prompt_tokens        INTEGER NOT NULL,
  completion_tokens    INTEGER NOT NULL,
  cached_tokens        INTEGER NOT NULL,
  reasoning_tokens     INTEGER NOT NULL,
  cost_usd             REAL NOT NULL,
  latency_s            REAL NOT NULL,
  http_attempts        INTEGER NOT NULL,
  attempts_json        TEXT NOT NULL,
  provider_request_id  TEXT NOT NULL,
  failure              TEXT NOT NULL,
  error                TEXT NOT NULL,
  dup_possible         INTEGER NOT NULL,
  sends                INTEGER NOT NULL
);
CREATE INDEX llm_calls_by_episode ON llm_calls (episode_id, turn);

CREATE TABLE evaluations (
  request_id         TEXT PRIMARY KEY,
  episode_id         TEXT NOT NULL,
  kind               TEXT NOT NULL,
  code_sha           TEXT NOT NULL,
  state              TEXT NOT NULL CHECK (state IN ('queued', 'running', 'done')),
  owner              TEXT NOT NULL,
  attempts           INTEGER NOT NULL,
  verdict            TEXT NOT NULL,
  report_json        TEXT NOT NULL,
  evaluator_version  TEXT NOT NULL,
  created_at         REAL NOT NULL,
  finished_at        REAL NOT NULL
);
CREATE INDEX evaluations_by_episode ON evaluations (episode_id);
CREATE INDEX evaluations_by_state ON evaluations (state);

CREATE TABLE events (
  id          INTEGER PRIMARY KEY,
  episode_id  TEXT NOT NULL,
  turn        INTEGER NOT NULL,
  kind        TEXT NOT NULL,
  detail      TEXT NOT NULL,
  at          REAL NOT NULL
);
CREATE INDEX events_by_episode ON events (episode_id, id);

CREATE TABLE finals (
  episode_id  TEXT PRIMARY KEY REFERENCES episodes(id),
  reason      TEXT NOT NULL,
  verdict     TEXT NOT NULL,
  request_id  TEXT NOT NULL,
  speedup     REAL,
  reward      REAL NOT NULL,
  correct     INTEGER NOT NULL,
  at          REAL NOT NULL
);

CREATE TABLE leases (
  campaign_id   TEXT PRIMARY KEY,
  owner         TEXT NOT NULL,
  heartbeat_at  REAL NOT NULL,
  expires_at    REAL NOT NULL
);
)sql";

// Version 2: evaluations.failures. Until version 1, evaluations.attempts
// (every start) was what the attempt cap counted, so each kill or Ctrl-C
// during an evaluation brought it closer to worker_crash. Only failures a
// live korch observed count now (agent/episode.hpp); existing rows start at
// zero, so interruptions recorded by older versions no longer count.
constexpr std::string_view k_migration_2 = R"sql(
ALTER TABLE evaluations ADD COLUMN failures INTEGER NOT NULL DEFAULT 0;
)sql";

// Version 3: drops evaluations_by_state. No query of korch reads
// evaluations by state (resume finds them through their episode), and the
// index cost a delete and an insert at every state change of every
// evaluation (queued -> running -> done).
constexpr std::string_view k_migration_3 = R"sql(
DROP INDEX IF EXISTS evaluations_by_state;
)sql";

// eval_queue's columns after its key, as version 4 created them; version 5
// copies the table with the same columns (a migration names it
// {eval_queue_columns}: k_pieces below).
constexpr std::string_view k_eval_queue_columns = R"sql(
  campaign_id        TEXT NOT NULL,
  evaluator_version  TEXT NOT NULL,
  request_json       TEXT NOT NULL,
  state              TEXT NOT NULL CHECK (state IN ('queued', 'claimed', 'done')),
  worker_id          TEXT NOT NULL,
  lease_token        INTEGER NOT NULL,
  claims             INTEGER NOT NULL,
  lease_expires_at   REAL NOT NULL,
  result_json        TEXT NOT NULL,
  enqueued_at        REAL NOT NULL,
  claimed_at         REAL NOT NULL,
  finished_at        REAL NOT NULL)sql";

// Version 4: the evaluation work queue and the workers' rows (DESIGN §8,
// store/work_queue.hpp). Only a PostgreSQL store uses them; a SQLite store
// has them too, so that the two schemas stay one.
constexpr std::string_view k_migration_4 = R"sql(
CREATE TABLE eval_queue (
  request_id         TEXT PRIMARY KEY,{eval_queue_columns}
);
CREATE INDEX eval_queue_ready ON eval_queue (evaluator_version, state, enqueued_at);
CREATE INDEX eval_queue_by_campaign ON eval_queue (campaign_id, state);

CREATE TABLE workers (
  id                  TEXT PRIMARY KEY,
  host                TEXT NOT NULL,
  pid                 INTEGER NOT NULL,
  gpus                TEXT NOT NULL,
  slots               INTEGER NOT NULL,
  korch_version       TEXT NOT NULL,
  evaluator_version   TEXT NOT NULL,
  mode                TEXT NOT NULL,
  device_description  TEXT NOT NULL,
  state               TEXT NOT NULL,
  note                TEXT NOT NULL,
  started_at          REAL NOT NULL,
  heartbeat_at        REAL NOT NULL,
  evaluations_done    INTEGER NOT NULL
);
)sql";

// Version 5: eval_queue is keyed on (request_id, evaluator_version). A
// request id is the digest of the candidate, not of the evaluator: keyed on
// it alone, a coordinator whose evaluator version changed (an upgrade, a
// setting a verdict rests on) was handed the old version's result, and a row
// queued under a version no worker runs any more kept the new request from
// being queued at all (korch serve answered 504). SQLite cannot change a
// primary key in place: the table is copied; PostgreSQL changes it in place.
constexpr std::string_view k_migration_5_sqlite = R"sql(
CREATE TABLE eval_queue_v5 (
  request_id         TEXT NOT NULL,{eval_queue_columns},
  PRIMARY KEY (request_id, evaluator_version)
);
INSERT INTO eval_queue_v5 SELECT request_id, campaign_id, evaluator_version, request_json, state,
  worker_id, lease_token, claims, lease_expires_at, result_json, enqueued_at, claimed_at,
  finished_at FROM eval_queue;
DROP TABLE eval_queue;
ALTER TABLE eval_queue_v5 RENAME TO eval_queue;
CREATE INDEX eval_queue_ready ON eval_queue (evaluator_version, state, enqueued_at);
CREATE INDEX eval_queue_by_campaign ON eval_queue (campaign_id, state);
)sql";
constexpr std::string_view k_migration_5_postgres = R"sql(
ALTER TABLE eval_queue DROP CONSTRAINT eval_queue_pkey;
ALTER TABLE eval_queue ADD PRIMARY KEY (request_id, evaluator_version);
)sql";
// campaign_devices: the device a remote campaign's evaluations run on,
// pinned at its first start (store/work_queue.hpp, CampaignDevice): its
// system prompt's device text and, in gpu mode, the GPU model its queue
// version names, so that a resumed campaign says and measures the same.
constexpr std::string_view k_migration_5 = R"sql(
CREATE TABLE campaign_devices (
  campaign_id         TEXT PRIMARY KEY,
  device_model        TEXT NOT NULL,
  device_description  TEXT NOT NULL,
  pinned_at           REAL NOT NULL
);
)sql";

// Version 6: verdict_cards (issue #51): `korch audit --store` records the
// verdict card of an evaluator version -- attack success x/N and false
// rejection y/M measured on the corpus, with the whole card as JSON -- keyed
// by what it measured (evaluator version, rules version, device); a later
// audit of the same key replaces it. Reports, the dashboard and the export's
// dataset card read the card of the evaluator version that scored a campaign.
constexpr std::string_view k_migration_6 = R"sql(
CREATE TABLE verdict_cards (
  evaluator_version  TEXT NOT NULL,
  rules_version      TEXT NOT NULL,
  device             TEXT NOT NULL,
  mode               TEXT NOT NULL,
  attacks_accepted   INTEGER NOT NULL,
  attacks            INTEGER NOT NULL,
  honest_rejected    INTEGER NOT NULL,
  honest             INTEGER NOT NULL,
  card_json          TEXT NOT NULL,
  measured_at        REAL NOT NULL,
  PRIMARY KEY (evaluator_version, rules_version, device)
);
)sql";

// One migration as written: `sql`, in SQLite's words, serves both backends;
// what one dialect does its own way comes before it, in that dialect's words.
struct MigrationSource {
  int version;
  std::string_view sql;
  std::string_view sqlite_only = {};
  std::string_view postgres_only = {};
};

constexpr MigrationSource k_sources[] = {
    {1, k_migration_1},
    {2, k_migration_2},
    {3, k_migration_3},
    {4, k_migration_4},
    {5, k_migration_5, k_migration_5_sqlite, k_migration_5_postgres},
    {6, k_migration_6},
};

static_assert(std::size(k_sources) == k_schema_version,
              "k_schema_version must equal the number of the last migration");

// --- building each dialect's text ---------------------------------------------
//
// The migrations for the PostgreSQL backend are numbered alike, with the
// types translated: INTEGER -> BIGINT (SQLite's integers are 64-bit), REAL ->
// DOUBLE PRECISION, TEXT stays TEXT, the events rowid (INTEGER PRIMARY KEY)
// -> an identity column. Tables go into the first schema of the connection's
// search_path.

using Words = std::span<const std::pair<std::string_view, std::string_view>>;

// The pieces that several migrations share, by the name a migration's text
// gives them.
constexpr std::pair<std::string_view, std::string_view> k_pieces[] = {
    {"{eval_queue_columns}", k_eval_queue_columns},
};

// SQLite's words in a migration and PostgreSQL's for them, the longest first.
constexpr std::pair<std::string_view, std::string_view> k_postgres_words[] = {
    {"INTEGER PRIMARY KEY", "BIGINT GENERATED BY DEFAULT AS IDENTITY PRIMARY KEY"},
    {"INTEGER", "BIGINT"},
    {"REAL", "DOUBLE PRECISION"},
};

bool is_word_char(char c) { return std::isalnum(static_cast<unsigned char>(c)) != 0 || c == '_'; }

// `sql` with each whole word (or run of words) of `words` replaced by its
// replacement; the first match at a place wins.
std::string replace_words(std::string_view sql, Words words) {
  std::string out;
  std::size_t i = 0;
  while (i < sql.size()) {
    bool word_start = i == 0 || !is_word_char(sql[i - 1]);
    auto match = std::find_if(words.begin(), words.end(), [&](const auto& word) {
      std::size_t end = i + word.first.size();
      return word_start && sql.substr(i, word.first.size()) == word.first &&
             (end == sql.size() || !is_word_char(sql[end]));
    });
    if (match == words.end()) {
      out += sql[i++];
      continue;
    }
    out += match->second;
    i += match->first.size();
  }
  return out;
}

// Both dialects' migrations, built once from k_sources.
class Migrations {
 public:
  Migrations() {
    for (const auto& s : k_sources) {
      std::string sql = replace_words(s.sql, k_pieces);
      m_sqlite_text.push_back(replace_words(s.sqlite_only, k_pieces) + sql);
      m_postgres_text.push_back(std::string(s.postgres_only) +
                                replace_words(sql, k_postgres_words));
    }
    for (std::size_t i = 0; i < std::size(k_sources); ++i) {
      m_sqlite.push_back({k_sources[i].version, m_sqlite_text[i]});
      m_postgres.push_back({k_sources[i].version, m_postgres_text[i]});
    }
  }
  Migrations(const Migrations&) = delete;
  Migrations& operator=(const Migrations&) = delete;

  std::span<const Migration> sqlite() const { return m_sqlite; }
  std::span<const Migration> postgres() const { return m_postgres; }

 private:
  std::vector<std::string> m_sqlite_text, m_postgres_text;
  std::vector<Migration> m_sqlite, m_postgres;  // views of the texts above
};

const Migrations& all_migrations() {
  static const Migrations m;
  return m;
}

}  // namespace

std::span<const Migration> migrations() { return all_migrations().sqlite(); }
std::span<const Migration> pg_migrations() { return all_migrations().postgres(); }

}  // namespace korch::store::detail
