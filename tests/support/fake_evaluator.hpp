#pragma once
// A scripted evaluator for tests and benchmarks of the campaign engine (not
// of the evaluator): a code's verdict is its `MOCK_VERDICT: <verdict>` marker
// (default ok) and its SUBMIT speedup its `FAKE_SPEEDUP: <x>` marker (default
// 1.0). Reports arrive at once on one dispatcher thread, labelled mock, with
// wall_s = `wall_s` (so evaluation hours are deterministic).
#include <memory>

#include "evaluator/evaluator.hpp"

namespace korch::testing {

std::unique_ptr<evaluator::Evaluator> make_fake_speedup_evaluator(double wall_s = 1.0);

}  // namespace korch::testing
