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
template <>
struct EnumNames<config::EvalMode> {
  static constexpr std::pair<config::EvalMode, std::string_view> k_names[] = {
      {config::EvalMode::mock, "mock"},
      {config::EvalMode::cpu, "cpu"},
      {config::EvalMode::gpu, "gpu"}};
};
template <>
struct EnumNames<config::Tolerance> {
  static constexpr std::pair<config::Tolerance, std::string_view> k_names[] = {
      {config::Tolerance::strict, "strict"}, {config::Tolerance::tf32, "tf32"}};
};
template <>
struct EnumNames<config::Reward> {
  static constexpr std::pair<config::Reward, std::string_view> k_names[] = {
      {config::Reward::speedup, "speedup"},
      {config::Reward::roofline, "roofline"},
      {config::Reward::beat_baseline, "beat_baseline"}};
};
template <>
struct EnumNames<config::TorchOps> {
  static constexpr std::pair<config::TorchOps, std::string_view> k_names[] = {
      {config::TorchOps::allow, "allow"}, {config::TorchOps::forbid, "forbid"}};
};
template <>
struct EnumNames<config::ResumeMode> {
  static constexpr std::pair<config::ResumeMode, std::string_view> k_names[] = {
      {config::ResumeMode::exact, "exact"}, {config::ResumeMode::compact, "compact"}};
};
template <>
struct EnumNames<config::Synchronous> {
  static constexpr std::pair<config::Synchronous, std::string_view> k_names[] = {
      {config::Synchronous::off, "OFF"},
      {config::Synchronous::normal, "NORMAL"},
      {config::Synchronous::full, "FULL"},
      {config::Synchronous::extra, "EXTRA"}};
};
template <>
struct EnumNames<config::LogLevel> {
  static constexpr std::pair<config::LogLevel, std::string_view> k_names[] = {
      {config::LogLevel::trace, "trace"}, {config::LogLevel::debug, "debug"},
      {config::LogLevel::info, "info"},   {config::LogLevel::warn, "warn"},
      {config::LogLevel::error, "error"}, {config::LogLevel::critical, "critical"},
      {config::LogLevel::off, "off"}};
};
template <>
struct EnumNames<config::LifecycleKind> {
  static constexpr std::pair<config::LifecycleKind, std::string_view> k_names[] = {
      {config::LifecycleKind::compaction, "compaction"},
      {config::LifecycleKind::crash, "crash"},
      {config::LifecycleKind::model_swap, "model_swap"}};
};
template <>
struct EnumNames<config::StrategyKind> {
  static constexpr std::pair<config::StrategyKind, std::string_view> k_names[] = {
      {config::StrategyKind::grid, "grid"},
      {config::StrategyKind::best_of_k, "best_of_k"},
      {config::StrategyKind::refine, "refine"},
      {config::StrategyKind::budget, "budget"}};
};
template <>
struct EnumNames<config::Bandit> {
  static constexpr std::pair<config::Bandit, std::string_view> k_names[] = {
      {config::Bandit::thompson, "thompson"}, {config::Bandit::ucb, "ucb"}};
};
}  // namespace korch

namespace korch::config {

// The name of a vocabulary value ("gpu", "tf32", "FULL", ...). Found by
// argument-dependent lookup: `to_string(cfg.evaluator.mode)`.
template <NamedEnum E>
constexpr std::string_view to_string(E value) {
  return enum_name(value);
}

// The value named `text`, or nullopt: `config::from_string<Tolerance>("tf32")`.
template <NamedEnum E>
constexpr std::optional<E> from_string(std::string_view text) {
  return enum_from_name<E>(text);
}

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
