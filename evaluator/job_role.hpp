#pragma once
// What a korch-worker job does: the "role" of the zygote's spawn message
// (DESIGN §5). The daemon names it (Zygote::run), the worker parses it once
// (evaluator/worker/main.cpp) and dispatches on the enum; the names are the
// wire's, so never rename one.
#include <string_view>
#include <utility>

#include "util/enum_names.hpp"

namespace korch::evaluator {

enum class JobRole {
  rules,     // the static rules (no candidate code runs)
  compile,   // load_inline sources -> a cached library (may exec the compilers)
  warm,      // one untimed run so Triton compiles and autotunes (may exec)
  measure,   // the judge and its runners (two a side): correctness and timing
  gpuinfo,   // the GPU's facts (trusted code only)
  validate,  // a task's reference: runs, deterministic, within memory
};

// What the zygote tells the daemon (its "ev" field; worker/main.cpp writes
// them, zygote.cpp reads them).
enum class ZygoteEvent {
  hello,    // ready, with the worker's versions
  started,  // a job's process was forked (or the fork failed)
  exit,     // a job's process ended
};

}  // namespace korch::evaluator

namespace korch {
KORCH_ENUM_NAMES(evaluator::JobRole, rules, compile, warm, measure, gpuinfo, validate);
KORCH_ENUM_NAMES(evaluator::ZygoteEvent, hello, started, exit);
}  // namespace korch
