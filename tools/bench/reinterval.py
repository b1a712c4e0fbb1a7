#!/usr/bin/env python3
"""Recompute the speedup intervals of saved reports with the judge's own
functions: for each report `korch-bench-eval --print` wrote (one JSON object
a line; scripts/gpu/suite.sh equalwork keeps them in $OUT/equalwork_<task>.jsonl),
the bootstrap interval and the runners' medians from its evidence are widened
by korch_judge.widen twice -- with 1.96 (dof None, as before Student's t) and
with t at the Welch-Satterthwaite dof of the processes' spread (the judge
now) -- and the reported interval is printed next to them.

    tools/bench/reinterval.py FILE.jsonl... [--truth 1.0]

Counts, per file, the evaluations within truth ± 0.03 and the intervals that
contain the truth. Needs only the Python standard library (korch_judge is
imported from evaluator/worker/py; its torch import is stubbed when torch is
missing)."""
import argparse
import json
import math
import os
import sys
import types

HERE = os.path.dirname(os.path.abspath(__file__))
sys.path.insert(0, os.path.join(HERE, "..", "..", "evaluator", "worker", "py"))
try:
    import torch  # noqa: F401
except ImportError:
    sys.modules["torch"] = types.ModuleType("torch")
import korch_judge as kj  # noqa: E402


def find(d, key):
    if isinstance(d, dict):
        if key in d:
            return d[key]
        for v in d.values():
            x = find(v, key)
            if x is not None:
                return x
    return None


def spread(ps):
    """(rel_sd, dof) of the speedup from the runners' medians, pooled as the
    judge pools them (korch_judge.pooled_spread)."""
    ref, cand = ps.get("reference_medians_ns"), ps.get("candidate_medians_ns")
    pooled = kj.pooled_spread(ref, cand, max(1, len(ref or [])), max(1, len(cand or [])))
    return (0.0, None) if pooled is None else (pooled["rel_sd"], pooled["dof"])


def main():
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("files", nargs="+")
    ap.add_argument("--truth", type=float, default=1.0)
    args = ap.parse_args()
    for path in args.files:
        rows = []
        for line in open(path):
            line = line.strip()
            if not line.startswith("{"):
                continue
            r = json.loads(line)
            t = find(r.get("evidence", {}), "timing")
            if not t or r.get("speedup") is None or "speedup_ci_bootstrap" not in t:
                continue
            rel_sd, dof = spread(t.get("process_spread") or {})
            s, (blo, bhi) = r["speedup"], t["speedup_ci_bootstrap"]
            z = kj.widen(s, blo, bhi, rel_sd)
            w = kj.widen(s, blo, bhi, rel_sd, dof)
            rows.append((s, (r["speedup_ci_low"], r["speedup_ci_high"]), z, w, dof))
        print("== %s: %d evaluations" % (os.path.basename(path), len(rows)))
        inside = lambda lo, hi: lo <= args.truth <= hi  # noqa: E731
        for s, rep, z, w, dof in rows:
            print("  speedup %.4f  reported [%.4f, %.4f]  z [%.4f, %.4f]  t [%.4f, %.4f] (dof %s, t %.2f/%.2f)"
                  % (s, rep[0], rep[1], z[0], z[1], w[0], w[1], dof, w[2][0], w[2][1]))
        n = len(rows)
        print("  within %.2f +- 0.03: %d/%d; contain %.2f: reported %d/%d, z %d/%d, t %d/%d"
              % (args.truth, sum(abs(s - args.truth) <= 0.03 for s, *_ in rows), n, args.truth,
                 sum(inside(*rep) for _, rep, *_ in rows), n,
                 sum(inside(z[0], z[1]) for _, _, z, _, _ in rows), n,
                 sum(inside(w[0], w[1]) for _, _, _, w, _ in rows), n))


if __name__ == "__main__":
    main()
