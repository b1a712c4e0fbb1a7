#include "agent/runner.hpp"

#include <fmt/format.h>

#include <filesystem>

#include "llm_clients/probe.hpp"
#include "util/ids.hpp"

namespace korch::agent {
namespace {

Error prefixed(Error e, std::string_view prefix) {
  e.message = std::string(prefix) + e.message;
  return e;
}

}  // namespace

std::string default_cache_dir(const config::CampaignConfig& cfg) {
  if (!cfg.evaluator.cache_dir.empty()) return cfg.evaluator.cache_dir;
  // Beside a SQLite file; in the working directory for a PostgreSQL store.
  auto location = store::parse_location(cfg.db_path);
  auto dir = location && location->backend == store::Backend::sqlite
                 ? std::filesystem::path(location->target).parent_path()
                 : std::filesystem::path();
  return (dir.empty() ? std::filesystem::path(".") : dir).append("korch-cache").string();
}

Result<RunResult> run_campaign_wired(const config::CampaignConfig& cfg, store::Store& store,
                                     const RunOptions& options, const RunnerHooks& hooks) {
  auto ev = evaluator::make_evaluator(
      cfg.evaluator, hooks.cache_dir.empty() ? default_cache_dir(cfg) : hooks.cache_dir,
      {cfg.db_path, ids::campaign_id(cfg.name)});
  if (!ev) return std::unexpected(prefixed(ev.error(), "evaluator: "));
  std::unique_ptr<evaluator::Evaluator> evaluator = std::move(*ev);
  if (hooks.wrap_evaluator) evaluator = hooks.wrap_evaluator(std::move(evaluator));
  // A plan fails only on its input (tasks, models, budgets).
  auto plan = plan_campaign(cfg, *evaluator);
  if (!plan) {
    evaluator->shutdown();
    return std::unexpected(with_kind(plan.error(), ErrorKind::invalid));
  }
  std::unique_ptr<llm::ChatClient> client = llm::make_curl_client();
  if (hooks.wrap_client) client = hooks.wrap_client(std::move(client));
  auto abandon = [&](Error e) {
    client->shutdown();
    evaluator->shutdown();
    return std::unexpected(std::move(e));
  };
  for (auto& m : cfg.models) {
    if (auto r = client->add_model(m); !r)
      return abandon(prefixed(r.error(), fmt::format("model {}: ", m.id)));
    if (!hooks.probe_endpoints) continue;
    if (auto r = llm::probe_endpoint(m.base_url, hooks.probe_timeout_s); !r) {
      return abandon(
          prefixed(r.error(), fmt::format("LLM endpoint of model {} unreachable: ", m.id)));
    }
  }
  if (hooks.on_ready) hooks.on_ready(*plan, *evaluator);
  auto result = run_campaign(cfg, *plan, store, *client, *evaluator, options);
  client->shutdown();
  evaluator->shutdown();
  return result;
}

}  // namespace korch::agent
