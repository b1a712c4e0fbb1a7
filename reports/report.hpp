#pragma once
// The campaign report (`korch report`, the daemon's /api/campaigns/{id}/report
// and its dashboard): KernelBench-style metrics read from the store — fast_p,
// geometric-mean speedup, pass@k, cost and tokens per model — plus every
// episode's status for the per-task grid. Built once as a typed value, then
// rendered as text, JSON or one self-contained HTML page; the JSON form is
// what the HTML page and the dashboard plot (reports/web/plots.js).
#include <cstdint>
#include <map>
#include <nlohmann/json.hpp>
#include <optional>
#include <string>
#include <utility>
#include <vector>

#include "config/loader.hpp"
#include "reports/verdict_card.hpp"
#include "store/store.hpp"
#include "util/enum_names.hpp"
#include "util/error.hpp"

namespace korch::reports {

// How many episodes ended with each verdict: the verdict names of
// evaluator/protocol/protocol.json (docs/rules.md's words: ok, compile_error,
// incorrect, timeout, no_kernel, rule_violation, ...); "none" for an episode
// that ended without a judged submission (its end reason says why).
using VerdictCounts = std::map<std::string, std::int64_t>;

// The word every rendering puts beside numbers a mock evaluator made up.
inline constexpr const char* k_mock_label = "MOCK evaluator: fake verdicts and speedups";

struct ModelReport {
  std::string model_id;
  std::int64_t episodes = 0, finished = 0, correct = 0;
  // (p, share of all episodes that are correct with speedup > p; p = 0: all
  // correct ones) at report_thresholds().
  std::vector<std::pair<double, double>> fast_p;
  std::optional<double> geomean_speedup;          // over correct submissions
  std::vector<std::pair<int, double>> pass_at_k;  // k = 1, 2, 4, ... (unbiased estimator)
  std::int64_t llm_calls = 0, dup_possible_calls = 0, prompt_tokens = 0, completion_tokens = 0;
  double cost_usd = 0;  // recorded: the outcomes korch stored
  // Sends whose outcome korch never recorded (a kill while the request was
  // out: each resend of a call under its id leaves one; a call still
  // `started` leaves every send). The provider may have billed them:
  // `cost_usd` + up to `unknown_cost_bound_usd` (each at the model's
  // max_tokens of completion and the call's prompt, or the episode's largest
  // recorded prompt when the call has none, at the model's prices).
  std::int64_t unknown_requests = 0;
  double unknown_cost_bound_usd = 0;
  std::vector<double> speedups;  // correct submissions, ascending
  VerdictCounts verdicts;
};

struct EpisodeStatus {
  std::string id, task_id, model_id;
  int sample = 0;
  std::string status;           // pending | running | final
  std::string reason, verdict;  // of the final row; "" before it
  bool correct = false;
  std::optional<double> speedup;
  std::string evaluator;  // the mode that judged the final submission (mock|cpu|gpu); "" if none
  std::int64_t tokens = 0;
  double cost_usd = 0;
  // Strategies (agent/strategy.hpp): the round that started the episode (0
  // under grid) and, for a refine episode, the episode whose kernel seeded it.
  int round = 0;
  std::string seed_episode_id;
};

// The campaign after some of its episodes ended. fast_p here is per task, as
// KernelBench counts it: the share of the campaign's tasks whose best correct
// kernel so far (any model, any round) is faster than p (p = 0: has a correct
// kernel).
struct CurvePoint {
  std::int64_t episodes = 0;                      // episodes ended so far
  int round = 0;                                  // the latest round among them
  double cost_usd = 0;                            // their LLM spend
  double gpu_hours = 0;                           // their evaluations' time (wall_s) in hours
  std::vector<std::pair<double, double>> fast_p;  // at report_thresholds()
};

// The campaign's strategy and its curves: fast_p against spend, GPU-hours
// and rounds.
struct StrategyReport {
  std::string kind = "grid";  // strategy.kind of the stored config
  // One point per ended episode, in the order they ended (finals' `at`, then
  // episode id): run-describing, a resumed run may order them otherwise.
  std::vector<CurvePoint> by_episode;
  // One point per round, once every episode of rounds <= r is counted:
  // depends only on results.
  std::vector<CurvePoint> by_round;
  std::int64_t decisions =
      0;  // strategy decisions recorded (distinct keys; a decision has an event per episode)
};

struct CampaignReport {
  std::string campaign_id, campaign_name;
  std::vector<ModelReport> models;      // by model id
  std::vector<std::string> tasks;       // natural order ("2" before "10")
  std::vector<EpisodeStatus> episodes;  // by task, model, sample
  StrategyReport strategy;
  VerdictCounts verdicts;                              // the whole campaign
  std::map<std::string, VerdictCounts> task_verdicts;  // by task
  std::map<std::string, std::int64_t> evaluators;      // final results by evaluator mode
  bool mock = false;  // a mock evaluator judged any of its evaluations
  // Tasks the campaign left out because `korch tasks validate` flagged them
  // (tasks.exclude_flagged), as recorded at its start.
  std::vector<config::ExcludedTask> excluded;
  // The verdict card of each evaluator version that scored it (issue #51).
  std::vector<VerdictCardLine> verdict_cards;
};

// The usual fast_p thresholds: 0, 0.5, 0.8, 1, 1.5, 2.
const std::vector<double>& report_thresholds();

Result<CampaignReport> build_report(store::Store& store, const std::string& campaign_id);

// The text report: one block per model; a mock campaign's first line is
// k_mock_label.
std::string render_text(const CampaignReport& report);
// {"campaign", "mock", "label", "evaluators", "verdicts", "task_verdicts",
// "thresholds", "models": {id: {..., "verdicts"}}, "tasks", "excluded_tasks", "episodes",
// "strategy": {"kind", "decisions", "by_round": [...], "by_episode": [...]},
// "verdict_cards": [{"evaluator_version", "rules", "measured", "text", "cards"}]};
// docs/api.md describes it. A mock campaign's "label" is k_mock_label.
std::string render_json(const CampaignReport& report);
// The "verdict_cards" array of the report's JSON (the dataset card's too).
nlohmann::json verdict_cards_json(const std::vector<VerdictCardLine>& lines);

// One self-contained page (inline CSS and JS, no external resource): the
// speedup distribution, the fast_p curve, cost per model and the task grid.
std::string render_html(const CampaignReport& report);

// The report as `format` asks (`korch report --format`, the API's ?format=).
enum class ReportFormat { text, json, html };
std::string render(const CampaignReport& report, ReportFormat format);

}  // namespace korch::reports

namespace korch {
KORCH_ENUM_NAMES(reports::ReportFormat, text, json, html);
}  // namespace korch
