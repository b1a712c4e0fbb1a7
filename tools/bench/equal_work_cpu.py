#!/usr/bin/env python3
"""Equal work on the CPU (issue #49): the equal-work candidate
(tests/evaluator/corpus/equal_work/relu_at.py, a load_inline function calling
the reference's own at::relu) evaluated N times at each of three ReLU sizes,
~5 us, ~1 ms and ~40 ms a call, through the real evaluator
(korch-bench-eval --print). It must read 1.00:

  pass  >= 8 of 9 speedups within 1.00 +- 0.03 (+- 0.05 at ~5 us) with 1.0
        inside the 95% interval, and every interval at >= 1 ms no wider
        than +- 3%.

Prints one row per evaluation (speedup, interval, its half-widths, the
runners a side and the process term's dof) and the verdict; exit 1 if it
fails. Run it on an idle machine:

  /usr/bin/python3 tools/bench/equal_work_cpu.py --bench build/tools/bench/korch-bench-eval
  KORCH_REFERENCE_RUNNERS=4 KORCH_CANDIDATE_RUNNERS=4 /usr/bin/python3 tools/bench/equal_work_cpu.py ...
"""
import argparse
import json
import os
import subprocess
import sys
import time

HERE = os.path.dirname(os.path.abspath(__file__))
ROOT = os.path.normpath(os.path.join(HERE, "..", ".."))
SIZES = [("~5 us", "examples/tasks/1_ReLU_small.py", 0.05, False),
         ("~1 ms", "examples/tasks/5_ReLU_medium.py", 0.03, True),
         ("~40 ms", "examples/tasks/6_ReLU_large.py", 0.03, True)]


def run(bench, task, repeat, cache):
    cmd = [bench, "--task", os.path.join(ROOT, task), "--code",
           os.path.join(ROOT, "tests/evaluator/corpus/equal_work/relu_at.py"),
           "--mode", "submit", "--repeat", str(repeat), "--print", "--cache", cache]
    out = subprocess.run(cmd, capture_output=True, text=True, check=False).stdout
    reports = []
    for line in out.splitlines():
        if line.startswith("{"):
            reports.append(json.loads(line))
    return reports


def main():
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("--bench", default=os.path.join(ROOT, "build/tools/bench/korch-bench-eval"))
    ap.add_argument("--repeat", type=int, default=3)
    ap.add_argument("--cache", default="/var/tmp/korch-cache")
    ap.add_argument("--json", default="", help="write the rows here too")
    args = ap.parse_args()
    rows, t0 = [], time.time()
    for label, task, tol, wide_matters in SIZES:
        for r in run(args.bench, task, args.repeat, args.cache):
            t = r.get("evidence", {}).get("measure", {}).get("timing", {})
            ps = t.get("process_spread", {})
            s, lo, hi = r.get("speedup"), r.get("speedup_ci_low"), r.get("speedup_ci_high")
            row = {"size": label, "task": os.path.basename(task), "status": r.get("status"),
                   "speedup": s, "lo": lo, "hi": hi,
                   "runners": [t.get("reference_runners"), t.get("candidate_runners")],
                   "dof": ps.get("dof"), "process_rel_sd": ps.get("process_rel_sd"),
                   "cand_ms": r.get("cand_time_ms"), "boot": t.get("speedup_ci_bootstrap"),
                   "blocks": t.get("blocks"), "t": ps.get("ci_t")}
            ok = s is not None and abs(s - 1) <= tol and lo is not None and lo <= 1.0 <= hi
            narrow = not wide_matters or (s is not None and lo is not None and
                                          (hi / s - 1) <= 0.03 and (1 - lo / s) <= 0.03)
            row.update(within=ok, narrow=narrow)
            rows.append(row)
            boot = row["boot"] or [None, None]
            print("%-7s %-16s %-17s %s [%s, %s] -%s/+%s boot [%s, %s] blocks %s runners %s dof %s t %s "
                  "proc_sd %s %s%s" % (
                label, row["task"], row["status"],
                "%.3f" % s if s else "-", "%.3f" % lo if lo else "-", "%.3f" % hi if hi else "-",
                "%.1f%%" % (100 * (1 - lo / s)) if s and lo else "-",
                "%.1f%%" % (100 * (hi / s - 1)) if s and hi else "-",
                "%.3f" % boot[0] if boot[0] else "-", "%.3f" % boot[1] if boot[1] else "-",
                row["blocks"], row["runners"], row["dof"],
                "/".join("%.2f" % x for x in row["t"]) if row["t"] else "-",
                "%.2f%%" % (100 * row["process_rel_sd"]) if row["process_rel_sd"] else "-",
                "ok" if ok else "OUT", "" if narrow else " WIDE"), flush=True)
    within = sum(r["within"] for r in rows)
    wide = [r for r in rows if not r["narrow"]]
    passed = len(rows) >= 9 and within >= len(rows) - 1 and not wide
    print("equal work: %d of %d within the band with 1.0 inside; %d intervals at >= 1 ms wider "
          "than +-3%%; %.0f s: %s" % (within, len(rows), len(wide), time.time() - t0,
                                      "PASS" if passed else "FAIL"))
    if args.json:
        with open(args.json, "w") as f:
            json.dump(rows, f, indent=1)
    return 0 if passed else 1


if __name__ == "__main__":
    sys.exit(main())
