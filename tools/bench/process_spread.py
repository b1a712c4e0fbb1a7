#!/usr/bin/env python3
"""Where does the spread between two processes that time the same op come
from? (issue #49: the CPU judge's process term, tools/bench/README.md.)

Forks P processes from one parent that has imported torch (as the worker's
zygote does). They take turns, block by block, timing torch.clamp_min(x, 0) (a ReLU with an out= form) on
ReLU-task-sized inputs: one untimed call, then CALLS timed calls, a fresh
output each call. Each process's median is compared with the spread its own
blocks allow: the sd of the process medians against the sd of each process's
split-half medians (odd vs even blocks). A ratio well over 1 is a real
process effect.

Variants, each over R rounds of fresh processes:
  private  each process makes its inputs after the fork (its own pages)
  shared   the parent makes the inputs before the fork: every process reads
           the same physical pages
  shared+out  as shared, and every call writes into one output the parent
           made in shared memory (clamp_min(x, 0, out=o)): the same pages written

  /usr/bin/python3 tools/bench/process_spread.py [--size 1024] [--procs 4] [--rounds 4] [--blocks 60]
"""
import argparse
import math
import os
import statistics as st
import sys
import time

import torch


def child(conn_r, conn_w, variant, size, sets, calls, shared_in, shared_out):
    torch.set_num_threads(1)
    if variant == "private":
        g = torch.Generator().manual_seed(1)
        xs = [torch.randn(size, size, generator=g) for _ in range(sets)]
    else:
        xs = shared_in
    k = 0
    while True:
        msg = os.read(conn_r, 1)
        if not msg or msg == b"q":
            return
        ts = []
        for c in range(calls + 1):
            x = xs[k % sets]
            k += 1
            t0 = time.perf_counter_ns()
            if variant == "shared+out":
                torch.clamp_min(x, 0, out=shared_out)
            else:
                torch.clamp_min(x, 0)
            t = time.perf_counter_ns() - t0
            if c:
                ts.append(t)
        os.write(conn_w, (",".join(map(str, ts)) + "\n").encode())


def one_round(variant, size, procs, blocks, calls, sets):
    torch.set_num_threads(1)
    shared_in = shared_out = None
    if variant != "private":
        g = torch.Generator().manual_seed(1)
        shared_in = [torch.randn(size, size, generator=g).share_memory_() for _ in range(sets)]
        shared_out = torch.empty(size, size).share_memory_()
    kids = []
    for _ in range(procs):
        r1, w1 = os.pipe()
        r2, w2 = os.pipe()
        pid = os.fork()
        if pid == 0:
            os.close(w1)
            os.close(r2)
            try:
                child(r1, w2, variant, size, sets, calls, shared_in, shared_out)
            finally:
                os._exit(0)
        os.close(r1)
        os.close(w2)
        kids.append((pid, w1, os.fdopen(r2)))
    per = [[] for _ in range(procs)]  # per process: list of block medians
    for b in range(blocks * procs):
        i = b % procs
        _, w, r = kids[i]
        os.write(w, b"g")
        ts = list(map(int, r.readline().split(",")))
        per[i].append(st.median(ts))
    for pid, w, r in kids:
        os.write(w, b"q")
        os.waitpid(pid, 0)
    meds = [st.median(p) for p in per]
    halves = [math.log(st.median(p[0::2]) / st.median(p[1::2])) for p in per]
    logs = [math.log(m) for m in meds]
    between = st.stdev(logs)
    # a half's median has ~2x the variance of the whole's: sd(whole) ~ sd(diff of halves) / 2
    within = math.sqrt(sum(h * h for h in halves) / len(halves)) / 2
    return meds, between, within


def main():
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("--size", type=int, default=1024)
    ap.add_argument("--procs", type=int, default=4)
    ap.add_argument("--rounds", type=int, default=4)
    ap.add_argument("--blocks", type=int, default=60, help="blocks per process")
    ap.add_argument("--calls", type=int, default=12)
    ap.add_argument("--sets", type=int, default=4)
    ap.add_argument("--variants", default="private,shared,shared+out")
    a = ap.parse_args()
    print("size %dx%d, %d processes, %d blocks of %d calls each, %d input sets" %
          (a.size, a.size, a.procs, a.blocks, a.calls, a.sets))
    for r in range(a.rounds):
        for v in a.variants.split(","):
            meds, between, within = one_round(v, a.size, a.procs, a.blocks, a.calls, a.sets)
            print("round %d %-11s medians(us) %s  between-process sd %.2f%%  within %.2f%%  ratio %.1f" % (
                r, v, " ".join("%.1f" % (m / 1e3) for m in meds), 100 * between, 100 * within,
                between / max(within, 1e-9)), flush=True)


if __name__ == "__main__":
    sys.exit(main())
