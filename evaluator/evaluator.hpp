#pragma once
// The evaluator as the engine sees it (DESIGN §5). Implementations: mock
// (deterministic fake verdicts, labelled mock everywhere), cpu and gpu (the
// protected pipeline with sandboxed workers). Idempotency by request id is
// enforced one level up, by the store: the engine looks the request id up
// before calling evaluate(), and records exactly one result per id.
#include <cstdint>
#include <functional>
#include <memory>
#include <optional>
#include <string>
#include <utility>
#include <vector>

#include <nlohmann/json.hpp>

#include "config/campaign.hpp"
#include "config/tasks.hpp"
#include "evaluator/protocol_schema.hpp"
#include "util/error.hpp"

namespace korch::evaluator {

// enum class Verdict: generated from evaluator/protocol/protocol.json.

const char* to_string(Verdict v);
std::optional<Verdict> verdict_from_string(std::string_view s);

enum class Mode { check, submit };

// "check" | "submit": the request kind as the worker's job JSON and the
// store's evaluation rows spell it.
const char* to_string(Mode m);
std::optional<Mode> mode_from_string(std::string_view s);

struct Request {
  std::string request_id;  // "check|..." or "kernel|..." (util/ids.hpp)
  Mode mode = Mode::check;
  config::Task task;
  std::string code;               // the candidate module (defines ModelNew)
  std::uint64_t secret_seed = 0;  // per-campaign, never shown to the model
  bool rules = true;              // false: skip static rules (sandbox testing; report says so)
  std::optional<config::EvalMode> device;  // cpu | gpu; nullopt = the evaluator's own device
};

// Everything a verdict rests on. Rendered into feedback by prompts/ and stored
// verbatim (report_json) by the engine.
// struct Measured and k_measured_fields, what a measurement found and its
// fields' JSON names: generated from protocol.json (measure_result.measured).

// One evaluation's outcome. Its JSON encoding (to_json/from_json, the
// stored form) names every field once: k_measured_fields and k_report_fields
// (evaluator.cpp).
struct Report : Measured {
  std::string request_id;
  Verdict status = Verdict::worker_crash;
  bool correct = false;
  double reward = 0;
  std::string rule_id;         // rule_violation: which rule
  std::string error;           // first line(s) of the failure
  std::string compile_log;     // compiler output tail
  std::string runtime_detail;  // runtime traceback tail
  // Facts for the agent that are not a verdict (an adversarial family on
  // which the reference itself is fragile); shown in the feedback.
  std::vector<std::string> notes;
  std::vector<std::string> protections;  // sandbox features that were active
  std::string evaluator_version;
  std::string mode;   // "mock" | "cpu" | "gpu"
  bool mock = false;  // true: verdict and timings are fake
  double wall_s = 0;
  bool rules_skipped = false;      // the static rules were not run (--rules off)
  std::optional<double> t_min_ms;  // roofline lower bound, when known
  nlohmann::json evidence = nlohmann::json::object();  // stage-specific evidence
  // Not a result: the evaluation did not run to its end because the
  // evaluator was shutting down (its workers are killed, its queue dropped).
  // Whatever the verdict fields say, the engine never records or counts such
  // a report; the evaluation runs again when the campaign resumes. Not part
  // of the JSON encoding (such a report is never stored).
  bool interrupted = false;

  // The host's fault, not a verdict: the evaluator's "infrastructure: ..."
  // outcome (memory held outside the evaluation, a device that refused a
  // context, a host too loaded to time on). Such an evaluation runs again.
  bool host_fault() const;

  // JSON encoding used for storage and `korch eval --json`.
  std::string to_json() const;
  static Result<Report> from_json(std::string_view json);
};

// Called exactly once per evaluate(), on an evaluator thread. Keep it short:
// post to your own queue.
using Callback = std::function<void(Report)>;

class Evaluator {
 public:
  virtual ~Evaluator() = default;
  // Starts one evaluation. Never blocks on the evaluation itself; never runs
  // candidate code in this process. Thread-safe.
  virtual void evaluate(Request request, Callback done) = 0;
  // Version string recorded on every report (changes when verdicts may).
  virtual std::string version() const = 0;
  // Which evaluator this is (mock, cpu or gpu).
  virtual config::EvalMode mode() const = 0;
  // Facts for the system prompt: target device and software versions.
  virtual std::string device_description() const = 0;
  // Stops accepting work and waits for in-flight evaluations (killing
  // workers). Their callbacks, and those of evaluations queued or submitted
  // after it, get a Report with interrupted = true.
  virtual void shutdown() = 0;
};

// One documented static rule (the same table the rule checker enforces), used
// to render the system prompt's rules list.
struct RuleDoc {
  std::string id;
  std::string message;
};
std::vector<RuleDoc> rule_docs();

// Where a remote evaluator (evaluator.remote = true) queues its work: the
// store's postgres:// URL and the campaign ("" for korch serve).
struct QueueTarget {
  std::string store_url;
  std::string campaign_id;
};

// Creates the evaluator of a config, the one factory of every front door:
// with cfg.remote the queue evaluator (evaluator/remote/, `queue` says where),
// else the one named by cfg.mode, in this process. `cache_dir` holds the
// compile cache.
Result<std::unique_ptr<Evaluator>> make_evaluator(const config::EvaluatorConfig& cfg,
                                                  const std::string& cache_dir,
                                                  const QueueTarget& queue = {});

// Reward functions (DESIGN §5 stage 4).
double reward_speedup(bool correct, std::optional<double> speedup);
double reward_roofline(bool correct, double t_min_s, double t_cand_s);
double reward_beat_baseline(bool correct, std::optional<double> ci_low);
// The campaign's reward option applied to a report: the one reward function every mode uses.
// `roofline` needs r.t_min_ms (gpu mode); without it the speedup reward is used and the config
// validation refuses `roofline` where no mode can compute t_min.
double reward_for(config::Reward reward, const Report& r);

}  // namespace korch::evaluator
