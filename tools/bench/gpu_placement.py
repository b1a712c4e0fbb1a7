#!/usr/bin/env python3
"""How much of a short GPU kernel's time is where its memory lies (issue #7).

korch's GPU timing gives each side one runner process; the equal-work
candidate (tests/evaluator/corpus/equal_work/relu_at.py) runs the very same
ATen kernel as the reference, yet separate evaluations read it 0.94-1.01 at
64x256 (3.8 us) and 0.988-1.002 at 4096^2 (35 us) with intervals that often
exclude 1.0. This program measures, with korch's own GPU protocol (L2 flushed
by writing 256 MB, the GPU held by torch.cuda._sleep while the call is
queued, CUDA events around the call), two things no resampling inside one
process can see:

  --mode placement   one process: torch.clamp_min(x, 0, out=y) with x and y at
                     P different device addresses, rounds interleaved; the
                     spread of the per-placement medians
  --mode processes   P fresh processes, each timing torch.relu on its own
                     freshly allocated input, as a runner does; the spread of
                     the per-process medians

    python3 tools/bench/gpu_placement.py --mode processes --shape 64,256 --procs 8
    python3 tools/bench/gpu_placement.py --mode placement --shape 4096,4096 --places 8

Run on the GPU machine (scripts/gpu/suite.sh placement).
"""
import argparse
import json
import os
import statistics
import subprocess
import sys

import torch

sys.path.insert(0, os.path.join(os.path.dirname(os.path.abspath(__file__)), "..", "..", "evaluator", "worker", "py"))
import korch_runner  # noqa: E402  (the worker's runner: its GPU sleep calibration)


def sleep_cycles(us):
    """Cycles of torch.cuda._sleep that take ~us on this GPU (the runner's own calibration)."""
    return max(1, korch_runner.sleep_cycles(us, torch.cuda._sleep, torch.cuda.Event))


class Timer:
    def __init__(self, pre_us=200):
        self.flush = torch.empty(256 << 20, dtype=torch.uint8, device="cuda")
        self.cycles = sleep_cycles(pre_us)

    def __call__(self, fn):
        self.flush.zero_()
        s, e = torch.cuda.Event(enable_timing=True), torch.cuda.Event(enable_timing=True)
        torch.cuda.synchronize()
        torch.cuda._sleep(self.cycles)
        s.record()
        out = fn()
        e.record()
        e.synchronize()
        del out
        return s.elapsed_time(e) * 1e6  # ns


def summary(name, meds):
    m = statistics.median(meds)
    rel = [v / m for v in meds]
    print("%s: %d medians %s ns; max/min %.4f, sd %.2f%%"
          % (name, len(meds), [round(v) for v in meds], max(meds) / min(meds),
             100 * statistics.pstdev(rel)))


def one_process(shape, calls):
    torch.manual_seed(0)
    x = torch.randn(*shape, device="cuda")
    timer = Timer()
    for _ in range(20):
        timer(lambda: torch.relu(x))
    return statistics.median(timer(lambda: torch.relu(x)) for _ in range(calls))


def main():
    ap = argparse.ArgumentParser()
    ap.add_argument("--mode", choices=["placement", "processes", "child"], required=True)
    ap.add_argument("--shape", default="64,256")
    ap.add_argument("--places", type=int, default=8)
    ap.add_argument("--procs", type=int, default=8)
    ap.add_argument("--calls", type=int, default=300)
    ap.add_argument("--rounds", type=int, default=30)
    a = ap.parse_args()
    shape = [int(s) for s in a.shape.split(",")]
    n = 1
    for d in shape:
        n *= d
    if a.mode == "child":
        print(json.dumps(one_process(shape, a.calls)))
        return
    print("torch %s, %s, shape %s" % (torch.__version__, torch.cuda.get_device_name(), shape))
    if a.mode == "processes":
        meds = []
        for _ in range(a.procs):
            out = subprocess.run([sys.executable, __file__, "--mode", "child", "--shape", a.shape,
                                  "--calls", str(a.calls)], check=True, capture_output=True, text=True)
            meds.append(float(out.stdout.strip().splitlines()[-1]))
        summary("torch.relu, one median per process (%d calls each)" % a.calls, meds)
        return
    # placement: P (x, y) pairs at different offsets of one pool, each pair
    # 2 MB + 4 KB * i apart from the last, timed in interleaved rounds.
    torch.manual_seed(0)
    src = torch.randn(n, device="cuda")
    stride = ((n * 4 + (2 << 20)) // 4) + 1024 * 7
    pool = torch.empty(2 * a.places * stride + n, device="cuda")
    pairs = []
    for i in range(a.places):
        x = pool[2 * i * stride: 2 * i * stride + n].view(*shape)
        y = pool[(2 * i + 1) * stride: (2 * i + 1) * stride + n].view(*shape)
        x.copy_(src.view(*shape))
        pairs.append((x, y))
    timer = Timer()
    per = [[] for _ in pairs]
    for r in range(a.rounds + 2):
        for i, (x, y) in enumerate(pairs):
            for _ in range(10):
                t = timer(lambda: torch.clamp_min(x, 0.0, out=y))
                if r >= 2:
                    per[i].append(t)
    summary("clamp_min(out=), one median per placement (%d calls each)" % (10 * a.rounds),
            [statistics.median(p) for p in per])
    # the same placements' medians from the first and second half of the rounds
    half = 10 * a.rounds // 2
    a1 = [statistics.median(p[:half]) for p in per]
    a2 = [statistics.median(p[half:]) for p in per]
    print("first half vs second half, per placement: %s"
          % [round(u / v, 4) for u, v in zip(a1, a2)])


if __name__ == "__main__":
    main()
