#pragma once
// The daemon's Prometheus metrics (prometheus-cpp's registry and text
// serialisation). LLM calls and evaluations are counted by decorators around
// the real client and evaluator, so every campaign, one-off evaluation and
// environment step is seen the same way; campaign gauges are set at scrape
// time from the campaigns' latest progress.
#include <memory>
#include <mutex>
#include <string>

#include "agent/campaign_runner.hpp"
#include "daemon/campaign_state.hpp"
#include "evaluator/evaluator.hpp"
#include "llm_clients/client.hpp"

namespace prometheus {
class Registry;
}

namespace korch::daemon {

class Metrics {
 public:
  Metrics();
  ~Metrics();

  // Decorators; `inner` is owned by the result.
  std::unique_ptr<llm::ChatClient> wrap(std::unique_ptr<llm::ChatClient> inner);
  std::unique_ptr<evaluator::Evaluator> wrap(std::unique_ptr<evaluator::Evaluator> inner);

  // Campaign gauges (episodes by state, turns, tokens, cost).
  void set_campaign(const std::string& name, CampaignState state, const agent::Progress& p);
  void count_http(const std::string& route, int status);
  void count_env_step(const std::string& action);
  void set_env_sessions(int n);
  void set_sse_clients(int n);

  // The exposition text (text/plain; version=0.0.4).
  std::string serialize();

  struct Impl;

 private:
  std::unique_ptr<Impl> m;
};

}  // namespace korch::daemon
