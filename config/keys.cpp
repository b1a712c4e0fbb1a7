// The key tables: one row a key (its TOML name, KORCH_* variable, default,
// type, doc string, value rules and typed setter/getter), the conversions
// between typed fields and values, and the key-table queries of loader.hpp.
// A new config key is a row here (and a paragraph in docs/config.md).
#include <fmt/format.h>

#include <cctype>
#include <cstdint>
#include <limits>

#include "config/loader_internal.hpp"

namespace korch::config {
namespace detail {

// ---------------------------------------------------------------------------
// Assigning and reading typed fields. `assign` returns an error text when the
// value does not fit the field (an integer out of int range).

std::optional<std::string> assign(std::string& field, const Value& v) {
  field = std::get<std::string>(v);
  return std::nullopt;
}

std::optional<std::string> assign(int& field, const Value& v) {
  auto x = std::get<std::int64_t>(v);
  if (x < std::numeric_limits<int>::min() || x > std::numeric_limits<int>::max())
    return fmt::format("is out of range (got {})", x);
  field = static_cast<int>(x);
  return std::nullopt;
}

std::optional<std::string> assign(std::int64_t& field, const Value& v) {
  field = std::get<std::int64_t>(v);
  return std::nullopt;
}

std::optional<std::string> assign(double& field, const Value& v) {
  field = std::get<double>(v);
  return std::nullopt;
}

std::optional<std::string> assign(bool& field, const Value& v) {
  field = std::get<bool>(v);
  return std::nullopt;
}

std::optional<std::string> assign(std::vector<int>& field, const Value& v) {
  field = std::get<std::vector<int>>(v);
  return std::nullopt;
}

namespace {

Value to_value(const std::string& x) { return x; }
Value to_value(int x) { return static_cast<std::int64_t>(x); }
Value to_value(std::int64_t x) { return x; }
Value to_value(double x) { return x; }
Value to_value(bool x) { return x; }
Value to_value(const std::vector<int>& x) { return x; }
template <NamedEnum E>
Value to_value(E x) {
  return std::string(to_string(x));
}

}  // namespace

// Quotes a string as a TOML basic string.
std::string toml_quote(std::string_view s) {
  std::string out = "\"";
  for (unsigned char c : s) {
    switch (c) {
      case '"': out += "\\\""; break;
      case '\\': out += "\\\\"; break;
      case '\n': out += "\\n"; break;
      case '\t': out += "\\t"; break;
      case '\r': out += "\\r"; break;
      default:
        if (c < 0x20 || c == 0x7f)
          out += fmt::format("\\u{:04X}", static_cast<unsigned>(c));
        else
          out += static_cast<char>(c);
    }
  }
  return out + "\"";
}

std::string render_int_list(const std::vector<int>& xs) {
  std::string out = "[";
  for (std::size_t i = 0; i < xs.size(); ++i) out += (i ? ", " : "") + std::to_string(xs[i]);
  return out + "]";
}

std::string render(const Value& v) {
  struct Visitor {
    std::string operator()(const std::string& s) const { return toml_quote(s); }
    std::string operator()(std::int64_t x) const { return std::to_string(x); }
    std::string operator()(double x) const { return fmt::format("{}", x); }
    std::string operator()(bool x) const { return x ? "true" : "false"; }
    std::string operator()(const std::vector<int>& xs) const { return render_int_list(xs); }
  };
  return std::visit(Visitor{}, v);
}

std::string render_event(const LifecycleEvent& e) {
  std::string out = fmt::format("{{ kind = \"{}\", turn = {}", to_string(e.kind), e.turn);
  if (!e.model.empty()) out += ", model = " + toml_quote(e.model);
  if (!e.samples.empty()) out += ", samples = " + render_int_list(e.samples);
  return out + " }";
}

// ---------------------------------------------------------------------------
// The key tables. Each entry: the documented KeyInfo, the value rules
// (bounds; a vocabulary key's choices are its enum's names) and a
// setter/getter pair on the typed struct (Spec, loader_internal.hpp).

namespace {

// Doc strings that quote a table of config/vocabulary.hpp, so the numbers and
// names are written once.
std::string_view tolerance_doc() {
  static const std::string k_doc = [] {
    const auto strict = tolerance_profile(Tolerance::strict);
    const auto tf32 = tolerance_profile(Tolerance::tf32);
    return fmt::format("\"{}\" (atol=rtol={}, TF32 off) or \"{}\" ({}, TF32 allowed).",
                       to_string(Tolerance::strict), format_tolerance(strict.atol),
                       to_string(Tolerance::tf32), format_tolerance(tf32.atol));
  }();
  return k_doc;
}

std::string_view kind_doc() {
  static const std::string k_doc = enum_choices<LifecycleKind>() + " (required).";
  return k_doc;
}

#define KORCH_FIELD(Struct, expr)                                                            \
  [](Struct& s, const Value& v) -> std::optional<std::string> { return assign(s.expr, v); }, \
      [](const Struct& s) -> Value { return to_value(s.expr); }

constexpr std::optional<double> k_none = std::nullopt;

}  // namespace

const std::vector<Spec<C>>& campaign_specs() {
  static const std::vector<Spec<C>> k_specs = {
      {{"name", "KORCH_NAME", KeyType::string, "\"\"",
        "Campaign name (required). The campaign id is derived from it: keep it unchanged to "
        "resume."},
       k_none,
       false,
       k_none,
       KORCH_FIELD(C, name)},
      {{"db_path", "KORCH_DB_PATH", KeyType::path, "\"korch.db\"",
        "SQLite database that records every step of every episode (a postgres:// URL works too; "
        "see store.url)."},
       k_none,
       false,
       k_none,
       KORCH_FIELD(C, db_path)},
      {{"store.url", "KORCH_STORE_URL", KeyType::string, "\"\"",
        "The store as a URL: postgres://USER@HOST:PORT/DB (PostgreSQL 15, docs/postgres.md) or "
        "sqlite:PATH; empty = the SQLite file db_path. Wins over db_path. Keep the password in "
        "PGPASSFILE or PGPASSWORD; one in the URL is redacted wherever korch prints or stores it."},
       k_none,
       false,
       k_none,
       KORCH_FIELD(C, store_url)},
      {{"context", "KORCH_CONTEXT", KeyType::string, "\"\"",
        "Optional campaign context, sent before the task prompt in the first user message."},
       k_none,
       false,
       k_none,
       KORCH_FIELD(C, context)},
      {{"tasks.kernelbench_dir", "KORCH_TASKS_KERNELBENCH_DIR", KeyType::path, "\"\"",
        "Task source (required): a KernelBench/ folder with level1..level4, or any folder of task "
        "files."},
       k_none,
       false,
       k_none,
       KORCH_FIELD(C, tasks.kernelbench_dir)},
      {{"tasks.levels", "KORCH_TASKS_LEVELS", KeyType::integer_list, "[1]",
        "KernelBench levels to run; ignored for a folder without level subfolders."},
       1,
       false,
       k_none,
       KORCH_FIELD(C, tasks.levels)},
      {{"tasks.ids", "KORCH_TASKS_IDS", KeyType::string, "\"\"",
        "Task numbers to run within each level, e.g. \"1-10,15\"; empty runs all."},
       k_none,
       false,
       k_none,
       KORCH_FIELD(C, tasks.ids)},
      {{"tasks.exclude_flagged", "KORCH_TASKS_EXCLUDE_FLAGGED", KeyType::path, "\"\"",
        "A `korch tasks validate --out` report: the tasks it flags (rounding noise of the "
        "reference, constant or stochastic outputs, ...) are left out and listed in the "
        "campaign's report; a task it lacks or that changed since refuses the start."},
       k_none,
       false,
       k_none,
       KORCH_FIELD(C, tasks.exclude_flagged)},
      {{"samples_per_task", "KORCH_SAMPLES_PER_TASK", KeyType::integer, "1",
        "Independent episodes per (task, model); sample indices are 0-based."},
       1,
       false,
       k_none,
       KORCH_FIELD(C, samples_per_task)},
      {{"max_turns", "KORCH_MAX_TURNS", KeyType::integer, "5",
        "Model replies per episode; the last one is submitted."},
       1,
       false,
       k_none,
       KORCH_FIELD(C, max_turns)},
      {{"episode_wall_clock_s", "KORCH_EPISODE_WALL_CLOCK_S", KeyType::number, "2400",
        "Wall-clock budget of one episode in seconds."},
       0,
       true,
       k_none,
       KORCH_FIELD(C, episode_wall_clock_s)},
      {{"episode_token_budget", "KORCH_EPISODE_TOKEN_BUDGET", KeyType::integer, "0",
        "Token budget of one episode (prompt + completion); 0 = unlimited."},
       0,
       false,
       k_none,
       KORCH_FIELD(C, episode_token_budget)},
      {{"spend_cap_usd", "KORCH_SPEND_CAP_USD", KeyType::number, "0",
        "Campaign spend cap in USD (from the model price tables); 0 = unlimited."},
       0,
       false,
       k_none,
       KORCH_FIELD(C, spend_cap_usd)},
      {{"max_inflight_episodes", "KORCH_MAX_INFLIGHT_EPISODES", KeyType::integer, "1000",
        "Episodes running concurrently."},
       1,
       false,
       k_none,
       KORCH_FIELD(C, max_inflight_episodes)},
      {{"resume", "KORCH_RESUME", KeyType::string, "\"exact\"",
        "How an interrupted episode continues: \"exact\" (rebuild the conversation) or \"compact\" "
        "(summary)."},
       k_none,
       false,
       k_none,
       KORCH_FIELD(C, resume)},
      {{"synchronous", "KORCH_SYNCHRONOUS", KeyType::string, "\"FULL\"",
        "SQLite PRAGMA synchronous: \"OFF\", \"NORMAL\", \"FULL\" or \"EXTRA\"."},
       k_none,
       false,
       k_none,
       KORCH_FIELD(C, synchronous)},
      {{"log_level", "KORCH_LOG_LEVEL", KeyType::string, "\"info\"",
        "Log level: trace, debug, info, warn, error, critical or off."},
       k_none,
       false,
       k_none,
       KORCH_FIELD(C, log_level)},
      {{"evaluator.mode", "KORCH_EVALUATOR_MODE", KeyType::string, "\"mock\"",
        "\"gpu\" (real), \"cpu\" (real pipeline on the CPU) or \"mock\" (no rules, no "
        "compile: fake verdicts and timings, reported with rules_skipped)."},
       k_none,
       false,
       k_none,
       KORCH_FIELD(C, evaluator.mode)},
      {{"evaluator.tolerance", "KORCH_EVALUATOR_TOLERANCE", KeyType::string, "\"strict\"",
        tolerance_doc()},
       k_none,
       false,
       k_none,
       KORCH_FIELD(C, evaluator.tolerance)},
      {{"evaluator.reward", "KORCH_EVALUATOR_REWARD", KeyType::string, "\"speedup\"",
        "Reward: \"speedup\", \"roofline\" or \"beat_baseline\"."},
       k_none,
       false,
       k_none,
       KORCH_FIELD(C, evaluator.reward)},
      {{"evaluator.torch_ops", "KORCH_EVALUATOR_TORCH_OPS", KeyType::string, "\"allow\"",
        "\"allow\" torch operations in forward for parts not replaced, or \"forbid\" them."},
       k_none,
       false,
       k_none,
       KORCH_FIELD(C, evaluator.torch_ops)},
      {{"evaluator.workers", "KORCH_EVALUATOR_WORKERS", KeyType::integer, "2",
        "Concurrent evaluations (cpu mode); gpu mode runs at least evaluator.compile_jobs + 2 per "
        "GPU."},
       1,
       false,
       k_none,
       KORCH_FIELD(C, evaluator.workers)},
      {{"evaluator.gpus", "KORCH_EVALUATOR_GPUS", KeyType::string, "\"all\"",
        "gpu mode: the GPUs to measure on, \"all\" or indices like \"0,1\" or \"0-3\"; one "
        "evaluation per GPU at a time."},
       k_none,
       false,
       k_none,
       KORCH_FIELD(C, evaluator.gpus)},
      {{"evaluator.compile_jobs", "KORCH_EVALUATOR_COMPILE_JOBS", KeyType::integer, "0",
        "gpu mode: concurrent compiles (nvcc, Triton) on the CPU while the GPUs measure; 0 = sized "
        "to the host's cores and memory."},
       0,
       false,
       k_none,
       KORCH_FIELD(C, evaluator.compile_jobs)},
      {{"evaluator.timeout_s", "KORCH_EVALUATOR_TIMEOUT_S", KeyType::number, "300",
        "Wall-clock limit of one evaluation in seconds."},
       0,
       true,
       k_none,
       KORCH_FIELD(C, evaluator.timeout_s)},
      {{"evaluator.memory_budget_mb", "KORCH_EVALUATOR_MEMORY_BUDGET_MB", KeyType::integer, "4096",
        "Per-task memory budget in MiB; larger tasks get the task_too_large verdict."},
       1,
       false,
       k_none,
       KORCH_FIELD(C, evaluator.memory_budget_mb)},
      {{"evaluator.cache_dir", "KORCH_EVALUATOR_CACHE_DIR", KeyType::path, "\"\"",
        "Compile cache folder; empty = <folder of db_path>/korch-cache."},
       k_none,
       false,
       k_none,
       KORCH_FIELD(C, evaluator.cache_dir)},
      {{"evaluator.mock_latency_s", "KORCH_EVALUATOR_MOCK_LATENCY_S", KeyType::number, "0",
        "Mock mode only: simulated time of one evaluation in seconds."},
       0,
       false,
       k_none,
       KORCH_FIELD(C, evaluator.mock_latency_s)},
      {{"evaluator.remote", "KORCH_EVALUATOR_REMOTE", KeyType::boolean, "false",
        "Evaluate on `korch worker` processes through the store's work queue (needs a "
        "postgres:// store) instead of in this process; evaluator.mode names the evaluator the "
        "workers must run (docs/cluster.md)."},
       k_none,
       false,
       k_none,
       KORCH_FIELD(C, evaluator.remote)},
      {{"strategy.kind", "KORCH_STRATEGY_KIND", KeyType::string, "\"grid\"",
        "\"grid\" (every task, model and sample), \"best_of_k\" (stop a task and model at a "
        "fast enough correct kernel), \"refine\" (rounds seeded with the best verified kernel) "
        "or \"budget\" (a spend cap allocated across models by a bandit)."},
       k_none,
       false,
       k_none,
       KORCH_FIELD(C, strategy.kind)},
      {{"strategy.k", "KORCH_STRATEGY_K", KeyType::integer, "4",
        "best_of_k: most samples per (task, model); budget: most episodes per (task, model)."},
       1,
       false,
       k_none,
       KORCH_FIELD(C, strategy.k)},
      {{"strategy.target_speedup", "KORCH_STRATEGY_TARGET_SPEEDUP", KeyType::number, "1",
        "best_of_k: a correct kernel at least this fast stops its (task, model); budget: a "
        "correct episode at least this fast counts as a success."},
       0,
       false,
       k_none,
       KORCH_FIELD(C, strategy.target_speedup)},
      {{"strategy.parallel", "KORCH_STRATEGY_PARALLEL", KeyType::integer, "1",
        "best_of_k: samples of one (task, model) started together; the next wave starts once "
        "they are all final."},
       1,
       false,
       k_none,
       KORCH_FIELD(C, strategy.parallel)},
      {{"strategy.rounds", "KORCH_STRATEGY_ROUNDS", KeyType::integer, "3",
        "refine: rounds of samples_per_task episodes per (task, model); round r+1 of a task "
        "starts from its best verified kernel once round r is final."},
       1,
       false,
       k_none,
       KORCH_FIELD(C, strategy.rounds)},
      {{"strategy.budget_usd", "KORCH_STRATEGY_BUDGET_USD", KeyType::number, "0",
        "budget: LLM spend of the whole campaign in USD after which no episode is started; 0 = "
        "no spend cap."},
       0,
       false,
       k_none,
       KORCH_FIELD(C, strategy.budget_usd)},
      {{"strategy.budget_gpu_hours", "KORCH_STRATEGY_BUDGET_GPU_HOURS", KeyType::number, "0",
        "budget: evaluation hours (the evaluator's wall_s summed) after which no episode is "
        "started; 0 = no such cap."},
       0,
       false,
       k_none,
       KORCH_FIELD(C, strategy.budget_gpu_hours)},
      {{"strategy.bandit", "KORCH_STRATEGY_BANDIT", KeyType::string, "\"thompson\"",
        "budget: \"thompson\" (seeded Thompson sampling) or \"ucb\" (UCB1) over each model's "
        "successes per dollar."},
       k_none,
       false,
       k_none,
       KORCH_FIELD(C, strategy.bandit)},
      {{"strategy.batch", "KORCH_STRATEGY_BATCH", KeyType::integer, "4",
        "budget: episodes allocated per decision; the next decision waits until they are all "
        "final."},
       1,
       false,
       k_none,
       KORCH_FIELD(C, strategy.batch)},
      {{"strategy.seed", "KORCH_STRATEGY_SEED", KeyType::integer, "1",
        "budget: the bandit's seed (decisions depend only on it and the stored results)."},
       k_none,
       false,
       k_none,
       KORCH_FIELD(C, strategy.seed)},
  };
  return k_specs;
}

const std::vector<Spec<M>>& model_specs() {
  static const std::vector<Spec<M>> k_specs = {
      {{"id", "", KeyType::string, "\"\"",
        "korch's name for the model (required, unique; letters, digits, '.', '_', '-')."},
       k_none,
       false,
       k_none,
       KORCH_FIELD(M, id)},
      {{"base_url", "", KeyType::string, "\"\"",
        "OpenAI-compatible endpoint (required), e.g. \"http://127.0.0.1:8000/v1\"."},
       k_none,
       false,
       k_none,
       KORCH_FIELD(M, base_url)},
      {{"model", "", KeyType::string, "\"\"", "Model name sent in the request (required)."},
       k_none,
       false,
       k_none,
       KORCH_FIELD(M, model)},
      {{"api_key_env", "", KeyType::string, "\"\"",
        "Name of the environment variable holding the API key (never the key); empty = no key."},
       k_none,
       false,
       k_none,
       KORCH_FIELD(M, api_key_env)},
      {{"temperature", "", KeyType::number, "0", "Sampling temperature."},
       0,
       false,
       k_none,
       KORCH_FIELD(M, temperature)},
      {{"top_p", "", KeyType::number, "1", "Nucleus sampling probability, in (0, 1]."},
       0,
       true,
       1,
       KORCH_FIELD(M, top_p)},
      {{"max_tokens", "", KeyType::integer, "8192", "Completion token limit per reply."},
       1,
       false,
       k_none,
       KORCH_FIELD(M, max_tokens)},
      {{"concurrency", "", KeyType::integer, "64", "Most requests in flight to this model."},
       1,
       false,
       k_none,
       KORCH_FIELD(M, concurrency)},
      {{"stream", "", KeyType::boolean, "false", "Use SSE streaming."},
       k_none,
       false,
       k_none,
       KORCH_FIELD(M, stream)},
      {{"max_attempts", "", KeyType::integer, "6", "HTTP attempts per call, the first included."},
       1,
       false,
       k_none,
       KORCH_FIELD(M, max_attempts)},
      {{"retry_cap_s", "", KeyType::number, "60",
        "Longest single backoff or Retry-After honoured, in seconds."},
       0,
       false,
       k_none,
       KORCH_FIELD(M, retry_cap_s)},
      {{"connect_timeout_s", "", KeyType::number, "10", "Connection timeout in seconds."},
       0,
       true,
       k_none,
       KORCH_FIELD(M, connect_timeout_s)},
      {{"first_byte_timeout_s", "", KeyType::number, "300",
        "Time to the first response byte, in seconds."},
       0,
       true,
       k_none,
       KORCH_FIELD(M, first_byte_timeout_s)},
      {{"total_timeout_s", "", KeyType::number, "900", "Whole-request timeout in seconds."},
       0,
       true,
       k_none,
       KORCH_FIELD(M, total_timeout_s)},
      {{"stall_timeout_s", "", KeyType::number, "120",
        "Streaming: abort when no bytes arrive for this many seconds."},
       0,
       true,
       k_none,
       KORCH_FIELD(M, stall_timeout_s)},
      {{"price_prompt_per_mtok", "", KeyType::number, "0", "USD per million prompt tokens."},
       0,
       false,
       k_none,
       KORCH_FIELD(M, price_prompt_per_mtok)},
      {{"price_completion_per_mtok", "", KeyType::number, "0",
        "USD per million completion tokens."},
       0,
       false,
       k_none,
       KORCH_FIELD(M, price_completion_per_mtok)},
      {{"price_cached_per_mtok", "", KeyType::number, "0", "USD per million cached prompt tokens."},
       0,
       false,
       k_none,
       KORCH_FIELD(M, price_cached_per_mtok)},
      {{"context_window", "", KeyType::integer, "0", "Context window in tokens; 0 = unknown."},
       0,
       false,
       k_none,
       KORCH_FIELD(M, context_window)},
  };
  return k_specs;
}

#undef KORCH_FIELD

const std::vector<KeyInfo>& event_infos() {
  static const std::vector<KeyInfo> k_infos = {
      {"kind", "", KeyType::string, "\"compaction\"", kind_doc()},
      {"turn", "", KeyType::integer, "0",
       "The event applies before this turn (1-based, <= max_turns) is generated (required)."},
      {"model", "", KeyType::string, "\"\"",
       "model_swap only: id of the model that generates that turn (required for model_swap)."},
      {"samples", "", KeyType::integer_list, "[]",
       "Sample indices (0-based) the event applies to; empty = every sample."},
  };
  return k_infos;
}

namespace {

template <typename Struct>
std::vector<KeyInfo> infos_of(const std::vector<Spec<Struct>>& specs) {
  std::vector<KeyInfo> out;
  for (const auto& s : specs) out.push_back(s.info);
  return out;
}

}  // namespace
}  // namespace detail

using detail::campaign_specs;
using detail::event_infos;
using detail::find_spec;
using detail::infos_of;
using detail::model_specs;
using detail::render;

const std::vector<KeyInfo>& key_table() {
  static const std::vector<KeyInfo> k_table = infos_of(campaign_specs());
  return k_table;
}

const std::vector<KeyInfo>& model_key_table() {
  static const std::vector<KeyInfo> k_table = infos_of(model_specs());
  return k_table;
}

const std::vector<KeyInfo>& event_key_table() { return event_infos(); }

std::string render_key(const CampaignConfig& cfg, std::string_view name) {
  const auto* spec = find_spec(campaign_specs(), name);
  return spec ? render(spec->get(cfg)) : std::string();
}

std::string render_model_key(const ModelConfig& model, std::string_view name) {
  const auto* spec = find_spec(model_specs(), name);
  return spec ? render(spec->get(model)) : std::string();
}

std::string model_env_name(std::string_view model_id, std::string_view key) {
  std::string out = "KORCH_MODELS_";
  for (unsigned char c : model_id)
    out += std::isalnum(c) ? static_cast<char>(std::toupper(c)) : '_';
  out += '_';
  for (unsigned char c : key) out += static_cast<char>(std::toupper(c));
  return out;
}

}  // namespace korch::config
