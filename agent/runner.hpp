#pragma once
// The one campaign runner shared by `korch run`, `korch serve` and the engine
// benchmark: builds the evaluator, the plan and the LLM client of a config,
// checks the model endpoints, drives the campaign (run_campaign) and
// shuts the client and evaluator down. The caller owns the store (and its
// file lock) and the stop flag.
#include <functional>
#include <memory>
#include <string>

#include "agent/campaign_runner.hpp"
#include "config/campaign.hpp"
#include "evaluator/evaluator.hpp"
#include "llm_clients/client.hpp"
#include "store/store.hpp"
#include "util/error.hpp"

namespace korch::agent {

struct RunnerHooks {
  // Compile cache of the evaluator; "" = evaluator.cache_dir, else
  // <db dir>/korch-cache.
  std::string cache_dir;
  // GET <base_url>/models of every model before starting (fails fast on an
  // unreachable endpoint).
  bool probe_endpoints = true;
  double probe_timeout_s = 5;
  // Decorators (metrics, timing): take the real object, return the one the
  // campaign uses (it owns the inner one).
  std::function<std::unique_ptr<llm::ChatClient>(std::unique_ptr<llm::ChatClient>)> wrap_client;
  std::function<std::unique_ptr<evaluator::Evaluator>(std::unique_ptr<evaluator::Evaluator>)>
      wrap_evaluator;
  // Called once everything is built and checked, just before the run starts
  // (banners, signal handlers).
  std::function<void(const CampaignPlan&, const evaluator::Evaluator&)> on_ready;
};

// The compile cache directory of a config (see RunnerHooks::cache_dir).
std::string default_cache_dir(const config::CampaignConfig& cfg);

// Builds and runs one campaign to completion, stop or abort. Setup failures
// carry their kind (a bad plan is `invalid`) and say what failed
// ("evaluator: ...", "model m1: ...", "LLM endpoint of model m1 unreachable: ...").
Result<RunResult> run_campaign_wired(const config::CampaignConfig& cfg, store::Store& store,
                                     const RunOptions& options, const RunnerHooks& hooks = {});

}  // namespace korch::agent
