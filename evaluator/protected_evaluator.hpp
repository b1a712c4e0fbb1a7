#pragma once
// The protected evaluator (DESIGN §5), cpu and gpu modes as one pipeline:
// sandboxed worker processes forked from a pre-warmed zygote, AST rules,
// trusted compile into a content-addressed cache, measured correctness and
// timing, verdicts and rewards. Reached through make_evaluator (factory.cpp).
#include <memory>
#include <string>

#include "evaluator/evaluator.hpp"

namespace korch::evaluator {

Result<std::unique_ptr<Evaluator>> make_protected_evaluator(const config::EvaluatorConfig& cfg,
                                                            const std::string& cache_dir);

}  // namespace korch::evaluator
