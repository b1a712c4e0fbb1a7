#!/usr/bin/env python3
"""Per-GPU statistics of a campaign's evaluations, from its SQLite store:
evaluations per GPU, time leased (busy), evaluations per hour over the
campaign's wall time, health checks and GPU failures, and a check that no
evaluation ran twice (one row per request id, attempts as stored).

    pool_stats.py DB WALL_S [LABEL]
"""
import collections
import json
import sqlite3
import sys


def main():
    db, wall = sys.argv[1], float(sys.argv[2])
    label = sys.argv[3] if len(sys.argv) > 3 else db
    con = sqlite3.connect(db)
    rows = con.execute("select request_id, state, attempts, verdict, report_json from evaluations").fetchall()
    ids = [r[0] for r in rows]
    per = collections.defaultdict(lambda: {"n": 0, "lease_s": 0.0, "verdicts": collections.Counter(),
                                           "health_checks": 0})
    failures = []
    for rid, state, attempts, verdict, rep in rows:
        r = json.loads(rep) if rep else {}
        ev = json.loads(r.get("evidence_json") or "{}") if isinstance(r.get("evidence_json"), str) \
            else (r.get("evidence") or {})
        g = ev.get("gpu", -1)
        p = per[g]
        p["n"] += 1
        p["lease_s"] += float(ev.get("stages", {}).get("lease_s", 0.0))
        p["verdicts"][verdict] += 1
        if "gpu_health_after" in ev:
            p["health_checks"] += 1
            p.setdefault("health", []).append(ev["gpu_health_after"])
        failures += ev.get("gpu_failures", [])
    n = len(rows)
    print("== %s: %d evaluations (%d distinct request ids, states %s) in %.1f s: %.0f evaluations/hour"
          % (label, n, len(set(ids)), dict(collections.Counter(r[1] for r in rows)), wall, n / wall * 3600))
    for g in sorted(per):
        p = per[g]
        print("   GPU %s: %d evaluations, busy %.1f%% (leased %.1f s), %.0f evaluations/hour, verdicts %s, "
              "health checks %d %s" % (g, p["n"], 100 * p["lease_s"] / wall, p["lease_s"], p["n"] / wall * 3600,
                                       dict(p["verdicts"]), p["health_checks"], p.get("health", [])))
    if failures:
        print("   GPU failures (evaluation re-run on another lease):", failures)
    print("RESULT %s evals=%d wall=%.1f per_hour=%.1f" % (label, n, wall, n / wall * 3600))


if __name__ == "__main__":
    main()
