#include "evaluator/zygote.hpp"

#include <fcntl.h>
#include <signal.h>
#include <sys/socket.h>
#include <sys/stat.h>
#include <sys/wait.h>
#include <unistd.h>

#include <atomic>
#include <chrono>
#include <condition_variable>
#include <cstring>
#include <filesystem>
#include <fstream>
#include <map>
#include <mutex>
#include <nlohmann/json.hpp>
#include <sstream>
#include <thread>
#include <vector>

#include "evaluator/job_dir.hpp"
#include "util/fs.hpp"
#include "util/log.hpp"

extern char** environ;

namespace korch::evaluator {
namespace {

using json = nlohmann::json;
namespace fs = std::filesystem;

constexpr double k_hello_timeout_s = 180;  // Python + torch import on a loaded machine
constexpr double k_kill_grace_s = 15;      // after SIGKILL, for the zygote's exit event
constexpr std::size_t k_log_tail = 4000;
constexpr std::size_t k_max_message = 1 << 20;

std::string tail_of(const std::string& path, std::size_t n = k_log_tail) {
  return tail(read_file(path).value_or(""), n);
}

// Field 22 of /proc/<pid>/stat (start time in clock ticks), 0 when gone.
std::uint64_t start_time_of(pid_t pid) {
  std::ifstream f("/proc/" + std::to_string(pid) + "/stat");
  std::string s((std::istreambuf_iterator<char>(f)), std::istreambuf_iterator<char>());
  auto rp = s.rfind(')');
  if (rp == std::string::npos) return 0;
  std::istringstream in(s.substr(rp + 2));
  std::string field;
  for (int i = 3; i <= 22 && (in >> field); ++i) {
    if (i == 22) return std::stoull(field);
  }
  return 0;
}

pid_t parent_of(pid_t pid) {
  std::ifstream f("/proc/" + std::to_string(pid) + "/stat");
  std::string s((std::istreambuf_iterator<char>(f)), std::istreambuf_iterator<char>());
  auto rp = s.rfind(')');
  if (rp == std::string::npos) return 0;
  std::istringstream in(s.substr(rp + 2));
  std::string state;
  pid_t ppid = 0;
  in >> state >> ppid;
  return ppid;
}

struct Pending {
  pid_t pid = -1;
  bool started = false;
  bool exited = false;
  int code = -1;
  int signal = 0;
  std::string error;
};

}  // namespace

// One zygote process plus the thread that spawned it and reads its events.
// The thread lives as long as the zygote, because PR_SET_PDEATHSIG fires when
// the spawning *thread* exits.
class ZygoteProc {
 public:
  ZygoteProc(std::string worker, std::string run_dir, bool restart, std::string glibc_tunables)
      : m_worker(std::move(worker)),
        m_run_dir(std::move(run_dir)),
        m_restart(restart),
        m_glibc_tunables(std::move(glibc_tunables)) {
    m_keeper = std::thread([this] { keeper(); });
  }
  ~ZygoteProc() { stop(); }

  bool wait_ready(double timeout_s) {
    std::unique_lock lk(m_mu);
    return m_cv.wait_for(lk, std::chrono::duration<double>(timeout_s), [&] {
      return m_ready || m_stopping || m_failed;
    }) && m_ready;
  }

  void stop() {
    {
      std::lock_guard lk(m_mu);
      if (m_stopping && !m_keeper.joinable()) return;
      m_stopping = true;
      for (auto& [id, p] : m_pending)
        if (p.pid > 0 && !p.exited) kill(-p.pid, SIGKILL);
      if (m_pid > 0) kill(m_pid, SIGKILL);
    }
    m_cv.notify_all();
    if (m_keeper.joinable() && m_keeper.get_id() != std::this_thread::get_id()) m_keeper.join();
  }

  JobOutcome run(JobRole role, const std::string& dir, const std::string& extra,
                 std::optional<std::uint64_t> seed, double timeout_s) {
    JobOutcome out;
    const auto t0 = std::chrono::steady_clock::now();
    if (!wait_ready(k_hello_timeout_s)) {
      out.error = "the worker zygote is not running (" + m_last_error + ")";
      return out;
    }
    json msg = extra.empty() ? json::object() : json::parse(extra);
    const std::string id = fs::path(dir).filename().string() + "-" + std::to_string(++m_counter);
    msg["op"] = "spawn";
    msg["job"] = id;
    msg["role"] = std::string(enum_name(role));
    msg["dir"] = dir;
    const std::string text = msg.dump();

    int seed_fd = -1;
    if (seed) {
      int p[2];
      if (pipe2(p, O_CLOEXEC) != 0) {
        out.error = "pipe failed";
        return out;
      }
      const std::string s = std::to_string(*seed);
      (void)!write(p[1], s.data(), s.size());
      close(p[1]);
      seed_fd = p[0];
    }
    {
      std::unique_lock lk(m_mu);
      if (m_stopping) {
        // stop() ran: no job starts after it (nothing would ever report its
        // exit once the keeper is gone).
        if (seed_fd >= 0) close(seed_fd);
        out.error = "the evaluator is shut down";
        return out;
      }
      m_pending[id] = Pending{};
      bool sent = send_locked(text, seed_fd);
      if (seed_fd >= 0) close(seed_fd);
      if (!sent) {
        m_pending.erase(id);
        out.error = "could not reach the worker zygote";
        return out;
      }
      const auto deadline = t0 + std::chrono::duration_cast<std::chrono::steady_clock::duration>(
                                     std::chrono::duration<double>(timeout_s));
      // m_stopped: the keeper is gone (stop()), so no exit event will come.
      if (!m_cv.wait_until(lk, deadline, [&] { return m_pending[id].exited || m_stopped; })) {
        Pending& p = m_pending[id];
        out.timed_out = true;
        if (p.pid > 0) {
          kill(-p.pid, SIGKILL);  // its session: the namespace's PID 1 and everything under it
          kill(p.pid, SIGKILL);
        }
        m_cv.wait_for(lk, std::chrono::duration<double>(k_kill_grace_s),
                      [&] { return m_pending[id].exited; });
      }
      Pending p = m_pending[id];
      m_pending.erase(id);
      if (!p.exited && m_stopped) p.error = "the worker zygote was stopped";
      out.started = p.started;
      out.exit_code = p.code;
      out.signal = p.signal;
      out.error = p.error;
    }
    out.result_json = read_file(dir + "/result.json").value_or("");
    out.worker_log = tail_of(dir + "/worker.log");
    out.candidate_log = tail_of(dir + "/candidate.log");
    out.wall_s = std::chrono::duration<double>(std::chrono::steady_clock::now() - t0).count();
    return out;
  }

  std::string versions() {
    std::lock_guard lk(m_mu);
    return m_versions;
  }
  double startup_s() {
    std::lock_guard lk(m_mu);
    return m_startup_s;
  }

 private:
  bool send_locked(const std::string& text, int fd) {
    if (m_sock < 0) return false;
    iovec iov{const_cast<char*>(text.data()), text.size()};
    msghdr m{};
    m.msg_iov = &iov;
    m.msg_iovlen = 1;
    alignas(cmsghdr) char ctrl[CMSG_SPACE(sizeof(int))];
    if (fd >= 0) {
      std::memset(ctrl, 0, sizeof ctrl);
      m.msg_control = ctrl;
      m.msg_controllen = sizeof ctrl;
      cmsghdr* c = CMSG_FIRSTHDR(&m);
      c->cmsg_level = SOL_SOCKET;
      c->cmsg_type = SCM_RIGHTS;
      c->cmsg_len = CMSG_LEN(sizeof(int));
      std::memcpy(CMSG_DATA(c), &fd, sizeof(int));
    }
    return sendmsg(m_sock, &m, MSG_NOSIGNAL) == static_cast<ssize_t>(text.size());
  }

  bool spawn() {
    int sv[2];
    if (socketpair(AF_UNIX, SOCK_SEQPACKET | SOCK_CLOEXEC, 0, sv) != 0) return false;
    // The environment whitelist: no keys, no daemon configuration.
    std::vector<std::string> env_s;
    const char* path = getenv("PATH");
    env_s.push_back(std::string("PATH=") + (path ? path : "/usr/local/bin:/usr/bin:/bin"));
    env_s.push_back("LANG=C.UTF-8");
    env_s.push_back("HOME=/tmp");
    env_s.push_back("OMP_NUM_THREADS=1");
    env_s.push_back("MKL_NUM_THREADS=1");
    env_s.push_back("MAX_JOBS=1");
    // Multi-GPU hosts: NVLink multicast stays off in every process korch starts.
    env_s.push_back("NCCL_NVLS_ENABLE=0");
    env_s.push_back("TORCH_SYMM_MEM_DISABLE_MULTICAST=1");
    env_s.push_back("NVSHMEM_DISABLE_NVLS=1");
    if (!m_glibc_tunables.empty()) env_s.push_back("GLIBC_TUNABLES=" + m_glibc_tunables);
    std::vector<char*> envp;
    for (auto& e : env_s) envp.push_back(e.data());
    envp.push_back(nullptr);
    std::string arg0 = "korch-worker", arg1 = "--zygote";
    char* argv[] = {arg0.data(), arg1.data(), nullptr};
    const auto t0 = std::chrono::steady_clock::now();
    pid_t pid = fork();
    if (pid < 0) {
      close(sv[0]);
      close(sv[1]);
      return false;
    }
    if (pid == 0) {
      // Only async-signal-safe calls until exec.
      if (dup2(sv[1], 3) < 0) _exit(127);
      close_range(4, ~0u, 0);
      execve(m_worker.c_str(), argv, envp.data());
      _exit(127);
    }
    close(sv[1]);
    {
      std::lock_guard lk(m_mu);
      m_sock = sv[0];
      m_pid = pid;
      m_spawned_at = t0;
    }
    record_pid(pid);
    return true;
  }

  void record_pid(pid_t zpid) {
    std::error_code ec;
    fs::create_directories(m_run_dir, ec);
    json j;
    j["daemon_pid"] = getpid();
    j["daemon_start"] = start_time_of(getpid());
    j["zygote_pid"] = zpid;
    j["zygote_start"] = start_time_of(zpid);
    m_pid_file =
        m_run_dir + "/zygote-" + std::to_string(getpid()) + "-" + std::to_string(zpid) + ".json";
    (void)write_file_atomic(m_pid_file, j.dump());
  }

  void handle(const std::string& text) {
    json ev = json::parse(text, nullptr, false);
    if (ev.is_discarded()) return;
    std::lock_guard lk(m_mu);
    const auto kind = enum_from_name<ZygoteEvent>(ev.value("ev", ""));
    if (!kind) return;  // (a newer worker's event: nothing of ours waits on it)
    if (*kind == ZygoteEvent::hello) {
      m_versions = ev.value("versions", json::object()).dump();
      m_startup_s =
          std::chrono::duration<double>(std::chrono::steady_clock::now() - m_spawned_at).count();
      m_ready = true;
    } else if (*kind == ZygoteEvent::started) {
      auto it = m_pending.find(ev.value("job", ""));
      if (it == m_pending.end()) return;
      it->second.pid = ev.value("pid", -1);
      it->second.started = it->second.pid > 0;
      if (!it->second.started) {
        it->second.exited = true;
        it->second.error = "fork failed: " + ev.value("error", std::string("?"));
      }
    } else if (*kind == ZygoteEvent::exit) {
      auto it = m_pending.find(ev.value("job", ""));
      if (it == m_pending.end()) return;
      it->second.exited = true;
      it->second.code = ev.value("code", -1);
      it->second.signal = ev.value("signal", 0);
    }
    m_cv.notify_all();
  }

  void keeper() {
    static char buf[k_max_message];
    while (true) {
      {
        std::lock_guard lk(m_mu);
        if (m_stopping) break;
      }
      if (!spawn()) {
        std::lock_guard lk(m_mu);
        m_last_error = std::string("cannot start ") + m_worker + ": " + std::strerror(errno);
        m_failed = true;
        m_cv.notify_all();
        break;
      }
      while (true) {
        ssize_t n = recv(m_sock, buf, sizeof buf, 0);
        if (n <= 0) {
          if (n < 0 && errno == EINTR) continue;
          break;
        }
        handle(std::string(buf, static_cast<std::size_t>(n)));
      }
      int status = 0;
      waitpid(m_pid, &status, 0);
      std::error_code ec;
      fs::remove(m_pid_file, ec);
      std::lock_guard lk(m_mu);
      close(m_sock);
      m_sock = -1;
      bool was_ready = m_ready;
      m_ready = false;
      m_last_error = "the zygote exited (status " + std::to_string(status) + ")";
      for (auto& [id, p] : m_pending) {
        if (p.exited) continue;
        if (p.pid > 0) kill(-p.pid, SIGKILL);
        p.exited = true;
        p.error = "the worker zygote died";
      }
      m_cv.notify_all();
      if (!m_stopping && !was_ready) {
        KLOG_ERROR("[eval] korch-worker zygote failed to start: {}", m_last_error);
        m_failed = true;
        break;
      }
      if (m_stopping || !m_restart) break;
      KLOG_WARN("[eval] korch-worker zygote died; restarting");
    }
    std::lock_guard lk(m_mu);
    m_stopped = true;
    m_cv.notify_all();
  }

  std::string m_worker, m_run_dir;
  bool m_restart;
  std::string m_glibc_tunables;
  std::mutex m_mu;
  std::condition_variable m_cv;
  int m_sock = -1;
  pid_t m_pid = -1;
  bool m_ready = false, m_stopping = false, m_failed = false, m_stopped = false;
  std::string m_versions = "{}", m_last_error = "not started", m_pid_file;
  double m_startup_s = 0;
  std::chrono::steady_clock::time_point m_spawned_at;
  std::map<std::string, Pending> m_pending;
  std::atomic<std::uint64_t> m_counter{0};
  std::thread m_keeper;
};

class Zygote::Impl {
 public:
  std::string worker, run_dir;
  bool fresh = false;
  std::string glibc_tunables;
  std::unique_ptr<ZygoteProc> warm;
  std::string versions;
  double startup_s = 0;
};

Zygote::Zygote(std::unique_ptr<Impl> impl) : m_impl(std::move(impl)) {}
Zygote::~Zygote() { stop(); }

Result<std::unique_ptr<Zygote>> Zygote::start(const std::string& worker_path,
                                              const std::string& run_dir, bool fresh_per_job,
                                              const std::string& glibc_tunables) {
  if (access(worker_path.c_str(), X_OK) != 0)
    return fail("korch-worker not found or not executable at " + worker_path +
                " (build it, or set KORCH_WORKER)");
  auto impl = std::make_unique<Impl>();
  impl->worker = worker_path;
  impl->run_dir = run_dir;
  impl->fresh = fresh_per_job;
  impl->glibc_tunables = glibc_tunables;
  // Even in fresh mode, one zygote answers the versions.
  auto proc = std::make_unique<ZygoteProc>(worker_path, run_dir, !fresh_per_job, glibc_tunables);
  if (!proc->wait_ready(k_hello_timeout_s)) return fail("the korch-worker zygote did not start");
  impl->versions = proc->versions();
  impl->startup_s = proc->startup_s();
  if (fresh_per_job)
    proc->stop();
  else
    impl->warm = std::move(proc);
  return std::unique_ptr<Zygote>(new Zygote(std::move(impl)));
}

JobOutcome Zygote::run(JobRole role, const std::string& job_dir, const std::string& extra,
                       std::optional<std::uint64_t> seed, double timeout_s) {
  if (!m_impl->fresh) {
    if (!m_impl->warm) {
      JobOutcome o;
      o.error = "the evaluator is shut down";
      return o;
    }
    return m_impl->warm->run(role, job_dir, extra, seed, timeout_s);
  }
  // A fresh process per job: exec, import Python and torch, fork once.
  const auto t0 = std::chrono::steady_clock::now();
  ZygoteProc proc(m_impl->worker, m_impl->run_dir, false, m_impl->glibc_tunables);
  JobOutcome o = proc.run(role, job_dir, extra, seed, timeout_s);
  proc.stop();
  o.wall_s = std::chrono::duration<double>(std::chrono::steady_clock::now() - t0).count();
  return o;
}

std::string Zygote::versions_json() const { return m_impl->versions; }
double Zygote::startup_s() const { return m_impl->startup_s; }

void Zygote::stop() {
  // Stops the zygote but keeps the object until ~Zygote: other threads may
  // be inside run() (they return once their job's exit is known or the
  // keeper is gone); destroying it under them hung korch's Ctrl-C.
  if (m_impl && m_impl->warm) m_impl->warm->stop();
}

int reap_orphans(const std::string& run_dir) {
  int killed = 0;
  std::error_code ec;
  for (auto& e : fs::directory_iterator(run_dir, ec)) {
    if (e.path().extension() != ".json") continue;
    auto text = read_file(e.path());
    if (!text) continue;
    json j = json::parse(*text, nullptr, false);
    if (j.is_discarded()) continue;
    pid_t dpid = j.value("daemon_pid", 0);
    std::uint64_t dstart = j.value("daemon_start", 0ull);
    if (dpid > 0 && start_time_of(dpid) == dstart && dstart != 0) continue;  // its daemon lives
    pid_t zpid = j.value("zygote_pid", 0);
    std::uint64_t zstart = j.value("zygote_start", 0ull);
    if (zpid > 0 && zstart != 0 && start_time_of(zpid) == zstart) {
      // Its jobs lead their own sessions: kill each job's group, then the zygote.
      for (auto& p : fs::directory_iterator("/proc", ec)) {
        const std::string name = p.path().filename().string();
        if (name.empty() || !std::isdigit(static_cast<unsigned char>(name[0]))) continue;
        pid_t pid = std::stoi(name);
        if (parent_of(pid) == zpid) kill(-pid, SIGKILL), kill(pid, SIGKILL);
      }
      kill(zpid, SIGKILL);
      ++killed;
    }
    fs::remove(e.path(), ec);
  }
  return killed;
}

std::string find_worker_path() {
  if (const char* env = getenv("KORCH_WORKER"); env && *env) return env;
  std::error_code ec;
  fs::path self = fs::read_symlink("/proc/self/exe", ec);
  if (!ec) {
    for (fs::path cand : {self.parent_path() / "korch-worker",
                          self.parent_path() / "../evaluator/worker/korch-worker",
                          self.parent_path() / "../../evaluator/worker/korch-worker"}) {
      if (access(cand.c_str(), X_OK) == 0) return fs::weakly_canonical(cand, ec).string();
    }
  }
#ifdef KORCH_WORKER_BUILD_PATH
  return KORCH_WORKER_BUILD_PATH;
#else
  return "korch-worker";
#endif
}

}  // namespace korch::evaluator
