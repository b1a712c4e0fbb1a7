#pragma once
// The campaign's closed vocabularies: every choice a config key, a CLI flag or
// a stored record spells as a word. Each enum has one name table (below, via
// util/enum_names.hpp); text becomes an enum once, at the edge (the config
// loader, the CLI's flag parser, a stored row), and is compared as an enum
// everywhere else. The names are wire values: the TOML file, the worker's job
// JSON, the database and the exports use them verbatim, so never rename one.
#include <optional>
#include <string>
#include <string_view>
#include <utility>

#include "util/enum_names.hpp"

namespace korch::config {

// evaluator.mode: which evaluator runs the candidates.
enum class EvalMode { mock, cpu, gpu };

// evaluator.tolerance: the correctness profile (values in tolerance_profile()).
enum class Tolerance { strict, tf32 };

// evaluator.reward: how a report becomes a reward (evaluator::reward_for).
enum class Reward { speedup, roofline, beat_baseline };

// evaluator.torch_ops: torch arithmetic in forward() outside the replaced parts.
enum class TorchOps { allow, forbid };

// resume: how an interrupted episode continues.
enum class ResumeMode { exact, compact };

// synchronous: SQLite's PRAGMA synchronous for the store.
enum class Synchronous { off, normal, full, extra };

// log_level: the least severe log line shown (util/log.hpp spells the same names).
enum class LogLevel { trace, debug, info, warn, error, critical, off };

// [[events]] kind: a lifecycle event scheduled at a turn (DESIGN §2).
enum class LifecycleKind { compaction, crash, model_swap };

// strategy.kind: how a campaign decides which episodes to run
// (agent/strategy.hpp, docs/config.md "Strategies").
enum class StrategyKind { grid, best_of_k, refine, budget };

// strategy.bandit: how the budget strategy allocates episodes across models.
enum class Bandit { thompson, ucb };

}  // namespace korch::config

namespace korch {
KORCH_ENUM_NAMES(config::EvalMode, mock, cpu, gpu);
KORCH_ENUM_NAMES(config::Tolerance, strict, tf32);
KORCH_ENUM_NAMES(config::Reward, speedup, roofline, beat_baseline);
KORCH_ENUM_NAMES(config::TorchOps, allow, forbid);
KORCH_ENUM_NAMES(config::ResumeMode, exact, compact);
template <>
struct EnumNames<config::Synchronous> {
  static constexpr std::pair<config::Synchronous, std::string_view> k_names[] = {
      {config::Synchronous::off, "OFF"},
      {config::Synchronous::normal, "NORMAL"},
      {config::Synchronous::full, "FULL"},
      {config::Synchronous::extra, "EXTRA"}};
};
KORCH_ENUM_NAMES(config::LogLevel, trace, debug, info, warn, error, critical, off);
KORCH_ENUM_NAMES(config::LifecycleKind, compaction, crash, model_swap);
KORCH_ENUM_NAMES(config::StrategyKind, grid, best_of_k, refine, budget);
KORCH_ENUM_NAMES(config::Bandit, thompson, ucb);
}  // namespace korch

namespace korch::config {

// to_string(E) and from_string<E>(text) (util/enum_names.hpp), found by
// argument-dependent lookup: `to_string(cfg.evaluator.mode)`.
using korch::from_string;
using korch::to_string;

// The one tolerance table: read by the evaluator (passed to the worker in the
// job JSON), the roofline model and the system prompt.
struct ToleranceProfile {
  double atol = 0;  // fp32 outputs; scaled by max(1, rms(ref)) in the judge
  double rtol = 0;
  double low_precision_tol = 0;  // fp16/bf16 outputs: atol = rtol = max(atol, this)
  bool allow_tf32 = false;       // TF32 matmuls/convolutions on both sides
};

constexpr ToleranceProfile tolerance_profile(Tolerance t) {
  switch (t) {
    case Tolerance::strict: return {1e-4, 1e-4, 1e-2, false};
    case Tolerance::tf32: return {1e-2, 1e-2, 1e-2, true};
  }
  return {1e-4, 1e-4, 1e-2, false};
}

// A tolerance as the prompt and the docs write it: 1e-4 -> "1e-4".
std::string format_tolerance(double x);

// The profile in words for the system prompt:
// "atol = rtol = 1e-4 (fp32; TF32 off; fp16/bf16 tasks 1e-2)".
std::string tolerance_summary(Tolerance t);

}  // namespace korch::config
