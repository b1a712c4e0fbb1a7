#pragma once
// The campaign runner: drives every episode of a campaign through the
// episode state machine (agent/episode.hpp) on one orchestrator thread.
// Network, evaluation and storage complete asynchronously on their own
// threads and post their results back, so thousands of episodes are in
// flight on a handful of threads.
//
// Durability: every Step's batch is committed before its next action starts
// (DESIGN §3). A run stopped at any moment (Ctrl-C, SIGKILL, crash) leaves a
// store from which run() resumes: finished steps are never repeated.
#include <atomic>
#include <cstdint>
#include <functional>
#include <memory>
#include <string>
#include <vector>

#include "config/campaign.hpp"
#include "config/loader.hpp"
#include "config/tasks.hpp"
#include "evaluator/evaluator.hpp"
#include "llm_clients/client.hpp"
#include "store/store.hpp"
#include "util/error.hpp"

namespace korch::agent {

struct Progress {
  std::int64_t episodes = 0;  // in the campaign
  std::int64_t final = 0;     // finished (all runs)
  std::int64_t running = 0;   // in flight now
  std::int64_t failed = 0;    // final without a correct submission
  std::int64_t turns = 0;     // LLM replies recorded (all runs)
  std::int64_t tokens = 0;
  double cost_usd = 0;
  double elapsed_s = 0;  // this run
  double eta_s = -1;     // -1 = unknown; 0 once every episode is final (eta_of)
};

// The estimate a progress report carries: 0 once every episode is final
// (whichever process finished them), else `estimate` (-1 = unknown). The
// runner's progress and the daemon's merged one both go through it.
inline double eta_of(const Progress& p, double estimate) {
  return p.episodes > 0 && p.final >= p.episodes ? 0.0 : estimate;
}

struct RunOptions {
  std::string owner;  // "<host>:<pid>:<nonce>", holder of the campaign lease
  // The caller holds the database's file lock (util/file_lock.hpp): a lease
  // held by another process on this host is then stale (its holder died,
  // e.g. after kill -9) and is taken over.
  bool holds_db_lock = false;
  double lease_ttl_s = 30;
  double progress_interval_s = 1;
  std::function<void(const Progress&)> on_progress;  // orchestrator thread
  // Set to true (e.g. from a signal handler) to stop: no new step starts,
  // in-flight results are dropped, the store stays resumable.
  std::atomic<bool>* stop = nullptr;
};

enum class RunStatus {
  completed,  // every episode is final
  stopped,    // stop requested; resumable
  aborted,    // a failure that concerns every episode (endpoint down, bad key, spend cap, store
              // error)
};

struct RunResult {
  RunStatus status = RunStatus::completed;
  std::string message;  // why it stopped or aborted
  Progress progress;
  std::int64_t episodes_resumed = 0;  // unfinished episodes found in the store at start
  double resume_load_s = 0;           // time to load and rebuild them
};

// The campaign id, episode specs and system prompt of a config.
struct CampaignPlan {
  std::string campaign_id;
  std::vector<std::shared_ptr<const config::Task>> tasks;
  std::string system_prompt;
  // The selected tasks left out because tasks.exclude_flagged's report flags
  // them; recorded with the campaign (its row's config_json,
  // "excluded_tasks") and shown by korch report.
  std::vector<config::ExcludedTask> excluded;
};

// Builds the plan (loads tasks, leaves out those tasks.exclude_flagged's
// report flags, renders the system prompt from the evaluator's facts and the
// rule table). A stale or incomplete report fails it (invalid).
Result<CampaignPlan> plan_campaign(const config::CampaignConfig& cfg,
                                   const evaluator::Evaluator& evaluator);

// Registers the campaign (campaign, task and episode rows; insert-if-absent,
// so running it twice creates nothing new), takes the lease, and drives every
// unfinished episode to the end. Blocks until done, stopped or aborted.
Result<RunResult> run_campaign(const config::CampaignConfig& cfg, const CampaignPlan& plan,
                               store::Store& store, llm::ChatClient& client,
                               evaluator::Evaluator& evaluator, const RunOptions& options);

}  // namespace korch::agent
