// The compile cache (compile_cache.hpp): a lookup, a build under the entry's
// lock, or a symbol recheck of a build made under another allowlist.
#include "evaluator/compile_cache.hpp"

#include <filesystem>
#include <optional>
#include <utility>

#include "util/file_lock.hpp"
#include "util/fs.hpp"
#include "util/log.hpp"

namespace korch::evaluator {

using json = nlohmann::json;
namespace fs = std::filesystem;

CompileCache::CompileCache(std::string root, RunJob run_job)
    : m_root(std::move(root)), m_run_job(std::move(run_job)) {}

Result<protocol::CompileManifest> CompileCache::get(const json& entry, const std::string& key,
                                                    json& ev, const json& allow_extra, bool probe,
                                                    const std::string& policy) {
  const std::string dir = m_root + "/cache/" + key;
  const std::string manifest = dir + "/korch-manifest.json";
  auto load = [&]() -> std::optional<protocol::CompileManifest> {
    auto t = read_file(manifest);
    if (!t) return std::nullopt;
    auto m = protocol::parse_manifest(*t);
    if (!m) return std::nullopt;
    return *m;
  };
  // A compile error does not depend on the allowlist.
  auto current = [&](const protocol::CompileManifest& m) {
    return probe || m.symbol_policy == policy || m.status == protocol::CompileStatus::compile_error;
  };
  if (auto m = load(); m && current(*m)) {
    ev.push_back({{"key", key}, {"hit", true}, {"probe", probe}});
    return *m;
  }
  std::error_code ec;
  fs::create_directories(m_root + "/locks", ec);
  // Without the lock (a cache on a file system that refuses it) two
  // requests may build the same entry; the rename keeps one.
  auto lock = FileLock::acquire_blocking(m_root + "/locks/" + key + ".lock");
  if (!lock) KLOG_WARN("[eval] compile cache: {}", lock.error().message);
  if (auto m = load()) {
    if (current(*m)) {  // built (or rechecked) by a concurrent request while we waited
      ev.push_back({{"key", key}, {"hit", true}, {"probe", probe}, {"waited", true}});
      return *m;
    }
    return recheck(entry, key, dir, *m, ev, allow_extra, policy);
  }
  JobDir jdir(m_root + "/jobs", "compile");
  const std::string build = scratch_dir(key);
  (void)jdir.write_job(protocol::compile_job(entry, key, build, allow_extra, probe, policy));
  JobOutcome o = m_run_job(jdir, build);
  auto res = protocol::parse_manifest(o.result_json);
  if (!res || !fs::exists(build + "/korch-manifest.json")) {
    fs::remove_all(build, ec);
    return fail(o.timed_out
                    ? "the compiler exceeded its time limit"
                    : "the compile worker ended without a result: " + tail(o.worker_log, 500));
  }
  chown_tree_to_root(build);
  fs::rename(build, dir, ec);
  if (ec) {
    fs::remove_all(build, ec);
  }
  ev.push_back({{"key", key},
                {"hit", false},
                {"probe", probe},
                {"compile_s", res->compile_s},
                {"protections", res->protections}});
  if (auto m = load()) return *m;
  return fail("the compile cache entry " + key + " is unreadable");
}

std::string CompileCache::scratch_dir(const std::string& key) const {
  return m_root + "/cache/tmp-" + key.substr(0, 16) + "-" + random_hex(8);
}

Result<protocol::CompileManifest> CompileCache::recheck(const json& entry, const std::string& key,
                                                        const std::string& dir,
                                                        const protocol::CompileManifest& old,
                                                        json& ev, const json& allow_extra,
                                                        const std::string& policy) {
  const std::string path = dir + "/korch-manifest.json";
  auto old_json = json::parse(read_file(path).value_or("{}"), nullptr, false);
  if (old_json.is_discarded()) old_json = json::object();
  JobDir jdir(m_root + "/jobs", "recheck");
  const std::string scratch = scratch_dir(key);
  (void)jdir.write_job(
      protocol::recheck_job(entry, key, scratch, dir, old_json, allow_extra, policy));
  JobOutcome o = m_run_job(jdir, scratch);
  std::error_code ec;
  fs::remove_all(scratch, ec);
  auto res = protocol::parse_manifest(o.result_json);
  if (!res) return fail("the symbol re-check ended without a result: " + tail(o.worker_log, 500));
  json updated = json::parse(o.result_json, nullptr, false);
  if (updated.is_discarded()) return fail("the symbol re-check's result is not JSON");
  updated.erase("protections");
  if (auto w = write_file_atomic(path, updated.dump()); !w) return fail(w.error().message);
  ev.push_back({{"key", key},
                {"hit", true},
                {"probe", false},
                {"rechecked", true},
                {"policy_was", old.symbol_policy},
                {"wall_s", o.wall_s}});
  return *res;
}

}  // namespace korch::evaluator
