#pragma once
// The protected evaluator in cpu mode (DESIGN §5): sandboxed worker processes
// forked from a pre-warmed zygote, AST rules, trusted compile into a
// content-addressed cache, measured correctness/timing, verdicts and rewards.
#include <memory>
#include <string>

#include "evaluator/evaluator.hpp"

namespace korch::evaluator {

Result<std::unique_ptr<Evaluator>> make_cpu_evaluator(const config::EvaluatorConfig& cfg,
                                                      const std::string& cache_dir);

}  // namespace korch::evaluator
