#pragma once
// The compile cache: load_inline builds under <cache>/cache/<key>, keyed by
// what they are built from (korch_build.cache_key), each with its manifest
// (korch-manifest.json: the compile's status, log, module and symbol
// verdict). Identical code is never compiled twice: concurrent builds of one
// key serialise on an flock of <cache>/locks/<key>.lock, and the second finds
// the first's manifest. A build's symbol verdict also depends on the
// allowlist: a manifest made under another symbol policy is checked again
// from the cached objects (a recheck job, no compile) and rewritten.
#include <functional>
#include <string>

#include <nlohmann/json.hpp>

#include "evaluator/job_dir.hpp"
#include "evaluator/job_protocol.hpp"
#include "evaluator/zygote.hpp"
#include "util/error.hpp"

namespace korch::evaluator {

class CompileCache {
 public:
  // Runs a compile-role job (a compile or a symbol recheck) that builds into
  // `build_dir`. Where and when is the pipeline's choice: in gpu mode on a
  // compile slot, in cpu mode never while a timing job runs.
  using RunJob = std::function<JobOutcome(const JobDir& job, const std::string& build_dir)>;

  // `root`: the evaluator's cache folder (builds in root/cache, their locks
  // in root/locks, job folders in root/jobs).
  CompileCache(std::string root, RunJob run_job);

  // The manifest of the build of `entry` (the compile job's description of
  // one load_inline call) under `key`, building it when absent, made or
  // rechecked under the symbol `policy` unless it is the glue `probe` (which
  // has no verdict) or a compile error (which no allowlist changes). Appends
  // what it did (hit, built, waited, rechecked) to `ev`.
  Result<protocol::CompileManifest> get(const nlohmann::json& entry, const std::string& key,
                                        nlohmann::json& ev, const nlohmann::json& allow_extra,
                                        bool probe, const std::string& policy);

 private:
  // A fresh folder beside the cache for a compile-role job to build into.
  std::string scratch_dir(const std::string& key) const;
  // The symbol check of the cached build in `dir` under `policy` (the caller
  // holds the entry's lock); rewrites its manifest.
  Result<protocol::CompileManifest> recheck(const nlohmann::json& entry, const std::string& key,
                                            const std::string& dir,
                                            const protocol::CompileManifest& old,
                                            nlohmann::json& ev, const nlohmann::json& allow_extra,
                                            const std::string& policy);

  std::string m_root;
  RunJob m_run_job;
};

}  // namespace korch::evaluator
