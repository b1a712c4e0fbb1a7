// korch-worker: the sandboxed evaluator worker (DESIGN §5). The only program
// that links LibTorch and embeds CPython.
//
//   korch-worker --zygote     control socket on fd 3 (SOCK_SEQPACKET)
//
// The zygote imports Python and torch once (no torch operation: a child of a
// zygote whose thread pool started hangs at its first parallel op), then, for
// each `spawn` message, forks a job process:
//
//   zygote ──fork──► P (root, new session, new mount/net/IPC/PID namespaces)
//                    └─fork─► G = PID 1 of the new PID namespace: private
//                             /proc, /tmp, /var/tmp, /dev/shm; then its role:
//     rules / compile: drop to an unprivileged uid + seccomp, run the Python
//                      role (korch_worker.py); result written to result.json
//     measure:         G forks the runners (candidate runners uid nobody,
//                      reference runners uid 65531; two a side unless the job
//                      says), then drops to uid 65533 and runs the judge;
//                      each runner talks to it over its own socketpair.
//
// Messages (one JSON object per datagram):
//   zygote → daemon  {"ev":"hello", "versions":{...}}
//                    {"ev":"started","job":ID,"pid":PID}
//                    {"ev":"exit","job":ID,"code":C,"signal":S}
//   daemon → zygote  {"op":"spawn","job":ID,"role":R,"dir":DIR,...} [+ seed fd]
// The job's secret seed travels only as bytes in a pipe whose read end comes
// with the spawn message; the zygote never reads it, and the candidate
// runner closes it before it runs any Python.
#define PY_SSIZE_T_CLEAN
#include <Python.h>

#include <errno.h>
#include <fcntl.h>
#include <poll.h>
#include <sched.h>
#include <signal.h>
#include <sys/prctl.h>
#include <sys/signalfd.h>
#include <sys/socket.h>
#include <sys/stat.h>
#include <sys/wait.h>
#include <unistd.h>

#include <algorithm>
#include <cctype>
#include <chrono>
#include <climits>
#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <map>
#include <nlohmann/json.hpp>
#include <string>
#include <tuple>

#include "evaluator/job_protocol_version.hpp"
#include "evaluator/job_role.hpp"
#include "evaluator/worker/sandbox.hpp"

#ifndef KORCH_WORKER_PYDIR
#error "KORCH_WORKER_PYDIR must name the folder holding korch_worker.py"
#endif

namespace korch::evaluator {
const char* rules_python_dir();
}
#ifdef KORCH_WORKER_CUDA
extern "C" PyObject* korch_init_cuda_module();
#endif

namespace {

using json = nlohmann::json;
using korch::worker::Protections;
using korch::worker::SeccompProfile;

constexpr int k_control_fd = 3;
constexpr std::uint32_t k_uid_candidate = 65534;   // nobody
constexpr std::uint32_t k_uid_judge = 65533;       // the judge (trusted harness, reference outputs)
constexpr std::uint32_t k_uid_ref_runner = 65531;  // the reference runner (times the reference)
constexpr std::uint32_t k_uid_compile = 65532;     // the compiler
constexpr std::size_t k_max_message = 1 << 20;
constexpr int k_max_runners_a_side = 8;  // a measure job's runners of one side, at most

[[noreturn]] void die(const char* what) {
  std::fprintf(stderr, "korch-worker: %s: %s\n", what, std::strerror(errno));
  std::fflush(stderr);
  _exit(120);
}

void send_msg(int fd, const json& j) {
  std::string s = j.dump();
  if (send(fd, s.data(), s.size(), MSG_NOSIGNAL) < 0) die("send");
}

// Receives one datagram and at most one file descriptor.
bool recv_msg(int fd, std::string& out, int& passed_fd) {
  static char buf[k_max_message];
  passed_fd = -1;
  iovec iov{buf, sizeof buf};
  alignas(cmsghdr) char ctrl[CMSG_SPACE(sizeof(int))];
  msghdr msg{};
  msg.msg_iov = &iov;
  msg.msg_iovlen = 1;
  msg.msg_control = ctrl;
  msg.msg_controllen = sizeof ctrl;
  ssize_t n = recvmsg(fd, &msg, MSG_CMSG_CLOEXEC);
  if (n <= 0) return false;
  for (cmsghdr* c = CMSG_FIRSTHDR(&msg); c; c = CMSG_NXTHDR(&msg, c)) {
    if (c->cmsg_level == SOL_SOCKET && c->cmsg_type == SCM_RIGHTS)
      std::memcpy(&passed_fd, CMSG_DATA(c), sizeof(int));
  }
  out.assign(buf, static_cast<std::size_t>(n));
  return true;
}

PyObject* g_harness = nullptr;

// Calls korch_worker.<fn>(arg_json) and returns its string result. Exits
// the process on a Python error in the trusted harness (the traceback is on
// stderr, which is the job's worker.log).
std::string call_harness(const char* fn, const std::string& arg) {
  PyObject* f = PyObject_GetAttrString(g_harness, fn);
  if (!f) {
    PyErr_Print();
    _exit(121);
  }
  PyObject* r = PyObject_CallFunction(f, "s#", arg.data(), static_cast<Py_ssize_t>(arg.size()));
  Py_DECREF(f);
  if (!r) {
    PyErr_Print();
    std::fflush(stderr);
    _exit(122);
  }
  std::string out;
  if (PyUnicode_Check(r)) {
    Py_ssize_t n = 0;
    const char* s = PyUnicode_AsUTF8AndSize(r, &n);
    if (s) out.assign(s, static_cast<std::size_t>(n));
  }
  Py_DECREF(r);
  return out;
}

bool env_is_whitelisted() {
  // CUDA_VISIBLE_DEVICES: the one GPU the job may use (set by job_process);
  // the NVLink multicast switches stay off in everything korch starts.
  static const char* allowed[] = {"PATH=",
                                  "LANG=",
                                  "LC_ALL=",
                                  "HOME=",
                                  "OMP_NUM_THREADS=",
                                  "MKL_NUM_THREADS=",
                                  "MAX_JOBS=",
                                  "TMPDIR=",
                                  "KORCH_",
                                  "CUDA_VISIBLE_DEVICES=",
                                  "NCCL_NVLS_ENABLE=",
                                  "TORCH_SYMM_MEM_DISABLE_MULTICAST=",
                                  "NVSHMEM_DISABLE_NVLS="};
  for (char** e = environ; e && *e; ++e) {
    bool ok = false;
    for (const char* a : allowed) ok = ok || std::strncmp(*e, a, std::strlen(a)) == 0;
    // KORCH_ variables the daemon passes are flags, never keys.
    if (ok && std::strncmp(*e, "KORCH_", 6) == 0 && std::strstr(*e, "KEY")) ok = false;
    if (!ok) return false;
  }
  return true;
}

// `path` with symlinks resolved (itself when it does not resolve). Jobs see a
// private /tmp, so a tree reached through a /tmp symlink would vanish.
std::string real_path(const std::string& path) {
  char buf[PATH_MAX];
  return realpath(path.c_str(), buf) ? std::string(buf) : path;
}

int open_or_die(const std::string& path, int flags, mode_t mode = 0600) {
  int fd = open(path.c_str(), flags | O_CLOEXEC, mode);
  if (fd < 0) die(path.c_str());
  return fd;
}

// Moves `fd` to `target` without O_CLOEXEC.
void move_fd(int fd, int target) {
  if (fd == target) {
    fcntl(fd, F_SETFD, 0);
    return;
  }
  if (dup2(fd, target) < 0) die("dup2");
  close(fd);
}

// Bytes of address space this process maps now (/proc/self/statm, field 1).
std::uint64_t mapped_bytes() {
  FILE* f = std::fopen("/proc/self/statm", "r");
  unsigned long long pages = 0;
  if (f) {
    if (std::fscanf(f, "%llu", &pages) != 1) pages = 0;
    std::fclose(f);
  }
  return pages * static_cast<std::uint64_t>(sysconf(_SC_PAGESIZE));
}

// PID 1 of the job's namespace. Never returns.
[[noreturn]] void run_job(const json& job, Protections prot, int seed_fd) {
  using korch::evaluator::JobRole;
  const auto parsed_role = korch::enum_from_name<JobRole>(job.at("role").get<std::string>());
  if (!parsed_role) die("unknown job role");
  const JobRole role = *parsed_role;
  const std::string dir = job.at("dir");
  const std::uint64_t mb = 1024ull * 1024ull;
  {
    // The job dir is <cache>/jobs/<id>: keep the cache root (prebuilt
    // libraries) and the harness's Python visible under a private /tmp.
    std::vector<std::string> keep = {real_path(dir + "/../.."), real_path(KORCH_WORKER_PYDIR),
                                     real_path(korch::evaluator::rules_python_dir())};
    korch::worker::private_mounts(prot, keep);
  }
  if (env_is_whitelisted()) prot.add(korch::worker::Protection::env_whitelist);

  std::string job_text;
  {
    FILE* f = std::fopen((dir + "/job.json").c_str(), "rb");
    if (!f) die("job.json");
    char buf[65536];
    size_t n;
    while ((n = std::fread(buf, 1, sizeof buf, f)) > 0) job_text.append(buf, n);
    std::fclose(f);
  }
  // The result file is opened as root; the role writes to the fd.
  int result_fd = open_or_die(dir + "/result.json", O_WRONLY | O_CREAT | O_TRUNC);

  const json job_json = json::parse(job_text, nullptr, false);
  const bool gpu_job = job_json.is_object() && job_json.value("device", "cpu") == "cuda";
  if (!job_json.is_object() ||
      job_json.value("protocol", -1) != korch::evaluator::protocol::k_version) {
    // A daemon of another version: refuse rather than misread the job.
    const std::string msg =
        "job protocol " +
        (job_json.is_object() ? std::to_string(job_json.value("protocol", -1)) : "?") +
        ", this korch-worker speaks " + std::to_string(korch::evaluator::protocol::k_version) +
        " (daemon and worker from different builds?)";
    const std::string out =
        json{{"error", msg}, {"verdict", "worker_crash"}, {"correct", false}}.dump();
    (void)!write(result_fd, out.data(), out.size());
    _exit(0);
  }

  json ctx;
  ctx["result_fd"] = result_fd;
  ctx["job"] = job_text;
  // RLIMIT_AS counts address space already mapped at fork: torch 2.x with
  // CUDA maps several GB of libraries before any job runs, so a fixed base
  // failed every later dlopen ("failed to map segment from shared object").
  // The base is what the process maps when its sandbox closes (after
  // prepare_main: torch 2.11's cpp_extension import maps more than a
  // headroom measured before it, and a runner limited that way ran out of
  // address space in its first recvmsg) plus headroom for the role.
  const std::uint64_t headroom = job.value("as_headroom_mb", 2048ull) * mb;
  auto as_base = [headroom] { return mapped_bytes() + headroom; };
  const std::uint64_t budget = job.value("memory_budget_mb", 4096ull) * mb;

  if (role == JobRole::measure) {
    // cpu: the runners share one core (the highest this job may use), so
    // they time on the same core with the same cache state; the protocol is
    // synchronous, so they never compete for it. The judge runs on another
    // core when the job has one: its work between calls (copying inputs in,
    // comparing outputs) evicted the runners' code from the core's private
    // caches, and a cold call costs more for a longer code path than for the
    // kernel it reaches (equal work through pybind11: 0.4% dearer in a warm
    // loop, 3% in the judge's cold calls at 150 us; issue #7).
    int pinned_cpu = -1, judge_cpu = -1;
    if (!gpu_job) {
      cpu_set_t set;
      CPU_ZERO(&set);
      if (sched_getaffinity(0, sizeof set, &set) == 0) {
        for (int c = CPU_SETSIZE - 1; c >= 0; --c) {
          if (!CPU_ISSET(c, &set)) continue;
          if (pinned_cpu >= 0 && job_json.value("judge_shares_core", false)) break;
          if (pinned_cpu < 0) {
            cpu_set_t one;
            CPU_ZERO(&one);
            CPU_SET(c, &one);
            if (sched_setaffinity(0, sizeof one, &one) != 0) break;
            pinned_cpu = c;
          } else {
            judge_cpu = c;
            break;
          }
        }
      }
    }
    ctx["pinned_cpu"] = pinned_cpu;
    // Two runners, forked alike and sandboxed alike, so that a reference call
    // and a candidate call pay exactly the same harness costs (transport,
    // process state, timing); the judge only ever compares their times.
    //   C: the candidate runner (uid nobody)  R: the reference runner
    std::vector<int> judge_ends;  // closed in every later runner
    auto fork_runner = [&](std::uint32_t uid, const char* log_name, const char* which,
                           bool gated = false) {
      int sv[2];
      if (socketpair(AF_UNIX, SOCK_SEQPACKET | SOCK_CLOEXEC, 0, sv) != 0) die("socketpair");
      int log = open_or_die(dir + "/" + log_name, O_WRONLY | O_CREAT | O_TRUNC, 0600);
      PyOS_BeforeFork();
      pid_t pid = fork();
      if (pid < 0) die("fork runner");
      if (pid == 0) {
        PyOS_AfterFork_Child();
        // Nothing of the judge's is reachable from here.
        close(sv[0]);
        close(result_fd);
        for (int fd : judge_ends) close(fd);
        if (seed_fd >= 0) close(seed_fd);
        move_fd(log, 1);
        dup2(1, 2);
        move_fd(sv[1], 4);
        Protections cp = prot;
        json cctx;
        cctx["sock_fd"] = 4;
        cctx["which"] = which;
        cctx["device"] = gpu_job ? "cuda" : "cpu";
        cctx["env"] = job_json.value("runner_env", json::object());
        if (!gpu_job && job_json.is_object() && job_json.contains("fake_cuda"))
          cctx["fake_cuda"] = job_json["fake_cuda"];  // tests only (korch_runner.runner_main)
        // A gated runner (one of timing_lone_runners' extras) waits for the
        // judge's one-byte "g" before it prepares anything: the judge sends
        // away those it will not time (Judge._more_runners_fit), and their
        // preparation would cost ~0.25 s of the job's cores each.
        if (gated) {
          char go = 0;
          if (recv(4, &go, 1, 0) != 1 || go != 'g') _exit(0);
        }
        // Trusted preparation as root, before the sandbox closes and before
        // any candidate code: imports that read files the sandbox hides
        // (torch.utils.cpp_extension) and Triton's ptxas version query.
        call_harness("prepare_main", cctx.dump());
        const bool may_exec = job_json.value("runner_exec", false);
        korch::worker::drop_privileges(cp, uid, gpu_job ? 0 : as_base() + 2 * budget,
                                       may_exec ? SeccompProfile::compile : SeccompProfile::strict);
        cctx["protections"] = cp.names();
        call_harness("runner_main", cctx.dump());
        std::fflush(nullptr);
        _exit(0);
      }
      PyOS_AfterFork_Parent();
      close(sv[1]);
      close(log);
      judge_ends.push_back(sv[0]);
      return std::pair<pid_t, int>{pid, sv[0]};
    };
    auto [c, cand_sock] = fork_runner(k_uid_candidate, "candidate.log", "candidate");
    auto [r, ref_sock] = fork_runner(k_uid_ref_runner, "reference.log", "reference");
    // More runners a side (reference_runners, candidate_runners: 2 unless
    // the job says; the daemon asks for 4 on the GPU), so that each
    // evaluation measures how much the same model's time moves from one
    // process to another, which no resampling of one process's calls can
    // see: the judge pools each side's runners and widens the speedup's
    // interval by their spread (issue #7). 1-2% on the CPU; on the H200 up
    // to 5% for a 3.8 us kernel (torch.relu at 64x256 in 8 fresh processes:
    // 3744-3936 ns, sd 1.45%, against sd 0 at 8 addresses in one process;
    // sd 0.2% at 4096^2; tools/bench/gpu_placement.py). Each further
    // candidate runner is sandboxed like the first, and every output it
    // times is compared too. GPU: the judge leaves them idle (killed with
    // the job) for a CHECK, and those whose copies of the model would not
    // fit the memory budget (Judge._more_runners_fit).
    struct MoreRunner {
      pid_t pid;
      int sock;
    };
    auto fork_more = [&](const char* key, std::uint32_t uid, const char* log_stem,
                         const char* which) {
      // (timing_lone_runners: as many as the judge may want for lone calls;
      // it sends those it does not time away, Judge._more_runners_fit)
      const int asked = std::clamp(job_json.value(key, 2), 1, k_max_runners_a_side);
      const int n = std::clamp(std::max(asked, job_json.value("timing_lone_runners", 0)), 1,
                               k_max_runners_a_side);
      std::vector<MoreRunner> more;
      for (int i = 2; i <= n; ++i) {
        auto [pid, sock] = fork_runner(uid, (log_stem + std::to_string(i) + ".log").c_str(), which,
                                       i > asked);
        more.push_back({pid, sock});
      }
      return more;
    };
    const auto ref_more =
        fork_more("reference_runners", k_uid_ref_runner, "reference", "reference");
    const auto cand_more =
        fork_more("candidate_runners", k_uid_candidate, "candidate", "candidate");
    if (judge_cpu >= 0) {
      cpu_set_t one;
      CPU_ZERO(&one);
      CPU_SET(judge_cpu, &one);
      if (sched_setaffinity(0, sizeof one, &one) != 0) judge_cpu = pinned_cpu;
    }
    ctx["judge_cpu"] = judge_cpu >= 0 ? judge_cpu : pinned_cpu;
    korch::worker::drop_privileges(prot, k_uid_judge, gpu_job ? 0 : as_base() + 4 * budget,
                                   SeccompProfile::strict);
    if (prctl(PR_SET_DUMPABLE, 0) == 0) prot.add(korch::worker::Protection::judge_nondumpable);
    ctx["seed_fd"] = seed_fd;
    ctx["cand_pid"] = c;
    ctx["ref_pid"] = r;
    ctx["protections"] = prot.names();
    ctx["sock_fd"] = cand_sock;
    ctx["ref_sock_fd"] = ref_sock;
    // The judge finds them as [[pid, socket fd], ...].
    for (const auto& [key, more] : {std::pair{"ref_more", &ref_more}, {"cand_more", &cand_more}}) {
      ctx[key] = json::array();
      for (const auto& m : *more) ctx[key].push_back({m.pid, m.sock});
    }
    call_harness("reference_main", ctx.dump());
    std::fflush(nullptr);
    kill(c, SIGKILL);
    kill(r, SIGKILL);
    for (const auto* more : {&ref_more, &cand_more})
      for (const auto& m : *more) kill(m.pid, SIGKILL);
    _exit(0);
  }
  if (seed_fd >= 0) {
    ctx["seed_fd"] = seed_fd;
  }
  const char* entry = "rules_main";
  if (role == JobRole::compile || role == JobRole::warm) {
    // As for the runners: prepared as root in this process (after the fork,
    // so a CUDA query at import cannot poison a child that needs CUDA).
    json pctx;
    pctx["env"] = job_json.value("runner_env", json::object());
    call_harness("prepare_main", pctx.dump());
  }
  if (role == JobRole::compile) {
    const std::string build = job.at("build_dir");
    mkdir(build.c_str(), 0755);
    if (chown(build.c_str(), k_uid_compile, k_uid_compile) != 0) die("chown build dir");
    korch::worker::drop_privileges(prot, k_uid_compile, 0, SeccompProfile::compile);
    entry = "compile_main";
  } else if (role == JobRole::warm) {
    // Runs the candidate once so Triton compiles its kernels into the job's
    // cache (Triton runs ptxas and a C compiler: exec is allowed here, and only
    // here, for candidate code). Not timed; the measure job's runners then
    // load what it built and may not exec.
    const std::string cache = job_json.value("triton_cache", "");
    if (!cache.empty()) {
      mkdir(cache.c_str(), 0755);
      if (chown(cache.c_str(), k_uid_candidate, k_uid_candidate) != 0) die("chown triton cache");
    }
    korch::worker::drop_privileges(prot, k_uid_candidate, gpu_job ? 0 : as_base(),
                                   SeccompProfile::compile);
    entry = "warm_main";
  } else if (role == JobRole::gpuinfo) {
    korch::worker::drop_privileges(prot, k_uid_judge, 0, SeccompProfile::strict);
    entry = "gpuinfo_main";
  } else if (role == JobRole::validate) {
    korch::worker::drop_privileges(prot, k_uid_candidate, gpu_job ? 0 : as_base(),
                                   SeccompProfile::strict);
    entry = "validate_main";
  } else {
    korch::worker::drop_privileges(prot, k_uid_candidate, as_base(), SeccompProfile::strict);
  }
  ctx["protections"] = prot.names();
  call_harness(entry, ctx.dump());
  std::fflush(nullptr);
  _exit(0);
}

std::string cgroup_name_for(pid_t zygote, const std::string& job_id) {
  std::string n = "job-" + std::to_string(zygote) + "-";
  for (char ch : job_id) n += std::isalnum(static_cast<unsigned char>(ch)) ? ch : '_';
  return n;
}
std::string cgroup_name(const std::string& job_id) { return cgroup_name_for(getppid(), job_id); }

// The first child: enters namespaces, forks PID 1, waits for it.
[[noreturn]] void job_process(const json& job, int seed_fd) {
  sigset_t all;
  sigemptyset(&all);
  sigprocmask(SIG_SETMASK, &all, nullptr);
  signal(SIGCHLD, SIG_DFL);
  const std::string dir = job.at("dir");
  int log = open(std::string(dir + "/worker.log").c_str(), O_WRONLY | O_CREAT | O_TRUNC, 0600);
  if (log >= 0) {
    dup2(log, 1);
    dup2(log, 2);
    close(log);
  }
  int devnull = open("/dev/null", O_RDONLY);
  if (devnull >= 0) {
    dup2(devnull, 0);
    close(devnull);
  }
  // Keep only stdio and the seed pipe (as fd 3); the control socket and
  // everything else the zygote holds stays behind.
  if (seed_fd >= 0) {
    move_fd(seed_fd, 3);
    seed_fd = 3;
    close_range(4, ~0u, 0);
  } else {
    close_range(3, ~0u, 0);
  }
  Protections prot;
  // The GPU of the job's lease, as device 0 of every CUDA process in it (set
  // before anything initialises CUDA: the zygote never does).
  // Python's os.environ too: it is a copy taken when the zygote started, and
  // torch counts devices from it (through NVML) while the CUDA runtime reads
  // the C environment; measured on the two-H200 host, a count of 2 against 1
  // visible device failed every CUDA initialisation (_check_capability).
  if (job.contains("gpu") && job["gpu"].is_number_integer() && job["gpu"].get<int>() >= 0) {
    const std::string g = std::to_string(job["gpu"].get<int>());
    setenv("CUDA_VISIBLE_DEVICES", g.c_str(), 1);
    PyRun_SimpleString(("import os; os.environ['CUDA_VISIBLE_DEVICES'] = '" + g + "'").c_str());
  }
  // The cores the job may run on: a measure job keeps its GPU's reserved
  // cores, a compile job the rest, so compiles never preempt a timing loop.
  if (job.contains("cpus") && job["cpus"].is_array() && !job["cpus"].empty()) {
    cpu_set_t set;
    CPU_ZERO(&set);
    for (auto& c : job["cpus"])
      if (c.is_number_integer() && c.get<int>() >= 0 && c.get<int>() < CPU_SETSIZE)
        CPU_SET(c.get<int>(), &set);
    if (sched_setaffinity(0, sizeof set, &set) == 0)
      prot.add(korch::worker::Protection::cpu_affinity);
  }
  // Memory: a cgroup where one can be made (root, cgroup v2), named after the
  // job so the zygote can remove it when the job is gone.
  const std::uint64_t limit_mb = job.value("memory_limit_mb", 0ull);
  if (limit_mb > 0)
    korch::worker::join_memory_cgroup(prot, cgroup_name(job.value("job", "")), limit_mb << 20);
  bool pid_ns = korch::worker::enter_namespaces(prot);
  if (!pid_ns) run_job(job, prot, seed_fd);
  PyOS_BeforeFork();
  pid_t g = fork();
  if (g < 0) die("fork pid1");
  if (g == 0) {
    PyOS_AfterFork_Child();
    run_job(job, prot, seed_fd);
  }
  if (seed_fd >= 0) close(seed_fd);
  int status = 0;
  while (waitpid(g, &status, 0) < 0 && errno == EINTR) {}
  if (WIFSIGNALED(status)) _exit(128 + WTERMSIG(status));
  _exit(WIFEXITED(status) ? WEXITSTATUS(status) : 125);
}

int zygote_main() {
  // Dies with the daemon.
  prctl(PR_SET_PDEATHSIG, SIGKILL);
  if (getppid() == 1) return 1;
  // glibc read GLIBC_TUNABLES when this process started, and every job forked
  // from it keeps what it read; programs a job execs (the C++ compiler) do
  // not get it (removed before Python copies the environment).
  unsetenv("GLIBC_TUNABLES");
#ifdef KORCH_WORKER_CUDA
  PyImport_AppendInittab("_korch_cuda", korch_init_cuda_module);
#endif
  Py_InitializeEx(0);
  PyRun_SimpleString(("import sys; sys.path.insert(0, '" + real_path(KORCH_FLOPS_PYDIR) +
                      "'); sys.path.insert(0, '" + real_path(KORCH_WORKER_PYDIR) +
                      "'); sys.path.insert(0, '" + real_path(korch::evaluator::rules_python_dir()) +
                      "')")
                         .c_str());
  g_harness = PyImport_ImportModule("korch_worker");
  if (!g_harness) {
    PyErr_Print();
    return 2;
  }
  json hello;
  hello["ev"] = korch::enum_name(korch::evaluator::ZygoteEvent::hello);
  hello["versions"] = json::parse(call_harness("zygote_hello", "{}"));
  hello["pid"] = getpid();
  send_msg(k_control_fd, hello);

  sigset_t chld;
  sigemptyset(&chld);
  sigaddset(&chld, SIGCHLD);
  sigprocmask(SIG_BLOCK, &chld, nullptr);
  int sfd = signalfd(-1, &chld, SFD_CLOEXEC | SFD_NONBLOCK);
  if (sfd < 0) die("signalfd");
  std::map<pid_t, std::string> jobs;
  // Jobs whose first process exited while others of their group (runners
  // killed with the namespace, tearing down CUDA contexts) are still alive.
  // Their exit is reported only once the group is empty, so the next holder
  // of the GPU (an evaluation, a health check) never meets a dying job's
  // context (issue #32), or after k_drain_limit.
  struct Draining {
    std::string job;
    json ev;
    std::chrono::steady_clock::time_point since;
  };
  constexpr auto k_drain_limit = std::chrono::seconds(10);
  std::map<pid_t, Draining> draining;
  auto report_exit = [&](const json& ev, const std::string& job) {
    send_msg(k_control_fd, ev);
    korch::worker::remove_memory_cgroup(cgroup_name_for(getpid(), job));
  };

  for (;;) {
    pollfd fds[2] = {{k_control_fd, POLLIN, 0}, {sfd, POLLIN, 0}};
    if (poll(fds, 2, draining.empty() ? -1 : 20) < 0) {
      if (errno == EINTR) continue;
      die("poll");
    }
    for (auto it = draining.begin(); it != draining.end();) {
      const auto waited = std::chrono::steady_clock::now() - it->second.since;
      const bool alive =
          korch::worker::memory_cgroup_populated(cgroup_name_for(getpid(), it->second.job));
      if (alive && waited < k_drain_limit) {
        ++it;
        continue;
      }
      it->second.ev["drain_ms"] =
          std::chrono::duration_cast<std::chrono::milliseconds>(waited).count();
      if (alive) it->second.ev["drain_timed_out"] = true;
      report_exit(it->second.ev, it->second.job);
      it = draining.erase(it);
    }
    if (fds[1].revents & POLLIN) {
      signalfd_siginfo si;
      while (read(sfd, &si, sizeof si) == sizeof si) {}
      int status = 0;
      pid_t p;
      while ((p = waitpid(-1, &status, WNOHANG)) > 0) {
        auto it = jobs.find(p);
        if (it == jobs.end()) continue;
        json ev;
        ev["ev"] = korch::enum_name(korch::evaluator::ZygoteEvent::exit);
        ev["job"] = it->second;
        ev["pid"] = p;
        ev["code"] = WIFEXITED(status) ? WEXITSTATUS(status) : -1;
        ev["signal"] = WIFSIGNALED(status) ? WTERMSIG(status) : 0;
        // The job's first process was the cgroup's; its children die with it
        // (PID 1 of the job's namespace), but a CUDA process may take a while.
        if (korch::worker::memory_cgroup_populated(cgroup_name_for(getpid(), it->second)))
          draining[p] = {it->second, ev, std::chrono::steady_clock::now()};
        else
          report_exit(ev, it->second);
        jobs.erase(it);
      }
    }
    if (fds[0].revents & (POLLIN | POLLHUP | POLLERR)) {
      std::string text;
      int seed_fd = -1;
      if (!recv_msg(k_control_fd, text, seed_fd)) {
        // The daemon is gone: take every job down with us.
        for (auto& [pid, id] : jobs) kill(-pid, SIGKILL);
        return 0;
      }
      json msg = json::parse(text, nullptr, false);
      if (msg.is_discarded() || msg.value("op", "") != "spawn") {
        if (seed_fd >= 0) close(seed_fd);
        continue;
      }
      PyOS_BeforeFork();
      pid_t pid = fork();
      if (pid == 0) {
        PyOS_AfterFork_Child();
        job_process(msg, seed_fd);
      }
      PyOS_AfterFork_Parent();
      if (seed_fd >= 0) close(seed_fd);
      json ev;
      ev["ev"] = korch::enum_name(korch::evaluator::ZygoteEvent::started);
      ev["job"] = msg.value("job", "");
      ev["pid"] = pid;
      if (pid < 0)
        ev["error"] = std::strerror(errno);
      else
        jobs[pid] = msg.value("job", "");
      send_msg(k_control_fd, ev);
    }
  }
}

}  // namespace

int main(int argc, char** argv) {
  if (argc >= 2 && std::strcmp(argv[1], "--zygote") == 0) return zygote_main();
  if (argc >= 2 && std::strcmp(argv[1], "--version") == 0) {
    std::printf("korch-worker (%s, job protocol %d)\n",
                std::string(korch::evaluator::schema::k_evaluator_version).c_str(),
                korch::evaluator::schema::k_job_protocol);
    return 0;
  }
  std::fprintf(stderr, "usage: korch-worker --zygote   (started by the korch daemon)\n");
  return 2;
}
