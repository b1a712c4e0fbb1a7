#pragma once
// One small process helper for tools and tests: start a program with
// arguments (its output to files, to a pipe, or inherited), signal it, wait
// for it with or without a timeout, and capture its output. POSIX only.
//
// The child starts as a shell starts a foreground command: default SIGINT /
// SIGQUIT dispositions and an empty signal mask, whatever the parent
// inherited. Everything the child needs (argv, environment) is built before
// fork(), so the child only calls async-signal-safe functions until exec.
#include <sys/types.h>

#include <chrono>
#include <map>
#include <optional>
#include <string>
#include <vector>

#include "util/error.hpp"

namespace korch::process {

struct SpawnOptions {
  // Set on top of the parent's environment; a value of "" unsets the variable.
  std::map<std::string, std::string> env;
  std::string stdout_path;         // "" = inherit; else appended to (created 0644)
  std::string stderr_path;         // "" = inherit; else appended to
  bool capture_stdout = false;     // read it through a pipe (Child::read_stdout)
  bool stdin_null = true;          // stdin from /dev/null
  bool own_process_group = false;  // setpgid(0, 0): signals to the group reach its children
  std::optional<uid_t> uid;        // when root: run as this uid (and gid)
};

// A started child. Destroying a child that was not waited for kills it with
// SIGKILL and reaps it. Not thread-safe.
class Child {
 public:
  // Starts argv[0] (a path, or a name looked up in PATH). Fails when the
  // program cannot be found or started (the child exits 127).
  static Result<Child> spawn(const std::vector<std::string>& argv,
                             const SpawnOptions& options = {});

  Child() = default;
  Child(Child&& other) noexcept;
  Child& operator=(Child&& other) noexcept;
  Child(const Child&) = delete;
  Child& operator=(const Child&) = delete;
  ~Child();

  pid_t pid() const { return m_pid; }
  // Sends `sig` to the child (or to its process group with own_process_group).
  void signal(int sig) const;
  // Reads the captured stdout to its end (capture_stdout only; "" otherwise).
  std::string read_stdout();
  // Waits for exit; returns the exit code, or 128 + the signal number.
  int wait();
  // Waits up to `timeout`; nullopt when it is still running.
  std::optional<int> wait_for(std::chrono::milliseconds timeout);

 private:
  pid_t m_pid = -1;
  int m_stdout_fd = -1;
  bool m_group = false;
  std::optional<int> m_status;
};

struct Output {
  int status = 0;          // exit code, or 128 + signal
  std::string out;         // its stdout
  bool timed_out = false;  // killed with SIGKILL after `timeout`
};

// Runs argv to completion with stdout captured (stderr as `options` says).
// With a timeout, a child still running then is killed with SIGKILL.
Result<Output> run_capture(const std::vector<std::string>& argv, SpawnOptions options = {},
                           std::optional<std::chrono::milliseconds> timeout = std::nullopt);

}  // namespace korch::process
