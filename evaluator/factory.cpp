// make_evaluator: the one place a config's evaluator.mode becomes an
// evaluator (the mock, or the protected evaluator in cpu or gpu mode).
#include <fmt/format.h>

#include "evaluator/evaluator.hpp"
#include "evaluator/mock_evaluator.hpp"
#include "evaluator/protected_evaluator.hpp"

namespace korch::evaluator {

Result<std::unique_ptr<Evaluator>> make_evaluator(const config::EvaluatorConfig& cfg,
                                                  const std::string& cache_dir) {
  switch (cfg.mode) {
    case config::EvalMode::mock: return make_mock_evaluator(cfg);
    case config::EvalMode::cpu:
    case config::EvalMode::gpu: return make_protected_evaluator(cfg, cache_dir);
  }
  return fail(fmt::format("unknown evaluator.mode {}", static_cast<int>(cfg.mode)));
}

}  // namespace korch::evaluator
