#pragma once
// The campaign report (`korch report`, the daemon's /api/campaigns/{id}/report
// and its dashboard): KernelBench-style metrics read from the store — fast_p,
// geometric-mean speedup, pass@k, cost and tokens per model — plus every
// episode's status for the per-task grid. Built once as a typed value, then
// rendered as text, JSON or one self-contained HTML page; the JSON form is
// what the HTML page and the dashboard plot (daemon/web/plots.js).
#include <cstdint>
#include <optional>
#include <string>
#include <utility>
#include <vector>

#include "store/store.hpp"
#include "util/enum_names.hpp"
#include "util/error.hpp"

namespace korch::reports {

struct ModelReport {
  std::string model_id;
  std::int64_t episodes = 0, finished = 0, correct = 0;
  // (p, share of all episodes that are correct with speedup > p; p = 0: all
  // correct ones) at report_thresholds().
  std::vector<std::pair<double, double>> fast_p;
  std::optional<double> geomean_speedup;          // over correct submissions
  std::vector<std::pair<int, double>> pass_at_k;  // k = 1, 2, 4, ... (unbiased estimator)
  std::int64_t llm_calls = 0, dup_possible_calls = 0, prompt_tokens = 0, completion_tokens = 0;
  double cost_usd = 0;
  std::vector<double> speedups;  // correct submissions, ascending
};

struct EpisodeStatus {
  std::string id, task_id, model_id;
  int sample = 0;
  std::string status;           // pending | running | final
  std::string reason, verdict;  // of the final row; "" before it
  bool correct = false;
  std::optional<double> speedup;
  std::int64_t tokens = 0;
  double cost_usd = 0;
};

struct CampaignReport {
  std::string campaign_id, campaign_name;
  std::vector<ModelReport> models;      // by model id
  std::vector<std::string> tasks;       // natural order ("2" before "10")
  std::vector<EpisodeStatus> episodes;  // by task, model, sample
};

// The usual fast_p thresholds: 0, 0.5, 0.8, 1, 1.5, 2.
const std::vector<double>& report_thresholds();

Result<CampaignReport> build_report(store::Store& store, const std::string& campaign_id);

// The text report (unchanged format: one block per model).
std::string render_text(const CampaignReport& report);
// {"campaign", "thresholds", "models": {id: {...}}, "tasks", "episodes"};
// docs/api.md describes it.
std::string render_json(const CampaignReport& report);
// One self-contained page (inline CSS and JS, no external resource): the
// speedup distribution, the fast_p curve, cost per model and the task grid.
std::string render_html(const CampaignReport& report);

// The report as `format` asks (`korch report --format`, the API's ?format=).
enum class ReportFormat { text, json, html };
std::string render(const CampaignReport& report, ReportFormat format);

}  // namespace korch::reports

namespace korch {
template <>
struct EnumNames<reports::ReportFormat> {
  static constexpr std::pair<reports::ReportFormat, std::string_view> k_names[] = {
      {reports::ReportFormat::text, "text"},
      {reports::ReportFormat::json, "json"},
      {reports::ReportFormat::html, "html"}};
};
}  // namespace korch
