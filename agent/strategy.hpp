#pragma once
// Campaign strategies ([strategy] in the campaign TOML, docs/config.md
// "Strategies"): which episodes a campaign runs beyond a fixed grid.
//
//   grid       every (task, model, sample) up front (the runner's own path;
//              decide() returns nothing for it)
//   best_of_k  waves of `parallel` samples per (task, model); a (task, model)
//              stops once a correct kernel reaches target_speedup, or after
//              k samples
//   refine     rounds of samples_per_task episodes per (task, model); round
//              r+1 of a task starts once every episode of its round r is
//              final, each from the task's best verified kernel so far (its
//              code and measured result in the first user message, whichever
//              model wrote it)
//   budget     decisions of `batch` episodes, allocated across models by a
//              seeded bandit (Thompson or UCB1) on successes per dollar (per
//              GPU-hour with only a GPU-hour cap), until the spend or
//              GPU-hour cap is reached
//
// Determinism (DESIGN §3, resume): decide() is a pure function of the config,
// the stored facts (episodes, their finals, costs and evaluation times, and
// the keys of the decisions already recorded) and strategy.seed. A decision
// is taken only when every input it reads is final, so a run killed at any
// moment and resumed decides exactly what an uninterrupted run decides,
// whatever order episodes finished in. Each decision has a key and is
// recorded once, as events of kind "strategy" in the same batch as the
// episodes it starts.
#include <cstdint>
#include <optional>
#include <set>
#include <string>
#include <string_view>
#include <utility>
#include <vector>

#include "config/campaign.hpp"

namespace korch::agent {

// The event kind of every strategy decision (store events table).
inline constexpr std::string_view k_strategy_event_kind = "strategy";

// What a strategy reads about one episode; stored facts only.
struct StrategyEpisode {
  std::string id, task_id, model_id;
  int sample = 0;
  bool final = false;
  bool correct = false;
  std::optional<double> speedup;
  double cost_usd = 0;  // the episode's LLM spend
  double eval_s = 0;    // its evaluations' wall_s, summed (GPU time on the gpu evaluator)
};

// Where a refine seed came from: the best verified kernel of its task.
struct SeedOrigin {
  std::string episode_id, model_id;
  int round = 0;
  double speedup = 0;

  bool operator==(const SeedOrigin&) const = default;
};

struct NewEpisode {
  std::string id;  // ids::episode_id(campaign, task, model, sample)
  std::string task_id, model_id;
  int sample = 0;
  int round = 0;  // refine: round; best_of_k: wave; budget: decision index
  std::optional<SeedOrigin> seed;
};

struct Decision {
  std::string key;     // unique within the campaign, e.g. "refine|L1/19|round:2"
  std::string action;  // start | stop | exhausted
  std::vector<NewEpisode> start;
  // The decision's record (JSON object text, deterministic: no times).
  std::string detail_json;
  // The episode a decision that starts none is recorded under.
  std::string anchor_episode;
};

struct StrategyFacts {
  std::string campaign_id;
  std::vector<std::string> tasks;         // the plan's order
  std::vector<StrategyEpisode> episodes;  // every episode of the campaign
  std::set<std::string> decided;          // keys of the decisions already recorded
};

// The decisions ready now, in a deterministic order. Empty for grid.
std::vector<Decision> decide(const config::CampaignConfig& cfg, const StrategyFacts& facts);

// The sum of `parts` in the order of their keys (request ids): a spend or a
// time summed from rows read in any order comes out the same to the last bit.
double canonical_sum(std::vector<std::pair<std::string, double>> parts);

// The event detail recorded for a decision: its own record, plus (for each
// episode it starts) the episode's round, sample, seed origin and the seed's
// first-message text. `episode` null: the decision's own event.
std::string strategy_event_detail(const Decision& decision, const NewEpisode* episode,
                                  const std::string& seed_prompt);

// A stored strategy event, read back.
struct StrategyEvent {
  std::string key;
  std::string action;
  std::optional<int> round;  // set on an event that started its episode
  std::optional<SeedOrigin> seed;
  std::string seed_prompt;
};
std::optional<StrategyEvent> parse_strategy_event(std::string_view detail_json);

// The first-message block of a refine episode: the seed's code and its
// measured result (`result_text`, prompts::render_report of its submission).
std::string seed_prompt(const SeedOrigin& seed, const std::string& code,
                        const std::string& result_text);

// Beta(a, b) drawn from `seed` (two gamma draws of std::mt19937_64). The
// same seed gives the same value with the same standard library.
double beta_draw(double a, double b, std::uint64_t seed);

}  // namespace korch::agent
