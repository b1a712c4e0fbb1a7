// Verdict vocabulary, report encoding, reward functions and the evaluator
// factory. Shared by every mode.
#include "evaluator/evaluator.hpp"

#include <fmt/format.h>
#include <algorithm>
#include <array>
#include <cmath>
#include <tuple>

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

// A Report member and its JSON name.
template <typename T>
struct Field {
  const char* name;
  T Report::*member;
};

// Report's fields as its JSON holds them, each named once: k_measured_fields
// and these. Three more need care and are written out in to_json and
// from_json: status (a verdict name, which must be known), notes (left out
// when empty) and evidence (an object).
constexpr auto k_report_fields = std::make_tuple(
    Field<std::string>{"request_id", &Report::request_id}, Field<bool>{"correct", &Report::correct},
    Field<double>{"reward", &Report::reward},
    Field<std::optional<double>>{"t_min_ms", &Report::t_min_ms},
    Field<std::string>{"rule_id", &Report::rule_id}, Field<std::string>{"error", &Report::error},
    Field<std::string>{"compile_log", &Report::compile_log},
    Field<std::string>{"runtime_detail", &Report::runtime_detail},
    Field<std::vector<std::string>>{"protections", &Report::protections},
    Field<std::string>{"evaluator_version", &Report::evaluator_version},
    Field<std::string>{"mode", &Report::mode}, Field<bool>{"mock", &Report::mock},
    Field<bool>{"rules_skipped", &Report::rules_skipped}, Field<double>{"wall_s", &Report::wall_s});

// Calls f(name, member) for every field of both lists.
template <typename F>
void for_each_field(F&& f) {
  for (const auto& [name, member] : k_measured_fields)
    f(name, static_cast<std::optional<double> Report::*>(member));
  std::apply([&](const auto&... field) { (f(field.name, field.member), ...); }, k_report_fields);
}

// An absent value is written as null, and a null or missing key reads as absent.
template <typename T>
void put(nlohmann::json& j, const char* key, const T& v) {
  j[key] = v;
}
template <typename T>
void put(nlohmann::json& j, const char* key, const std::optional<T>& v) {
  j[key] = v ? nlohmann::json(*v) : nlohmann::json(nullptr);
}

// A missing key reads as the member's default (every default is T{}).
template <typename T>
void get(const nlohmann::json& j, const char* key, T& v) {
  v = j.value(key, T{});
}
template <typename T>
void get(const nlohmann::json& j, const char* key, std::optional<T>& v) {
  auto it = j.find(key);
  v = it == j.end() || it->is_null() ? std::nullopt : std::optional<T>(it->template get<T>());
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

bool Report::host_fault() const {
  return status == Verdict::worker_crash && !interrupted && error.rfind("infrastructure: ", 0) == 0;
}

std::string Report::to_json() const {
  nlohmann::json j;
  for_each_field([&](const char* name, auto member) { put(j, name, this->*member); });
  j["status"] = evaluator::to_string(status);
  if (!notes.empty()) j["notes"] = notes;
  j["evidence"] = evidence.is_null() ? nlohmann::json::object() : evidence;
  return j.dump();
}

Result<Report> Report::from_json(std::string_view text) {
  auto j = nlohmann::json::parse(text, nullptr, false);
  if (j.is_discarded() || !j.is_object()) return fail("evaluation report is not a JSON object");
  try {
    Report r;
    auto status = verdict_from_string(j.value("status", ""));
    if (!status) return fail("evaluation report has an unknown status");
    r.status = *status;
    for_each_field([&](const char* name, auto member) { get(j, name, r.*member); });
    r.notes = j.value("notes", std::vector<std::string>{});
    if (j.contains("evidence") && !j["evidence"].empty()) r.evidence = j["evidence"];
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
