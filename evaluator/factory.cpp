// make_evaluator: the one place a config's evaluator becomes an evaluator
// (the queue to korch workers when remote, else the mock or the protected
// evaluator in cpu or gpu mode).
#include <fmt/format.h>

#include "evaluator/evaluator.hpp"
#include "evaluator/mock_evaluator.hpp"
#include "evaluator/protected_evaluator.hpp"
#include "evaluator/remote/queue_evaluator.hpp"

namespace korch::evaluator {

Result<std::unique_ptr<Evaluator>> make_evaluator(const config::EvaluatorConfig& cfg,
                                                  const std::string& cache_dir,
                                                  const QueueTarget& queue) {
  if (cfg.remote) {
    if (queue.store_url.empty())
      return fail(ErrorKind::invalid, "evaluator.remote needs the store's URL (store.url)");
    return remote::make_queue_evaluator(cfg, queue.store_url, queue.campaign_id);
  }
  switch (cfg.mode) {
    case config::EvalMode::mock: return make_mock_evaluator(cfg);
    case config::EvalMode::cpu:
    case config::EvalMode::gpu: return make_protected_evaluator(cfg, cache_dir);
  }
  return fail(fmt::format("unknown evaluator.mode {}", static_cast<int>(cfg.mode)));
}

}  // namespace korch::evaluator
