#include "reports/training_export.hpp"

#include "reports/report.hpp"

#include "reports/export.hpp"

#include <algorithm>
#include <map>
#include <nlohmann/json.hpp>
#include <set>

namespace korch::reports {
namespace {

using nlohmann::json;

bool level_matches(const std::string& task_id, std::optional<int> level) {
  return !level || task_id.starts_with("L" + std::to_string(*level) + "/");
}

json report_of(const store::EpisodeSnapshot& s, const std::string& request_id) {
  for (const auto& e : s.evaluations)
    if (e.request_id == request_id && e.state == store::EvalState::done) {
      auto rep = json::parse(e.report_json, nullptr, false);
      return rep.is_object() ? rep : json::object();
    }
  return nullptr;
}

// The conversation as sent before the model's reply of turn `turn`, with that
// reply: the live epoch by seq, up to and including the turn's assistant
// message (what followed, the feedback on it included, was never the
// model's to learn from). Empty when that reply is not in the live epoch
// (a compaction came after it).
json sft_messages(const store::EpisodeSnapshot& s, int turn) {
  json msgs = json::array();
  std::size_t cut = 0;
  for (const auto& m : s.messages) {
    msgs.push_back({{"role", std::string(store::to_string(m.role))}, {"content", m.content}});
    if (m.role == store::Role::assistant && m.turn == turn) cut = msgs.size();
  }
  if (cut == 0) return json::array();
  msgs.erase(msgs.begin() + static_cast<std::ptrdiff_t>(cut), msgs.end());
  return msgs;
}

// The turn whose code the final scored, and whether that final was a
// fallback submission (the engine's, after the turns ran out: no turn row
// names its request, so the turn is the latest whose code the evaluation
// scored). Null when the final scored nothing.
struct ScoredTurn {
  const store::TurnRow* turn = nullptr;
  bool fallback = false;
};

ScoredTurn final_turn(const store::EpisodeSnapshot& s) {
  if (!s.final || s.final->request_id.empty()) return {};
  for (const auto& t : s.turns)
    if (t.eval_request_id == s.final->request_id) return {&t, false};
  std::string sha;
  for (const auto& e : s.evaluations)
    if (e.request_id == s.final->request_id) sha = e.code_sha;
  const store::TurnRow* source = nullptr;
  for (const auto& t : s.turns)
    if (!sha.empty() && t.code_sha == sha) source = &t;
  return {source, source != nullptr};
}

std::string reply_of_turn(const store::EpisodeSnapshot& s, int turn) {
  for (const auto& m : s.messages)
    if (m.role == store::Role::assistant && m.turn == turn) return m.content;
  return "";
}

json verdict_json(const std::string& verdict) {
  return verdict.empty() ? json(nullptr) : json(verdict);
}

json verdict_class_json(const std::string& verdict) {
  return verdict.empty() ? json(nullptr) : json(store::to_string(store::verdict_class(verdict)));
}

// One scored action of an RL record: a turn's CHECK or SUBMIT, or the
// fallback SUBMIT the engine made of a turn's code.
struct Action {
  const store::TurnRow* turn;
  bool fallback = false;
  std::string request_id;
  std::string verdict;
  json report;  // the evaluation's report, null when none is stored
  double reward = 0;
};

}  // namespace

Result<TrainingCounts> write_training_export(store::Store& store, const std::string& campaign_id,
                                             const TrainingOptions& o, std::ostream& out) {
  if (!(o.gamma >= 0 && o.gamma <= 1)) return fail(ErrorKind::invalid, "--gamma must be in [0, 1]");
  auto episodes = store.list_episodes(campaign_id);
  if (!episodes) return std::unexpected(episodes.error());
  auto sorted = *episodes;
  std::sort(sorted.begin(), sorted.end(), [](auto& a, auto& b) { return a.id < b.id; });
  TrainingCounts n;
  std::set<std::string> seen;  // sft: final code shas already exported
  for (const auto& ep : sorted) {
    auto snap = store.load_episode(ep.id);
    if (!snap) return std::unexpected(snap.error());
    if (!*snap) continue;
    const store::EpisodeSnapshot& s = **snap;
    // Round and seed origin of a strategy episode (null seed: not seeded).
    const auto origins = strategy_origins(s.events);
    const StrategyOrigin origin = origins.contains(ep.id) ? origins.at(ep.id) : StrategyOrigin{};
    const json seed =
        origin.seed_episode_id.empty()
            ? json(nullptr)
            : json{{"episode_id", origin.seed_episode_id},
                   {"model_id", origin.seed_model_id},
                   {"speedup", origin.seed_speedup ? json(*origin.seed_speedup) : json(nullptr)}};
    if (o.format == TrainingFormat::sft) {
      const auto [t, fallback] = final_turn(s);
      json msgs = t ? sft_messages(s, t->turn) : json::array();
      if (!t || t->code_sha.empty() || msgs.empty()) {
        ++n.no_code;
        continue;
      }
      if ((o.correct_only && !s.final->correct) ||
          (o.min_speedup && !(s.final->speedup && *s.final->speedup >= *o.min_speedup)) ||
          !level_matches(ep.task_id, o.level) || (o.model && ep.model_id != *o.model)) {
        ++n.filtered_out;
        continue;
      }
      if (!seen.insert(t->code_sha).second) {
        ++n.duplicates;
        continue;
      }
      json rec = {{"messages", msgs}};
      if (!o.openai_only) {
        rec["metadata"] = {{"campaign_id", campaign_id},
                           {"episode_id", ep.id},
                           {"task_id", ep.task_id},
                           {"model_id", ep.model_id},
                           {"sample", ep.sample_index},
                           {"final_reason", store::to_string(s.final->reason)},
                           {"fallback", fallback},
                           {"code_turn", t->turn},
                           {"verdict", verdict_json(s.final->verdict)},
                           {"verdict_class", verdict_class_json(s.final->verdict)},
                           {"correct", s.final->correct},
                           {"speedup", s.final->speedup ? json(*s.final->speedup) : json(nullptr)},
                           {"reward", s.final->reward},
                           {"code_sha", t->code_sha},
                           {"turns", s.turns.size()},
                           {"epoch", s.epoch},
                           {"round", origin.round},
                           {"seed", seed}};
      }
      out << rec.dump() << '\n';
      ++n.records;
      continue;
    }
    // RL: every scored action of the episode in order (each turn's CHECK or
    // SUBMIT, then a fallback SUBMIT), its reward (a SUBMIT's from its
    // report, 0 for an unscored CHECK) and the discounted return from it.
    std::vector<Action> actions;
    for (const auto& t : s.turns) {
      if (t.parse_status != "code" || t.code_sha.empty()) {
        ++n.no_code;
        continue;
      }
      actions.push_back({&t, false, t.eval_request_id, t.eval_status, nullptr, 0});
    }
    if (const auto [t, fallback] = final_turn(s); t && fallback)
      actions.push_back({t, true, s.final->request_id, s.final->verdict, nullptr, 0});
    for (auto& a : actions) {
      a.report = a.request_id.empty() ? json(nullptr) : report_of(s, a.request_id);
      const bool submit = a.fallback || a.turn->action == "submit";
      if (submit && a.report.is_object()) a.reward = a.report.value("reward", 0.0);
    }
    std::vector<double> returns(actions.size());
    double g = 0;
    for (std::size_t i = actions.size(); i-- > 0;) returns[i] = g = actions[i].reward + o.gamma * g;
    for (std::size_t i = 0; i < actions.size(); ++i) {
      const Action& a = actions[i];
      const store::TurnRow& t = *a.turn;
      const json& rep = a.report;
      const bool correct = rep.is_object() && rep.value("correct", false);
      const json speedup =
          rep.is_object() && rep.contains("speedup") ? rep["speedup"] : json(nullptr);
      if ((o.correct_only && !correct) ||
          (o.min_speedup && !(speedup.is_number() && speedup.get<double>() >= *o.min_speedup)) ||
          !level_matches(ep.task_id, o.level) || (o.model && t.model_id != *o.model)) {
        ++n.filtered_out;
        continue;
      }
      const bool submit = a.fallback || t.action == "submit";
      const std::string reply = reply_of_turn(s, t.turn);
      json rec = {{"campaign_id", campaign_id},
                  {"episode_id", ep.id},
                  {"task_id", ep.task_id},
                  {"model_id", t.model_id},
                  {"sample", ep.sample_index},
                  {"turn", t.turn},
                  {"step", i},
                  {"action", submit ? "submit" : "check"},
                  {"fallback", a.fallback},
                  {"request_id", a.request_id},
                  {"code", t.code},
                  {"code_sha", t.code_sha},
                  {"verdict", verdict_json(a.verdict)},
                  {"verdict_class", verdict_class_json(a.verdict)},
                  {"correct", rep.is_object() ? json(correct) : json(nullptr)},
                  {"speedup", speedup},
                  {"scored", submit},
                  {"reward", a.reward},
                  {"return", returns[i]},
                  {"gamma", o.gamma},
                  {"final_reason", s.final ? json(store::to_string(s.final->reason)) : json()},
                  {"reply", reply.empty() ? json(nullptr) : json(reply)},
                  {"prompt_tokens", t.prompt_tokens},
                  {"completion_tokens", t.completion_tokens},
                  {"round", origin.round},
                  {"seed", seed}};
      out << rec.dump() << '\n';
      ++n.records;
    }
  }
  if (!out) return fail("export: write failed");
  return n;
}

Result<std::string> training_card(store::Store& store, const std::string& campaign_id,
                                  const TrainingOptions& o, const TrainingCounts& n) {
  auto c = store.get_campaign(campaign_id);
  if (!c) return std::unexpected(c.error());
  if (!*c) return fail("no campaign " + campaign_id);
  auto evals = store.list_evaluations(campaign_id);
  if (!evals) return std::unexpected(evals.error());
  std::set<std::string> versions, modes;
  bool mock = false;
  for (const auto& e : *evals) {
    if (e.state != store::EvalState::done) continue;
    versions.insert(e.evaluator_version);
    auto rep = json::parse(e.report_json, nullptr, false);
    if (rep.is_object()) modes.insert(rep.value("mode", ""));
    if (rep.is_object()) mock = mock || rep.value("mock", false);
  }
  auto cards = campaign_verdict_cards(store, campaign_id);
  if (!cards) return std::unexpected(cards.error());
  json config = json::parse((*c)->config_json, nullptr, false);
  // The target device as the system prompt named it (every episode's is the same).
  std::string device;
  if (auto eps = store.list_episodes(campaign_id); eps && !eps->empty()) {
    if (auto s = store.load_episode(eps->front().id); s && *s) {
      const std::string& sp = (**s).episode.system_prompt;
      if (auto at = sp.find("Target device:"); at != std::string::npos) {
        auto end = sp.find("\n\n", at);
        device = sp.substr(at + 15, end == std::string::npos ? std::string::npos : end - at - 15);
      }
    }
  }
  json card = {
      {"campaign_id", campaign_id},
      {"campaign", (*c)->name},
      // A mock evaluator's verdicts and speedups are made up: the card says so first.
      {"mock", mock},
      {"label", mock ? k_mock_label : ""},
      {"format", o.format == TrainingFormat::sft ? "sft" : "rl"},
      {"filters",
       {{"correct_only", o.correct_only},
        {"min_speedup", o.min_speedup ? json(*o.min_speedup) : json(nullptr)},
        {"level", o.level ? json(*o.level) : json(nullptr)},
        {"model", o.model ? json(*o.model) : json(nullptr)},
        {"openai_only", o.openai_only}}},
      {"dedup", o.format == TrainingFormat::sft
                    ? "by code sha256: the first record of each code (episode id order)"
                    : "none: one record per scored action"},
      {"gamma", o.format == TrainingFormat::rl ? json(o.gamma) : json(nullptr)},
      {"counts",
       {{"records", n.records},
        {"filtered_out", n.filtered_out},
        {"duplicates", n.duplicates},
        {"no_code", n.no_code}}},
      {"evaluator_versions", versions},
      {"evaluator_modes", modes},
      {"tolerance", config.is_object()
                        ? config.value(json::json_pointer("/evaluator/tolerance"), json(nullptr))
                        : json(nullptr)},
      {"target_device", device},
      // The reward's measured error rates: the card of each evaluator
      // version that scored these records, or "no card measured" (issue #51).
      {"verdict_cards", verdict_cards_json(*cards)},
      {"config", config.is_discarded() ? json(nullptr) : config},
  };
  return card.dump(1);
}

}  // namespace korch::reports
