#pragma once
// Sandbox steps for a worker process (DESIGN §5 "Sandbox for every worker").
// Every step reports whether it took effect; the names end up verbatim in
// Report::protections, so a step that failed is simply absent.
#include <cstdint>
#include <string>
#include <vector>

namespace korch::worker {

// Protections that actually took effect, in the order applied.
using Protections = std::vector<std::string>;

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
// job forks inherits it. Pushes "cgroup_memory" when that took effect.
bool join_memory_cgroup(Protections& p, const std::string& name, std::uint64_t bytes);
// Removes the job's cgroup after its processes are gone (the zygote calls it).
void remove_memory_cgroup(const std::string& name);
// Whether `p` lists the cgroup step.
bool has_cgroup(const Protections& p);

}  // namespace korch::worker
