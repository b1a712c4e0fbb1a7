#!/usr/bin/env python3
"""Does the CPU timing's stop hold its interval's coverage? (issue #49, stop 56)

Simulates equal-work timings on synthetic times and runs them through the
judge's own statistics (korch_judge.Judge._interval, _process_spread,
korch_timing.widen and runner_schedule): two runners a
side, each runner with its own process effect drawn from N(0, sigma_b) on
the log scale, every block with a level of its own (block_sd) and every call
with noise of its own (call_sd), 12 calls a block, the stop looked at every
10 blocks up to 200. The true speedup is 1.0; a rule that stopped when its
interval happened to be narrow would cover it less than 95% of the time.

Rules: boot (stop when the bootstrap is within +-1%: the CPU's stop before
stop 56, the GPU's now), reported (stop when the reported interval is
within +-2% at two looks in a row), reported1 (at the first such look),
none (always 200 blocks: the CPU's timing since stop 56).

  /usr/bin/python3 tools/bench/stop_coverage.py [--reps 60]
"""
import argparse
import math
import os
import random
import sys

HERE = os.path.dirname(os.path.abspath(__file__))
sys.path.insert(0, os.path.join(HERE, "..", "..", "evaluator", "worker", "py"))

import korch_judge as kj  # noqa: E402
from korch_timing import runner_schedule, widen  # noqa: E402


def judge():
    job = {"device": "cpu", "atol": 1e-4, "rtol": 1e-4, "low_precision_tol": 1e-2, "allow_tf32": False}
    j = kj.Judge({"protections": []}, job)
    j.seed = 7
    return j


def one(j, seed, sigma_b, rule, block_sd, call_sd, cap=200):
    rng = random.Random(seed)
    effect = {(side, r): rng.gauss(0, sigma_b) for side in ("ref", "cand") for r in range(2)}
    samples, ref_of, cand_of = {"ref": [], "cand": []}, [], []
    b, narrow_looks = 0, 0
    while True:
        ri, ci = runner_schedule(b, 2, 2, True)
        for side, r in (("ref", ri), ("cand", ci)):
            level = 400_000 * math.exp(effect[(side, r)] + rng.gauss(0, block_sd))
            samples[side].append([int(level * math.exp(rng.gauss(0, call_sd))) for _ in range(12)])
        ref_of.append(ri)
        cand_of.append(ci)
        b += 1
        if b < 10 or b % 10:
            continue
        if b >= cap:
            break
        if rule == "boot":
            lo, hi, p = j._interval(samples, 200)
            if (hi - lo) / 2 / p <= 0.01:
                break
        elif rule.startswith("reported"):
            lo, hi, p = reported(j, samples, ref_of, cand_of, 200)
            narrow_looks = narrow_looks + 1 if max(hi / p - 1, 1 - lo / p) <= 0.02 else 0
            if narrow_looks >= (1 if rule == "reported1" else 2):
                break
    lo, hi, p = reported(j, samples, ref_of, cand_of, 300)
    return lo <= 1.0 <= hi, max(hi / p - 1, 1 - lo / p), b


def reported(j, samples, ref_of, cand_of, n_boot):
    """(lo, hi, speedup): the interval the verdict reports, as time_both
    makes it (the block bootstrap widened by the runners' spread)."""
    lo, hi, p = j._interval(samples, n_boot)
    ps = j._process_spread(samples, ref_of, 2, cand_of, 2)
    lo, hi, _ = widen(p, lo, hi, ps["rel_sd"], ps["dof"])
    return lo, hi, p


def main():
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("--reps", type=int, default=60)
    ap.add_argument("--sigma-b", default="0,0.01,0.02")
    ap.add_argument("--block-sd", type=float, default=0.05)
    ap.add_argument("--call-sd", type=float, default=0.10)
    ap.add_argument("--rules", default="boot,reported1,reported,none")
    a = ap.parse_args()
    j = judge()
    for sigma_b in map(float, a.sigma_b.split(",")):
        for rule in a.rules.split(","):
            res = [one(j, 1000 + i, sigma_b, rule, a.block_sd, a.call_sd) for i in range(a.reps)]
            halves = sorted(r[1] for r in res)
            print("sigma_b %.2f  %-8s  coverage %.2f  half-width median %.1f%%, 90th %.1f%%  "
                  "blocks %.0f" % (sigma_b, rule, sum(r[0] for r in res) / a.reps,
                                   100 * halves[a.reps // 2], 100 * halves[int(a.reps * 0.9)],
                                   sum(r[2] for r in res) / a.reps), flush=True)


if __name__ == "__main__":
    sys.exit(main())
