#pragma once
// The daemon's core, below its HTTP and WebSocket front ends: one process
// that owns a database (its file lock), runs every submitted campaign on its
// own thread through the shared runner (agent/runner.hpp), and keeps each
// campaign's submitted config and wanted state (active, paused, cancelled)
// in files under the state directory, so a restart — after SIGTERM or kill -9
// — resumes every campaign that was active. The store itself is used only
// through its public interface.
#include <atomic>
#include <condition_variable>
#include <map>
#include <memory>
#include <mutex>
#include <nlohmann/json.hpp>
#include <optional>
#include <string>
#include <thread>

#include "agent/campaign_runner.hpp"
#include "config/campaign.hpp"
#include "daemon/campaign_state.hpp"
#include "daemon/metrics.hpp"
#include "daemon/serve_config.hpp"
#include "evaluator/evaluator.hpp"
#include "store/store.hpp"
#include "util/error.hpp"
#include "util/file_lock.hpp"

namespace korch::daemon {

// What an API call returns: an HTTP status and a JSON body ({"error": ...}
// for a 4xx/5xx).
struct Reply {
  int status = 200;
  nlohmann::json body;
  static Reply error(int status, std::string message) {
    return {status, {{"error", std::move(message)}}};
  }
  // A failure of korch's own (an Error): its kind decides the status, here
  // and nowhere else. The literal statuses at the call sites are HTTP's own
  // answers about the request (404 no such campaign, 409 wrong state, ...).
  static Reply error(const Error& e) { return error(status_of(e.kind), e.message); }
  static constexpr int status_of(ErrorKind kind) {
    switch (kind) {
      case ErrorKind::invalid: return 400;      // the request must change
      case ErrorKind::unavailable: return 503;  // a service korch needs (store, endpoint)
      case ErrorKind::interrupted: return 503;  // the daemon is stopping
      case ErrorKind::failure: break;
    }
    return 500;
  }
};

class Daemon {
 public:
  // Takes the database's file lock, opens the store and the daemon's
  // evaluator; fails when another process holds the lock.
  static Result<std::unique_ptr<Daemon>> open(const ServeConfig& cfg);
  ~Daemon();

  // Starts a thread for every campaign whose stored state is active.
  void resume_all();
  // Stops taking work, stops every campaign (in-flight replies commit or are
  // abandoned by the runner), joins their threads, closes the store.
  void stop();
  bool stopping() const { return m_stopping.load(); }

  // --- campaigns ---------------------------------------------------------
  // `body` is TOML, or JSON when `json` is true (same keys; converted to TOML
  // and loaded by the same loader as korch run, so errors read the same).
  Reply submit(const std::string& body, bool json);
  Reply list();
  Reply get(const std::string& id);
  Reply pause(const std::string& id);
  Reply resume(const std::string& id);
  Reply cancel(const std::string& id);
  Reply episodes(const std::string& campaign_id);
  Reply episode(const std::string& episode_id);
  // The stored id of a campaign named by id or name: a daemon campaign, or
  // any campaign of the store (e.g. the environment's); nullopt if none.
  std::optional<std::string> campaign_id_of(const std::string& id_or_name);
  // One-off evaluation {"task": {"path"} | {"level","number"}, "code", "mode"}.
  Reply evaluate(const nlohmann::json& request);
  // The `korch worker`s that registered in a PostgreSQL store
  // (docs/cluster.md); an empty list for a SQLite store.
  Reply workers();
  // A compact progress snapshot of every campaign (the SSE payload).
  nlohmann::json progress_snapshot();

  Metrics& metrics() { return m_metrics; }
  store::Store& store() { return *m_store; }
  evaluator::Evaluator& evaluator() { return *m_evaluator; }
  const ServeConfig& config() const { return m_cfg; }
  const std::string& owner() const { return m_owner; }
  // Resolves a task named by a request: {"path": FILE} or {"level": L,
  // "number": N} (in env.tasks_dir), or the strings "L/N", "FILE".
  Result<config::Task> resolve_task(const nlohmann::json& spec);
  // Increments whenever a campaign's progress or state changes.
  std::uint64_t version() const { return m_version.load(); }

  struct Campaign;

 private:
  explicit Daemon(ServeConfig cfg);
  void start_thread(Campaign& c);
  void drive(Campaign& c);
  Result<void> persist(const Campaign& c);
  Reply stop_driving(Campaign& c, CampaignState state);  // caller holds m_mutex
  nlohmann::json describe(Campaign& c);
  // The runner's progress with the store's counts (episodes, finals, turns,
  // tokens, cost) and the time driven over every run. Caller holds m_mutex.
  agent::Progress merged_progress(const Campaign& c) const;
  // Re-reads the store's counts of campaigns that changed (at most every
  // k_counts_every_s each). Takes m_mutex; reads the store without it.
  void refresh_counts();
  Campaign* find(const std::string& id_or_name);

  ServeConfig m_cfg;
  Metrics m_metrics;  // first built, last destroyed: decorators point into it
  std::optional<FileLock> m_lock;
  std::unique_ptr<store::Store> m_store;
  std::unique_ptr<evaluator::Evaluator> m_evaluator;
  std::string m_owner;
  std::atomic<bool> m_stopping{false};
  std::atomic<std::uint64_t> m_version{0};
  std::mutex m_mutex;  // m_campaigns and each Campaign's fields
  std::condition_variable m_cv;
  std::map<std::string, std::unique_ptr<Campaign>> m_campaigns;  // by id
};

// JSON campaign -> TOML text (tables, arrays of tables, scalars).
Result<std::string> json_to_toml(const nlohmann::json& j);

}  // namespace korch::daemon
