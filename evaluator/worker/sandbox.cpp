#include "evaluator/worker/sandbox.hpp"

#include <errno.h>
#include <fcntl.h>
#include <grp.h>
#include <linux/sched.h>
#include <sched.h>
#include <seccomp.h>
#include <signal.h>
#include <sys/mount.h>
#include <sys/prctl.h>
#include <sys/resource.h>
#include <sys/socket.h>
#include <sys/stat.h>
#include <unistd.h>
#include <cstring>

namespace korch::worker {
namespace {

constexpr const char* k_tmpfs_opts = "mode=1777,size=1g";

bool set_deathsig() {
  pid_t parent = getppid();
  if (prctl(PR_SET_PDEATHSIG, SIGKILL) != 0) return false;
  // The parent may have died between fork and prctl.
  if (getppid() != parent) _exit(137);
  return true;
}

// Deny-list filter on top of a default-allow policy: torch and CPython need
// clone (threads), mmap, futex, etc., so an allow-list would be brittle
// across torch versions. The namespaces and the uid do the confining; this
// is the backstop against raw system calls that could reach other processes
// or the kernel's attack surface.
bool load_seccomp(SeccompProfile profile) {
  scmp_filter_ctx ctx = seccomp_init(SCMP_ACT_ALLOW);
  if (!ctx) return false;
  bool ok = true;
  auto deny = [&](int nr, int err = EPERM) {
    if (nr < 0) return;  // not on this architecture
    ok = ok && seccomp_rule_add(ctx, SCMP_ACT_ERRNO(err), nr, 0) == 0;
  };
  for (const char* name : {"ptrace",
                           "process_vm_readv",
                           "process_vm_writev",
                           "mount",
                           "umount2",
                           "unshare",
                           "setns",
                           "kexec_load",
                           "kexec_file_load",
                           "bpf",
                           "perf_event_open",
                           "init_module",
                           "finit_module",
                           "delete_module",
                           "reboot",
                           "swapon",
                           "swapoff",
                           "pivot_root",
                           "chroot",
                           "keyctl",
                           "add_key",
                           "request_key",
                           "userfaultfd",
                           "io_uring_setup",
                           "io_uring_enter",
                           "io_uring_register",
                           "open_by_handle_at",
                           "name_to_handle_at",
                           "fanotify_init",
                           "acct",
                           "quotactl",
                           "syslog",
                           "settimeofday",
                           "clock_settime",
                           "adjtimex",
                           "move_mount",
                           "open_tree",
                           "fsopen",
                           "fsmount",
                           "fsconfig",
                           "fspick",
                           "pidfd_getfd",
                           "kcmp",
                           "lookup_dcookie",
                           "vhangup",
                           "iopl",
                           "ioperm",
                           "setuid",
                           "setgid",
                           "setreuid",
                           "setregid",
                           "setresuid",
                           "setresgid",
                           "setgroups",
                           "setfsuid",
                           "setfsgid",
                           "capset",
                           "personality"}) {
    deny(seccomp_syscall_resolve_name(name));
  }
  if (profile == SeccompProfile::strict) {
    deny(seccomp_syscall_resolve_name("execve"));
    deny(seccomp_syscall_resolve_name("execveat"));
  }
  // clone3 passes its flags in memory a filter cannot read: make glibc fall
  // back to clone, whose namespace flags we can check.
  deny(seccomp_syscall_resolve_name("clone3"), ENOSYS);
  for (unsigned long flag : {CLONE_NEWUSER, CLONE_NEWNS, CLONE_NEWPID, CLONE_NEWNET, CLONE_NEWIPC,
                             CLONE_NEWUTS, CLONE_NEWCGROUP}) {
    ok = ok && seccomp_rule_add(ctx, SCMP_ACT_ERRNO(EPERM), SCMP_SYS(clone), 1,
                                SCMP_A0(SCMP_CMP_MASKED_EQ, flag, flag)) == 0;
  }
  // Only AF_UNIX sockets (no network even if a namespace step failed).
  ok = ok && seccomp_rule_add(ctx, SCMP_ACT_ERRNO(EPERM), SCMP_SYS(socket), 1,
                              SCMP_A0(SCMP_CMP_NE, AF_UNIX)) == 0;
  ok = ok && seccomp_rule_add(ctx, SCMP_ACT_ERRNO(EPERM), SCMP_SYS(socketpair), 1,
                              SCMP_A0(SCMP_CMP_NE, AF_UNIX)) == 0;
  ok = ok && seccomp_load(ctx) == 0;
  seccomp_release(ctx);
  return ok;
}

}  // namespace

std::vector<std::string> Protections::names() const {
  std::vector<std::string> out;
  out.reserve(m_list.size());
  for (auto p : m_list) out.emplace_back(enum_name(p));
  return out;
}

bool enter_namespaces(Protections& p) {
  setsid();  // own process group: the daemon kills -pgid on timeout
  if (set_deathsig()) p.add(Protection::pdeathsig);
  if (unshare(CLONE_NEWNS) == 0) p.add(Protection::mount_ns);
  if (unshare(CLONE_NEWNET) == 0) p.add(Protection::net_ns);
  if (unshare(CLONE_NEWIPC) == 0) p.add(Protection::ipc_ns);
  if (unshare(CLONE_NEWPID) == 0) {
    p.add(Protection::pid_ns);
    return true;
  }
  return false;
}

namespace {

constexpr const char* k_masked_roots[] = {"/tmp", "/var/tmp", "/dev/shm"};

bool under_masked_root(const std::string& path) {
  for (const char* root : k_masked_roots) {
    std::string r = root;
    if (path == r || path.rfind(r + "/", 0) == 0) return true;
  }
  return false;
}

void mkdir_p(const std::string& path) {
  for (std::size_t pos = 1; pos <= path.size(); ++pos) {
    if (pos == path.size() || path[pos] == '/') mkdir(path.substr(0, pos).c_str(), 0755);
  }
}

}  // namespace

void private_mounts(Protections& p, const std::vector<std::string>& keep) {
  if (!p.has(Protection::mount_ns)) return;
  if (mount(nullptr, "/", nullptr, MS_REC | MS_PRIVATE, nullptr) != 0) return;
  if (p.has(Protection::pid_ns) && getpid() == 1 &&
      mount("proc", "/proc", "proc", MS_NOSUID | MS_NODEV | MS_NOEXEC, "hidepid=0") == 0) {
    p.add(Protection::private_proc);
  }
  // Hold the kept directories open before they disappear under the tmpfs.
  std::vector<std::pair<std::string, int>> kept;
  for (auto& path : keep) {
    if (path.empty() || !under_masked_root(path)) continue;
    int fd = open(path.c_str(), O_PATH | O_DIRECTORY | O_CLOEXEC);
    if (fd >= 0) kept.emplace_back(path, fd);
  }
  bool tmp_ok = mount("tmpfs", "/tmp", "tmpfs", MS_NOSUID | MS_NODEV, k_tmpfs_opts) == 0;
  // Other world-writable places on the host.
  struct stat st {};
  if (stat("/var/tmp", &st) == 0)
    tmp_ok = tmp_ok && mount("tmpfs", "/var/tmp", "tmpfs", MS_NOSUID | MS_NODEV, k_tmpfs_opts) == 0;
  if (stat("/dev/shm", &st) == 0)
    tmp_ok = tmp_ok && mount("tmpfs", "/dev/shm", "tmpfs", MS_NOSUID | MS_NODEV, k_tmpfs_opts) == 0;
  for (auto& [path, fd] : kept) {
    mkdir_p(path);
    std::string source = "/proc/self/fd/" + std::to_string(fd);
    tmp_ok = tmp_ok && mount(source.c_str(), path.c_str(), nullptr, MS_BIND | MS_REC, nullptr) == 0;
    close(fd);
  }
  if (tmp_ok) p.add(Protection::private_tmp);
}

void drop_privileges(Protections& p, std::uint32_t uid, std::uint64_t as_bytes,
                     SeccompProfile profile) {
  if (set_deathsig()) p.add(Protection::pdeathsig);
  rlimit core{0, 0};
  if (setrlimit(RLIMIT_CORE, &core) == 0) p.add(Protection::no_core);
  if (as_bytes > 0) {
    rlimit as{as_bytes, as_bytes};
    if (setrlimit(RLIMIT_AS, &as) == 0) p.add(Protection::rlimit_as);
  }
  bool uid_ok = setgroups(0, nullptr) == 0 && setresgid(uid, uid, uid) == 0 &&
                setresuid(uid, uid, uid) == 0 && getuid() == uid && geteuid() == uid;
  if (uid_ok) p.add(uid == 65534 ? Protection::uid_nobody : Protection::uid_unprivileged);
  if (prctl(PR_SET_NO_NEW_PRIVS, 1, 0, 0, 0) == 0) p.add(Protection::no_new_privs);
  if (load_seccomp(profile)) p.add(Protection::seccomp);
}

namespace {

constexpr const char* k_cgroup_root = "/sys/fs/cgroup";
constexpr const char* k_cgroup_parent = "/sys/fs/cgroup/korch";

bool write_text(const std::string& path, const std::string& text) {
  int fd = open(path.c_str(), O_WRONLY | O_CLOEXEC);
  if (fd < 0) return false;
  bool ok = write(fd, text.data(), text.size()) == static_cast<ssize_t>(text.size());
  close(fd);
  return ok;
}

}  // namespace

bool join_memory_cgroup(Protections& p, const std::string& name, std::uint64_t bytes) {
  if (bytes == 0 || name.empty() || name.find('/') != std::string::npos) return false;
  // cgroup v2 only: the root lists its controllers here.
  if (access((std::string(k_cgroup_root) + "/cgroup.controllers").c_str(), R_OK) != 0) return false;
  mkdir(k_cgroup_parent, 0755);
  // "No internal processes": the parent holds no process, only job groups.
  (void)write_text(std::string(k_cgroup_root) + "/cgroup.subtree_control", "+memory");
  (void)write_text(std::string(k_cgroup_parent) + "/cgroup.subtree_control", "+memory");
  const std::string dir = std::string(k_cgroup_parent) + "/" + name;
  if (mkdir(dir.c_str(), 0755) != 0 && errno != EEXIST) return false;
  if (!write_text(dir + "/memory.max", std::to_string(bytes))) {
    rmdir(dir.c_str());
    return false;
  }
  (void)write_text(dir + "/memory.swap.max", "0");
  if (!write_text(dir + "/cgroup.procs", "0")) {
    rmdir(dir.c_str());
    return false;
  }
  p.add(Protection::cgroup_memory);
  return true;
}

bool memory_cgroup_populated(const std::string& name) {
  if (name.empty() || name.find('/') != std::string::npos) return false;
  const std::string path = std::string(k_cgroup_parent) + "/" + name + "/cgroup.events";
  int fd = open(path.c_str(), O_RDONLY | O_CLOEXEC);
  if (fd < 0) return false;
  char buf[256];
  const ssize_t n = read(fd, buf, sizeof buf - 1);
  close(fd);
  if (n <= 0) return false;
  buf[n] = 0;
  return std::strstr(buf, "populated 1") != nullptr;
}

void remove_memory_cgroup(const std::string& name) {
  if (name.empty() || name.find('/') != std::string::npos) return;
  rmdir((std::string(k_cgroup_parent) + "/" + name).c_str());
}

}  // namespace korch::worker
