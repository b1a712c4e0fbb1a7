#pragma once
// A job's folder, and the small helpers the evaluator's files share: every
// job (the pipeline's stages, the compile cache's builds, a task's
// validation, the GPU's facts) runs in a JobDir.
#include <cstddef>
#include <filesystem>
#include <string>

#include <nlohmann/json.hpp>

#include "util/error.hpp"

namespace korch::evaluator {

// A job folder: created fresh under `jobs_root`, readable only by root (the
// job reads job.json before it drops privileges), removed afterwards.
class JobDir {
 public:
  JobDir(const std::string& jobs_root, const std::string& tag);
  ~JobDir();
  JobDir(const JobDir&) = delete;
  JobDir& operator=(const JobDir&) = delete;
  const std::string& path() const { return m_path; }
  Result<void> write_job(const nlohmann::json& job);

 private:
  std::string m_path;
};

// `n` random hex digits, for the names of fresh folders.
std::string random_hex(std::size_t n);

// The last `n` characters of `s`: what a report keeps of a long log.
constexpr std::size_t k_tail = 4000;
std::string tail(const std::string& s, std::size_t n = k_tail);

// Gives `root` and everything below it to root (a finished build: the
// unprivileged job that wrote it can change it no more).
void chown_tree_to_root(const std::filesystem::path& root);

}  // namespace korch::evaluator
