#include "evaluator/validate_report.hpp"

#include <fmt/format.h>

#include <map>
#include <nlohmann/json.hpp>

#include "util/fs.hpp"
#include "util/sha256.hpp"

namespace korch::evaluator {

using nlohmann::json;

std::string validate_report_json(
    const std::vector<std::pair<config::Task, TaskValidation>>& validated) {
  json tasks = json::array();
  for (const auto& [task, v] : validated) {
    tasks.push_back({{"task", task.id},
                     {"source_sha256", sha256_hex(task.source)},
                     {"ok", v.ok},
                     {"issues", v.issues}});
  }
  return json{{"korch_tasks_validate", k_validate_report_version}, {"tasks", tasks}}.dump(1) + "\n";
}

Result<std::vector<config::ExcludedTask>> flagged_tasks(const std::string& path,
                                                        const std::vector<config::Task>& tasks) {
  auto bad = [&](const std::string& why) {
    return fail(ErrorKind::invalid, fmt::format("tasks.exclude_flagged {}: {}", path, why));
  };
  auto text = read_file(path);
  if (!text) return bad(text.error().message);
  auto j = json::parse(*text, nullptr, false);
  if (j.is_discarded() || !j.is_object() || !j.contains("tasks") || !j["tasks"].is_array())
    return bad("not a report of `korch tasks validate --out`");
  const auto version =
      j.contains("korch_tasks_validate") && j["korch_tasks_validate"].is_number_integer()
          ? j["korch_tasks_validate"].get<int>()
          : 0;
  if (version != k_validate_report_version)
    return bad(
        fmt::format("report version {} (this korch reads {})", version, k_validate_report_version));
  struct Entry {
    std::string sha;
    bool ok = false;
    std::vector<std::string> issues;
  };
  std::map<std::string, Entry> by_id;
  for (const auto& t : j["tasks"]) {
    if (!t.is_object() || !t.contains("task") || !t["task"].is_string() ||
        !t.contains("source_sha256") || !t["source_sha256"].is_string() || !t.contains("ok") ||
        !t["ok"].is_boolean() || !t.contains("issues") || !t["issues"].is_array())
      return bad("an entry lacks task, source_sha256, ok or issues");
    Entry e{t["source_sha256"].get<std::string>(), t["ok"].get<bool>(), {}};
    for (const auto& i : t["issues"]) {
      if (!i.is_string()) return bad("an issue is not a string");
      e.issues.push_back(i.get<std::string>());
    }
    if (!e.ok && e.issues.empty())
      return bad(t["task"].get<std::string>() + " is flagged with no issue");
    by_id[t["task"].get<std::string>()] = std::move(e);
  }
  std::vector<config::ExcludedTask> flagged;
  for (const auto& task : tasks) {
    auto it = by_id.find(task.id);
    if (it == by_id.end())
      return bad(
          fmt::format("{} was not validated (run `korch tasks validate --out` on it)", task.id));
    if (it->second.sha != sha256_hex(task.source))
      return bad(fmt::format("{} changed since it was validated (run `korch tasks validate` again)",
                             task.id));
    if (it->second.ok) continue;
    flagged.push_back({task.id, it->second.issues});
  }
  return flagged;
}

}  // namespace korch::evaluator
