#pragma once
// The protected evaluator (DESIGN §5), cpu and gpu modes as one pipeline:
// sandboxed worker processes forked from a pre-warmed zygote, AST rules,
// trusted compile into a content-addressed cache, measured correctness and
// timing, verdicts and rewards. Reached through make_evaluator (factory.cpp).
#include <memory>
#include <string>
#include <vector>

#include "evaluator/evaluator.hpp"
#include "evaluator/job_protocol.hpp"
#include "evaluator/knobs.hpp"
#include "evaluator/zygote.hpp"

namespace korch::evaluator {

namespace stages {
class Clock;
}

Result<std::unique_ptr<Evaluator>> make_protected_evaluator(const config::EvaluatorConfig& cfg,
                                                            const std::string& cache_dir);

// What make_protected_evaluator gathers from the machine before the evaluator
// starts. Tests give fakes instead (tests/evaluator/fake_device.hpp: a fake
// judge answering as a GPU judge would, fake GPU facts, a clock whose pauses
// take no time), so the GPU host's logic runs on a CPU.
struct EvaluatorParts {
  std::unique_ptr<JobRunner> jobs;       // the worker zygote
  protocol::GpuInfo gpu;                 // gpu mode: the device's facts
  std::vector<int> gpus;                 // gpu mode: evaluator.gpus, resolved
  std::shared_ptr<stages::Clock> clock;  // null: the steady clock
  EnvKnobs knobs;
  bool daemon_nondumpable = false;
};
// `cache_dir`: absolute, with cache/, jobs/, run/ and triton/ in it.
std::unique_ptr<Evaluator> assemble_protected_evaluator(const config::EvaluatorConfig& cfg,
                                                        const std::string& cache_dir,
                                                        EvaluatorParts parts);

}  // namespace korch::evaluator
