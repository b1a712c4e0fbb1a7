#pragma once
// The job protocol between the daemon and korch-worker (DESIGN §5), as types:
// what the daemon writes to a job's job.json and spawn message, and what the
// job's result.json holds. The only code on the daemon side that builds or
// reads job JSON (cpu/gpu evaluator, task validator, GPU facts); the worker's
// side is evaluator/worker/py/ (field names are the same strings).
//
// Versioned: every job carries k_version; a worker built for another version
// refuses the job with an error result instead of misreading it. A verdict
// name the daemon does not know is a protocol error (parse_measure fails), not
// a silent worker_crash.
#include <cstdint>
#include <nlohmann/json.hpp>
#include <optional>
#include <string>
#include <vector>

#include "config/campaign.hpp"
#include "evaluator/evaluator.hpp"
#include "evaluator/job_protocol_version.hpp"
#include "evaluator/protocol_types.hpp"
#include "util/enum_names.hpp"
#include "util/error.hpp"

namespace korch::evaluator::protocol {

using json = nlohmann::json;

// ---------------------------------------------------------------- requests

// How the job process is started (the zygote's spawn message).
struct Spawn {
  std::int64_t memory_budget_mb = 0;
  std::int64_t memory_limit_mb = 0;  // > 0: a cgroup memory.max for the whole job
  int gpu = -1;                      // >= 0: the job's only visible GPU
  std::vector<int> cpus;             // non-empty: the cores the job may run on
  std::string build_dir;             // compile jobs: the folder they build into
  std::string dump() const;
};

// The evaluator's settings every evaluation job carries (one tolerance table:
// the worker holds no copy of it).
struct Settings {
  config::Tolerance tolerance = config::Tolerance::strict;
  config::TorchOps torch_ops = config::TorchOps::allow;
  std::int64_t memory_budget_mb = 0;  // gpu: of GPU memory
  bool gpu = false;
  std::int64_t l2_bytes = 0;         // gpu: the L2 flush size
  json runner_env = json::object();  // gpu: TRITON_* for the candidate's cache
  bool runner_exec = false;          // gpu: the runners may exec (Triton)
  // Reference runners of a measure job; 0: the worker's default (2).
  int reference_runners = 0;
  // CPU: runners a side for calls timed alone, not batched (0: as the others)
  int timing_lone_runners = 0;
  // Candidate runners of a measure job; 0: the worker's default (2).
  int candidate_runners = 0;
  // cpu: the judge on the runners' core, as before issue #7's change (A/B runs).
  bool judge_shares_core = false;
  // cpu: batched calls (models under ~200 us) at most 60 blocks, as before
  // this stop's change (A/B runs).
  bool timing_batched_cap = false;
  // cpu: a block of long calls lasts at most this long (0: the judge's
  // default, 20 ms: calls over 4 ms are timed one per block).
  double timing_block_ms = 0;
  // cpu: batched calls that size a fast model's batch before timing
  // (-1: the judge's default, 2; 0: sized from lone warm-up calls, as before
  // issue #7's seventh pass; A/B runs).
  int timing_calibrations = -1;
  // cpu: calls shorter than this run in batches (0: the judge's default).
  double timing_batch_us = 0;
  // cpu: how long a runner waits awake for the next call of its block
  // (-1: the judge's default; 0: it blocks between calls, as before).
  double timing_spin_us = -1;
  // cpu: freed memory stays in the heap of every timing process (-1: the
  // judge's default, on; 0: glibc's default, large blocks mapped and
  // unmapped per allocation, as before; A/B runs).
  int timing_heap_only = -1;
  // cpu/gpu: the timed blocks stop after this long once the minimum is
  // timed (0: the judge's default, 15 s). A shorter cap widens the speedup's
  // interval; no check of the outputs is skipped.
  double timing_max_s = 0;
  // cpu/gpu: the most timed blocks (0: the judge's default, 200 cpu, 60 gpu;
  // A/B runs).
  int timing_max_blocks = 0;
  // CPU: timed calls a side before the time cap may end the timing (-1: the judge's default)
  int timing_min_calls = -1;
  // cpu: the judge writes every timed call's inputs into the runner's input
  // region from the other core, as before stop 56 (A/B runs); by default a
  // runner copies them from the sealed input sets itself.
  bool timing_judge_writes = false;
  bool timing_split_compare = true;  // CPU: large checks on both cores (korch_chunks.SPLIT_BYTES)
  // cpu: the timing stops at the first look at which the bootstrap interval
  // is within 1%, as before stop 56 (A/B runs); by default it runs to its
  // caps.
  bool timing_stop_on_bootstrap = false;
  // gpu: the first candidate runner profiles its first forward (cProfile)
  // and the judge keeps the top of it in evidence.runners_warmed (a
  // diagnostic: where a runner's first call goes; tools/bench/triton_first_call.py).
  bool profile_first_call = false;
  // cpu, tests only: the fake CUDA layer (KORCH_FAKE_CUDA, a JSON object:
  // total_mb, foreign_mb, runner_init_error) under which the judge runs the
  // GPU's fault rules on the CPU (korch_device.DeviceMemory). Empty: none.
  std::string fake_cuda;
};

json rules_job(const Settings& s, const std::string& code);
// symbol_policy: the rules' digest (korch_rules.symbol_policy) plus the glue
// allowance the verdict is made under; the manifest records it.
json compile_job(const json& entry, const std::string& key, const std::string& build_dir,
                 const json& allow_extra, bool probe, const std::string& symbol_policy = "");
// The symbol check again for the cache entry `built` (read only) whose
// manifest is `manifest`, under the current allowlist: no compile.
json recheck_job(const json& entry, const std::string& key, const std::string& build_dir,
                 const std::string& built, const json& manifest, const json& allow_extra,
                 const std::string& symbol_policy);
json warm_job(const Settings& s, const std::string& code, const std::string& task_source,
              const json& prebuilt, const std::string& triton_cache);
struct MeasureJob {
  Mode mode = Mode::check;
  std::string code, task_source, task_name;
  json prebuilt = json::object();  // cache key -> {dir, module, so}
  double timeout_s = 300;
  std::optional<json> work;  // gpu: the task's counted work, when known
};
json measure_job(const Settings& s, const MeasureJob& m);
json gpuinfo_job();
json validate_job(const std::string& task_source, const std::string& task_name,
                  std::int64_t memory_budget_mb, bool gpu);

// ----------------------------------------------------------------- results

struct Violation {
  std::string rule;
  int line = 0;
  std::string message;
};

// One load_inline call the rules resolved statically.
struct LoadInline {
  json entry;       // its normalised arguments (the compile job's input)
  std::string key;  // content address in the compile cache
  int lineno = 0;
  std::string unresolved;  // non-empty: why its arguments could not be resolved
  std::string name() const { return entry.value("name", ""); }
};

// What the candidate's kernels are written in, as the rules found it (the
// rules job's "language"; the wire's names).
enum class CandidateLanguage { unknown, torch, cpp, cuda, triton };

struct RulesResult {
  std::string error, detail;  // the rule checker itself failed
  bool ok = false;
  std::vector<Violation> violations;
  json violations_json = json::array();  // as reported (the evidence keeps them)
  std::string rules_version;              // korch_rules.RULES_VERSION (the evidence keeps it)
  std::vector<std::string> protections;
  CandidateLanguage language = CandidateLanguage::unknown;
  std::vector<LoadInline> load_inline;
  std::optional<LoadInline> glue_probe;
  std::string symbol_policy;  // korch_rules.symbol_policy(): the allowlist's digest
};
Result<RulesResult> parse_rules(const std::string& result_json);

// A compile cache entry's manifest (korch-manifest.json).
enum class CompileStatus { ok, compile_error, rule_violation };
struct CompileManifest {
  CompileStatus status = CompileStatus::compile_error;
  std::string log, module, so;
  std::vector<Violation> violations;
  json undefined = json::array();  // symbols the glue probe imports
  std::string symbol_policy;       // what the verdict was made under (compile_job)
  double compile_s = 0;
  json protections = json::array();
};
Result<CompileManifest> parse_manifest(const std::string& text);

struct WarmResult {
  bool ok = false;
  std::string error;
};
WarmResult parse_warm(const std::string& result_json);

// Measured: what the report takes over as it is (apply_measure).
struct MeasureResult : Measured {
  Verdict verdict = Verdict::worker_crash;
  bool correct = false;
  std::string error, runtime_detail;
  std::vector<std::string> notes;  // for the agent, not a verdict (korch_judge notes)
  // Non-empty: the failure was the host's, not the candidate's (a GPU
  // allocation failed while other processes held memory, a device that
  // refused a context); the evaluation runs again (Judge.infrastructure).
  std::string infrastructure;
  std::vector<std::string> protections, candidate_protections;
  json evidence = json::object();
  // The judge's evidence the daemon decides on, typed (protocol.json,
  // measure_result.structs; read from `evidence` by parse_measure):
  // evidence.timing.health (cpu) and evidence.work (gpu).
  TimingHealth timing_health;
  CountedWork counted_work;
  std::string candidate_log;  // not from result.json: the daemon adds the runner's output tail
  // evidence.work as JSON (the daemon keeps it per task and sends it back to
  // the next judge); counted_work is its typed reading.
  json work() const { return evidence.value("work", json::object()); }
  // cpu: why the judge does not trust its runners' times (timing_health in
  // korch_timing.py: runner processes that disagree, or reference runners far
  // slower than the judge's own reference); empty when they are trusted.
  std::string timing_distrust() const;
  // cpu: whether that distrust is the host's fault (a reference-side reason:
  // the reference's code is the task's, not the candidate's).
  bool timing_distrust_is_machine() const;
};

// What the daemon does with a measurement's timing health: the one place
// that turns distrusted times into an outcome (the judge states the facts:
// trusted or not, and whose side the reasons are on). `measurements` is how
// many were taken, this one included, of at most `max_measurements`.
//   keep            the times are trusted, or the verdict is not ok (it stands)
//   measure_again   distrusted and measurements are left: a fresh judge and
//                   fresh runners (after a pause when the host is at fault)
//   host_fault      distrusted to the last, on the reference side: the
//                   host's fault, an infrastructure outcome (worker_crash, run
//                   again), never the candidate's verdict
//   impossible_timing  distrusted to the last, the candidate's own runners
enum class TimingOutcome { keep, measure_again, host_fault, impossible_timing };
TimingOutcome timing_outcome(const MeasureResult& m, int measurements, int max_measurements);
// Fails when the job left no result (the caller reports the job's outcome)
// or named a verdict this daemon does not know (a version mismatch).
Result<MeasureResult> parse_measure(const std::string& result_json);
bool has_result(const std::string& result_json);

struct GpuInfo {
  bool ok = false, health = false;
  std::string name, capability, torch, cuda, error;
  int sms = 0, count = 0;
  double memory_bytes = 0, l2_bytes = 0;
  json raw = json::object();
};
GpuInfo parse_gpuinfo(const std::string& result_json);

struct ValidateResult {
  std::vector<std::string> issues;
  std::int64_t estimated_bytes = 0;
  double ref_time_ms = 0;
  std::vector<std::string> protections;
};
Result<ValidateResult> parse_validate(const std::string& result_json);

}  // namespace korch::evaluator::protocol

namespace korch {
// The worker's spelling of a compile status (korch_worker.compile_main).
KORCH_ENUM_NAMES(evaluator::protocol::CompileStatus, ok, compile_error, rule_violation);
// The rules' spelling of a candidate's language (korch_rules.check).
KORCH_ENUM_NAMES(evaluator::protocol::CandidateLanguage, unknown, torch, cpp, cuda, triton);
}  // namespace korch
