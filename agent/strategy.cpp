#include "agent/strategy.hpp"

#include <fmt/format.h>

#include <algorithm>
#include <cmath>
#include <limits>
#include <map>
#include <nlohmann/json.hpp>
#include <numbers>
#include <random>

#include "util/ids.hpp"

namespace korch::agent {
namespace {

using config::StrategyKind;
using nlohmann::json;

// Costs below this count as this (a free local model): success per dollar
// stays finite.
constexpr double k_min_unit_cost = 1e-9;

std::string kind_name(const config::CampaignConfig& cfg) {
  return std::string(config::to_string(cfg.strategy.kind));
}

json seed_json(const std::optional<SeedOrigin>& s) {
  if (!s) return nullptr;
  return {{"episode_id", s->episode_id},
          {"model_id", s->model_id},
          {"round", s->round},
          {"speedup", s->speedup}};
}

NewEpisode new_episode(const StrategyFacts& f, const std::string& task, const std::string& model,
                       int sample, int round) {
  NewEpisode e;
  e.id = ids::episode_id(f.campaign_id, task, model, sample);
  e.task_id = task;
  e.model_id = model;
  e.sample = sample;
  e.round = round;
  return e;
}

Decision make(const config::CampaignConfig& cfg, std::string key, std::string action,
              json extra = json::object()) {
  Decision d;
  d.key = std::move(key);
  d.action = std::move(action);
  json j = std::move(extra);
  j["strategy"] = kind_name(cfg);
  j["key"] = d.key;
  j["action"] = d.action;
  d.detail_json = j.dump();
  return d;
}

// Episodes by (task, model) -> sample.
using Index = std::map<std::pair<std::string, std::string>, std::map<int, const StrategyEpisode*>>;

Index index_of(const StrategyFacts& f) {
  Index ix;
  for (auto& e : f.episodes) ix[{e.task_id, e.model_id}][e.sample] = &e;
  return ix;
}

bool all_final(const std::map<int, const StrategyEpisode*>& group, int from, int to) {
  for (int s = from; s < to; ++s) {
    auto it = group.find(s);
    if (it == group.end() || !it->second->final) return false;
  }
  return true;
}

// --- best_of_k ---------------------------------------------------------------

void decide_best_of_k(const config::CampaignConfig& cfg, const StrategyFacts& f,
                      std::vector<Decision>& out) {
  const auto& st = cfg.strategy;
  auto ix = index_of(f);
  for (auto& task : f.tasks) {
    for (auto& m : cfg.models) {
      auto prefix = fmt::format("best_of_k|{}|{}|", task, m.id);
      if (f.decided.contains(prefix + "stop") || f.decided.contains(prefix + "exhausted")) continue;
      auto& group = ix[{task, m.id}];
      int w = 0;
      while (f.decided.contains(prefix + fmt::format("wave:{}", w))) ++w;
      int started = std::min(w * st.parallel, st.k);
      if (w > 0) {
        // Wave w-1 must be final before anything is decided from it.
        if (!all_final(group, (w - 1) * st.parallel, started)) continue;
        const StrategyEpisode* hit = nullptr;
        for (int s = 0; s < started; ++s) {
          auto* e = group[s];
          if (e && e->correct && e->speedup && *e->speedup >= st.target_speedup) {
            hit = e;
            break;
          }
        }
        if (hit) {
          auto d = make(cfg, prefix + "stop", "stop",
                        {{"task_id", task},
                         {"model_id", m.id},
                         {"samples", started},
                         {"by_episode", hit->id},
                         {"speedup", *hit->speedup},
                         {"target_speedup", st.target_speedup}});
          d.anchor_episode = hit->id;
          out.push_back(std::move(d));
          continue;
        }
        if (started >= st.k) {
          auto d = make(cfg, prefix + "exhausted", "exhausted",
                        {{"task_id", task}, {"model_id", m.id}, {"samples", started}});
          if (auto* last = group[started - 1]) d.anchor_episode = last->id;
          out.push_back(std::move(d));
          continue;
        }
      }
      int end = std::min(started + st.parallel, st.k);
      auto d =
          make(cfg, prefix + fmt::format("wave:{}", w), "start",
               {{"task_id", task}, {"model_id", m.id}, {"wave", w}, {"samples_before", started}});
      for (int s = started; s < end; ++s) d.start.push_back(new_episode(f, task, m.id, s, w));
      out.push_back(std::move(d));
    }
  }
}

// --- refine --------------------------------------------------------------------

void decide_refine(const config::CampaignConfig& cfg, const StrategyFacts& f,
                   std::vector<Decision>& out) {
  const int per_round = cfg.samples_per_task;
  auto ix = index_of(f);
  for (auto& task : f.tasks) {
    auto prefix = fmt::format("refine|{}|", task);
    int r = 0;
    while (f.decided.contains(prefix + fmt::format("round:{}", r))) ++r;
    if (r >= cfg.strategy.rounds) continue;
    std::optional<SeedOrigin> seed;
    if (r > 0) {
      bool ready = true;
      for (auto& m : cfg.models)
        ready = ready && all_final(ix[{task, m.id}], (r - 1) * per_round, r * per_round);
      if (!ready) continue;
      // The best verified kernel of the task so far, whichever model wrote
      // it: the highest speedup; ties go to the earlier sample, then the
      // model listed first.
      for (int s = 0; s < r * per_round; ++s) {
        for (auto& m : cfg.models) {
          auto* e = ix[{task, m.id}][s];
          if (!e || !e->correct) continue;
          double sp = e->speedup.value_or(0);
          if (!seed || sp > seed->speedup) seed = SeedOrigin{e->id, e->model_id, s / per_round, sp};
        }
      }
    }
    auto d = make(cfg, prefix + fmt::format("round:{}", r), "start",
                  {{"task_id", task}, {"round", r}, {"seed", seed_json(seed)}});
    for (int s = 0; s < per_round; ++s) {
      for (auto& m : cfg.models) {
        auto e = new_episode(f, task, m.id, r * per_round + s, r);
        e.seed = seed;
        d.start.push_back(std::move(e));
      }
    }
    out.push_back(std::move(d));
  }
}

// --- budget --------------------------------------------------------------------

struct Arm {
  std::string model;
  int n = 0;  // final episodes
  int successes = 0;
  double cost = 0;   // USD, or evaluation seconds with only a GPU-hour cap
  int assigned = 0;  // in the decision being made
};

std::uint64_t slot_seed(std::int64_t seed, int decision, int slot) {
  return ids::stable_hash64(fmt::format("budget|{}|{}|{}", seed, decision, slot));
}

void decide_budget(const config::CampaignConfig& cfg, const StrategyFacts& f,
                   std::vector<Decision>& out) {
  const auto& st = cfg.strategy;
  if (f.decided.contains("budget|stop")) return;
  int d = 0;
  while (f.decided.contains(fmt::format("budget|decision:{}", d))) ++d;
  // A decision reads every earlier result: all of them must be final.
  for (auto& e : f.episodes)
    if (!e.final) return;
  const bool by_usd = st.budget_usd > 0;
  double spent_usd = 0, spent_eval_s = 0;
  for (auto& e : f.episodes) {
    spent_usd += e.cost_usd;
    spent_eval_s += e.eval_s;
  }
  const double spent_gpu_hours = spent_eval_s / 3600;
  json spent = {{"spent_usd", spent_usd},
                {"spent_gpu_hours", spent_gpu_hours},
                {"budget_usd", st.budget_usd},
                {"budget_gpu_hours", st.budget_gpu_hours}};
  auto anchor = [&] {
    std::string a;
    for (auto& e : f.episodes)
      if (a.empty() || e.id < a) a = e.id;
    return a;
  };
  if ((st.budget_usd > 0 && spent_usd >= st.budget_usd) ||
      (st.budget_gpu_hours > 0 && spent_gpu_hours >= st.budget_gpu_hours)) {
    auto j = spent;
    j["decisions"] = d;
    auto dec = make(cfg, "budget|stop", "stop", j);
    dec.anchor_episode = anchor();
    out.push_back(std::move(dec));
    return;
  }
  std::vector<Arm> arms;
  std::map<std::string, std::size_t> arm_of;
  for (auto& m : cfg.models) {
    arm_of[m.id] = arms.size();
    arms.push_back(Arm{m.id});
  }
  std::map<std::pair<std::string, std::string>, int> count;  // (model, task) -> episodes
  for (auto& e : f.episodes) {
    ++count[{e.model_id, e.task_id}];
    auto it = arm_of.find(e.model_id);
    if (it == arm_of.end()) continue;
    auto& a = arms[it->second];
    ++a.n;
    a.successes += e.correct && e.speedup && *e.speedup >= st.target_speedup;
    a.cost += by_usd ? e.cost_usd : e.eval_s;
  }
  double total_cost = 0;
  int total_n = 0;
  for (auto& a : arms) {
    total_cost += a.cost;
    total_n += a.n;
  }
  const double prior_unit_cost = total_n > 0 ? std::max(total_cost / total_n, k_min_unit_cost) : 1;
  // The task an arm runs next: the one it has run least (plan order on ties),
  // below k episodes; "" when it has none left.
  auto next_task = [&](const Arm& a) -> std::string {
    std::string best;
    int best_n = std::numeric_limits<int>::max();
    for (auto& t : f.tasks) {
      int n = count[{a.model, t}];
      if (n < st.k && n < best_n) {
        best = t;
        best_n = n;
      }
    }
    return best;
  };
  json arms_json = json::array();
  for (auto& a : arms)
    arms_json.push_back(
        {{"model_id", a.model}, {"episodes", a.n}, {"successes", a.successes}, {"cost", a.cost}});
  std::vector<NewEpisode> start;
  json slots = json::array();
  for (int slot = 0; slot < st.batch; ++slot) {
    std::mt19937_64 rng(slot_seed(st.seed, d, slot));
    int best = -1;
    double best_score = -1;
    json scores = json::object();
    int pulls = 0;
    for (auto& a : arms) pulls += a.n + a.assigned;
    for (std::size_t i = 0; i < arms.size(); ++i) {
      auto& a = arms[i];
      double score = 0;
      if (next_task(a).empty()) {
        scores[a.model] = nullptr;
        continue;
      }
      double unit_cost = a.n > 0 ? std::max(a.cost / a.n, k_min_unit_cost) : prior_unit_cost;
      if (a.n + a.assigned == 0) {
        score = std::numeric_limits<double>::infinity();  // every arm is tried once first
      } else if (st.bandit == config::Bandit::thompson) {
        // One draw per arm per slot, in model order, from the slot's stream.
        double theta = beta_draw(1 + a.successes, 1 + a.n - a.successes, rng());
        score = theta / unit_cost;
      } else {
        // UCB1; the slots of this decision already given to the arm count as
        // pulls at its observed rate.
        double n = a.n + a.assigned;
        double rate = a.n > 0 ? static_cast<double>(a.successes) / a.n : 0.5;
        score = (rate + std::sqrt(2 * std::log(std::max(pulls, 1)) / n)) / unit_cost;
      }
      scores[a.model] = std::isinf(score) ? json("inf") : json(score);
      if (best < 0 || score > best_score) {
        best = static_cast<int>(i);
        best_score = score;
      }
    }
    if (best < 0) break;  // every arm has run k episodes of every task
    auto& a = arms[best];
    auto task = next_task(a);
    int sample = count[{a.model, task}]++;
    ++a.assigned;
    start.push_back(new_episode(f, task, a.model, sample, d));
    slots.push_back({{"slot", slot}, {"scores", scores}, {"model_id", a.model}, {"task_id", task}});
  }
  auto j = spent;
  j["decision"] = d;
  j["bandit"] = std::string(config::to_string(st.bandit));
  j["seed"] = st.seed;
  j["arms"] = arms_json;
  j["slots"] = slots;
  if (start.empty()) {
    auto dec = make(cfg, "budget|stop", "exhausted", j);
    dec.anchor_episode = anchor();
    if (!dec.anchor_episode.empty()) out.push_back(std::move(dec));
    return;
  }
  auto dec = make(cfg, fmt::format("budget|decision:{}", d), "start", j);
  dec.start = std::move(start);
  out.push_back(std::move(dec));
}

}  // namespace

std::vector<Decision> decide(const config::CampaignConfig& cfg, const StrategyFacts& facts) {
  std::vector<Decision> out;
  if (cfg.strategy.kind == StrategyKind::grid) return out;
  // One order for the facts, whatever order they were loaded or arrived in:
  // sums of doubles (spend) depend on it, to the last bit.
  StrategyFacts f = facts;
  std::sort(f.episodes.begin(), f.episodes.end(),
            [](const StrategyEpisode& a, const StrategyEpisode& b) { return a.id < b.id; });
  switch (cfg.strategy.kind) {
    case StrategyKind::grid: break;
    case StrategyKind::best_of_k: decide_best_of_k(cfg, f, out); break;
    case StrategyKind::refine: decide_refine(cfg, f, out); break;
    case StrategyKind::budget: decide_budget(cfg, f, out); break;
  }
  return out;
}

double canonical_sum(std::vector<std::pair<std::string, double>> parts) {
  std::sort(parts.begin(), parts.end());
  double sum = 0;
  for (auto& [key, x] : parts) sum += x;
  return sum;
}

std::string strategy_event_detail(const Decision& decision, const NewEpisode* episode,
                                  const std::string& seed_prompt_text) {
  auto j = json::parse(decision.detail_json);
  if (episode) {
    j["episode"] = {{"task_id", episode->task_id},
                    {"model_id", episode->model_id},
                    {"sample", episode->sample},
                    {"round", episode->round},
                    {"seed", seed_json(episode->seed)}};
    if (!seed_prompt_text.empty()) j["seed_prompt"] = seed_prompt_text;
  }
  return j.dump();
}

std::optional<StrategyEvent> parse_strategy_event(std::string_view detail_json) {
  auto j = json::parse(detail_json, nullptr, false);
  if (!j.is_object() || !j.contains("key") || !j["key"].is_string()) return std::nullopt;
  StrategyEvent ev;
  ev.key = j["key"].get<std::string>();
  ev.action = j.value("action", "");
  if (auto it = j.find("episode"); it != j.end() && it->is_object()) {
    ev.round = it->value("round", 0);
    if (auto s = it->find("seed"); s != it->end() && s->is_object()) {
      ev.seed = SeedOrigin{s->value("episode_id", ""), s->value("model_id", ""),
                           s->value("round", 0), s->value("speedup", 0.0)};
    }
  }
  ev.seed_prompt = j.value("seed_prompt", "");
  return ev;
}

std::string seed_prompt(const SeedOrigin& seed, const std::string& code,
                        const std::string& result_text) {
  return fmt::format(
      "Start from the best verified kernel for this task so far (round {}, written by model "
      "{}, episode {}): it passed the protected evaluation with a measured speedup of {:.3f}x. "
      "Improve on it: make it faster while keeping it correct.\n\n"
      "```python\n{}{}```\n\n"
      "Its measured result:\n{}\n",
      seed.round, seed.model_id, seed.episode_id, seed.speedup, code,
      code.ends_with('\n') ? "" : "\n", result_text);
}

namespace {

// The draws are korch's own, on mt19937_64's raw bits (whose sequence the
// standard fixes): std::gamma_distribution's algorithm is the library's, so
// a campaign resumed on another host or standard library could have drawn
// differently for a decision not yet recorded.
double uniform_open01(std::mt19937_64& rng) {  // in (0, 1)
  return (static_cast<double>(rng() >> 11) + 0.5) * 0x1.0p-53;
}

double standard_normal(std::mt19937_64& rng) {  // Box-Muller, one of the pair
  const double u1 = uniform_open01(rng);
  const double u2 = uniform_open01(rng);
  return std::sqrt(-2.0 * std::log(u1)) * std::cos(2.0 * std::numbers::pi * u2);
}

// Gamma(a, 1): Marsaglia and Tsang (2000); a < 1 through Gamma(a + 1) * U^(1/a).
double gamma_draw(double a, std::mt19937_64& rng) {
  if (a < 1) {
    const double u = uniform_open01(rng);
    return gamma_draw(a + 1, rng) * std::pow(u, 1.0 / a);
  }
  const double d = a - 1.0 / 3;
  const double c = 1 / std::sqrt(9 * d);
  for (;;) {
    double x = 0;
    double v = 0;
    do {
      x = standard_normal(rng);
      v = 1 + c * x;
    } while (v <= 0);
    v = v * v * v;
    const double u = uniform_open01(rng);
    if (u < 1 - 0.0331 * x * x * x * x) return d * v;
    if (std::log(u) < 0.5 * x * x + d * (1 - v + std::log(v))) return d * v;
  }
}

}  // namespace

double beta_draw(double a, double b, std::uint64_t seed) {
  std::mt19937_64 rng(seed);
  const double x = gamma_draw(a, rng);
  const double y = gamma_draw(b, rng);
  return x + y > 0 ? x / (x + y) : 0.5;
}

}  // namespace korch::agent
