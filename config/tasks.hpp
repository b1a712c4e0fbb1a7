#pragma once
// KernelBench task discovery. A task source is a KernelBench checkout's
// `KernelBench/` folder (level1..level4 subfolders) or any folder of task
// files in the same format (`<number>_<Name>.py` defining Model, get_inputs,
// get_init_inputs).
#include <string>
#include <vector>

#include "config/campaign.hpp"
#include "util/error.hpp"

namespace korch::config {

struct Task {
  std::string id;      // "L1/19_ReLU" (level and file stem): stable across checkouts
  int level = 0;       // 0 when the folder has no level subfolders
  int number = 0;      // the numeric filename prefix
  std::string name;    // "ReLU"
  std::string path;    // absolute path of the file
  std::string source;  // the file's contents (the reference Model)
};

// Loads the tasks selected by `sel`, sorted by (level, number). Fails with a
// one-line message naming the folder when it is missing, has no task files,
// or `sel.ids` does not parse.
Result<std::vector<Task>> load_tasks(const TaskSelection& sel);

// Loads a single task file (for `korch eval --task FILE`).
Result<Task> load_task_file(const std::string& path);

// Parses an id list such as "1-10,15" into a sorted, de-duplicated list.
Result<std::vector<int>> parse_id_ranges(const std::string& spec);

}  // namespace korch::config
