#!/usr/bin/env python3
"""What the allocator costs a model's call on the CPU (issue #7).

Times torch.relu on N x N float32 in fresh processes, alternating three
allocators: glibc's default (a block over its mmap threshold, at most 32 MB,
is mapped on each allocation and unmapped when freed); korch_runner.
keep_freed_memory alone (no mmap, no trimming); and what every CPU timing
process of korch runs under, that plus glibc's tcache off (the CPU
evaluator's worker zygote starts with GLIBC_TUNABLES=glibc.malloc.tcache_count=0):
freed memory stays in the heap, as freed GPU memory stays in torch's caching
allocator. Prints per size the median time per call and the minor page
faults per call of each.

    python3 tools/bench/heap_reuse.py --size 256 --size 1024 --size 4096

With --groups G, under korch's allocator only: G groups of 20 calls at each
size, the output's heap block kept throughout or given back between groups
(malloc_trim(0), then one untimed call that faults a new block in); prints
each group's median and the spread, to tell a block's placement from the
machine's drift over seconds.
"""
import argparse
import os
import statistics
import subprocess
import sys

HERE = os.path.dirname(os.path.abspath(__file__))
WORKER_PY = os.path.join(HERE, "..", "..", "evaluator", "worker", "py")

# What the CPU evaluator's worker zygote starts with (make_protected_evaluator).
KORCH_TUNABLES = "glibc.malloc.tcache_count=0"

# Both children: argv = [N, allocator ("default" or not), worker py dir, ...];
# x is N x N, under keep_freed_memory unless the allocator is "default".
PROLOGUE = r"""
import statistics, sys, time
sys.path.insert(0, sys.argv[3])
import torch
if sys.argv[2] != "default":
    from korch_runner import keep_freed_memory
    assert keep_freed_memory(), "mallopt failed"
torch.set_num_threads(1)
n = int(sys.argv[1])
x = torch.randn(n, n)
"""

CHILD = PROLOGUE + r"""
import resource
def one():
    f0 = resource.getrusage(resource.RUSAGE_SELF).ru_minflt
    t0 = time.perf_counter_ns()
    y = torch.relu(x)
    dt = time.perf_counter_ns() - t0
    del y
    return dt, resource.getrusage(resource.RUSAGE_SELF).ru_minflt - f0
for _ in range(3):
    one()
calls = max(10, min(200, int(4e9 // max(1, n * n * 4 * 20))))
res = [one() for _ in range(calls)]
print(statistics.median(r[0] for r in res), statistics.median(r[1] for r in res))
"""


MODES = {"default": "glibc default", "heap": "keep_freed_memory",
         "korch": "+ tcache off (korch)"}


GROUPS = PROLOGUE + r"""
import ctypes
libc = ctypes.CDLL(None)
meds = []
for g in range(int(sys.argv[4])):
    if sys.argv[5] == "replace":
        libc.malloc_trim(0)
    torch.relu(x)
    ts = []
    for _ in range(20):
        t0 = time.perf_counter_ns()
        y = torch.relu(x)
        ts.append(time.perf_counter_ns() - t0)
        del y
    meds.append(statistics.median(ts) / 1e6)
print(" ".join("%.3f" % m for m in meds), "spread %.1f%%" % (100 * (max(meds) / min(meds) - 1)))
"""


def groups(n, g):
    env = dict(os.environ, GLIBC_TUNABLES=KORCH_TUNABLES)
    for how in ("keep", "replace", "keep", "replace"):
        r = subprocess.run([sys.executable, "-c", GROUPS, str(n), "korch", WORKER_PY, str(g), how],
                           check=True, capture_output=True, text=True, env=env)
        print("%5d x %-5d %-7s group medians (ms): %s" % (n, n, how, r.stdout.strip()))


def main():
    ap = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    ap.add_argument("--size", type=int, action="append", required=True)
    ap.add_argument("--repeat", type=int, default=3)
    ap.add_argument("--groups", type=int, default=0)
    a = ap.parse_args()
    if a.groups:
        for n in a.size:
            groups(n, a.groups)
        return 0
    print("torch.relu on N x N float32, one thread; median per call (page faults per call)")
    for n in a.size:
        out = {m: [] for m in MODES}
        for rep in range(a.repeat):
            for mode in (list(MODES) if rep % 2 == 0 else list(MODES)[::-1]):
                env = dict(os.environ)
                env.pop("GLIBC_TUNABLES", None)
                if mode == "korch":
                    env["GLIBC_TUNABLES"] = KORCH_TUNABLES
                r = subprocess.run([sys.executable, "-c", CHILD, str(n), mode, WORKER_PY],
                                   check=True, capture_output=True, text=True, env=env)
                ns, faults = r.stdout.split()
                out[mode].append((float(ns), float(faults)))
        line = ["%5d x %-5d" % (n, n)]
        for mode in MODES:
            ts = [t for t, _ in out[mode]]
            line.append("%s %.3f ms (%d faults)" % (
                MODES[mode], statistics.median(ts) / 1e6, statistics.median(f for _, f in out[mode])))
        print("  ".join(line))
    return 0


if __name__ == "__main__":
    sys.exit(main())
