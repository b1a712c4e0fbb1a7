#pragma once
// Mock evaluator: deterministic fake verdicts and timings derived from the
// code's hash, for developing prompts and testing the engine without torch.
// Every report says mock = true, mode = "mock", and its evaluator_version
// starts with "mock-". Tests and benchmarks script outcomes with markers
// anywhere in the code (e.g. in a `#` comment):
//   `MOCK_VERDICT: <verdict>`  the code gets that verdict (ok, incorrect, ...);
//   `MOCK_SPEEDUP: <x>`        a SUBMIT measures exactly x (x > 0; no noise:
//                              speedup_ci_low = speedup_ci_high = x), and the
//                              code is ok unless MOCK_VERDICT says otherwise;
//   `MOCK_INFRASTRUCTURE: <n>`  the first n evaluations of the request id by
//                              this evaluator are the host's fault
//                              (worker_crash "infrastructure: ..."; the
//                              queue's hand-back test, issue #47).
// An unmarked code gets a verdict (70% ok) and a speedup (0.5x-3.5x) drawn
// from its hash. Only the first of each marker counts. A report arrives
// mock_latency_s after evaluate(); on shutdown(), evaluations not yet due are
// answered at once with Report::interrupted set (not a result).
#include <memory>

#include "evaluator/evaluator.hpp"

namespace korch::evaluator {

std::unique_ptr<Evaluator> make_mock_evaluator(const config::EvaluatorConfig& cfg);

}  // namespace korch::evaluator
