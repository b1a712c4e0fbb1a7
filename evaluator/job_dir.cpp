#include "evaluator/job_dir.hpp"

#include <unistd.h>

#include <random>

#include "util/fs.hpp"

namespace korch::evaluator {
namespace fs = std::filesystem;

JobDir::JobDir(const std::string& jobs_root, const std::string& tag) {
  m_path = jobs_root + "/" + tag + "-" + random_hex(12);
  std::error_code ec;
  fs::create_directories(m_path, ec);
  fs::permissions(m_path, fs::perms::owner_all, ec);
}

JobDir::~JobDir() {
  std::error_code ec;
  fs::remove_all(m_path, ec);
}

Result<void> JobDir::write_job(const nlohmann::json& job) {
  return write_file_atomic(m_path + "/job.json", job.dump());
}

std::string random_hex(std::size_t n) {
  static thread_local std::mt19937_64 rng{std::random_device{}()};
  static const char* hex = "0123456789abcdef";
  std::string s;
  for (std::size_t i = 0; i < n; ++i) s += hex[rng() % 16];
  return s;
}

std::string tail(const std::string& s, std::size_t n) {
  return s.size() > n ? s.substr(s.size() - n) : s;
}

void chown_tree_to_root(const fs::path& root) {
  std::error_code ec;
  (void)lchown(root.c_str(), 0, 0);
  for (auto& e : fs::recursive_directory_iterator(root, ec)) (void)lchown(e.path().c_str(), 0, 0);
}

}  // namespace korch::evaluator
