#include "reports/report.hpp"

#include <fmt/format.h>
#include <fmt/ranges.h>

#include <algorithm>
#include <cctype>
#include <cmath>
#include <map>
#include <nlohmann/json.hpp>
#include <set>

#include "config/loader.hpp"
#include "reports/export.hpp"
#include "reports/web_assets.hpp"
#include "util/exact_sum.hpp"

namespace korch::reports {
namespace {

using nlohmann::json;

// "L1/2" < "L1/10": runs of digits compare as numbers.
bool natural_less(const std::string& a, const std::string& b) {
  std::size_t i = 0, j = 0;
  while (i < a.size() && j < b.size()) {
    if (std::isdigit(static_cast<unsigned char>(a[i])) &&
        std::isdigit(static_cast<unsigned char>(b[j]))) {
      std::size_t ie = i, je = j;
      while (ie < a.size() && std::isdigit(static_cast<unsigned char>(a[ie]))) ++ie;
      while (je < b.size() && std::isdigit(static_cast<unsigned char>(b[je]))) ++je;
      auto na = a.substr(i, ie - i), nb = b.substr(j, je - j);
      na.erase(0, std::min(na.find_first_not_of('0'), na.size()));
      nb.erase(0, std::min(nb.find_first_not_of('0'), nb.size()));
      if (na.size() != nb.size()) return na.size() < nb.size();
      if (na != nb) return na < nb;
      i = ie;
      j = je;
      continue;
    }
    if (a[i] != b[j]) return a[i] < b[j];
    ++i;
    ++j;
  }
  return a.size() - i < b.size() - j;
}

std::string fast_key(double p) { return fmt::format("fast_{}", p); }

json model_json(const ModelReport& m) {
  json jm;
  jm["episodes"] = m.episodes;
  jm["finished"] = m.finished;
  jm["correct"] = m.correct;
  json fast = json::object();
  for (auto& [p, v] : m.fast_p) fast[fast_key(p)] = v;
  jm["fast_p"] = fast;
  jm["geomean_speedup_correct"] = m.geomean_speedup ? json(*m.geomean_speedup) : json(nullptr);
  json passk = json::object();
  for (auto& [k, v] : m.pass_at_k) passk[fmt::format("pass@{}", k)] = v;
  jm["pass_at_k"] = passk;
  jm["llm_calls"] = m.llm_calls;
  jm["dup_possible_calls"] = m.dup_possible_calls;
  jm["prompt_tokens"] = m.prompt_tokens;
  jm["completion_tokens"] = m.completion_tokens;
  jm["cost_usd"] = m.cost_usd;
  jm["unknown_requests"] = m.unknown_requests;
  jm["unknown_cost_bound_usd"] = m.unknown_cost_bound_usd;
  jm["speedups"] = m.speedups;
  jm["verdicts"] = m.verdicts;
  return jm;
}

json point_json(const CurvePoint& p) {
  json fast = json::object();
  for (auto& [t, v] : p.fast_p) fast[fast_key(t)] = v;
  return {{"episodes", p.episodes},
          {"round", p.round},
          {"cost_usd", p.cost_usd},
          {"gpu_hours", p.gpu_hours},
          {"fast_p", fast}};
}

}  // namespace

json verdict_cards_json(const std::vector<VerdictCardLine>& lines) {
  json out = json::array();
  for (const auto& l : lines) {
    json cards = json::array();
    for (const auto& c : l.cards) {
      json card = json::parse(c.card_json, nullptr, false);
      cards.push_back({{"evaluator_version", c.evaluator_version},
                       {"rules_version", c.rules_version},
                       {"device", c.device},
                       {"mode", c.mode},
                       {"attack_success", {{"x", c.attacks_accepted}, {"n", c.attacks}}},
                       {"false_rejection", {{"x", c.honest_rejected}, {"n", c.honest}}},
                       {"measured_at", c.measured_at},
                       {"card", card.is_discarded() ? json(nullptr) : card}});
    }
    out.push_back({{"evaluator_version", l.evaluator_version},
                   {"rules", l.rules},
                   {"measured", !l.cards.empty()},
                   {"text", l.text},
                   {"cards", cards}});
  }
  return out;
}

namespace {

json report_json(const CampaignReport& r) {
  json j;
  j["campaign"] = {{"id", r.campaign_id}, {"name", r.campaign_name}};
  j["mock"] = r.mock;
  j["label"] = r.mock ? k_mock_label : "";
  j["evaluators"] = r.evaluators;
  j["verdicts"] = r.verdicts;
  j["task_verdicts"] = r.task_verdicts;
  j["thresholds"] = report_thresholds();
  json models = json::object();
  for (auto& m : r.models) models[m.model_id] = model_json(m);
  j["models"] = models;
  j["tasks"] = r.tasks;
  json excluded = json::array();
  for (auto& e : r.excluded) excluded.push_back({{"task", e.task_id}, {"issues", e.issues}});
  j["excluded_tasks"] = excluded;
  json eps = json::array();
  for (auto& e : r.episodes) {
    json je = {{"id", e.id},           {"task_id", e.task_id},     {"model_id", e.model_id},
               {"sample", e.sample},   {"status", e.status},       {"reason", e.reason},
               {"verdict", e.verdict}, {"evaluator", e.evaluator}, {"correct", e.correct},
               {"tokens", e.tokens},   {"cost_usd", e.cost_usd},   {"round", e.round}};
    je["speedup"] = e.speedup ? json(*e.speedup) : json(nullptr);
    je["seed_episode_id"] = e.seed_episode_id.empty() ? json(nullptr) : json(e.seed_episode_id);
    eps.push_back(std::move(je));
  }
  j["episodes"] = eps;
  json by_round = json::array(), by_episode = json::array();
  for (auto& p : r.strategy.by_round) by_round.push_back(point_json(p));
  for (auto& p : r.strategy.by_episode) by_episode.push_back(point_json(p));
  j["verdict_cards"] = verdict_cards_json(r.verdict_cards);
  j["strategy"] = {{"kind", r.strategy.kind},
                   {"decisions", r.strategy.decisions},
                   {"by_round", by_round},
                   {"by_episode", by_episode}};
  return j;
}

// The strategy's curves from the episodes' results, rounds, spend and
// evaluation time.
void build_curves(CampaignReport& report, const std::map<std::string, double>& cost_of,
                  const std::map<std::string, double>& eval_s_of,
                  const std::map<std::string, const store::FinalRow*>& final_by_ep) {
  struct Ended {
    const EpisodeStatus* e;
    double at;
  };
  std::vector<Ended> ended;
  for (auto& e : report.episodes) {
    if (auto it = final_by_ep.find(e.id); it != final_by_ep.end())
      ended.push_back({&e, it->second->at});
  }
  const double n_tasks = static_cast<double>(report.tasks.size());
  auto accumulate = [&](const std::vector<const EpisodeStatus*>& order, auto&& emit_after) {
    std::map<std::string, double> best;  // task -> best speedup of a correct kernel (0: none)
    CurvePoint p;
    // One summation for both curves, whatever their order: equal sets, equal sums.
    ExactSum cost, eval_s;
    for (std::size_t i = 0; i < order.size(); ++i) {
      auto* e = order[i];
      ++p.episodes;
      p.round = std::max(p.round, e->round);
      if (auto c = cost_of.find(e->id); c != cost_of.end()) cost.add(c->second);
      if (auto g = eval_s_of.find(e->id); g != eval_s_of.end()) eval_s.add(g->second);
      if (e->correct) {
        auto [it, fresh] = best.emplace(e->task_id, e->speedup.value_or(0));
        if (!fresh) it->second = std::max(it->second, e->speedup.value_or(0));
      }
      if (!emit_after(i)) continue;
      p.cost_usd = cost.value();
      p.gpu_hours = eval_s.value() / 3600;
      p.fast_p.clear();
      for (double t : report_thresholds()) {
        double n = 0;
        for (auto& [task, sp] : best) n += t == 0 || sp > t;
        p.fast_p.emplace_back(t, n_tasks > 0 ? n / n_tasks : 0.0);
      }
      emit_after.point(p);
    }
  };
  // By episode: in the order they ended.
  std::sort(ended.begin(), ended.end(), [](const Ended& a, const Ended& b) {
    return std::tie(a.at, a.e->id) < std::tie(b.at, b.e->id);
  });
  std::vector<const EpisodeStatus*> order;
  for (auto& x : ended) order.push_back(x.e);
  struct EveryPoint {
    std::vector<CurvePoint>* out;
    bool operator()(std::size_t) const { return true; }
    void point(const CurvePoint& p) const { out->push_back(p); }
  };
  accumulate(order, EveryPoint{&report.strategy.by_episode});
  // By round: the episodes of round 0, then 1, ...; a point after each round.
  std::stable_sort(order.begin(), order.end(), [](auto* a, auto* b) {
    return std::tie(a->round, a->id) < std::tie(b->round, b->id);
  });
  struct RoundEnds {
    const std::vector<const EpisodeStatus*>* order;
    std::vector<CurvePoint>* out;
    bool operator()(std::size_t i) const {
      return i + 1 == order->size() || (*order)[i + 1]->round != (*order)[i]->round;
    }
    void point(const CurvePoint& p) const { out->push_back(p); }
  };
  accumulate(order, RoundEnds{&order, &report.strategy.by_round});
}

std::string html_escape(const std::string& s) {
  std::string out;
  out.reserve(s.size());
  for (char c : s) {
    switch (c) {
      case '&': out += "&amp;"; break;
      case '<': out += "&lt;"; break;
      case '>': out += "&gt;"; break;
      case '"': out += "&quot;"; break;
      default: out += c;
    }
  }
  return out;
}

// JSON inside a <script> element: "</" (only ever inside strings) would end
// the element, so it is written "<\/", the same string to a JSON parser.
std::string script_safe(std::string s) {
  for (std::size_t pos = 0; (pos = s.find("</", pos)) != std::string::npos; pos += 3)
    s.replace(pos, 2, "<\\/");
  return s;
}

std::string asset_text(std::string_view name) {
  auto* a = web::find_asset(name);
  return a ? std::string(a->data) : std::string();
}

}  // namespace

const std::vector<double>& report_thresholds() {
  static const std::vector<double> k_thresholds = {0, 0.5, 0.8, 1, 1.5, 2};
  return k_thresholds;
}

Result<CampaignReport> build_report(store::Store& store, const std::string& campaign_id) {
  auto camp = store.get_campaign(campaign_id);
  if (!camp) return std::unexpected(camp.error());
  auto episodes = store.list_episodes(campaign_id);
  if (!episodes) return std::unexpected(episodes.error());
  auto finals = store.list_finals(campaign_id);
  if (!finals) return std::unexpected(finals.error());
  auto calls = store.list_llm_calls(campaign_id);
  if (!calls) return std::unexpected(calls.error());
  auto events = store.list_events(campaign_id);
  if (!events) return std::unexpected(events.error());
  auto evals = store.list_evaluations(campaign_id);
  if (!evals) return std::unexpected(evals.error());

  CampaignReport report;
  report.campaign_id = campaign_id;
  report.campaign_name = *camp ? (*camp)->name : "";
  // The stored config, read as a resume reads it (a config it cannot read
  // leaves the default, "grid").
  std::map<std::string, config::ModelConfig> model_cfg;  // by id: prices and max_tokens
  if (*camp) report.excluded = config::excluded_tasks((*camp)->config_json);
  if (*camp)
    if (auto cfg = config::config_from_json((*camp)->config_json)) {
      report.strategy.kind = std::string(to_string(cfg->strategy.kind));
      for (const auto& m : cfg->models) model_cfg[m.id] = m;
    }
  // Rounds and seeds, from the strategy's decisions (agent/strategy.cpp).
  const auto origins = strategy_origins(*events);
  {
    // One decision writes an event per episode it starts: decisions are the
    // distinct keys.
    std::set<std::string> keys;
    for (auto& ev : *events) {
      if (ev.kind != "strategy") continue;
      auto d = json::parse(ev.detail, nullptr, false);
      if (d.is_object() && d.contains("key") && d["key"].is_string())
        keys.insert(d["key"].get<std::string>());
    }
    report.strategy.decisions = static_cast<int>(keys.size());
  }
  std::map<std::string, double> cost_of, eval_s_of;
  std::map<std::string, std::string> mode_of_request;  // request id -> the evaluator that judged it
  for (auto& c : *calls) cost_of[c.episode_id] += c.cost_usd;
  for (auto& e : *evals) {
    if (e.state != store::EvalState::done) continue;
    auto rep = json::parse(e.report_json, nullptr, false);
    if (!rep.is_object()) continue;
    eval_s_of[e.episode_id] += rep.value("wall_s", 0.0);
    const bool mock = rep.value("mock", false);
    report.mock = report.mock || mock;
    // A report of an older korch may name no mode: "unknown", never "".
    std::string mode = mock ? std::string("mock") : rep.value("mode", std::string());
    mode_of_request[e.request_id] = mode.empty() ? "unknown" : mode;
  }

  auto cards = campaign_verdict_cards(store, campaign_id);
  if (!cards) return std::unexpected(cards.error());
  report.verdict_cards = std::move(*cards);

  std::map<std::string, const store::FinalRow*> final_by_ep;
  for (auto& f : *finals) final_by_ep[f.episode_id] = &f;

  struct Acc {
    ModelReport m;
    std::map<std::string, std::pair<int, int>> per_task;  // task -> (samples, correct)
  };
  std::map<std::string, Acc> by_model;
  std::map<std::string, std::string> model_of_episode;
  std::set<std::string> tasks;
  for (auto& ep : *episodes) {
    auto& acc = by_model[ep.model_id];
    auto& m = acc.m;
    model_of_episode[ep.id] = ep.model_id;
    tasks.insert(ep.task_id);
    ++m.episodes;
    auto& task = acc.per_task[ep.task_id];
    ++task.first;
    EpisodeStatus es;
    es.id = ep.id;
    es.task_id = ep.task_id;
    es.model_id = ep.model_id;
    es.sample = ep.sample_index;
    es.status = std::string(store::to_string(ep.status));
    es.tokens = ep.tokens_used;
    es.cost_usd = ep.cost_usd;
    if (auto it = origins.find(ep.id); it != origins.end()) {
      es.round = it->second.round;
      es.seed_episode_id = it->second.seed_episode_id;
    }
    if (auto it = final_by_ep.find(ep.id); it != final_by_ep.end()) {
      auto& f = *it->second;
      ++m.finished;
      es.reason = std::string(store::to_string(f.reason));
      es.verdict = f.verdict;
      es.correct = f.correct;
      es.speedup = f.speedup;
      if (auto mode = mode_of_request.find(f.request_id); mode != mode_of_request.end()) {
        es.evaluator = mode->second;
        ++report.evaluators[mode->second];
      }
      const std::string verdict = f.verdict.empty() ? "none" : f.verdict;
      ++m.verdicts[verdict];
      ++report.verdicts[verdict];
      ++report.task_verdicts[ep.task_id][verdict];
      if (f.correct) {
        ++m.correct;
        ++task.second;
        if (f.speedup) m.speedups.push_back(*f.speedup);
      }
    }
    report.episodes.push_back(std::move(es));
  }
  std::map<std::string, std::int64_t> largest_prompt;  // by episode
  for (auto& c : *calls)
    largest_prompt[c.episode_id] = std::max(largest_prompt[c.episode_id], c.prompt_tokens);
  for (auto& c : *calls) {
    if (!model_of_episode.count(c.episode_id)) continue;
    auto& m = by_model[c.model_id].m;
    m.prompt_tokens += c.prompt_tokens;
    m.completion_tokens += c.completion_tokens;
    m.cost_usd += c.cost_usd;
    ++m.llm_calls;
    m.dup_possible_calls += c.dup_possible;
    // Sends without a recorded outcome: every earlier send of a resent call,
    // and every send of a call still `started`.
    const int unknown = std::max(0, c.state == store::CallState::started ? c.sends : c.sends - 1);
    if (unknown == 0) continue;
    m.unknown_requests += unknown;
    if (auto it = model_cfg.find(c.model_id); it != model_cfg.end()) {
      const auto& mc = it->second;
      const auto prompt = c.prompt_tokens > 0 ? c.prompt_tokens : largest_prompt[c.episode_id];
      m.unknown_cost_bound_usd +=
          unknown *
          (static_cast<double>(prompt) * mc.price_prompt_per_mtok +
           static_cast<double>(mc.max_tokens) * mc.price_completion_per_mtok) /
          1e6;
    }
  }
  for (auto& [model, acc] : by_model) {
    auto& m = acc.m;
    m.model_id = model;
    for (double p : report_thresholds()) {
      std::int64_t n = 0;
      for (double s : m.speedups) n += s > p;
      if (p == 0) n = m.correct;
      m.fast_p.emplace_back(p, m.episodes ? static_cast<double>(n) / m.episodes : 0.0);
    }
    if (!m.speedups.empty()) {
      double sum = 0;
      for (double s : m.speedups) sum += std::log(s);
      m.geomean_speedup = std::exp(sum / m.speedups.size());
    }
    int max_n = 0;
    for (auto& [t, nc] : acc.per_task) max_n = std::max(max_n, nc.first);
    for (int k = 1; k <= max_n; k *= 2) {
      double sum = 0;
      int counted = 0;
      for (auto& [t, nc] : acc.per_task) {
        int n = nc.first, c = nc.second;
        if (n < k) continue;
        double fail_all = 1;
        if (n - c >= k) {
          for (int i = 0; i < k; ++i) fail_all *= static_cast<double>(n - c - i) / (n - i);
        } else {
          fail_all = 0;
        }
        sum += 1 - fail_all;
        ++counted;
      }
      if (counted) m.pass_at_k.emplace_back(k, sum / counted);
    }
    std::sort(m.speedups.begin(), m.speedups.end());
    report.models.push_back(std::move(m));
  }
  report.tasks.assign(tasks.begin(), tasks.end());
  std::sort(report.tasks.begin(), report.tasks.end(), natural_less);
  std::map<std::string, std::size_t> task_rank;
  for (std::size_t i = 0; i < report.tasks.size(); ++i) task_rank[report.tasks[i]] = i;
  std::stable_sort(report.episodes.begin(), report.episodes.end(),
                   [&](const EpisodeStatus& a, const EpisodeStatus& b) {
                     return std::tie(task_rank[a.task_id], a.model_id, a.sample) <
                            std::tie(task_rank[b.task_id], b.model_id, b.sample);
                   });
  build_curves(report, cost_of, eval_s_of, final_by_ep);
  return report;
}

namespace {

// "compile_error 2, ok 3"
std::string verdict_text(const VerdictCounts& v) {
  std::string out;
  for (auto& [name, n] : v) out += fmt::format("{}{} {}", out.empty() ? "" : ", ", name, n);
  return out.empty() ? "none yet" : out;
}

}  // namespace

std::string render_text(const CampaignReport& report) {
  std::string text;
  for (auto& m : report.models) {
    text += fmt::format("model {}: {} episodes, {} finished, {} correct\n", m.model_id, m.episodes,
                        m.finished, m.correct);
    text += "  verdicts: " + verdict_text(m.verdicts) + "\n";
    text += "  fast_p:";
    for (auto& [p, v] : m.fast_p) text += fmt::format(" {}={:.3f}", fast_key(p), v);
    text += "\n";
    text += fmt::format(
        "  geomean speedup (correct): {}\n",
        m.geomean_speedup ? fmt::format("{:.3f}", *m.geomean_speedup) : std::string("n/a"));
    text += "  ";
    for (auto& [k, v] : m.pass_at_k) text += fmt::format("pass@{}={:.3f} ", k, v);
    text += fmt::format("\n  llm calls {} (dup_possible {}), tokens {} in / {} out, cost ${:.4f}",
                        m.llm_calls, m.dup_possible_calls, m.prompt_tokens, m.completion_tokens,
                        m.cost_usd);
    // A kill while requests were out: the provider may have billed more.
    text += m.unknown_requests == 0
                ? std::string("\n")
                : fmt::format(" recorded + up to {} unknown request(s) (at most ${:.4f} more)\n",
                              m.unknown_requests, m.unknown_cost_bound_usd);
  }
  if (text.empty()) return "no episodes\n";
  std::string head;
  if (report.mock) head += std::string(k_mock_label) + "\n";
  std::string by_evaluator;
  for (auto& [mode, n] : report.evaluators)
    by_evaluator += fmt::format("{}{} {}", by_evaluator.empty() ? "" : ", ", mode, n);
  if (!by_evaluator.empty()) head += "results by evaluator: " + by_evaluator + "\n";
  head += "verdicts: " + verdict_text(report.verdicts) + "\n";
  for (auto& e : report.excluded)
    head += fmt::format("excluded task {} (flagged by korch tasks validate): {}\n", e.task_id,
                        fmt::join(e.issues, "; "));
  for (const auto& c : report.verdict_cards) head += c.text + "\n";
  text = head + text;
  for (auto& [task, v] : report.task_verdicts)
    text += fmt::format("task {}: verdicts {}\n", task, verdict_text(v));
  const auto& st = report.strategy;
  // Numbers only after "|" and "fast_1:": the model blocks' "fast_p=" pairs stay the only ones.
  text += fmt::format(
      "strategy {}: {} decision(s); per task (its best kernel so far) fast_p at p =", st.kind,
      st.decisions);
  for (double t : report_thresholds()) text += fmt::format(" {}", t);
  text += "\n";
  for (auto& p : st.by_round) {
    text += fmt::format("  round {:>3}: episodes {:>5}  spend ${:<9.4f} gpu-h {:<8.4f} |", p.round,
                        p.episodes, p.cost_usd, p.gpu_hours);
    for (auto& [t, v] : p.fast_p) text += fmt::format(" {:.3f}", v);
    text += "\n";
  }
  // The spend curve at about ten points (every point is in the JSON).
  const auto& be = st.by_episode;
  if (be.size() > 1) {
    text += "  as episodes ended:\n";
    std::size_t step = std::max<std::size_t>(1, be.size() / 10);
    for (std::size_t i = step - 1; i < be.size(); i += step) {
      // The last point always, in place of a sampled one close to it.
      if (i + step >= be.size()) i = be.size() - 1;
      double f1 = 0;
      for (auto& [t, v] : be[i].fast_p)
        if (t == 1) f1 = v;
      text += fmt::format(
          "    episodes {:>5}  spend ${:<9.4f} gpu-h {:<8.4f} round {:>2}  fast_1: {:.3f}\n",
          be[i].episodes, be[i].cost_usd, be[i].gpu_hours, be[i].round, f1);
    }
  }
  return text;
}

std::string render_json(const CampaignReport& report) { return report_json(report).dump(2); }

std::string render_html(const CampaignReport& report) {
  auto title = "korch report: " +
               (report.campaign_name.empty() ? report.campaign_id : report.campaign_name) +
               (report.mock ? " (MOCK)" : "");
  std::string page;
  page += "<!doctype html>\n<html lang=\"en\">\n<head>\n<meta charset=\"utf-8\">\n";
  page += "<meta name=\"viewport\" content=\"width=device-width, initial-scale=1\">\n";
  page += "<title>" + html_escape(title) + "</title>\n";
  page += "<style>\n" + asset_text("style.css") + "\n</style>\n</head>\n<body>\n";
  page += "<h1>" + html_escape(title) + "</h1>\n";
  // In the page itself, not only drawn by the script: a reader without
  // JavaScript (or grep) sees it too.
  if (report.mock)
    page +=
        "<p class=\"mock-banner\" id=\"korch-mock-label\">" + std::string(k_mock_label) + "</p>\n";
  // The reward's measured error rates, in the page itself (issue #51).
  for (const auto& c : report.verdict_cards)
    page += "<p class=\"verdict-card\" data-verdict-card>" + html_escape(c.text) + "</p>\n";
  page += "<div id=\"korch-report\"></div>\n";
  page += "<noscript><pre>" + html_escape(render_text(report)) + "</pre></noscript>\n";
  page += "<script id=\"korch-report-data\" type=\"application/json\">" +
          script_safe(report_json(report).dump()) + "</script>\n";
  page += "<script>\n" + asset_text("plots.js") + "\n</script>\n";
  page +=
      "<script>\n"
      "KorchPlots.renderReport(document.getElementById('korch-report'),\n"
      "  JSON.parse(document.getElementById('korch-report-data').textContent));\n"
      "</script>\n</body>\n</html>\n";
  return page;
}

std::string render(const CampaignReport& report, ReportFormat format) {
  switch (format) {
    case ReportFormat::json: return render_json(report);
    case ReportFormat::html: return render_html(report);
    case ReportFormat::text: break;
  }
  return render_text(report);
}

}  // namespace korch::reports
