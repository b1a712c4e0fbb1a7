#include "daemon/metrics.hpp"

#include <prometheus/counter.h>
#include <prometheus/family.h>
#include <prometheus/gauge.h>
#include <prometheus/histogram.h>
#include <prometheus/registry.h>
#include <prometheus/text_serializer.h>

#include "util/fs.hpp"

namespace korch::daemon {

using prometheus::BuildCounter;
using prometheus::BuildGauge;
using prometheus::BuildHistogram;

struct Metrics::Impl {
  std::shared_ptr<prometheus::Registry> registry = std::make_shared<prometheus::Registry>();
  prometheus::Family<prometheus::Gauge>& episodes = BuildGauge()
                                                        .Name("korch_episodes")
                                                        .Help("Episodes of a campaign by state")
                                                        .Register(*registry);
  prometheus::Family<prometheus::Gauge>& turns =
      BuildGauge()
          .Name("korch_campaign_turns")
          .Help("LLM replies recorded in a campaign (all runs)")
          .Register(*registry);
  prometheus::Family<prometheus::Gauge>& campaign_tokens =
      BuildGauge()
          .Name("korch_campaign_tokens")
          .Help("Tokens used by a campaign (all runs)")
          .Register(*registry);
  prometheus::Family<prometheus::Gauge>& campaign_cost =
      BuildGauge()
          .Name("korch_campaign_cost_usd")
          .Help("Cost of a campaign in USD (all runs)")
          .Register(*registry);
  prometheus::Family<prometheus::Gauge>& campaign_state =
      BuildGauge()
          .Name("korch_campaign_state")
          .Help("1 for the campaign's current state")
          .Register(*registry);
  prometheus::Family<prometheus::Counter>& llm_calls =
      BuildCounter()
          .Name("korch_llm_calls_total")
          .Help("LLM calls finished, by model and outcome")
          .Register(*registry);
  prometheus::Family<prometheus::Counter>& llm_retries =
      BuildCounter()
          .Name("korch_llm_retries_total")
          .Help("HTTP attempts beyond the first, by model")
          .Register(*registry);
  prometheus::Family<prometheus::Histogram>& llm_latency =
      BuildHistogram()
          .Name("korch_llm_latency_seconds")
          .Help("LLM call latency (submit to completion)")
          .Register(*registry);
  prometheus::Family<prometheus::Counter>& llm_tokens = BuildCounter()
                                                            .Name("korch_llm_tokens_total")
                                                            .Help("Tokens by model and kind")
                                                            .Register(*registry);
  prometheus::Family<prometheus::Counter>& llm_cost = BuildCounter()
                                                          .Name("korch_llm_cost_usd_total")
                                                          .Help("LLM cost in USD by model")
                                                          .Register(*registry);
  prometheus::Family<prometheus::Counter>& evaluations =
      BuildCounter()
          .Name("korch_evaluations_total")
          .Help("Evaluations by mode and verdict")
          .Register(*registry);
  prometheus::Family<prometheus::Histogram>& eval_latency =
      BuildHistogram()
          .Name("korch_evaluation_seconds")
          .Help("Evaluation wall time by mode")
          .Register(*registry);
  prometheus::Gauge& queue_depth = BuildGauge()
                                       .Name("korch_evaluator_queue_depth")
                                       .Help("Evaluations submitted and not finished")
                                       .Register(*registry)
                                       .Add({});
  prometheus::Gauge& busy_fraction =
      BuildGauge()
          .Name("korch_evaluator_busy_fraction")
          .Help(
              "Fraction of the daemon's uptime with at least one evaluation running "
              "(the GPU busy fraction in gpu mode)")
          .Register(*registry)
          .Add({});
  prometheus::Counter& busy_seconds = BuildCounter()
                                          .Name("korch_evaluator_busy_seconds_total")
                                          .Help("Seconds with at least one evaluation running")
                                          .Register(*registry)
                                          .Add({});
  prometheus::Family<prometheus::Counter>& http = BuildCounter()
                                                      .Name("korch_http_requests_total")
                                                      .Help("API requests by route and status")
                                                      .Register(*registry);
  prometheus::Family<prometheus::Counter>& env_steps = BuildCounter()
                                                           .Name("korch_env_steps_total")
                                                           .Help("OpenEnv steps by action")
                                                           .Register(*registry);
  prometheus::Gauge& env_sessions = BuildGauge()
                                        .Name("korch_env_sessions")
                                        .Help("Open OpenEnv WebSocket sessions")
                                        .Register(*registry)
                                        .Add({});
  prometheus::Gauge& sse_clients = BuildGauge()
                                       .Name("korch_sse_clients")
                                       .Help("Open server-sent-event streams")
                                       .Register(*registry)
                                       .Add({});

  std::mutex mutex;  // busy accounting
  int in_flight = 0;
  double busy_since = 0;
  double started = now_mono();

  static prometheus::Histogram::BucketBoundaries latency_buckets() {
    return {0.05, 0.1, 0.25, 0.5, 1, 2.5, 5, 10, 30, 60, 120, 300, 600};
  }

  void eval_started() {
    std::lock_guard lock(mutex);
    if (in_flight++ == 0) busy_since = now_mono();
    queue_depth.Set(in_flight);
  }
  void eval_finished() {
    std::lock_guard lock(mutex);
    if (--in_flight == 0) busy_seconds.Increment(now_mono() - busy_since);
    queue_depth.Set(in_flight);
  }
  void update_busy() {
    std::lock_guard lock(mutex);
    double busy = busy_seconds.Value() + (in_flight > 0 ? now_mono() - busy_since : 0);
    double up = now_mono() - started;
    busy_fraction.Set(up > 0 ? busy / up : 0);
  }
};

namespace {

class MetricsClient final : public llm::ChatClient {
 public:
  MetricsClient(std::unique_ptr<llm::ChatClient> inner, Metrics::Impl& m)
      : m_inner(std::move(inner)), m(m) {}
  Result<void> add_model(const config::ModelConfig& model) override {
    return m_inner->add_model(model);
  }
  void submit(llm::ChatRequest req, llm::ChatCallback done) override {
    auto model = req.model_id;
    m_inner->submit(std::move(req), [this, model, done = std::move(done)](llm::ChatResult r) {
      if (r.outcome != llm::Outcome::cancelled) {
        m.llm_calls.Add({{"model", model}, {"outcome", llm::to_string(r.outcome)}}).Increment();
        if (r.attempts.size() > 1)
          m.llm_retries.Add({{"model", model}}).Increment(double(r.attempts.size() - 1));
        m.llm_latency.Add({{"model", model}}, Metrics::Impl::latency_buckets())
            .Observe(r.latency_s);
        m.llm_tokens.Add({{"model", model}, {"kind", "prompt"}})
            .Increment(double(r.usage.prompt_tokens));
        m.llm_tokens.Add({{"model", model}, {"kind", "completion"}})
            .Increment(double(r.usage.completion_tokens));
        m.llm_cost.Add({{"model", model}}).Increment(r.cost_usd);
      }
      done(std::move(r));
    });
  }
  llm::ClientStats stats() const override { return m_inner->stats(); }
  void shutdown() override { m_inner->shutdown(); }

 private:
  std::unique_ptr<llm::ChatClient> m_inner;
  Metrics::Impl& m;
};

class MetricsEvaluator final : public evaluator::Evaluator {
 public:
  MetricsEvaluator(std::unique_ptr<evaluator::Evaluator> inner, Metrics::Impl& m)
      : m_inner(std::move(inner)), m(m) {}
  void evaluate(evaluator::Request request, evaluator::Callback done) override {
    m.eval_started();
    const std::string mode(config::to_string(m_inner->mode()));
    m_inner->evaluate(std::move(request), [this, mode,
                                           done = std::move(done)](evaluator::Report r) {
      if (!r.interrupted) {
        m.evaluations.Add({{"mode", mode}, {"verdict", evaluator::to_string(r.status)}})
            .Increment();
        m.eval_latency.Add({{"mode", mode}}, Metrics::Impl::latency_buckets()).Observe(r.wall_s);
      }
      m.eval_finished();
      done(std::move(r));
    });
  }
  std::string version() const override { return m_inner->version(); }
  config::EvalMode mode() const override { return m_inner->mode(); }
  std::string device_description() const override { return m_inner->device_description(); }
  void shutdown() override { m_inner->shutdown(); }

 private:
  std::unique_ptr<evaluator::Evaluator> m_inner;
  Metrics::Impl& m;
};

}  // namespace

Metrics::Metrics() : m(std::make_unique<Impl>()) {}
Metrics::~Metrics() = default;

std::unique_ptr<llm::ChatClient> Metrics::wrap(std::unique_ptr<llm::ChatClient> inner) {
  return std::make_unique<MetricsClient>(std::move(inner), *m);
}

std::unique_ptr<evaluator::Evaluator> Metrics::wrap(std::unique_ptr<evaluator::Evaluator> inner) {
  return std::make_unique<MetricsEvaluator>(std::move(inner), *m);
}

void Metrics::set_campaign(const std::string& name, CampaignState state, const agent::Progress& p) {
  auto pending = std::max<std::int64_t>(0, p.episodes - p.final - p.running);
  m->episodes.Add({{"campaign", name}, {"state", "pending"}}).Set(double(pending));
  m->episodes.Add({{"campaign", name}, {"state", "running"}}).Set(double(p.running));
  m->episodes.Add({{"campaign", name}, {"state", "final"}}).Set(double(p.final));
  m->episodes.Add({{"campaign", name}, {"state", "failed"}}).Set(double(p.failed));
  m->turns.Add({{"campaign", name}}).Set(double(p.turns));
  m->campaign_tokens.Add({{"campaign", name}}).Set(double(p.tokens));
  m->campaign_cost.Add({{"campaign", name}}).Set(p.cost_usd);
  for (const auto& [value, label] : EnumNames<CampaignState>::k_names) {
    m->campaign_state.Add({{"campaign", name}, {"state", std::string(label)}})
        .Set(state == value ? 1 : 0);
  }
}

void Metrics::count_http(const std::string& route, int status) {
  m->http.Add({{"route", route}, {"status", std::to_string(status)}}).Increment();
}

void Metrics::count_env_step(const std::string& action) {
  m->env_steps.Add({{"action", action}}).Increment();
}
void Metrics::set_env_sessions(int n) { m->env_sessions.Set(n); }
void Metrics::set_sse_clients(int n) { m->sse_clients.Set(n); }

std::string Metrics::serialize() {
  m->update_busy();
  prometheus::TextSerializer s;
  return s.Serialize(m->registry->Collect());
}

}  // namespace korch::daemon
