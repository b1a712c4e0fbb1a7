#!/usr/bin/env python3
"""Is the spread between a side's CPU runners more than their medians' own
sampling? (issue #49, stop 56)

Reads the report lines of `korch-bench-eval --print` (one JSON object per
line, as equal_work_cpu.py and the A/B loops of tools/bench/README.md keep
them) and, for every evaluation of lone calls with two runners a side,
prints per side:
  between  |log(median runner 0 / median runner 1)| / sqrt 2: one draw of a
           process's sd (sampling and process effect together)
  within   the sampling sd of one runner's median, from its odd against its
           even blocks (|log ratio of the halves' medians| / 2, pooled over
           the side's runners)
A between consistently above within is a process effect; equal sizes are
sampling alone. Each line also gives the per-call spread within a block
(`block`: the median over the reference's blocks of a block's sd / mean),
the figure tools/bench/README.md's stop-56 A/B tables compare. Which runner timed which block is recomputed with
korch_timing.runner_schedule.

  build/tools/bench/korch-bench-eval ... --print | grep '^{' > runs.jsonl
  /usr/bin/python3 tools/bench/runner_split.py runs.jsonl
"""
import json
import math
import os
import statistics as st
import sys

HERE = os.path.dirname(os.path.abspath(__file__))
sys.path.insert(0, os.path.join(HERE, "..", "..", "evaluator", "worker", "py"))

from korch_timing import runner_schedule  # noqa: E402


def split(t):
    bc, nb = t["block_calls"], t["blocks"]
    out = {}
    for side, key, which in (("ref", "ref_ns", 0), ("cand", "cand_ns", 1)):
        calls = t[key]
        per = {}
        for b in range(nb):
            r = runner_schedule(b, t["reference_runners"], t["candidate_runners"], True)[which]
            per.setdefault(r, []).append(calls[b * bc:(b + 1) * bc])
        meds = [st.median([x for blk in per[k] for x in blk]) for k in sorted(per)]
        halves = [math.log(st.median([x for blk in v[0::2] for x in blk]) /
                           st.median([x for blk in v[1::2] for x in blk])) for v in per.values()]
        out[side] = (abs(math.log(meds[0] / meds[1])) / math.sqrt(2),
                     math.sqrt(sum(h * h for h in halves) / len(halves)) / 2)
    ref = t["ref_ns"]
    out["block"] = st.median([st.stdev(b) / st.mean(b) for b in
                              (ref[i * bc:(i + 1) * bc] for i in range(nb)) if len(b) > 1])
    return out


def main():
    rows = []
    for path in sys.argv[1:] or ["-"]:
        for line in (sys.stdin if path == "-" else open(path)):
            if line.startswith("{"):
                rows.append(json.loads(line))
    for r in rows:
        t = r.get("evidence", {}).get("measure", {}).get("timing", {})
        if t.get("batch") != 1 or t.get("reference_runners") != 2 or t.get("candidate_runners") != 2:
            continue
        s = split(t)
        print("%-10s speedup %.3f  ref between %.2f%% within %.2f%%  cand between %.2f%% within %.2f%%"
              "  block %.1f%%" % (r.get("variant", ""), r["speedup"], 100 * s["ref"][0], 100 * s["ref"][1],
                                 100 * s["cand"][0], 100 * s["cand"][1], 100 * s["block"]))


if __name__ == "__main__":
    sys.exit(main())
