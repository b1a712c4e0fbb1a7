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

// Version 4: the evaluation work queue and the workers' rows (DESIGN §8,
// store/work_queue.hpp). Only a PostgreSQL store uses them; a SQLite store
// has them too, so that the two schemas stay one.
constexpr std::string_view k_migration_4 = R"sql(
CREATE TABLE eval_queue (
  request_id         TEXT PRIMARY KEY,
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
  finished_at        REAL NOT NULL
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
// primary key in place: the table is copied.
// campaign_devices: the device a remote campaign's evaluations run on,
// pinned at its first start (store/work_queue.hpp, CampaignDevice): its
// system prompt's device text and, in gpu mode, the GPU model its queue
// version names, so that a resumed campaign says and measures the same.
constexpr std::string_view k_migration_5 = R"sql(
CREATE TABLE eval_queue_v5 (
  request_id         TEXT NOT NULL,
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
  finished_at        REAL NOT NULL,
  PRIMARY KEY (request_id, evaluator_version)
);
INSERT INTO eval_queue_v5 SELECT request_id, campaign_id, evaluator_version, request_json, state,
  worker_id, lease_token, claims, lease_expires_at, result_json, enqueued_at, claimed_at,
  finished_at FROM eval_queue;
DROP TABLE eval_queue;
ALTER TABLE eval_queue_v5 RENAME TO eval_queue;
CREATE INDEX eval_queue_ready ON eval_queue (evaluator_version, state, enqueued_at);
CREATE INDEX eval_queue_by_campaign ON eval_queue (campaign_id, state);

CREATE TABLE campaign_devices (
  campaign_id         TEXT PRIMARY KEY,
  device_model        TEXT NOT NULL,
  device_description  TEXT NOT NULL,
  pinned_at           REAL NOT NULL
);
)sql";

constexpr Migration k_migrations[] = {
    {1, k_migration_1}, {2, k_migration_2}, {3, k_migration_3},
    {4, k_migration_4}, {5, k_migration_5},
};

static_assert(sizeof(k_migrations) / sizeof(k_migrations[0]) == k_schema_version,
              "k_schema_version must equal the number of the last migration");

// --- PostgreSQL --------------------------------------------------------------
//
// The same migrations for the PostgreSQL backend, numbered alike, with the
// types translated: INTEGER -> BIGINT (SQLite's integers are 64-bit), REAL ->
// DOUBLE PRECISION, TEXT stays TEXT, the events rowid -> an identity column.
// Tables go into the first schema of the connection's search_path. Like the
// SQLite ones, never edit a shipped migration.

constexpr std::string_view k_pg_migration_1 = R"sql(
CREATE TABLE campaigns (
  id           TEXT PRIMARY KEY,
  name         TEXT NOT NULL,
  config_json  TEXT NOT NULL,
  secret_seed  BIGINT NOT NULL,
  created_at   DOUBLE PRECISION NOT NULL
);

CREATE TABLE tasks (
  campaign_id  TEXT NOT NULL REFERENCES campaigns(id),
  task_id      TEXT NOT NULL,
  level        BIGINT NOT NULL,
  number       BIGINT NOT NULL,
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
  sample_index   BIGINT NOT NULL,
  status         TEXT NOT NULL CHECK (status IN ('pending', 'running', 'final')),
  active_s       DOUBLE PRECISION NOT NULL,
  tokens_used    BIGINT NOT NULL,
  cost_usd       DOUBLE PRECISION NOT NULL,
  created_at     DOUBLE PRECISION NOT NULL,
  updated_at     DOUBLE PRECISION NOT NULL
);
CREATE INDEX episodes_by_campaign ON episodes (campaign_id, status);

CREATE TABLE episode_prompts (
  episode_id     TEXT PRIMARY KEY REFERENCES episodes(id),
  system_prompt  TEXT NOT NULL
);

CREATE TABLE messages (
  episode_id  TEXT NOT NULL REFERENCES episodes(id),
  epoch       BIGINT NOT NULL,
  seq         BIGINT NOT NULL,
  role        TEXT NOT NULL,
  kind        TEXT NOT NULL,
  turn        BIGINT NOT NULL,
  content     TEXT NOT NULL,
  PRIMARY KEY (episode_id, epoch, seq)
);

CREATE TABLE turns (
  episode_id         TEXT NOT NULL REFERENCES episodes(id),
  turn               BIGINT NOT NULL,
  model_id           TEXT NOT NULL,
  llm_request_id     TEXT NOT NULL,
  action             TEXT NOT NULL,
  parse_status       TEXT NOT NULL,
  code               TEXT NOT NULL,
  code_sha           TEXT NOT NULL,
  eval_request_id    TEXT NOT NULL,
  eval_status        TEXT NOT NULL,
  finish_reason      TEXT NOT NULL,
  prompt_tokens      BIGINT NOT NULL,
  completion_tokens  BIGINT NOT NULL,
  llm_latency_s      DOUBLE PRECISION NOT NULL,
  at                 DOUBLE PRECISION NOT NULL,
  PRIMARY KEY (episode_id, turn)
);

CREATE TABLE llm_calls (
  request_id           TEXT PRIMARY KEY,
  episode_id           TEXT NOT NULL,
  turn                 BIGINT NOT NULL,
  model_id             TEXT NOT NULL,
  state                TEXT NOT NULL CHECK (state IN ('started', 'done', 'failed')),
  started_at           DOUBLE PRECISION NOT NULL,
  finished_at          DOUBLE PRECISION NOT NULL,
  content              TEXT NOT NULL,
  reasoning            TEXT NOT NULL,
  finish_reason        TEXT NOT NULL,
  prompt_tokens        BIGINT NOT NULL,
  completion_tokens    BIGINT NOT NULL,
  cached_tokens        BIGINT NOT NULL,
  reasoning_tokens     BIGINT NOT NULL,
  cost_usd             DOUBLE PRECISION NOT NULL,
  latency_s            DOUBLE PRECISION NOT NULL,
  http_attempts        BIGINT NOT NULL,
  attempts_json        TEXT NOT NULL,
  provider_request_id  TEXT NOT NULL,
  failure              TEXT NOT NULL,
  error                TEXT NOT NULL,
  dup_possible         BIGINT NOT NULL,
  sends                BIGINT NOT NULL
);
CREATE INDEX llm_calls_by_episode ON llm_calls (episode_id, turn);

CREATE TABLE evaluations (
  request_id         TEXT PRIMARY KEY,
  episode_id         TEXT NOT NULL,
  kind               TEXT NOT NULL,
  code_sha           TEXT NOT NULL,
  state              TEXT NOT NULL CHECK (state IN ('queued', 'running', 'done')),
  owner              TEXT NOT NULL,
  attempts           BIGINT NOT NULL,
  verdict            TEXT NOT NULL,
  report_json        TEXT NOT NULL,
  evaluator_version  TEXT NOT NULL,
  created_at         DOUBLE PRECISION NOT NULL,
  finished_at        DOUBLE PRECISION NOT NULL
);
CREATE INDEX evaluations_by_episode ON evaluations (episode_id);
CREATE INDEX evaluations_by_state ON evaluations (state);

CREATE TABLE events (
  id          BIGINT GENERATED BY DEFAULT AS IDENTITY PRIMARY KEY,
  episode_id  TEXT NOT NULL,
  turn        BIGINT NOT NULL,
  kind        TEXT NOT NULL,
  detail      TEXT NOT NULL,
  at          DOUBLE PRECISION NOT NULL
);
CREATE INDEX events_by_episode ON events (episode_id, id);

CREATE TABLE finals (
  episode_id  TEXT PRIMARY KEY REFERENCES episodes(id),
  reason      TEXT NOT NULL,
  verdict     TEXT NOT NULL,
  request_id  TEXT NOT NULL,
  speedup     DOUBLE PRECISION,
  reward      DOUBLE PRECISION NOT NULL,
  correct     BIGINT NOT NULL,
  at          DOUBLE PRECISION NOT NULL
);

CREATE TABLE leases (
  campaign_id   TEXT PRIMARY KEY,
  owner         TEXT NOT NULL,
  heartbeat_at  DOUBLE PRECISION NOT NULL,
  expires_at    DOUBLE PRECISION NOT NULL
);
)sql";

constexpr std::string_view k_pg_migration_2 = R"sql(
ALTER TABLE evaluations ADD COLUMN failures BIGINT NOT NULL DEFAULT 0;
)sql";

constexpr std::string_view k_pg_migration_3 = R"sql(
DROP INDEX IF EXISTS evaluations_by_state;
)sql";

constexpr std::string_view k_pg_migration_4 = R"sql(
CREATE TABLE eval_queue (
  request_id         TEXT PRIMARY KEY,
  campaign_id        TEXT NOT NULL,
  evaluator_version  TEXT NOT NULL,
  request_json       TEXT NOT NULL,
  state              TEXT NOT NULL CHECK (state IN ('queued', 'claimed', 'done')),
  worker_id          TEXT NOT NULL,
  lease_token        BIGINT NOT NULL,
  claims             BIGINT NOT NULL,
  lease_expires_at   DOUBLE PRECISION NOT NULL,
  result_json        TEXT NOT NULL,
  enqueued_at        DOUBLE PRECISION NOT NULL,
  claimed_at         DOUBLE PRECISION NOT NULL,
  finished_at        DOUBLE PRECISION NOT NULL
);
CREATE INDEX eval_queue_ready ON eval_queue (evaluator_version, state, enqueued_at);
CREATE INDEX eval_queue_by_campaign ON eval_queue (campaign_id, state);

CREATE TABLE workers (
  id                  TEXT PRIMARY KEY,
  host                TEXT NOT NULL,
  pid                 BIGINT NOT NULL,
  gpus                TEXT NOT NULL,
  slots               BIGINT NOT NULL,
  korch_version       TEXT NOT NULL,
  evaluator_version   TEXT NOT NULL,
  mode                TEXT NOT NULL,
  device_description  TEXT NOT NULL,
  state               TEXT NOT NULL,
  note                TEXT NOT NULL,
  started_at          DOUBLE PRECISION NOT NULL,
  heartbeat_at        DOUBLE PRECISION NOT NULL,
  evaluations_done    BIGINT NOT NULL
);
)sql";

// Version 5 (see k_migration_5): the queue's key is (request_id, evaluator_version);
// campaign_devices.
constexpr std::string_view k_pg_migration_5 = R"sql(
ALTER TABLE eval_queue DROP CONSTRAINT eval_queue_pkey;
ALTER TABLE eval_queue ADD PRIMARY KEY (request_id, evaluator_version);

CREATE TABLE campaign_devices (
  campaign_id         TEXT PRIMARY KEY,
  device_model        TEXT NOT NULL,
  device_description  TEXT NOT NULL,
  pinned_at           DOUBLE PRECISION NOT NULL
);
)sql";

constexpr Migration k_pg_migrations[] = {
    {1, k_pg_migration_1}, {2, k_pg_migration_2}, {3, k_pg_migration_3},
    {4, k_pg_migration_4}, {5, k_pg_migration_5},
};

static_assert(sizeof(k_pg_migrations) / sizeof(k_pg_migrations[0]) == k_schema_version,
              "every SQLite migration has its PostgreSQL twin");

}  // namespace

std::span<const Migration> migrations() { return k_migrations; }
std::span<const Migration> pg_migrations() { return k_pg_migrations; }

}  // namespace korch::store::detail
