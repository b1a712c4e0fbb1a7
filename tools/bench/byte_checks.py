#!/usr/bin/env python3
"""The byte work around one timed CPU call, each way side by side (stop 58):
the judge's check that two tensors hold the same bytes (torch.equal over
int64 words, what korch_compare.bitwise_equal did before, against libc
memcmp, korch_chunks.same_bytes) and the runner's copy of an output into its
region (torch copy_, what korch_transport.write did before, against memmove).
Sizes: the equal-work tasks' inputs, 64x256 (64 KB), 1024^2 (4 MB) and 4096^2
(64 MB). Times are the median of --reps, in ms; run it on an idle machine:

  /usr/bin/python3 tools/bench/byte_checks.py
"""
import argparse
import ctypes
import os
import sys
import time

import torch

HERE = os.path.dirname(os.path.abspath(__file__))
sys.path.insert(0, os.path.join(HERE, "..", "..", "evaluator", "worker", "py"))

from korch_chunks import equal, same_bytes  # noqa: E402


def median_ms(fn, reps):
    fn()
    ts = []
    for _ in range(reps):
        t0 = time.perf_counter()
        fn()
        ts.append(time.perf_counter() - t0)
    ts.sort()
    return ts[len(ts) // 2] * 1e3


def main():
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("--reps", type=int, default=15)
    args = ap.parse_args()
    torch.set_num_threads(1)
    print("%-10s %12s %12s %12s %12s" % ("size", "equal int64", "memcmp", "copy_", "memmove"))
    for rows, cols in ((64, 256), (1024, 1024), (4096, 4096)):
        a = torch.randn(rows, cols)
        b = a.clone()
        dst = torch.empty_like(a)
        n = a.numel() * a.element_size()
        eq = median_ms(lambda: equal(a.view(torch.int64), b.view(torch.int64)), args.reps)
        mc = median_ms(lambda: same_bytes(a, b), args.reps)
        cp = median_ms(lambda: dst.copy_(a), args.reps)
        mm = median_ms(lambda: ctypes.memmove(dst.data_ptr(), a.data_ptr(), n), args.reps)
        print("%-10s %12.3f %12.3f %12.3f %12.3f" % ("%dx%d" % (rows, cols), eq, mc, cp, mm), flush=True)


if __name__ == "__main__":
    main()
