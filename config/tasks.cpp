#include "config/tasks.hpp"

#include <fmt/format.h>

#include <algorithm>
#include <cctype>
#include <charconv>
#include <filesystem>
#include <optional>
#include <set>
#include <string_view>
#include <system_error>
#include <tuple>

#include "util/fs.hpp"
#include "util/strings.hpp"

namespace korch::config {
namespace {

namespace fs = std::filesystem;

// Highest level folder looked for ("level1".."level9").
constexpr int k_max_level = 9;

// Parses a non-negative decimal number that fills `s`.
std::optional<int> parse_number(std::string_view s) {
  int x = 0;
  if (s.empty() || !std::isdigit(static_cast<unsigned char>(s.front()))) return std::nullopt;
  auto [p, ec] = std::from_chars(s.data(), s.data() + s.size(), x);
  if (ec != std::errc() || p != s.data() + s.size()) return std::nullopt;
  return x;
}

// The numeric prefix of a file stem ("19_ReLU" -> 19, "ReLU"); nullopt when
// the stem has no "<digits>_" prefix.
struct StemParts {
  int number = 0;
  std::string name;
};
std::optional<StemParts> split_stem(std::string_view stem) {
  auto us = stem.find('_');
  if (us == std::string_view::npos) return std::nullopt;
  auto n = parse_number(stem.substr(0, us));
  if (!n) return std::nullopt;
  return StemParts{*n, std::string(stem.substr(us + 1))};
}

bool is_identifier_char(char c) { return std::isalnum(static_cast<unsigned char>(c)) || c == '_'; }

// True when some line of `src` starts with `prefix` followed by a character
// that ends the name (so "def get_inputs_x(" does not count as get_inputs).
bool has_top_level(std::string_view src, std::string_view prefix) {
  std::size_t pos = 0;
  while (pos <= src.size()) {
    auto end = src.find('\n', pos);
    auto line = src.substr(pos, end == std::string_view::npos ? std::string_view::npos : end - pos);
    if (line.starts_with(prefix) &&
        (line.size() == prefix.size() || !is_identifier_char(line[prefix.size()])))
      return true;
    if (end == std::string_view::npos) break;
    pos = end + 1;
  }
  return false;
}

// The level a task file belongs to, from its folder name ("level2" -> 2).
int level_of_folder(const fs::path& folder) {
  auto name = folder.filename().string();
  if (!name.starts_with("level")) return 0;
  return parse_number(std::string_view(name).substr(5)).value_or(0);
}

// Reads and checks one task file; `level`/`number`/`name` are given.
Result<Task> read_task(const fs::path& file, int level, int number, std::string name) {
  auto source = read_file(file);
  if (!source) return std::unexpected(source.error());
  std::vector<std::string> missing;
  if (!has_top_level(*source, "class Model")) missing.push_back("class Model");
  if (!has_top_level(*source, "def get_inputs")) missing.push_back("def get_inputs()");
  if (!has_top_level(*source, "def get_init_inputs")) missing.push_back("def get_init_inputs()");
  if (!missing.empty()) {
    std::string list;
    for (std::size_t i = 0; i < missing.size(); ++i) list += (i ? ", " : "") + missing[i];
    return fail(fmt::format("{}: not a KernelBench task file: missing {}", file.string(), list));
  }
  Task t;
  auto stem = file.stem().string();
  t.id = level > 0 ? fmt::format("L{}/{}", level, stem) : stem;
  t.level = level;
  t.number = number;
  t.name = std::move(name);
  t.path = file.string();
  t.source = std::move(*source);
  return t;
}

// A candidate task file in a folder: a regular *.py file, not __init__.py
// or hidden.
bool is_task_candidate(const fs::directory_entry& e) {
  std::error_code ec;
  if (!e.is_regular_file(ec)) return false;
  auto name = e.path().filename().string();
  return e.path().extension() == ".py" && !name.starts_with(".") && !name.starts_with("__");
}

struct Found {
  fs::path file;
  int number;
  std::string name;
};

// Lists the task files of one folder; fails on a *.py file whose name has no
// "<number>_" prefix (it would otherwise be skipped silently).
Result<std::vector<Found>> list_folder(const fs::path& folder) {
  std::vector<Found> out;
  std::error_code ec;
  fs::directory_iterator it(folder, ec);
  if (ec) return fail(fmt::format("{}: {}", folder.string(), ec.message()));
  for (const auto& e : it) {
    if (!is_task_candidate(e)) continue;
    auto parts = split_stem(e.path().stem().string());
    if (!parts)
      return fail(
          fmt::format("{}: task file names must look like <number>_<Name>.py", e.path().string()));
    out.push_back({e.path(), parts->number, std::move(parts->name)});
  }
  return out;
}

// The task root: `dir` itself, or `dir`/KernelBench when given a checkout's
// top folder.
fs::path task_root(const fs::path& dir) {
  std::error_code ec;
  if (fs::is_directory(dir / "level1", ec)) return dir;
  if (fs::is_directory(dir / "KernelBench" / "level1", ec)) return dir / "KernelBench";
  return dir;
}

bool has_level_folders(const fs::path& root) {
  std::error_code ec;
  for (int l = 1; l <= k_max_level; ++l)
    if (fs::is_directory(root / fmt::format("level{}", l), ec)) return true;
  return false;
}

}  // namespace

Result<std::vector<int>> parse_id_ranges(const std::string& spec) {
  std::set<int> ids;
  std::string_view rest = trim(spec);
  if (rest.empty()) return std::vector<int>{};
  auto bad = [&](std::string_view part, std::string_view why) {
    return fail(fmt::format("bad id list '{}': '{}' {}", spec, part, why));
  };
  while (true) {
    auto comma = rest.find(',');
    auto part = trim(rest.substr(0, comma));
    if (part.empty()) return bad(part, "is empty (a stray comma?)");
    auto dash = part.find('-');
    if (dash == std::string_view::npos) {
      auto n = parse_number(part);
      if (!n) return bad(part, "is not a number or a range like 1-10");
      ids.insert(*n);
    } else {
      auto lo = parse_number(trim(part.substr(0, dash)));
      auto hi = parse_number(trim(part.substr(dash + 1)));
      if (!lo || !hi) return bad(part, "is not a range like 1-10");
      if (*lo > *hi) return bad(part, "is a reversed range");
      for (int i = *lo; i <= *hi; ++i) ids.insert(i);
    }
    if (comma == std::string_view::npos) break;
    rest = rest.substr(comma + 1);
  }
  return std::vector<int>(ids.begin(), ids.end());
}

Result<Task> load_task_file(const std::string& path) {
  std::error_code ec;
  fs::path file = fs::absolute(fs::path(path), ec).lexically_normal();
  if (ec || !fs::is_regular_file(file, ec)) return fail(fmt::format("{}: no such task file", path));
  auto stem = file.stem().string();
  auto parts = split_stem(stem);
  int level = level_of_folder(file.parent_path());
  return read_task(file, level, parts ? parts->number : 0, parts ? parts->name : stem);
}

Result<std::vector<Task>> load_tasks(const TaskSelection& sel) {
  if (sel.kernelbench_dir.empty()) return fail("tasks.kernelbench_dir is not set");
  std::error_code ec;
  fs::path dir = fs::absolute(fs::path(sel.kernelbench_dir), ec).lexically_normal();
  if (ec || !fs::is_directory(dir, ec))
    return fail(fmt::format("{}: task folder not found", sel.kernelbench_dir));
  auto ids = parse_id_ranges(sel.ids);
  if (!ids) return fail(fmt::format("{}: {}", sel.kernelbench_dir, ids.error().message));
  auto selected = [&](int number) {
    return ids->empty() || std::binary_search(ids->begin(), ids->end(), number);
  };

  fs::path root = task_root(dir);
  std::vector<std::pair<int, Found>> found;  // (level, file)
  if (has_level_folders(root)) {
    std::vector<int> levels = sel.levels;
    std::sort(levels.begin(), levels.end());
    levels.erase(std::unique(levels.begin(), levels.end()), levels.end());
    if (levels.empty()) return fail(fmt::format("{}: no levels selected", root.string()));
    for (int level : levels) {
      auto folder = root / fmt::format("level{}", level);
      if (!fs::is_directory(folder, ec))
        return fail(fmt::format("{}: level {} folder not found", folder.string(), level));
      auto files = list_folder(folder);
      if (!files) return std::unexpected(files.error());
      for (auto& f : *files) found.emplace_back(level, std::move(f));
    }
  } else {
    auto files = list_folder(root);
    if (!files) return std::unexpected(files.error());
    for (auto& f : *files) found.emplace_back(0, std::move(f));
  }
  if (found.empty())
    return fail(fmt::format("{}: no task files (<number>_<Name>.py) found", root.string()));

  std::vector<Task> tasks;
  for (auto& [level, f] : found) {
    if (!selected(f.number)) continue;
    auto t = read_task(f.file, level, f.number, std::move(f.name));
    if (!t) return std::unexpected(t.error());
    tasks.push_back(std::move(*t));
  }
  if (tasks.empty())
    return fail(fmt::format("{}: no tasks match ids '{}'", root.string(), sel.ids));
  std::sort(tasks.begin(), tasks.end(), [](const Task& a, const Task& b) {
    return std::tie(a.level, a.number, a.id) < std::tie(b.level, b.number, b.id);
  });
  return tasks;
}

}  // namespace korch::config
