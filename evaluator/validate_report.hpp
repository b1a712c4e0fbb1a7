#pragma once
// The file `korch tasks validate --out FILE` writes, and the campaign side
// that reads it (tasks.exclude_flagged, issue #47): a campaign leaves out
// the tasks the report flags (rounding noise of the reference, constant or
// stochastic outputs, ...). Each entry carries the sha256 of the task's
// source, so a report of another version of a task is refused rather than
// trusted.
//
//   {"korch_tasks_validate": 1,
//    "tasks": [{"task": "L2/23_Conv3d_GroupNorm_Mean", "source_sha256": "…",
//               "ok": false, "issues": ["rounding_noise: …"]}, …]}
#include <string>
#include <utility>
#include <vector>

#include "config/loader.hpp"
#include "config/tasks.hpp"
#include "evaluator/validate.hpp"
#include "util/error.hpp"

namespace korch::evaluator {

inline constexpr int k_validate_report_version = 1;

// The report of validated tasks, as JSON text.
std::string validate_report_json(
    const std::vector<std::pair<config::Task, TaskValidation>>& validated);

// The tasks of `tasks` that the report at `path` flags, in `tasks`' order,
// with their issues ("rounding_noise: ...").
// Fails (kind invalid, naming the file and the task) when the file does not
// read or parse, when a task of `tasks` is not in it (never validated) or
// when its source changed since it was validated (stale).
Result<std::vector<config::ExcludedTask>> flagged_tasks(const std::string& path,
                                                        const std::vector<config::Task>& tasks);

}  // namespace korch::evaluator
