// korch lint: the static rules alone on candidate files -- no compile, no
// torch, no evaluator. For users, and for agents before they spend a CHECK.
//
// The rules run in a child process: the Python the build ran the rules with
// (rules_python()) executing evaluator/rules/korch_rules.py --lint. That
// checker only parses each file with Python's `ast` and never imports or
// runs the candidate, so no sandbox is needed here; the evaluator's
// sandboxed workers exist for the stages that execute candidate code.
#include <sys/stat.h>
#include <unistd.h>

#include <fmt/format.h>
#include <cerrno>

#include <cstdio>
#include <cstring>
#include <nlohmann/json.hpp>
#include <set>
#include <string>
#include <utility>
#include <vector>

#include "config/vocabulary.hpp"
#include "evaluator/rules/rule_table.hpp"
#include "tools/korch/cli.hpp"
#include "util/error.hpp"
#include "util/process.hpp"

namespace korch::cli {
namespace {

constexpr const char* k_lint_usage =
    "usage: korch lint FILE... [--json] [--tolerance strict|tf32] [--torch-ops allow|forbid]";

struct LintViolation {
  std::string rule;
  int line = 0;
  std::string message;  // what is wrong, ending in ". Fix: <how>"
  std::string fix;
};

struct LintRecord {
  std::string file;
  bool ok = false;
  std::vector<LintViolation> violations;
};

// The checker's interpreter: the build's, else python3 from PATH.
std::string python_for_rules() {
  const char* built = evaluator::rules_python();
  if (built[0] != '\0' && ::access(built, X_OK) == 0) return built;
  return "python3";
}

// One line of `korch_rules.py --lint` output, parsed into its struct.
Result<LintRecord> parse_record(const std::string& line) {
  auto j = nlohmann::json::parse(line, nullptr, false);
  if (j.is_discarded() || !j.is_object() || !j.contains("file") || !j.contains("ok")) {
    return fail("unexpected output line: " + line.substr(0, 200));
  }
  LintRecord r;
  r.file = j.value("file", "");
  r.ok = j.value("ok", false);
  for (const auto& v : j.value("violations", nlohmann::json::array())) {
    r.violations.push_back(LintViolation{v.value("rule", ""), v.value("line", 0),
                                         v.value("message", ""), v.value("fix", "")});
  }
  return r;
}

// {"file", "ok", "violations": [{"rule", "line", "message", "fix"}]}, keys in that order.
std::string to_json_line(const LintRecord& r) {
  nlohmann::ordered_json v = nlohmann::ordered_json::array();
  for (const auto& x : r.violations) {
    v.push_back({{"rule", x.rule}, {"line", x.line}, {"message", x.message}, {"fix", x.fix}});
  }
  nlohmann::ordered_json j = {{"file", r.file}, {"ok", r.ok}, {"violations", v}};
  return j.dump();
}

// The message without its trailing ". Fix: ..." (printed on its own line).
std::string what_of(const LintViolation& v) {
  const std::string tail = ". Fix: " + v.fix;
  if (!v.fix.empty() && v.message.size() >= tail.size() &&
      v.message.compare(v.message.size() - tail.size(), tail.size(), tail) == 0) {
    return v.message.substr(0, v.message.size() - tail.size());
  }
  return v.message;
}

// Empty if `path` is a readable regular file, else why not.
std::string unreadable(const std::string& path) {
  struct stat st {};
  if (::stat(path.c_str(), &st) != 0) return std::strerror(errno);
  if (S_ISDIR(st.st_mode)) return "is a directory (give candidate .py files)";
  if (!S_ISREG(st.st_mode)) return "not a regular file";
  if (::access(path.c_str(), R_OK) != 0) return std::strerror(errno);
  return "";
}

}  // namespace

int cmd_lint(const Args& args) {
  const auto tolerance_choice = get_enum(args, "--tolerance", config::Tolerance::strict);
  const auto torch_ops_choice = get_enum(args, "--torch-ops", config::TorchOps::allow);
  if (!tolerance_choice || !torch_ops_choice) {
    return report_failure(
        "lint", ErrorKind::invalid,
        fmt::format("--tolerance strict|tf32, --torch-ops allow|forbid\n{}", k_lint_usage));
  }
  // The checker takes the names (its own parser, korch_rules.py).
  const std::string tolerance(to_string(*tolerance_choice));
  const std::string torch_ops(to_string(*torch_ops_choice));
  if (args.positional.empty()) {
    return report_failure("lint", ErrorKind::invalid,
                          fmt::format("give one or more candidate files\n{}", k_lint_usage));
  }
  bool io_error = false;
  for (const auto& f : args.positional) {
    if (auto why = unreadable(f); !why.empty()) {
      std::fprintf(stderr, "korch lint: cannot read '%s': %s\n", f.c_str(), why.c_str());
      io_error = true;
    }
  }
  if (io_error) return exit_code(ErrorKind::invalid);

  const std::string script = std::string(evaluator::rules_python_dir()) + "/korch_rules.py";
  // -I: ignore PYTHON* variables and the user's site-packages; -B: write no .pyc.
  std::vector<std::string> argv = {
      python_for_rules(), "-I",          "-B",      script,  "--tolerance",
      tolerance,          "--torch-ops", torch_ops, "--lint"};
  for (const auto& f : args.positional) argv.push_back(f.starts_with("-") ? "./" + f : f);
  auto child = process::run_capture(argv);  // stdin /dev/null; stderr passes through
  if (!child) {
    return report_failure("lint", ErrorKind::invalid, child.error().message);
  }
  std::vector<LintRecord> records;
  size_t pos = 0;
  std::string parse_error;
  while (pos < child->out.size()) {
    size_t eol = child->out.find('\n', pos);
    std::string line =
        child->out.substr(pos, eol == std::string::npos ? std::string::npos : eol - pos);
    pos = eol == std::string::npos ? child->out.size() : eol + 1;
    if (line.empty()) continue;
    auto rec = parse_record(line);
    if (!rec) {
      parse_error = rec.error().message;
      break;
    }
    records.push_back(std::move(*rec));
  }
  if ((child->status != 0 && child->status != 1) || !parse_error.empty() ||
      records.size() != args.positional.size()) {
    return report_failure(
        "lint", ErrorKind::invalid,
        fmt::format("the rule checker ({} {}) failed: exit status {}, {} of {} results{}{}",
                    argv[0], script, child->status, records.size(), args.positional.size(),
                    parse_error.empty() ? "" : "; ", parse_error));
  }

  const bool json = args.has("--json");
  size_t bad_files = 0;
  size_t total = 0;
  for (size_t i = 0; i < records.size(); ++i) {
    LintRecord& r = records[i];
    r.file = args.positional[i];  // as the user wrote it
    if (!r.ok) ++bad_files;
    total += r.violations.size();
    if (json) {
      std::printf("%s\n", to_json_line(r).c_str());
      continue;
    }
    if (r.ok) {
      std::printf("%s: ok\n", r.file.c_str());
      continue;
    }
    for (const auto& v : r.violations) {
      std::printf("%s:%d: [%s] %s\n", r.file.c_str(), v.line, v.rule.c_str(), what_of(v).c_str());
      if (!v.fix.empty()) std::printf("    fix: %s\n", v.fix.c_str());
    }
  }
  if (!json) {
    std::printf("%zu file%s checked (tolerance %s, torch_ops %s): ", records.size(),
                records.size() == 1 ? "" : "s", tolerance.c_str(), torch_ops.c_str());
    if (bad_files == 0) {
      std::printf("all pass\n");
    } else {
      std::printf("%zu with %zu violation%s, %zu pass\n", bad_files, total, total == 1 ? "" : "s",
                  records.size() - bad_files);
    }
  }
  std::fflush(stdout);
  return bad_files == 0 ? k_exit_ok : exit_code(ErrorKind::failure);
}

}  // namespace korch::cli
