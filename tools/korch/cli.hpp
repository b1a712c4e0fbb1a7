#pragma once
// The `korch` command line: one function per subcommand, each returning the
// process exit code. The grammar (which flags a command takes, their values)
// is the table in grammar.hpp; a command reads flags that parsed already.
#include <map>
#include <optional>
#include <string>
#include <string_view>
#include <vector>

#include "util/enum_names.hpp"
#include "util/error.hpp"

namespace korch::cli {

// Exit codes, as documented in `korch --help`.
inline constexpr int k_exit_ok = 0;
inline constexpr int k_exit_error = 1;          // a failure (store, evaluator, I/O)
inline constexpr int k_exit_usage = 2;          // bad arguments or bad config
inline constexpr int k_exit_aborted = 3;        // the run stopped on a campaign-wide failure
inline constexpr int k_exit_interrupted = 130;  // Ctrl-C / SIGTERM: the store is resumable

// The exit code of a failure of `kind`: the one place that maps error kinds
// to exit codes.
constexpr int exit_code(ErrorKind kind) {
  switch (kind) {
    case ErrorKind::failure: return k_exit_error;
    case ErrorKind::invalid: return k_exit_usage;
    case ErrorKind::unavailable: return k_exit_aborted;
    case ErrorKind::interrupted: return k_exit_interrupted;
  }
  return k_exit_error;
}

// Prints "korch <verb>: <context><message>" as one line on stderr and returns
// exit_code(error.kind).
int report_failure(std::string_view verb, const Error& error, std::string_view context = {});

// The same for a failure the command finds itself (a bad flag, a file it
// cannot read): every korch command decides its exit code here, from a kind.
int report_failure(std::string_view verb, ErrorKind kind, std::string message);

struct Args {
  std::vector<std::string> positional;
  std::multimap<std::string, std::string> flags;  // "--set" may repeat
  std::optional<std::string> get(const std::string& name) const;
  std::vector<std::string> all(const std::string& name) const;
  bool has(const std::string& name) const { return flags.count(name) > 0; }
};

// Flag `name` as a vocabulary value (config/vocabulary.hpp): `fallback` when
// the flag is absent, nullopt when its text names no value of E.
template <NamedEnum E>
std::optional<E> get_enum(const Args& args, const std::string& name, E fallback) {
  auto text = args.get(name);
  return text ? enum_from_name<E>(*text) : std::optional<E>(fallback);
}

// Flag `name` as a number: nullopt when absent; an invalid-input error that
// names the flag when its whole text is not a number of type T (a whole
// number for integers; finite and >= 0 for double).
template <class T>
Result<std::optional<T>> get_number(const Args& args, const std::string& name);

int cmd_run(const Args& args, bool resume_only);
int cmd_status(const Args& args);
int cmd_export(const Args& args);
int cmd_report(const Args& args);
int cmd_config_show(const Args& args);
// `korch store copy SRC DST [--campaign NAME]`.
int cmd_store(const Args& args);
// `korch tasks list DIR` / `korch tasks validate DIR`.
int cmd_tasks(const Args& args, bool validate);
int cmd_eval(const Args& args);
// The compile cache of `korch eval` and `korch audit` without --cache-dir.
std::string default_cache_dir();
// `korch audit`: the verdict card (attack success, false rejection) of a corpus.
int cmd_audit(const Args& args);
// `korch lint FILE...`: the static rules alone; 0 all pass, 1 a violation,
// 2 bad usage, unreadable file or a checker that could not run.
int cmd_lint(const Args& args);
// `korch worker --store URL ...`: claims and runs queued evaluations (docs/cluster.md).
int cmd_worker(const Args& args);
// For `korch status` on a PostgreSQL store: the evaluation queue of each of
// `campaign_ids` and the workers' rows (nothing for a SQLite store).
void print_fleet(const Args& args, const std::vector<std::string>& campaign_ids);
// `korch serve`: returns when stopped.
int cmd_serve(const Args& args);

}  // namespace korch::cli

namespace korch::config {
struct Task;
}
namespace korch::cli {
// `korch tasks validate`: runs the evaluator's task checks on each task.
int cmd_tasks_validate(const Args& args, const std::vector<config::Task>& tasks);
}  // namespace korch::cli
