#pragma once
// Sandbox steps for a worker process (DESIGN §5 "Sandbox for every worker").
// Every step reports whether it took effect; their names end up verbatim in
// Report::protections, so a step that failed is simply absent.
#include <algorithm>
#include <cstdint>
#include <string>
#include <string_view>
#include <utility>
#include <vector>

#include "util/enum_names.hpp"

namespace korch::worker {

enum class Protection {
  pdeathsig,  // killed with its parent
  mount_ns,   // namespaces: mount, network, IPC, PID
  net_ns,
  ipc_ns,
  pid_ns,
  private_proc,      // a /proc of its own PID namespace
  private_tmp,       // private tmpfs on /tmp, /var/tmp, /dev/shm
  no_core,           // RLIMIT_CORE = 0
  rlimit_as,         // address-space limit
  uid_nobody,        // the candidate's uid
  uid_unprivileged,  // another unprivileged uid (judge, reference, compiler)
  no_new_privs,
  seccomp,
  cgroup_memory,      // a cgroup v2 memory limit for the whole job
  env_whitelist,      // the environment holds only whitelisted variables
  judge_nondumpable,  // the judge cannot be ptraced or read through /proc
  cpu_affinity,       // the job runs on its reserved cores
};

// Protections that actually took effect, in the order applied.
class Protections {
 public:
  void add(Protection p) {
    if (!has(p)) m_list.push_back(p);
  }
  bool has(Protection p) const {
    return std::find(m_list.begin(), m_list.end(), p) != m_list.end();
  }
  // As reported (Report::protections).
  std::vector<std::string> names() const;

 private:
  std::vector<Protection> m_list;
};

// Seccomp profiles. `strict` denies execve as well (rule, reference and
// candidate runners); `compile` allows it (the compiler driver execs gcc).
enum class SeccompProfile { strict, compile };

// Run in the first child after the zygote's fork (still root, old PID ns):
// new session, PR_SET_PDEATHSIG, and new mount/net/IPC/PID namespaces.
// Returns whether CLONE_NEWPID took effect (the caller must fork again).
bool enter_namespaces(Protections& p);

// Run in PID 1 of the new namespace: private mount propagation, a private
// /proc, and private tmpfs on /tmp, /var/tmp and /dev/shm. Directories in
// `keep` that lie under one of those (a job dir or compile cache in /tmp, a
// checkout in /tmp) are bind-mounted back at the same path, so the job still
// sees them and nothing else of the host's temporary space.
void private_mounts(Protections& p, const std::vector<std::string>& keep);

// Drops to `uid` (gid = uid, no supplementary groups), sets NO_NEW_PRIVS,
// RLIMIT_CORE=0, RLIMIT_AS (when as_bytes > 0), PR_SET_PDEATHSIG and loads
// the seccomp filter. Irreversible.
void drop_privileges(Protections& p, std::uint32_t uid, std::uint64_t as_bytes,
                     SeccompProfile profile);

// cgroup v2 memory limit for one job (DESIGN §5: CUDA reserves huge address
// ranges, so RLIMIT_AS cannot confine a GPU process). Run as root in the
// job's first process: creates /sys/fs/cgroup/korch/<name> with memory.max =
// `bytes` (swap off) and moves the calling process there; every process the
// job forks inherits it. Adds cgroup_memory when that took effect.
bool join_memory_cgroup(Protections& p, const std::string& name, std::uint64_t bytes);
// Removes the job's cgroup after its processes are gone (the zygote calls it).
void remove_memory_cgroup(const std::string& name);
// True while a process of that job group is still alive (cgroup.events says
// "populated 1"); false without such a group.
bool memory_cgroup_populated(const std::string& name);

}  // namespace korch::worker

namespace korch {
KORCH_ENUM_NAMES(worker::Protection, pdeathsig, mount_ns, net_ns, ipc_ns, pid_ns, private_proc,
                 private_tmp, no_core, rlimit_as, uid_nobody, uid_unprivileged, no_new_privs,
                 seccomp, cgroup_memory, env_whitelist, judge_nondumpable, cpu_affinity);
}  // namespace korch
