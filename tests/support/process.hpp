#pragma once
// A child process for integration tests: started with fork+exec, its stdout
// and stderr sent to files, killed with real signals and reaped.
#include <fcntl.h>
#include <signal.h>
#include <sys/wait.h>
#include <unistd.h>

#include <chrono>
#include <cstdlib>
#include <fstream>
#include <map>
#include <optional>
#include <sstream>
#include <string>
#include <thread>
#include <vector>

namespace korch::testing {

class Process {
 public:
  // Starts argv[0] with `argv` and the parent's environment plus `env`
  // (set) — a value of "" unsets the variable. Output goes to the files.
  // With `uid` (and when running as root), the child runs as that uid and
  // gid, e.g. to test file modes that root would ignore.
  static Process start(const std::vector<std::string>& argv, const std::string& stdout_path,
                       const std::string& stderr_path, const std::map<std::string, std::string>& env = {},
                       std::optional<uid_t> uid = std::nullopt) {
    pid_t pid = ::fork();
    if (pid == 0) {
      ::setpgid(0, 0);
      // As a shell starts a foreground command: default signal dispositions
      // and an empty mask, whatever the test runner inherited (a background
      // job without job control ignores SIGINT, and so would its children
      // until they install their own handlers).
      ::signal(SIGINT, SIG_DFL);
      ::signal(SIGQUIT, SIG_DFL);
      sigset_t none;
      sigemptyset(&none);
      ::sigprocmask(SIG_SETMASK, &none, nullptr);
      if (uid && ::geteuid() == 0) {
        if (::setgid(*uid) != 0 || ::setuid(*uid) != 0) ::_exit(126);
      }
      int out = ::open(stdout_path.c_str(), O_WRONLY | O_CREAT | O_APPEND, 0644);
      int err = ::open(stderr_path.c_str(), O_WRONLY | O_CREAT | O_APPEND, 0644);
      if (out >= 0) ::dup2(out, STDOUT_FILENO);
      if (err >= 0) ::dup2(err, STDERR_FILENO);
      for (auto& [k, v] : env) {
        if (v.empty()) {
          ::unsetenv(k.c_str());
        } else {
          ::setenv(k.c_str(), v.c_str(), 1);
        }
      }
      std::vector<char*> args;
      for (auto& a : argv) args.push_back(const_cast<char*>(a.c_str()));
      args.push_back(nullptr);
      ::execv(args[0], args.data());
      ::_exit(127);
    }
    Process p;
    p.m_pid = pid;
    return p;
  }

  Process() = default;
  Process(Process&& o) noexcept : m_pid(o.m_pid), m_status(o.m_status) { o.m_pid = -1; }
  Process& operator=(Process&& o) noexcept {
    std::swap(m_pid, o.m_pid);
    std::swap(m_status, o.m_status);
    return *this;
  }
  ~Process() {
    if (m_pid > 0 && !m_status) {
      ::kill(m_pid, SIGKILL);
      wait();
    }
  }

  pid_t pid() const { return m_pid; }
  void signal(int sig) const {
    if (m_pid > 0) ::kill(m_pid, sig);
  }

  // Waits for exit; returns the exit code, or 128 + signal number.
  int wait() {
    if (m_status) return *m_status;
    int status = 0;
    while (::waitpid(m_pid, &status, 0) < 0 && errno == EINTR) {
    }
    m_status = WIFEXITED(status) ? WEXITSTATUS(status) : 128 + WTERMSIG(status);
    return *m_status;
  }

  // Waits up to `timeout`; nullopt if still running.
  std::optional<int> wait_for(std::chrono::milliseconds timeout) {
    auto deadline = std::chrono::steady_clock::now() + timeout;
    while (std::chrono::steady_clock::now() < deadline) {
      int status = 0;
      pid_t r = ::waitpid(m_pid, &status, WNOHANG);
      if (r == m_pid) {
        m_status = WIFEXITED(status) ? WEXITSTATUS(status) : 128 + WTERMSIG(status);
        return m_status;
      }
      std::this_thread::sleep_for(std::chrono::milliseconds(5));
    }
    return std::nullopt;
  }

 private:
  pid_t m_pid = -1;
  std::optional<int> m_status;
};

// The whole content of a file ("" if missing).
inline std::string slurp(const std::string& path) {
  std::ifstream in(path, std::ios::binary);
  std::ostringstream ss;
  ss << in.rdbuf();
  return ss.str();
}

// Runs a command to completion; returns (exit code, stdout).
inline std::pair<int, std::string> run_capture(const std::vector<std::string>& argv, const std::string& dir,
                                               const std::map<std::string, std::string>& env = {}) {
  static int counter = 0;
  auto out = dir + "/cmd-" + std::to_string(::getpid()) + "-" + std::to_string(counter++) + ".out";
  auto err = out + ".err";
  auto p = Process::start(argv, out, err, env);
  int rc = p.wait();
  return {rc, slurp(out) + (rc != 0 ? "\n[stderr] " + slurp(err) : "")};
}

}  // namespace korch::testing
