#pragma once
// A child process for integration tests, on util/process.hpp: started with
// its stdout and stderr sent to files, in its own process group, killed with
// real signals and reaped.
#include <signal.h>
#include <unistd.h>

#include <chrono>
#include <fstream>
#include <map>
#include <optional>
#include <sstream>
#include <stdexcept>
#include <string>
#include <utility>
#include <vector>

#include "util/process.hpp"

namespace korch::testing {

class Process {
 public:
  // Starts argv[0] with `argv` and the parent's environment plus `env`
  // (set) — a value of "" unsets the variable. Output goes to the files.
  // With `uid` (and when running as root), the child runs as that uid and
  // gid, e.g. to test file modes that root would ignore. Throws when the
  // program cannot be started.
  static Process start(const std::vector<std::string>& argv, const std::string& stdout_path,
                       const std::string& stderr_path,
                       const std::map<std::string, std::string>& env = {},
                       std::optional<uid_t> uid = std::nullopt) {
    process::SpawnOptions o;
    o.env = env;
    o.stdout_path = stdout_path;
    o.stderr_path = stderr_path;
    o.stdin_null = false;
    o.own_process_group = true;
    o.uid = uid;
    auto child = process::Child::spawn(argv, o);
    if (!child) throw std::runtime_error(child.error().message);
    Process p;
    p.m_child = std::move(*child);
    return p;
  }

  pid_t pid() const { return m_child.pid(); }
  // Sends `sig` to the child's process id.
  void signal(int sig) const {
    if (m_child.pid() > 0) ::kill(m_child.pid(), sig);
  }
  // Waits for exit; returns the exit code, or 128 + signal number.
  int wait() { return m_child.wait(); }
  // Waits up to `timeout`; nullopt if still running.
  std::optional<int> wait_for(std::chrono::milliseconds timeout) {
    return m_child.wait_for(timeout);
  }

 private:
  process::Child m_child;
};

// The whole content of a file ("" if missing).
inline std::string slurp(const std::string& path) {
  std::ifstream in(path, std::ios::binary);
  std::ostringstream ss;
  ss << in.rdbuf();
  return ss.str();
}

// Runs a command to completion; returns (exit code, stdout, then its stderr
// when it failed). `dir` holds the stderr file.
inline std::pair<int, std::string> run_capture(const std::vector<std::string>& argv,
                                               const std::string& dir,
                                               const std::map<std::string, std::string>& env = {}) {
  static int counter = 0;
  process::SpawnOptions o;
  o.env = env;
  o.stdin_null = false;
  o.stderr_path =
      dir + "/cmd-" + std::to_string(::getpid()) + "-" + std::to_string(counter++) + ".err";
  auto r = process::run_capture(argv, o);
  if (!r) return {127, "[spawn] " + r.error().message};
  return {r->status, r->out + (r->status != 0 ? "\n[stderr] " + slurp(o.stderr_path) : "")};
}

}  // namespace korch::testing
