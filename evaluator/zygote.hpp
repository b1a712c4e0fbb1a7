#pragma once
// Daemon side of the worker zygote (DESIGN §5). Starts `korch-worker
// --zygote` with a whitelisted environment, asks it to fork one sandboxed job
// process per role, and waits for each job with a wall-clock limit that kills
// the job's process group. No LibTorch, no Python here.
#include <cstdint>
#include <memory>
#include <optional>
#include <string>

#include "evaluator/job_role.hpp"
#include "util/error.hpp"

namespace korch::evaluator {

// What one job left behind.
struct JobOutcome {
  bool started = false;       // the zygote forked it
  bool timed_out = false;     // killed at the wall-clock limit
  int exit_code = -1;         // of the job's first process (128+signal when PID 1 died by one)
  int signal = 0;             // the first process died by this signal
  std::string result_json;    // result.json, empty when the job wrote none
  std::string worker_log;     // tail of the trusted side's stdout/stderr
  std::string candidate_log;  // tail of the candidate runner's stdout/stderr
  double wall_s = 0;
  std::string error;  // why it did not start / the zygote died
};

// What runs a job: the zygote, or (tests) a fake answering as a worker
// would (tests/evaluator/fake_device.hpp). The evaluator's stages see only this.
class JobRunner {
 public:
  virtual ~JobRunner() = default;
  // Runs one job (role, in job_dir which already holds job.json) and blocks
  // until it ends or `timeout_s` passes. `seed` travels to the job only as
  // bytes in a pipe. Thread-safe; jobs run concurrently.
  virtual JobOutcome run(JobRole role, const std::string& job_dir,
                         const std::string& spawn_extra_json, std::optional<std::uint64_t> seed,
                         double timeout_s) = 0;
  // The versions the worker reported (JSON object text).
  virtual std::string versions_json() const = 0;
  // Kills every running job; runs in flight return (their job failed),
  // later runs fail at once. Thread-safe with run().
  virtual void stop() = 0;
};

class Zygote final : public JobRunner {
 public:
  // Spawns the zygote and waits for its hello. `run_dir` holds the pid record
  // used to reap the zygotes of a killed daemon (see reap_orphans).
  // fresh_per_job: no warm zygote; every job execs a new one (benchmarking).
  // glibc_tunables: the zygote's GLIBC_TUNABLES (its jobs inherit what glibc
  // read at exec); empty: none.
  static Result<std::unique_ptr<Zygote>> start(const std::string& worker_path,
                                               const std::string& run_dir,
                                               bool fresh_per_job = false,
                                               const std::string& glibc_tunables = "");
  ~Zygote() override;

  JobOutcome run(JobRole role, const std::string& job_dir, const std::string& spawn_extra_json,
                 std::optional<std::uint64_t> seed, double timeout_s) override;

  // The versions the zygote reported (JSON object text).
  std::string versions_json() const override;
  // Seconds from exec to the zygote's hello (Python + torch import).
  double startup_s() const;

  // Kills the zygote and every running job. Thread-safe with run(): runs in
  // flight return (their job failed), later runs fail at once.
  void stop() override;

  class Impl;

 private:
  explicit Zygote(std::unique_ptr<Impl> impl);
  std::unique_ptr<Impl> m_impl;
};

// Kills the zygotes (and their jobs) recorded in `run_dir` by daemons that no
// longer run. Returns how many it killed.
int reap_orphans(const std::string& run_dir);

// Finds korch-worker: $KORCH_WORKER, next to the running executable, then the
// build tree.
std::string find_worker_path();

}  // namespace korch::evaluator
