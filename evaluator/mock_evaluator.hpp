#pragma once
// Mock evaluator: deterministic fake verdicts and timings derived from the
// code's hash, for developing prompts and testing the engine without torch.
// Every report says mock = true, mode = "mock", and its evaluator_version
// starts with "mock-". A code containing the marker `MOCK_VERDICT: <verdict>`
// gets that verdict (tests use it to script outcomes). A report arrives
// mock_latency_s after evaluate(); on shutdown(), evaluations not yet due are
// answered at once with Report::interrupted set (not a result).
#include <memory>

#include "evaluator/evaluator.hpp"

namespace korch::evaluator {

std::unique_ptr<Evaluator> make_mock_evaluator(const config::EvaluatorConfig& cfg);

}  // namespace korch::evaluator
