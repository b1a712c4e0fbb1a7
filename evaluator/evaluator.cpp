// Verdict vocabulary, report encoding, reward functions and the evaluator
// factory. Shared by every mode.
#include "evaluator/evaluator.hpp"

#include <fmt/format.h>
#include <algorithm>
#include <array>
#include <cmath>

#include <nlohmann/json.hpp>

namespace korch::evaluator {
namespace {

constexpr std::array<std::pair<Mode, const char*>, 2> k_mode_names = {{
    {Mode::check, "check"},
    {Mode::submit, "submit"},
}};

// Reward shape of DESIGN §5 stage 4.
constexpr double k_base_reward = 0.3;
constexpr double k_log_speedup_min = -0.2;
constexpr double k_log_speedup_max = 3.0;
constexpr double k_roofline_span = 2.7;

template <typename T>
void put_opt(nlohmann::json& j, const char* key, const std::optional<T>& v) {
  j[key] = v ? nlohmann::json(*v) : nlohmann::json(nullptr);
}

template <typename T>
std::optional<T> get_opt(const nlohmann::json& j, const char* key) {
  auto it = j.find(key);
  if (it == j.end() || it->is_null()) return std::nullopt;
  return it->get<T>();
}

}  // namespace

// The names come from the schema, in the enum's order (both generated from
// evaluator/protocol/protocol.json); each is a string literal, so data() is
// null-terminated.
const char* to_string(Verdict v) {
  const auto i = static_cast<std::size_t>(v);
  return i < schema::k_verdict_names.size() ? schema::k_verdict_names[i].data() : "worker_crash";
}

const char* to_string(Mode m) {
  for (auto& [mode, name] : k_mode_names) {
    if (mode == m) return name;
  }
  return "check";
}

std::optional<Mode> mode_from_string(std::string_view s) {
  for (auto& [mode, name] : k_mode_names) {
    if (s == name) return mode;
  }
  return std::nullopt;
}

std::optional<Verdict> verdict_from_string(std::string_view s) {
  for (std::size_t i = 0; i < schema::k_verdict_names.size(); ++i) {
    if (s == schema::k_verdict_names[i]) return static_cast<Verdict>(i);
  }
  return std::nullopt;
}

std::string Report::to_json() const {
  nlohmann::json j;
  j["request_id"] = request_id;
  j["status"] = evaluator::to_string(status);
  j["correct"] = correct;
  put_opt(j, "speedup", speedup);
  put_opt(j, "speedup_ci_low", speedup_ci_low);
  put_opt(j, "speedup_ci_high", speedup_ci_high);
  j["reward"] = reward;
  put_opt(j, "ref_time_ms", ref_time_ms);
  put_opt(j, "cand_time_ms", cand_time_ms);
  put_opt(j, "t_min_ms", t_min_ms);
  put_opt(j, "max_abs_diff", max_abs_diff);
  put_opt(j, "max_rel_diff", max_rel_diff);
  put_opt(j, "mismatch_frac", mismatch_frac);
  j["rule_id"] = rule_id;
  j["error"] = error;
  j["compile_log"] = compile_log;
  j["runtime_detail"] = runtime_detail;
  if (!notes.empty()) j["notes"] = notes;
  j["protections"] = protections;
  j["evaluator_version"] = evaluator_version;
  j["mode"] = mode;
  j["mock"] = mock;
  j["rules_skipped"] = rules_skipped;
  j["wall_s"] = wall_s;
  if (!evidence_json.empty()) {
    auto ev = nlohmann::json::parse(evidence_json, nullptr, false);
    j["evidence"] = ev.is_discarded() ? nlohmann::json(evidence_json) : ev;
  } else {
    j["evidence"] = nlohmann::json::object();
  }
  return j.dump();
}

Result<Report> Report::from_json(std::string_view text) {
  auto j = nlohmann::json::parse(text, nullptr, false);
  if (j.is_discarded() || !j.is_object()) return fail("evaluation report is not a JSON object");
  try {
    Report r;
    r.request_id = j.value("request_id", "");
    auto status = verdict_from_string(j.value("status", ""));
    if (!status) return fail("evaluation report has an unknown status");
    r.status = *status;
    r.correct = j.value("correct", false);
    r.speedup = get_opt<double>(j, "speedup");
    r.speedup_ci_low = get_opt<double>(j, "speedup_ci_low");
    r.speedup_ci_high = get_opt<double>(j, "speedup_ci_high");
    r.reward = j.value("reward", 0.0);
    r.ref_time_ms = get_opt<double>(j, "ref_time_ms");
    r.cand_time_ms = get_opt<double>(j, "cand_time_ms");
    r.t_min_ms = get_opt<double>(j, "t_min_ms");
    r.max_abs_diff = get_opt<double>(j, "max_abs_diff");
    r.max_rel_diff = get_opt<double>(j, "max_rel_diff");
    r.mismatch_frac = get_opt<double>(j, "mismatch_frac");
    r.rule_id = j.value("rule_id", "");
    r.error = j.value("error", "");
    r.compile_log = j.value("compile_log", "");
    r.runtime_detail = j.value("runtime_detail", "");
    r.notes = j.value("notes", std::vector<std::string>{});
    r.protections = j.value("protections", std::vector<std::string>{});
    r.evaluator_version = j.value("evaluator_version", "");
    r.mode = j.value("mode", "");
    r.mock = j.value("mock", false);
    r.rules_skipped = j.value("rules_skipped", false);
    r.wall_s = j.value("wall_s", 0.0);
    if (j.contains("evidence") && !j["evidence"].empty()) r.evidence_json = j["evidence"].dump();
    return r;
  } catch (const nlohmann::json::exception& e) {
    return fail(std::string("evaluation report is malformed: ") + e.what());
  }
}

double reward_speedup(bool correct, std::optional<double> speedup) {
  if (!correct) return 0;
  if (!speedup || *speedup <= 0) return k_base_reward;
  return k_base_reward + std::clamp(std::log2(*speedup), k_log_speedup_min, k_log_speedup_max);
}

double reward_roofline(bool correct, double t_min_s, double t_cand_s) {
  if (!correct || t_cand_s <= 0 || t_min_s <= 0) return correct ? k_base_reward : 0;
  return k_base_reward + k_roofline_span * std::min(t_min_s / t_cand_s, 1.0);
}

double reward_beat_baseline(bool correct, std::optional<double> ci_low) {
  return correct && ci_low && *ci_low > 1.0 ? 1.0 : 0.0;
}

double reward_for(config::Reward reward, const Report& r) {
  switch (reward) {
    case config::Reward::beat_baseline: return reward_beat_baseline(r.correct, r.speedup_ci_low);
    case config::Reward::roofline:
      if (r.t_min_ms && r.cand_time_ms)
        return reward_roofline(r.correct, *r.t_min_ms / 1e3, *r.cand_time_ms / 1e3);
      break;
    case config::Reward::speedup: break;
  }
  return reward_speedup(r.correct, r.speedup);
}

}  // namespace korch::evaluator
