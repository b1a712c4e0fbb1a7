#include "util/process.hpp"

#include <fcntl.h>
#include <poll.h>
#include <signal.h>
#include <sys/wait.h>
#include <unistd.h>

#include <cerrno>
#include <cstring>
#include <thread>

extern char** environ;

namespace korch::process {
namespace {

int decode(int status) { return WIFEXITED(status) ? WEXITSTATUS(status) : 128 + WTERMSIG(status); }

// The parent's environment with `changes` applied, as "K=V" strings.
std::vector<std::string> merged_environment(const std::map<std::string, std::string>& changes) {
  std::vector<std::string> out;
  for (char** e = environ; e && *e; ++e) {
    std::string entry(*e);
    auto name = entry.substr(0, entry.find('='));
    if (!changes.contains(name)) out.push_back(std::move(entry));
  }
  for (const auto& [k, v] : changes)
    if (!v.empty()) out.push_back(k + "=" + v);
  return out;
}

std::vector<char*> pointers(std::vector<std::string>& strings) {
  std::vector<char*> out;
  for (auto& s : strings) out.push_back(s.data());
  out.push_back(nullptr);
  return out;
}

}  // namespace

Result<Child> Child::spawn(const std::vector<std::string>& argv, const SpawnOptions& options) {
  if (argv.empty()) return fail("spawn: empty argv");
  std::vector<std::string> args = argv;
  std::vector<std::string> env = merged_environment(options.env);
  auto c_args = pointers(args);
  auto c_env = pointers(env);
  int out_pipe[2] = {-1, -1};
  if (options.capture_stdout && ::pipe2(out_pipe, O_CLOEXEC) != 0)
    return fail(std::string("pipe: ") + std::strerror(errno));
  // Reports an exec failure to the parent: closed on a successful exec.
  int err_pipe[2];
  if (::pipe2(err_pipe, O_CLOEXEC) != 0) return fail(std::string("pipe: ") + std::strerror(errno));

  pid_t pid = ::fork();
  if (pid < 0) return fail(std::string("fork: ") + std::strerror(errno));
  if (pid == 0) {
    if (options.own_process_group) ::setpgid(0, 0);
    ::signal(SIGINT, SIG_DFL);
    ::signal(SIGQUIT, SIG_DFL);
    sigset_t none;
    sigemptyset(&none);
    ::sigprocmask(SIG_SETMASK, &none, nullptr);
    if (options.uid && ::geteuid() == 0) {
      if (::setgid(*options.uid) != 0 || ::setuid(*options.uid) != 0) ::_exit(126);
    }
    if (options.stdin_null) {
      int in = ::open("/dev/null", O_RDONLY);
      if (in >= 0) ::dup2(in, STDIN_FILENO);
    }
    if (options.capture_stdout) {
      ::dup2(out_pipe[1], STDOUT_FILENO);
    } else if (!options.stdout_path.empty()) {
      int out = ::open(options.stdout_path.c_str(), O_WRONLY | O_CREAT | O_APPEND, 0644);
      if (out >= 0) ::dup2(out, STDOUT_FILENO);
    }
    if (!options.stderr_path.empty()) {
      int err = ::open(options.stderr_path.c_str(), O_WRONLY | O_CREAT | O_APPEND, 0644);
      if (err >= 0) ::dup2(err, STDERR_FILENO);
    }
    ::execvpe(c_args[0], c_args.data(), c_env.data());
    int e = errno;
    (void)!::write(err_pipe[1], &e, sizeof e);
    ::_exit(127);
  }
  ::close(err_pipe[1]);
  if (options.capture_stdout) ::close(out_pipe[1]);
  Child child;
  child.m_pid = pid;
  child.m_stdout_fd = out_pipe[0];
  child.m_group = options.own_process_group;
  int exec_errno = 0;
  ssize_t n;
  while ((n = ::read(err_pipe[0], &exec_errno, sizeof exec_errno)) < 0 && errno == EINTR) {}
  ::close(err_pipe[0]);
  if (n == static_cast<ssize_t>(sizeof exec_errno)) {
    child.wait();
    return fail("cannot start " + argv[0] + ": " + std::strerror(exec_errno));
  }
  return child;
}

Child::Child(Child&& other) noexcept
    : m_pid(other.m_pid),
      m_stdout_fd(other.m_stdout_fd),
      m_group(other.m_group),
      m_status(other.m_status) {
  other.m_pid = -1;
  other.m_stdout_fd = -1;
}

Child& Child::operator=(Child&& other) noexcept {
  std::swap(m_pid, other.m_pid);
  std::swap(m_stdout_fd, other.m_stdout_fd);
  std::swap(m_group, other.m_group);
  std::swap(m_status, other.m_status);
  return *this;
}

Child::~Child() {
  if (m_pid > 0 && !m_status) {
    signal(SIGKILL);
    wait();
  }
  if (m_stdout_fd >= 0) ::close(m_stdout_fd);
}

void Child::signal(int sig) const {
  if (m_pid <= 0 || m_status) return;
  // With its own group, signal the group (the child's own children too).
  if (m_group && ::kill(-m_pid, sig) == 0) return;
  ::kill(m_pid, sig);
}

std::string Child::read_stdout() {
  std::string out;
  if (m_stdout_fd < 0) return out;
  char buf[65536];
  for (;;) {
    ssize_t n = ::read(m_stdout_fd, buf, sizeof buf);
    if (n > 0) {
      out.append(buf, static_cast<std::size_t>(n));
    } else if (n == 0 || errno != EINTR) {
      break;
    }
  }
  ::close(m_stdout_fd);
  m_stdout_fd = -1;
  return out;
}

int Child::wait() {
  if (m_status) return *m_status;
  if (m_pid <= 0) return -1;
  int status = 0;
  while (::waitpid(m_pid, &status, 0) < 0 && errno == EINTR) {}
  m_status = decode(status);
  return *m_status;
}

std::optional<int> Child::wait_for(std::chrono::milliseconds timeout) {
  if (m_status) return m_status;
  if (m_pid <= 0) return -1;
  constexpr auto k_poll = std::chrono::milliseconds(5);
  const auto deadline = std::chrono::steady_clock::now() + timeout;
  for (;;) {
    int status = 0;
    if (::waitpid(m_pid, &status, WNOHANG) == m_pid) {
      m_status = decode(status);
      return m_status;
    }
    if (std::chrono::steady_clock::now() >= deadline) return std::nullopt;
    std::this_thread::sleep_for(k_poll);
  }
}

Result<Output> run_capture(const std::vector<std::string>& argv, SpawnOptions options,
                           std::optional<std::chrono::milliseconds> timeout) {
  options.capture_stdout = true;
  auto child = Child::spawn(argv, options);
  if (!child) return std::unexpected(child.error());
  Output result;
  if (!timeout) {
    result.out = child->read_stdout();
    result.status = child->wait();
    return result;
  }
  // Read on a thread so a child that fills the pipe cannot block the timeout.
  std::thread reader([&] { result.out = child->read_stdout(); });
  auto status = child->wait_for(*timeout);
  if (!status) {
    result.timed_out = true;
    child->signal(SIGKILL);
    status = child->wait();
  }
  reader.join();
  result.status = *status;
  return result;
}

}  // namespace korch::process
