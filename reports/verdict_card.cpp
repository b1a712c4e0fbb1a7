#include "reports/verdict_card.hpp"

#include <fmt/format.h>

#include <ctime>
#include <map>
#include <nlohmann/json.hpp>
#include <set>

namespace korch::reports {

using json = nlohmann::json;

namespace {

// "x/n (r%, 95% CI lo-hi%)" from the stored card's own numbers.
std::string rate_of(const json& card, const char* key, int x, int n) {
  const json r = card.value(key, json::object());
  if (!r.is_object() || !r.contains("ci95") || !r["ci95"].is_array() || r["ci95"].size() != 2)
    return fmt::format("{}/{}", x, n);
  return fmt::format("{}/{} ({:.1f}%, 95% CI {:.1f}-{:.1f}%)", x, n,
                     n ? 100.0 * x / n : 0.0, 100 * r["ci95"][0].get<double>(),
                     100 * r["ci95"][1].get<double>());
}

}  // namespace

std::string verdict_card_text(const store::VerdictCardRow& row) {
  const json card = json::parse(row.card_json, nullptr, false);
  const json c = card.is_object() ? card : json::object();
  char day[32] = "?";
  const std::time_t at = static_cast<std::time_t>(row.measured_at);
  if (std::tm tm{}; gmtime_r(&at, &tm)) std::strftime(day, sizeof day, "%Y-%m-%d", &tm);
  return fmt::format(
      "verdict card of {} (rules {}, {} mode, device: {}; measured {}): attack success {}, "
      "false rejection {}",
      row.evaluator_version, row.rules_version.empty() ? "?" : row.rules_version, row.mode,
      row.device, day, rate_of(c, "attack_success", row.attacks_accepted, row.attacks),
      rate_of(c, "false_rejection", row.honest_rejected, row.honest));
}

Result<std::vector<VerdictCardLine>> campaign_verdict_cards(store::Store& store,
                                                            const std::string& campaign_id) {
  auto evals = store.list_evaluations(campaign_id);
  if (!evals) return std::unexpected(evals.error());
  std::map<std::string, std::set<std::string>> rules_of;  // evaluator version -> rules versions
  for (const auto& e : *evals) {
    if (e.state != store::EvalState::done || e.evaluator_version.empty()) continue;
    auto& rules = rules_of[e.evaluator_version];
    auto rep = json::parse(e.report_json, nullptr, false);
    const json* r = nullptr;
    if (rep.is_object() && rep.contains("evidence") && rep["evidence"].is_object() &&
        rep["evidence"].contains("rules") && rep["evidence"]["rules"].is_object())
      r = &rep["evidence"]["rules"];
    if (r && r->contains("rules_version") && (*r)["rules_version"].is_string() &&
        !(*r)["rules_version"].get<std::string>().empty())
      rules.insert((*r)["rules_version"].get<std::string>());
  }
  std::vector<VerdictCardLine> out;
  if (rules_of.empty()) return out;
  auto cards = store.list_verdict_cards();
  if (!cards) return std::unexpected(cards.error());
  for (const auto& [version, rules] : rules_of) {
    VerdictCardLine line;
    line.evaluator_version = version;
    line.rules.assign(rules.begin(), rules.end());
    for (const auto& c : *cards)
      if (c.evaluator_version == version && (rules.empty() || rules.count(c.rules_version)))
        line.cards.push_back(c);
    if (line.cards.empty()) {
      line.text = "no card measured for evaluator version " + version +
                  (rules.empty() ? std::string() : " (rules " + *rules.begin() + ")") +
                  ": its error rates are unknown (korch audit --store)";
    } else {
      for (const auto& c : line.cards)
        line.text += (line.text.empty() ? "" : "\n") + verdict_card_text(c);
    }
    out.push_back(std::move(line));
  }
  return out;
}

}  // namespace korch::reports
