#include "config/loader.hpp"

#include <fmt/format.h>
#include <toml++/toml.h>

#include <unistd.h>
#include <nlohmann/json.hpp>

#include <algorithm>
#include <cctype>
#include <charconv>
#include <cmath>
#include <cstdint>
#include <filesystem>
#include <functional>
#include <limits>
#include <optional>
#include <set>
#include <variant>

#include "config/gpus.hpp"
#include "config/tasks.hpp"
#include "util/fs.hpp"
#include "util/log.hpp"
#include "util/strings.hpp"

namespace korch::config {
namespace {

namespace fs = std::filesystem;

// A parsed value, before it is stored into a typed field. The alternative
// matches the key's KeyType: string/path -> string, integer -> int64,
// number -> double, boolean -> bool, integer_list -> vector<int>.
using Value = std::variant<std::string, std::int64_t, double, bool, std::vector<int>>;

std::string toml_quote(std::string_view s);

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

// A vocabulary enum is written as its name; an unknown name is refused with
// the list of the allowed ones (config/vocabulary.hpp holds the names).
template <NamedEnum E>
std::optional<std::string> assign(E& field, const Value& v) {
  const auto& s = std::get<std::string>(v);
  auto x = from_string<E>(s);
  if (!x) return fmt::format("must be {} (got {})", enum_choices<E>(), toml_quote(s));
  field = *x;
  return std::nullopt;
}

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

// ---------------------------------------------------------------------------
// The key tables. Each entry: the documented KeyInfo, the value rules
// (bounds; a vocabulary key's choices are its enum's names) and a
// setter/getter pair on the typed struct.

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

template <typename Struct>
struct Spec {
  KeyInfo info;
  std::optional<double> min;   // inclusive lower bound
  bool min_exclusive = false;  // min is exclusive (timeouts > 0)
  std::optional<double> max;   // inclusive upper bound
  std::optional<std::string> (*set)(Struct&, const Value&) = nullptr;
  Value (*get)(const Struct&) = nullptr;
};

#define KORCH_FIELD(Struct, expr)                                                            \
  [](Struct& s, const Value& v) -> std::optional<std::string> { return assign(s.expr, v); }, \
      [](const Struct& s) -> Value { return to_value(s.expr); }

using C = CampaignConfig;
using M = ModelConfig;

constexpr std::optional<double> k_none = std::nullopt;

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

template <typename Struct>
const Spec<Struct>* find_spec(const std::vector<Spec<Struct>>& specs, std::string_view name) {
  for (const auto& s : specs)
    if (s.info.name == name) return &s;
  return nullptr;
}

// ---------------------------------------------------------------------------
// Did-you-mean.

std::size_t edit_distance(std::string_view a, std::string_view b) {
  std::vector<std::size_t> row(b.size() + 1);
  for (std::size_t j = 0; j <= b.size(); ++j) row[j] = j;
  for (std::size_t i = 1; i <= a.size(); ++i) {
    std::size_t diag = row[0];
    row[0] = i;
    for (std::size_t j = 1; j <= b.size(); ++j) {
      std::size_t up = row[j];
      row[j] = std::min({row[j] + 1, row[j - 1] + 1, diag + (a[i - 1] == b[j - 1] ? 0 : 1)});
      diag = up;
    }
  }
  return row[b.size()];
}

// The closest candidate to `key`, or "" when none is close. A candidate whose
// last dotted segment equals `key` ("mode" -> "evaluator.mode") also counts.
std::string closest(std::string_view key, const std::vector<std::string>& candidates) {
  std::string best;
  std::size_t best_d = std::max<std::size_t>(2, key.size() / 3) + 1;
  for (const auto& c : candidates) {
    auto dot = c.rfind('.');
    if (dot != std::string::npos && std::string_view(c).substr(dot + 1) == key) return c;
    auto d = edit_distance(key, c);
    if (d < best_d) {
      best_d = d;
      best = c;
    }
  }
  return best;
}

std::string suggestion(std::string_view key, const std::vector<std::string>& candidates) {
  auto c = closest(key, candidates);
  return c.empty() ? "" : " (did you mean '" + c + "'?)";
}

// ---------------------------------------------------------------------------
// Text (env / flag) parsing with the same type rules as the file.

std::optional<std::int64_t> parse_int(std::string_view s) {
  s = trim(s);
  if (!s.empty() && s.front() == '+') s.remove_prefix(1);
  std::int64_t x = 0;
  auto [p, ec] = std::from_chars(s.data(), s.data() + s.size(), x);
  if (s.empty() || ec != std::errc() || p != s.data() + s.size()) return std::nullopt;
  return x;
}

std::optional<double> parse_double(std::string_view s) {
  s = trim(s);
  if (!s.empty() && s.front() == '+') s.remove_prefix(1);
  double x = 0;
  auto [p, ec] = std::from_chars(s.data(), s.data() + s.size(), x);
  if (s.empty() || ec != std::errc() || p != s.data() + s.size() || !std::isfinite(x))
    return std::nullopt;
  return x;
}

const char* type_phrase(KeyType t) {
  switch (t) {
    case KeyType::string:
    case KeyType::path: return "a string";
    case KeyType::integer: return "an integer";
    case KeyType::number: return "a number";
    case KeyType::boolean: return "a boolean (true or false)";
    case KeyType::integer_list: return "a list of integers, e.g. [1, 2]";
  }
  return "a value";
}

// Parses `text` as a value of type `t`; nullopt when it does not parse.
std::optional<Value> parse_text(KeyType t, std::string_view text) {
  switch (t) {
    case KeyType::string:
    case KeyType::path: return Value{std::string(text)};
    case KeyType::integer:
      if (auto x = parse_int(text)) return Value{*x};
      return std::nullopt;
    case KeyType::number:
      if (auto x = parse_double(text)) return Value{*x};
      return std::nullopt;
    case KeyType::boolean: {
      auto s = trim(text);
      if (s == "true" || s == "1" || s == "yes" || s == "on") return Value{true};
      if (s == "false" || s == "0" || s == "no" || s == "off") return Value{false};
      return std::nullopt;
    }
    case KeyType::integer_list: {
      auto s = trim(text);
      if (!s.empty() && s.front() == '[') {
        if (s.back() != ']') return std::nullopt;
        s = trim(s.substr(1, s.size() - 2));
      }
      std::vector<int> xs;
      while (!s.empty()) {
        auto comma = s.find(',');
        auto part = s.substr(0, comma);
        auto x = parse_int(part);
        if (!x || *x < std::numeric_limits<int>::min() || *x > std::numeric_limits<int>::max())
          return std::nullopt;
        xs.push_back(static_cast<int>(*x));
        if (comma == std::string_view::npos) break;
        s = s.substr(comma + 1);
        if (trim(s).empty()) return std::nullopt;  // trailing comma
      }
      return Value{std::move(xs)};
    }
  }
  return std::nullopt;
}

// Converts a TOML node to a value of type `t`; nullopt on a type mismatch.
std::optional<Value> node_value(KeyType t, const toml::node& node) {
  switch (t) {
    case KeyType::string:
    case KeyType::path:
      if (auto s = node.as_string()) return Value{s->get()};
      return std::nullopt;
    case KeyType::integer:
      if (auto x = node.as_integer()) return Value{x->get()};
      return std::nullopt;
    case KeyType::number:
      if (auto x = node.as_integer()) return Value{static_cast<double>(x->get())};
      if (auto x = node.as_floating_point(); x && std::isfinite(x->get())) return Value{x->get()};
      return std::nullopt;
    case KeyType::boolean:
      if (auto x = node.as_boolean()) return Value{x->get()};
      return std::nullopt;
    case KeyType::integer_list: {
      auto arr = node.as_array();
      if (!arr) return std::nullopt;
      std::vector<int> xs;
      for (const auto& el : *arr) {
        auto x = el.as_integer();
        if (!x || x->get() < std::numeric_limits<int>::min() ||
            x->get() > std::numeric_limits<int>::max())
          return std::nullopt;
        xs.push_back(static_cast<int>(x->get()));
      }
      return Value{std::move(xs)};
    }
  }
  return std::nullopt;
}

// Checks choices and bounds; returns the error text (without location).
template <typename Struct>
std::optional<std::string> check_rules(const Spec<Struct>& spec, std::string_view label,
                                       const Value& v) {
  auto check_one = [&](double x, const std::string& shown) -> std::optional<std::string> {
    if (spec.min) {
      if (spec.min_exclusive && !(x > *spec.min))
        return fmt::format("'{}' must be > {} (got {})", label, *spec.min, shown);
      if (!spec.min_exclusive && x < *spec.min)
        return fmt::format("'{}' must be >= {} (got {})", label, *spec.min, shown);
    }
    if (spec.max && x > *spec.max)
      return fmt::format("'{}' must be <= {} (got {})", label, *spec.max, shown);
    return std::nullopt;
  };
  if (auto x = std::get_if<std::int64_t>(&v))
    return check_one(static_cast<double>(*x), std::to_string(*x));
  if (auto x = std::get_if<double>(&v)) return check_one(*x, fmt::format("{}", *x));
  if (auto xs = std::get_if<std::vector<int>>(&v)) {
    for (int x : *xs)
      if (auto e = check_one(x, std::to_string(x))) return e;
  }
  return std::nullopt;
}

bool valid_model_id(std::string_view id) {
  return !id.empty() && std::all_of(id.begin(), id.end(), [](unsigned char c) {
    return std::isalnum(c) || c == '.' || c == '_' || c == '-';
  });
}

bool valid_env_name(std::string_view name) {
  if (name.empty() || std::isdigit(static_cast<unsigned char>(name.front()))) return false;
  return std::all_of(name.begin(), name.end(),
                     [](unsigned char c) { return std::isalnum(c) || c == '_'; });
}

std::string render_event(const LifecycleEvent& e) {
  std::string out = fmt::format("{{ kind = \"{}\", turn = {}", to_string(e.kind), e.turn);
  if (!e.model.empty()) out += ", model = " + toml_quote(e.model);
  if (!e.samples.empty()) out += ", samples = " + render_int_list(e.samples);
  return out + " }";
}

// ---------------------------------------------------------------------------
// Validation shared by load_campaign() and validate(). `where(key)` returns
// the message prefix for a key ("file:line: ", "KORCH_X: ", "" ...). Keys:
// "max_turns", "models[0]", "models[0].top_p", "events[1]", "events[1].turn".

using Locator = std::function<std::string(const std::string& key)>;

// `unknown_names`: vocabulary keys whose winning value named no choice (key ->
// "'key' must be ..."), reported here, in key order, like any other rule.
using UnknownNames = std::map<std::string, std::string>;

Result<void> validate_with(const CampaignConfig& cfg, const Locator& where,
                           std::vector<std::string>* warnings,
                           const UnknownNames& unknown_names = {}) {
  for (const auto& spec : campaign_specs()) {
    std::string key(spec.info.name);
    if (auto it = unknown_names.find(key); it != unknown_names.end())
      return fail(where(key) + it->second);
    if (auto e = check_rules(spec, key, spec.get(cfg))) return fail(where(key) + *e);
  }
  if (cfg.name.empty())
    return fail(where("name") + "'name' is required (the campaign id is derived from it)");
  if (cfg.tasks.kernelbench_dir.empty())
    return fail(where("tasks.kernelbench_dir") +
                "'tasks.kernelbench_dir' is required: set it under [tasks] or with "
                "KORCH_TASKS_KERNELBENCH_DIR");
  if (cfg.tasks.levels.empty())
    return fail(where("tasks.levels") + "'tasks.levels' must not be empty");
  if (cfg.evaluator.reward == Reward::roofline && cfg.evaluator.mode == EvalMode::cpu)
    return fail(where("evaluator.reward") +
                "'evaluator.reward = \"roofline\"' needs the GPU's datasheet peaks: use it with "
                "evaluator.mode = \"gpu\" (or \"mock\"); the cpu mode cannot compute t_min");
  if (auto ids = parse_id_ranges(cfg.tasks.ids); !ids)
    return fail(where("tasks.ids") + "'tasks.ids': " + ids.error().message);
  if (auto g = parse_gpu_list(cfg.evaluator.gpus, std::nullopt); !g)
    return fail(where("evaluator.gpus") + "'evaluator.gpus': " + g.error().message);

  if (cfg.strategy.kind == StrategyKind::budget && cfg.strategy.budget_usd <= 0 &&
      cfg.strategy.budget_gpu_hours <= 0)
    return fail(where("strategy.kind") +
                "'strategy.kind = \"budget\"' needs a cap: set strategy.budget_usd or "
                "strategy.budget_gpu_hours");
  if (cfg.models.empty())
    return fail(where("models") + "no models: add a [[models]] table with id, base_url and model");
  std::map<std::string, std::size_t> seen;
  for (std::size_t i = 0; i < cfg.models.size(); ++i) {
    const auto& m = cfg.models[i];
    auto at = fmt::format("models[{}]", i);
    for (const auto& spec : model_specs()) {
      auto key = at + "." + std::string(spec.info.name);
      if (auto e = check_rules(spec, key, spec.get(m))) return fail(where(key) + *e);
    }
    for (std::string_view req : {"id", "base_url", "model"}) {
      if (std::get<std::string>(find_spec(model_specs(), req)->get(m)).empty())
        return fail(where(at) + fmt::format("'{}.{}' is required", at, req));
    }
    if (!valid_model_id(m.id))
      return fail(where(at + ".id") +
                  fmt::format("'{}.id' may only hold letters, digits, '.', '_' and '-' (got {})",
                              at, toml_quote(m.id)));
    if (!m.base_url.starts_with("http://") && !m.base_url.starts_with("https://"))
      return fail(where(at + ".base_url") +
                  fmt::format("'{}.base_url' must start with http:// or https:// (got {})", at,
                              toml_quote(m.base_url)));
    // Never echo this value: a user may have pasted the key itself here.
    if (!m.api_key_env.empty() && !valid_env_name(m.api_key_env))
      return fail(where(at + ".api_key_env") +
                  fmt::format("'{}.api_key_env' must be the NAME of an environment variable "
                              "(letters, digits, '_'), not the key itself",
                              at));
    if (auto [it, fresh] = seen.emplace(m.id, i); !fresh)
      return fail(where(at + ".id") +
                  fmt::format("duplicate model id '{}' (also models[{}])", m.id, it->second));
  }

  for (std::size_t i = 0; i < cfg.events.size(); ++i) {
    const auto& e = cfg.events[i];
    auto at = fmt::format("events[{}]", i);
    if (e.turn < 1)
      return fail(where(at + ".turn") + fmt::format("'{}.turn' must be >= 1 (got {})", at, e.turn));
    if (e.turn > cfg.max_turns && warnings)
      warnings->push_back(
          where(at + ".turn") +
          fmt::format("'{}' at turn {} never fires: max_turns is {}", at, e.turn, cfg.max_turns));
    if (e.kind == LifecycleKind::model_swap) {
      if (e.model.empty())
        return fail(where(at) + fmt::format("'{}' is a model_swap event: 'model' is required", at));
      if (!seen.contains(e.model))
        return fail(where(at + ".model") + fmt::format("'{}.model' names an unknown model '{}'{}",
                                                       at, e.model, suggestion(e.model, [&] {
                                                         std::vector<std::string> ids;
                                                         for (const auto& m : cfg.models)
                                                           ids.push_back(m.id);
                                                         return ids;
                                                       }())));
    } else if (!e.model.empty()) {
      return fail(where(at + ".model") +
                  fmt::format("'{}.model' only applies to model_swap events (this one is '{}')", at,
                              to_string(e.kind)));
    }
    const int samples = max_samples_per_task_model(cfg);
    for (int s : e.samples)
      if (s < 0 || s >= samples)
        return fail(where(at + ".samples") +
                    fmt::format("'{}.samples' holds {}, but sample indices run from 0 to {} "
                                "(samples_per_task = {}, strategy.kind = \"{}\")",
                                at, s, samples - 1, cfg.samples_per_task,
                                to_string(cfg.strategy.kind)));
  }
  return {};
}

// ---------------------------------------------------------------------------
// The loader: applies the layers in order and remembers each value's origin.

struct Origin {
  std::string label;  // "default", "file:<path>:<line>", "env:KORCH_X", "flag"
  std::string where;  // message prefix, e.g. "cfg.toml:12: "
};

class Loader {
 public:
  explicit Loader(std::string path) : m_path(std::move(path)) {
    m_dir = fs::absolute(fs::path(m_path)).parent_path();
  }

  Result<void> apply_file(const toml::table& root);
  Result<void> apply_env(const std::map<std::string, std::string>& env,
                         std::vector<std::string>& warnings);
  Result<void> apply_flags(const std::vector<std::string>& overrides);
  Result<void> validate(std::vector<std::string>& warnings) const {
    return validate_with(
        m_cfg, [this](const std::string& key) { return where(key); }, &warnings, m_unknown_names);
  }
  LoadedConfig finish(std::vector<std::string> warnings) const;
  // Only each key's own rules (load_settings()).
  Result<void> validate_keys() const {
    for (const auto& spec : campaign_specs()) {
      std::string key(spec.info.name);
      if (auto it = m_unknown_names.find(key); it != m_unknown_names.end())
        return fail(where(key) + it->second);
      if (auto e = check_rules(spec, key, spec.get(m_cfg))) return fail(where(key) + *e);
    }
    return {};
  }

 private:
  std::string file_where(const toml::node& node) const {
    return fmt::format("{}:{}: ", m_path, node.source().begin.line);
  }
  std::string file_where(const toml::key& key) const {
    return fmt::format("{}:{}: ", m_path, key.source().begin.line);
  }
  Origin file_origin(const toml::node& node) const {
    return {fmt::format("file:{}:{}", m_path, node.source().begin.line), file_where(node)};
  }
  // The prefix for errors about `key`: its own origin, else its parent's
  // ("models[0].x" -> "models[0]"), else the file.
  std::string where(std::string key) const {
    while (true) {
      if (auto it = m_origins.find(key); it != m_origins.end() && it->second.label != "default")
        return it->second.where;
      auto cut = key.find_last_of(".[");
      if (cut == std::string::npos || cut == 0) break;
      // "models[0].x" -> "models[0]"; "models[0]" -> "models" (stop there)
      if (key[cut] == '[') break;
      key.resize(cut);
    }
    return m_path + ": ";
  }
  std::string resolve(const std::string& p) const {
    if (p.find("://") != std::string::npos) return p;  // a URL (db_path = "postgres://...")
    if (p.rfind("sqlite:", 0) == 0) return "sqlite:" + resolve(p.substr(7));
    if (p.empty() || fs::path(p).is_absolute()) return p;
    return (m_dir / p).lexically_normal().string();
  }

  Result<void> set_campaign_from_node(const Spec<C>& spec, const toml::node& node);
  Result<void> load_model(std::size_t index, const toml::table& tbl);
  Result<void> load_event(std::size_t index, const toml::table& tbl);

  std::string m_path;
  fs::path m_dir;
  CampaignConfig m_cfg;
  std::map<std::string, Origin> m_origins;
  // A vocabulary value that names no choice is reported by validate() with
  // the origin of the value that won, so a later layer (env, flag) can
  // still replace it, as for every other value rule.
  UnknownNames m_unknown_names;

  // Sets campaign key `spec` to `v`. Returns the error text of a value that
  // does not fit its field; an unknown vocabulary name is kept for validate().
  std::optional<std::string> set_campaign(const Spec<C>& spec, const Value& v) {
    std::string key(spec.info.name);
    auto e = spec.set(m_cfg, v);
    if (e && spec.info.type == KeyType::string) {
      m_unknown_names[key] = fmt::format("'{}' {}", key, *e);
      return std::nullopt;
    }
    if (!e) m_unknown_names.erase(key);
    return e;
  }
};

std::vector<std::string> campaign_candidates() {
  std::vector<std::string> out = {"tasks", "evaluator", "store", "strategy", "models", "events"};
  for (const auto& s : campaign_specs()) out.emplace_back(s.info.name);
  return out;
}

Result<void> Loader::set_campaign_from_node(const Spec<C>& spec, const toml::node& node) {
  std::string key(spec.info.name);
  auto v = node_value(spec.info.type, node);
  if (!v)
    return fail(file_where(node) +
                fmt::format("'{}' must be {}", key, type_phrase(spec.info.type)));
  if (spec.info.type == KeyType::path) v = Value{resolve(std::get<std::string>(*v))};
  if (auto e = set_campaign(spec, *v))
    return fail(file_where(node) + fmt::format("'{}' {}", key, *e));
  m_origins[key] = file_origin(node);
  return {};
}

Result<void> Loader::load_model(std::size_t index, const toml::table& tbl) {
  auto at = fmt::format("models[{}]", index);
  ModelConfig m;
  m_origins[at] = file_origin(tbl);
  std::vector<std::string> names;
  for (const auto& s : model_specs()) names.push_back(at + "." + std::string(s.info.name));
  for (auto&& [k, node] : tbl) {
    auto key = at + "." + std::string(k.str());
    const auto* spec = find_spec(model_specs(), k.str());
    if (!spec)
      return fail(file_where(k) + fmt::format("unknown key '{}'{}", key, suggestion(key, names)));
    auto v = node_value(spec->info.type, node);
    if (!v)
      return fail(file_where(node) +
                  fmt::format("'{}' must be {}", key, type_phrase(spec->info.type)));
    if (auto e = spec->set(m, *v)) return fail(file_where(node) + fmt::format("'{}' {}", key, *e));
    m_origins[key] = file_origin(node);
  }
  m_cfg.models.push_back(std::move(m));
  return {};
}

Result<void> Loader::load_event(std::size_t index, const toml::table& tbl) {
  auto at = fmt::format("events[{}]", index);
  LifecycleEvent e;
  m_origins[at] = file_origin(tbl);
  std::vector<std::string> names;
  for (const auto& info : event_infos()) names.push_back(at + "." + std::string(info.name));
  bool has_kind = false, has_turn = false;
  for (auto&& [k, node] : tbl) {
    auto key = at + "." + std::string(k.str());
    auto it = std::find_if(event_infos().begin(), event_infos().end(),
                           [&](const KeyInfo& i) { return i.name == k.str(); });
    if (it == event_infos().end())
      return fail(file_where(k) + fmt::format("unknown key '{}'{}", key, suggestion(key, names)));
    auto v = node_value(it->type, node);
    if (!v)
      return fail(file_where(node) + fmt::format("'{}' must be {}", key, type_phrase(it->type)));
    m_origins[key] = file_origin(node);
    if (it->name == "kind") {
      if (auto err = assign(e.kind, *v))
        return fail(file_where(node) + fmt::format("'{}' {}", key, *err));
      has_kind = true;
    } else if (it->name == "turn") {
      auto x = std::get<std::int64_t>(*v);
      if (x < 1 || x > std::numeric_limits<int>::max())
        return fail(file_where(node) + fmt::format("'{}' must be >= 1 (got {})", key, x));
      e.turn = static_cast<int>(x);
      has_turn = true;
    } else if (it->name == "model") {
      e.model = std::get<std::string>(*v);
    } else {
      e.samples = std::get<std::vector<int>>(*v);
    }
  }
  if (!has_kind) return fail(file_where(tbl) + fmt::format("'{}.kind' is required", at));
  if (!has_turn) return fail(file_where(tbl) + fmt::format("'{}.turn' is required", at));
  m_cfg.events.push_back(std::move(e));
  return {};
}

Result<void> Loader::apply_file(const toml::table& root) {
  const auto candidates = campaign_candidates();
  for (auto&& [k, node] : root) {
    std::string key(k.str());
    if (key == "tasks" || key == "evaluator" || key == "store" || key == "strategy") {
      auto tbl = node.as_table();
      if (!tbl)
        return fail(file_where(node) + fmt::format("'{}' must be a table ([{}])", key, key));
      for (auto&& [k2, node2] : *tbl) {
        auto dotted = key + "." + std::string(k2.str());
        const auto* spec = find_spec(campaign_specs(), dotted);
        if (!spec)
          return fail(file_where(k2) +
                      fmt::format("unknown key '{}'{}", dotted, suggestion(dotted, candidates)));
        if (auto r = set_campaign_from_node(*spec, node2); !r) return r;
      }
    } else if (key == "models" || key == "events") {
      auto arr = node.as_array();
      if (!arr || (!arr->empty() && !arr->is_array_of_tables()))
        return fail(file_where(node) +
                    fmt::format("'{}' must be an array of tables ([[{}]])", key, key));
      for (std::size_t i = 0; i < arr->size(); ++i) {
        const auto& tbl = *arr->get(i)->as_table();
        auto r = key == "models" ? load_model(i, tbl) : load_event(i, tbl);
        if (!r) return r;
      }
    } else {
      const auto* spec = find_spec(campaign_specs(), key);
      if (!spec || key.find('.') != std::string::npos)
        return fail(file_where(k) +
                    fmt::format("unknown key '{}'{}", key, suggestion(key, candidates)));
      if (auto r = set_campaign_from_node(*spec, node); !r) return r;
    }
  }
  return {};
}

Result<void> Loader::apply_env(const std::map<std::string, std::string>& env,
                               std::vector<std::string>& warnings) {
  std::set<std::string> known;
  for (const auto& spec : campaign_specs()) {
    std::string var(spec.info.env);
    known.insert(var);
    auto it = env.find(var);
    if (it == env.end()) continue;
    std::string key(spec.info.name);
    auto v = parse_text(spec.info.type, it->second);
    if (!v)
      return fail(fmt::format("{}: '{}' must be {} (got {})", var, key, type_phrase(spec.info.type),
                              toml_quote(it->second)));
    if (auto e = set_campaign(spec, *v)) return fail(fmt::format("{}: '{}' {}", var, key, *e));
    m_origins[key] = {"env:" + var, var + ": "};
  }
  for (std::size_t i = 0; i < m_cfg.models.size(); ++i) {
    auto& m = m_cfg.models[i];
    for (const auto& spec : model_specs()) {
      if (spec.info.name == "id") continue;
      auto var = model_env_name(m.id, spec.info.name);
      known.insert(var);
      auto it = env.find(var);
      if (it == env.end()) continue;
      auto key = fmt::format("models[{}].{}", i, spec.info.name);
      auto v = parse_text(spec.info.type, it->second);
      if (!v) {
        // Do not echo api_key_env's value here: it may be a pasted key.
        return fail(fmt::format("{}: '{}' must be {}", var, key, type_phrase(spec.info.type)));
      }
      if (auto e = spec.set(m, *v)) return fail(fmt::format("{}: '{}' {}", var, key, *e));
      m_origins[key] = {"env:" + var, var + ": "};
    }
  }
  std::vector<std::string> known_list(known.begin(), known.end());
  for (const auto& [var, value] : env) {
    if (!var.starts_with("KORCH_") || known.contains(var)) continue;
    if (auto c = closest(var, known_list); !c.empty())
      warnings.push_back(fmt::format("{} is not a korch setting (did you mean {}?)", var, c));
  }
  return {};
}

Result<void> Loader::apply_flags(const std::vector<std::string>& overrides) {
  const auto candidates = campaign_candidates();
  for (const auto& flag : overrides) {
    auto eq = flag.find('=');
    auto where = "--set " + flag + ": ";
    if (eq == std::string::npos) return fail(where + "expected key=value");
    std::string key(trim(std::string_view(flag).substr(0, eq)));
    std::string text(trim(std::string_view(flag).substr(eq + 1)));
    if (key.starts_with("models.")) {
      auto dot = key.rfind('.');
      if (dot <= 7) return fail(where + "expected models.<id>.<key>=value");
      auto id = key.substr(7, dot - 7);
      auto field = key.substr(dot + 1);
      auto it = std::find_if(m_cfg.models.begin(), m_cfg.models.end(),
                             [&](const ModelConfig& m) { return m.id == id; });
      if (it == m_cfg.models.end()) {
        std::vector<std::string> ids;
        for (const auto& m : m_cfg.models) ids.push_back(m.id);
        return fail(where + fmt::format("no model with id '{}'{}", id, suggestion(id, ids)));
      }
      std::vector<std::string> names;
      for (const auto& s : model_specs()) names.emplace_back(s.info.name);
      const auto* spec = find_spec(model_specs(), field);
      if (!spec)
        return fail(where +
                    fmt::format("unknown model key '{}'{}", field, suggestion(field, names)));
      if (field == "id") return fail(where + "a model's id can only be set in the file");
      auto i = static_cast<std::size_t>(it - m_cfg.models.begin());
      auto label = fmt::format("models[{}].{}", i, field);
      auto v = parse_text(spec->info.type, text);
      if (!v)
        return fail(where + fmt::format("'{}' must be {}", label, type_phrase(spec->info.type)));
      if (auto e = spec->set(*it, *v)) return fail(where + fmt::format("'{}' {}", label, *e));
      m_origins[label] = {"flag", where};
      continue;
    }
    const auto* spec = find_spec(campaign_specs(), key);
    if (!spec) {
      if (key == "models" || key == "events")
        return fail(where + fmt::format("'{}' can only be set in the file", key));
      return fail(where + fmt::format("unknown key '{}'{}", key, suggestion(key, candidates)));
    }
    auto v = parse_text(spec->info.type, text);
    if (!v)
      return fail(where + fmt::format("'{}' must be {} (got {})", key, type_phrase(spec->info.type),
                                      toml_quote(text)));
    if (auto e = set_campaign(*spec, *v)) return fail(where + fmt::format("'{}' {}", key, *e));
    m_origins[key] = {"flag", where};
  }
  return {};
}

LoadedConfig Loader::finish(std::vector<std::string> warnings) const {
  LoadedConfig out;
  out.config = m_cfg;
  if (!out.config.store_url.empty()) out.config.db_path = out.config.store_url;
  out.path = m_path;
  out.warnings = std::move(warnings);
  auto label = [&](const std::string& key) {
    auto it = m_origins.find(key);
    return it == m_origins.end() ? std::string("default") : it->second.label;
  };
  for (const auto& spec : campaign_specs()) {
    std::string key(spec.info.name);
    out.values.push_back({key, log::redact_url(render(spec.get(m_cfg))), label(key)});
  }
  for (std::size_t i = 0; i < m_cfg.models.size(); ++i) {
    for (const auto& spec : model_specs()) {
      out.values.push_back({fmt::format("models.{}.{}", m_cfg.models[i].id, spec.info.name),
                            render(spec.get(m_cfg.models[i])),
                            label(fmt::format("models[{}].{}", i, spec.info.name))});
    }
  }
  for (std::size_t i = 0; i < m_cfg.events.size(); ++i) {
    auto key = fmt::format("events[{}]", i);
    out.values.push_back({key, render_event(m_cfg.events[i]), label(key)});
  }
  return out;
}

// ---------------------------------------------------------------------------
// The JSON record of a resolved config (config_to_json / config_from_json).
// Written from the key tables, so a key added to a table is recorded with no
// further code; dotted names nest ("evaluator.mode" -> {"evaluator": {"mode"}}).

nlohmann::ordered_json value_json(const Value& v) {
  struct Visitor {
    nlohmann::ordered_json operator()(const std::string& s) const { return s; }
    nlohmann::ordered_json operator()(std::int64_t x) const { return x; }
    nlohmann::ordered_json operator()(double x) const { return x; }
    nlohmann::ordered_json operator()(bool x) const { return x; }
    nlohmann::ordered_json operator()(const std::vector<int>& xs) const { return xs; }
  };
  return std::visit(Visitor{}, v);
}

// The JSON value `j` as a value of type `t`; nullopt on a type mismatch.
std::optional<Value> json_value(KeyType t, const nlohmann::ordered_json& j) {
  switch (t) {
    case KeyType::string:
    case KeyType::path:
      if (j.is_string()) return Value{j.get<std::string>()};
      return std::nullopt;
    case KeyType::integer:
      if (j.is_number_integer()) return Value{j.get<std::int64_t>()};
      return std::nullopt;
    case KeyType::number:
      if (j.is_number()) return Value{j.get<double>()};
      return std::nullopt;
    case KeyType::boolean:
      if (j.is_boolean()) return Value{j.get<bool>()};
      return std::nullopt;
    case KeyType::integer_list: {
      if (!j.is_array()) return std::nullopt;
      std::vector<int> xs;
      for (const auto& el : j) {
        if (!el.is_number_integer()) return std::nullopt;
        xs.push_back(el.get<int>());
      }
      return Value{std::move(xs)};
    }
  }
  return std::nullopt;
}

// The node at dotted `name` under `root`; nullptr when absent.
const nlohmann::ordered_json* find_dotted(const nlohmann::ordered_json& root,
                                          std::string_view name) {
  const nlohmann::ordered_json* node = &root;
  while (true) {
    auto dot = name.find('.');
    auto part = std::string(name.substr(0, dot));
    if (!node->is_object()) return nullptr;
    auto it = node->find(part);
    if (it == node->end()) return nullptr;
    node = &*it;
    if (dot == std::string_view::npos) return node;
    name.remove_prefix(dot + 1);
  }
}

nlohmann::ordered_json& make_dotted(nlohmann::ordered_json& root, std::string_view name) {
  nlohmann::ordered_json* node = &root;
  while (true) {
    auto dot = name.find('.');
    node = &(*node)[std::string(name.substr(0, dot))];
    if (dot == std::string_view::npos) return *node;
    name.remove_prefix(dot + 1);
  }
}

template <typename Struct>
nlohmann::ordered_json specs_to_json(const std::vector<Spec<Struct>>& specs, const Struct& s) {
  nlohmann::ordered_json j = nlohmann::ordered_json::object();
  for (const auto& spec : specs) {
    auto v = spec.get(s);
    // A store location may carry a password: the record keeps it redacted.
    if (auto* text = std::get_if<std::string>(&v)) *text = log::redact_url(*text);
    make_dotted(j, spec.info.name) = value_json(v);
  }
  return j;
}

// Sets every key of `specs` present in `j`; a missing key keeps its default.
template <typename Struct>
Result<void> specs_from_json(const std::vector<Spec<Struct>>& specs,
                             const nlohmann::ordered_json& j, std::string_view at, Struct& s) {
  for (const auto& spec : specs) {
    const auto* node = find_dotted(j, spec.info.name);
    if (!node) continue;
    auto label = fmt::format("{}{}", at, spec.info.name);
    auto v = json_value(spec.info.type, *node);
    if (!v) return fail(fmt::format("'{}' must be {}", label, type_phrase(spec.info.type)));
    if (auto e = spec.set(s, *v)) return fail(fmt::format("'{}' {}", label, *e));
  }
  return {};
}

nlohmann::ordered_json event_to_json(const LifecycleEvent& e) {
  return {
      {"kind", to_string(e.kind)}, {"turn", e.turn}, {"model", e.model}, {"samples", e.samples}};
}

Result<LifecycleEvent> event_from_json(const nlohmann::ordered_json& j, const std::string& at) {
  LifecycleEvent e;
  for (const auto& info : event_infos()) {
    auto it = j.find(std::string(info.name));
    if (it == j.end()) continue;
    auto key = fmt::format("{}.{}", at, info.name);
    auto v = json_value(info.type, *it);
    if (!v) return fail(fmt::format("'{}' must be {}", key, type_phrase(info.type)));
    if (info.name == "kind") {
      if (auto err = assign(e.kind, *v)) return fail(fmt::format("'{}' {}", key, *err));
    } else if (info.name == "turn") {
      if (auto err = assign(e.turn, *v)) return fail(fmt::format("'{}' {}", key, *err));
    } else if (info.name == "model") {
      e.model = std::get<std::string>(*v);
    } else {
      e.samples = std::get<std::vector<int>>(*v);
    }
  }
  return e;
}

template <typename Struct>
std::vector<KeyInfo> infos_of(const std::vector<Spec<Struct>>& specs) {
  std::vector<KeyInfo> out;
  for (const auto& s : specs) out.push_back(s.info);
  return out;
}

}  // namespace

// ---------------------------------------------------------------------------

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

Result<LoadedConfig> load_campaign(const std::string& path,
                                   const std::map<std::string, std::string>& env,
                                   const std::vector<std::string>& overrides) {
  auto text = read_file(path);
  if (!text) return fail(text.error().message);
  toml::table root;
  try {
    root = toml::parse(*text, path);
  } catch (const toml::parse_error& e) {
    return fail(fmt::format("{}:{}:{}: {}", path, e.source().begin.line, e.source().begin.column,
                            e.description()));
  }
  Loader loader(path);
  std::vector<std::string> warnings;
  if (auto r = loader.apply_file(root); !r) return std::unexpected(r.error());
  if (auto r = loader.apply_env(env, warnings); !r) return std::unexpected(r.error());
  if (auto r = loader.apply_flags(overrides); !r) return std::unexpected(r.error());
  if (auto r = loader.validate(warnings); !r) return std::unexpected(r.error());
  return loader.finish(std::move(warnings));
}

Result<LoadedConfig> load_settings(const std::map<std::string, std::string>& env,
                                   const std::vector<std::string>& overrides) {
  Loader loader("(no config file)");
  std::vector<std::string> warnings;
  if (auto r = loader.apply_env(env, warnings); !r) return std::unexpected(r.error());
  if (auto r = loader.apply_flags(overrides); !r) return std::unexpected(r.error());
  if (auto r = loader.validate_keys(); !r) return std::unexpected(r.error());
  return loader.finish(std::move(warnings));
}

std::string config_to_json(const CampaignConfig& cfg) {
  auto j = specs_to_json(campaign_specs(), cfg);
  auto& models = j["models"] = nlohmann::ordered_json::array();
  for (const auto& m : cfg.models) models.push_back(specs_to_json(model_specs(), m));
  auto& events = j["events"] = nlohmann::ordered_json::array();
  for (const auto& e : cfg.events) events.push_back(event_to_json(e));
  return j.dump();
}

Result<CampaignConfig> config_from_json(std::string_view json) {
  auto j = nlohmann::ordered_json::parse(json, nullptr, false);
  if (j.is_discarded() || !j.is_object()) return fail("config JSON: not a JSON object");
  CampaignConfig cfg;
  if (auto r = specs_from_json(campaign_specs(), j, "", cfg); !r) return std::unexpected(r.error());
  if (auto it = j.find("models"); it != j.end() && it->is_array()) {
    for (std::size_t i = 0; i < it->size(); ++i) {
      ModelConfig m;
      auto r = specs_from_json(model_specs(), (*it)[i], fmt::format("models[{}].", i), m);
      if (!r) return std::unexpected(r.error());
      cfg.models.push_back(std::move(m));
    }
  }
  if (auto it = j.find("events"); it != j.end() && it->is_array()) {
    for (std::size_t i = 0; i < it->size(); ++i) {
      auto e = event_from_json((*it)[i], fmt::format("events[{}]", i));
      if (!e) return std::unexpected(e.error());
      cfg.events.push_back(std::move(*e));
    }
  }
  return cfg;
}

int max_samples_per_task_model(const CampaignConfig& cfg) {
  switch (cfg.strategy.kind) {
    case StrategyKind::best_of_k:
    case StrategyKind::budget: return cfg.strategy.k;
    case StrategyKind::refine: return cfg.strategy.rounds * cfg.samples_per_task;
    case StrategyKind::grid: break;
  }
  return cfg.samples_per_task;
}

Result<void> validate(const CampaignConfig& cfg) {
  return validate_with(
      cfg, [](const std::string&) { return std::string(); }, nullptr);
}

std::string describe(const LoadedConfig& loaded) {
  constexpr std::size_t k_max_align = 64;
  std::size_t width = 0;
  for (const auto& v : loaded.values) width = std::max(width, v.key.size() + 3 + v.value.size());
  width = std::min(width, k_max_align);
  std::string out = fmt::format("# {}\n", loaded.path);
  for (const auto& v : loaded.values) {
    auto lhs = v.key + " = " + v.value;
    out += fmt::format("{:<{}}   # {}\n", lhs, width, v.origin);
  }
  for (const auto& w : loaded.warnings) out += "# warning: " + w + "\n";
  return out;
}

const ConfigValue* find_value(const LoadedConfig& loaded, std::string_view key) {
  for (const auto& v : loaded.values)
    if (v.key == key) return &v;
  return nullptr;
}

std::map<std::string, std::string> process_environment() {
  std::map<std::string, std::string> out;
  for (char** e = environ; e && *e; ++e) {
    std::string_view entry(*e);
    if (!entry.starts_with("KORCH_")) continue;
    auto eq = entry.find('=');
    if (eq == std::string_view::npos) continue;
    out.emplace(std::string(entry.substr(0, eq)), std::string(entry.substr(eq + 1)));
  }
  return out;
}

}  // namespace korch::config
