#pragma once
// The campaign configuration as typed structs. Loaded by config/loader.hpp
// (TOML file < environment < command-line flags, one key table). Every key is
// documented in docs/config.md. No secret is ever stored here: models name the
// environment variable that holds their API key, never the key.
#include <cstdint>
#include <optional>
#include <string>
#include <vector>

#include "config/vocabulary.hpp"

namespace korch::config {

// One model endpoint (OpenAI-compatible /v1/chat/completions).
struct ModelConfig {
  std::string id;           // korch's name for it, used in ids and reports
  std::string base_url;     // e.g. "http://127.0.0.1:8000/v1"
  std::string model;        // the provider's model name sent in the request
  std::string api_key_env;  // name of the env var holding the key ("" = none)
  double temperature = 0.0;
  double top_p = 1.0;
  int max_tokens = 8192;
  int concurrency = 64;     // max requests in flight to this model
  bool stream = false;      // use SSE streaming
  int max_attempts = 6;     // HTTP attempts per call, including the first
  double retry_cap_s = 60;  // longest single backoff / Retry-After honoured
  double connect_timeout_s = 10;
  double first_byte_timeout_s = 300;
  double total_timeout_s = 900;
  double stall_timeout_s = 120;  // streaming: no bytes for this long aborts
  // Prices in USD per million tokens.
  double price_prompt_per_mtok = 0;
  double price_completion_per_mtok = 0;
  double price_cached_per_mtok = 0;
  int context_window = 0;  // tokens; 0 = unknown

  bool operator==(const ModelConfig&) const = default;
};

struct TaskSelection {
  std::string
      kernelbench_dir;  // a KernelBench/ folder with level1..level4, or any folder of task files
  std::vector<int> levels = {1};
  std::string ids;  // "1-10,15,20-22"; empty = all
  // A `korch tasks validate --out` report; the tasks it flags are left out
  // (agent::plan_campaign, evaluator/validate_report.hpp). "" = none.
  std::string exclude_flagged;

  bool operator==(const TaskSelection&) const = default;
};

// A lifecycle event scheduled at a turn of every episode (or of the samples
// listed), for studying and testing robustness (DESIGN §2).
struct LifecycleEvent {
  LifecycleKind kind = LifecycleKind::compaction;
  int turn = 0;              // applies before this turn (1-based) is generated
  std::string model;         // model_swap: model id that generates that turn
  std::vector<int> samples;  // empty = every sample

  bool operator==(const LifecycleEvent&) const = default;
};

struct EvaluatorConfig {
  EvalMode mode = EvalMode::mock;
  Tolerance tolerance = Tolerance::strict;
  Reward reward = Reward::speedup;
  TorchOps torch_ops = TorchOps::allow;
  int workers = 2;           // concurrent evaluations (cpu mode; gpu mode: at least
                             // compile_jobs + 2 per GPU, so compiles overlap measuring)
  std::string gpus = "all";  // gpu mode: "all" or indices "0,1" / "0-3" (one evaluation per GPU)
  int compile_jobs = 0;      // gpu mode: concurrent compiles; 0 = sized to the host
  double timeout_s = 300;    // wall clock per evaluation
  std::int64_t memory_budget_mb = 4096;
  std::string cache_dir;      // compile cache; "" = <db dir>/korch-cache
  double mock_latency_s = 0;  // mock mode: simulated evaluation time
  // Evaluate on `korch worker` processes through the store's work queue
  // (PostgreSQL only; docs/cluster.md) instead of in this process. `mode`
  // still names the evaluator the workers must run.
  bool remote = false;

  bool operator==(const EvaluatorConfig&) const = default;
};

// [strategy]: which episodes the campaign runs (agent/strategy.hpp). Every
// decision is derived from stored facts and `seed` only, so a resumed run
// decides exactly as an uninterrupted one.
struct StrategyConfig {
  StrategyKind kind = StrategyKind::grid;
  // best_of_k: most samples per (task, model); budget: most episodes per
  // (task, model).
  int k = 4;
  // best_of_k: a correct kernel at least this fast stops its (task, model);
  // budget: a correct episode at least this fast is a success.
  double target_speedup = 1.0;
  int parallel = 1;             // best_of_k: samples of one (task, model) started together (a wave)
  int rounds = 3;               // refine: rounds of samples_per_task episodes per (task, model)
  double budget_usd = 0;        // budget: spend cap of the whole campaign; 0 = none
  double budget_gpu_hours = 0;  // budget: evaluation-hours cap; 0 = none
  Bandit bandit = Bandit::thompson;
  int batch = 4;          // budget: episodes allocated per decision
  std::int64_t seed = 1;  // the bandit's seed (never the campaign's secret seed)

  bool operator==(const StrategyConfig&) const = default;
};

struct CampaignConfig {
  std::string name;  // the campaign id is derived from it
  // The store (store::parse_location): a SQLite path, sqlite:PATH or a
  // postgres:// URL. After loading it holds store.url when that key is set.
  std::string db_path = "korch.db";
  // store.url: names the store by URL (postgres://... or sqlite:PATH); when
  // set it wins over db_path. May carry a password: every printed or stored
  // copy of both keys is redacted (log::redact_url).
  std::string store_url;
  std::string context;  // optional first user message
  TaskSelection tasks;
  std::vector<ModelConfig> models;  // the first is the default generator
  int samples_per_task = 1;
  int max_turns = 5;
  double episode_wall_clock_s = 2400;
  std::int64_t episode_token_budget = 0;  // 0 = unlimited
  double spend_cap_usd = 0;               // 0 = unlimited
  int max_inflight_episodes = 1000;
  ResumeMode resume = ResumeMode::exact;
  Synchronous synchronous = Synchronous::full;  // SQLite PRAGMA synchronous
  std::vector<LifecycleEvent> events;
  EvaluatorConfig evaluator;
  StrategyConfig strategy;
  LogLevel log_level = LogLevel::info;

  bool operator==(const CampaignConfig&) const = default;
};

}  // namespace korch::config
